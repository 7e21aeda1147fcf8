"""The tool stage's replies: the plan and tool reply models the LLM fills, and the mapping of a reply onto
``ir.Tool``, which repairs the slips a small model keeps making by reading the SQL (``to_tool``).

Used by ``pipeline.stages.tools.toolset`` (which re-exports these names) and ``pipeline.stages.tools.repair``.
"""

from __future__ import annotations

import re
import sqlite3
import types
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.analysis import analyse_tool
from pipeline.dbmodel.columns import check_enums
from pipeline.runtime import engine
from pipeline.runtime.state import qi, table_infos
from pipeline.stages.tools import created_row

_IDENT = r"^[a-z][a-z0-9_]*$"
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


# ------------------------------------------------------------------ response models


class ToolPlanItem(BaseModel):
    name: str = Field(pattern=_IDENT)
    kind: Literal["read", "write"]
    purpose: str
    tables: list[str] = Field(default_factory=list)
    goals: list[int] = Field(default_factory=list)


def _list_of(values: tuple[Any, ...]) -> Any:
    """``list[Literal[*values]]``, built at run time (the values are the schema's)."""
    return types.GenericAlias(list, (Literal.__getitem__(values),))  # type: ignore[attr-defined]


def plan_model(lo: int, hi: int, tables: Sequence[str], n_goals: int) -> type[BaseModel]:
    """``{"tools": [{name, kind, purpose, tables, goals}]}``: ``tables`` an enum of the schema's tables,
    ``goals`` of the goal numbers (the grammar keeps both to what exists)."""
    fields: dict[str, Any] = {
        "name": (str, Field(pattern=_IDENT)), "kind": (Literal["read", "write"], ...), "purpose": (str, ...),
        "tables": (_list_of(tuple(tables)), Field(min_length=1, max_length=3)),
    }
    if n_goals:
        fields["goals"] = (_list_of(tuple(range(1, n_goals + 1))), Field(max_length=3))
    item = create_model("PlannedTool", __base__=BaseModel, **fields)
    return create_model("ToolPlan", tools=(list[item], Field(min_length=lo, max_length=hi)),  # type: ignore[valid-type]
                        __base__=BaseModel)


class ParamSpec(BaseModel):
    name: str = Field(pattern=_IDENT)
    type: Literal["string", "integer", "number", "boolean"]
    description: str


class GuardSpec(BaseModel):
    sql: str
    must: Literal["exist", "not_exist"]
    error: str


class ReturnsSpec(BaseModel):
    sql: str
    mode: Literal["one", "all"]


class ReadToolReply(BaseModel):
    description: str
    params: list[ParamSpec] = Field(max_length=5)
    guards: list[GuardSpec] = Field(max_length=3)
    returns: ReturnsSpec


class WriteToolReply(BaseModel):
    description: str
    params: list[ParamSpec] = Field(max_length=6)
    guards: list[GuardSpec] = Field(max_length=4)
    writes: list[str] = Field(min_length=1, max_length=3)
    returns: ReturnsSpec | None


# ------------------------------------------------------------------ reply -> ir.Tool

_BUILTINS = ("now", "today", "last_id", "changes")
_PARAM_TYPE = {"INTEGER": "integer", "REAL": "number", "TEXT": "string"}


def _enum_for(enum: tuple[Any, ...] | None, ptype: str) -> list[Any] | None:
    if not enum:
        return None
    if ptype == "string" and all(isinstance(v, str) for v in enum):
        return list(enum)
    if ptype == "integer" and all(isinstance(v, int) for v in enum):
        return list(enum)
    return None


def unique_sets(conn: sqlite3.Connection, table: str) -> tuple[tuple[str, ...], ...]:
    """The columns of each UNIQUE constraint of ``table`` (its primary key included)."""
    out = []
    for idx in conn.execute(f"PRAGMA index_list({qi(table)})").fetchall():
        if idx[2]:
            out.append(tuple(r[2] for r in conn.execute(f"PRAGMA index_info({qi(idx[1])})").fetchall()))
    return tuple(out)


def to_tool(plan: ToolPlanItem, reply: ReadToolReply | WriteToolReply, conn: sqlite3.Connection | None = None
            ) -> ir.Tool:
    """Map a reply onto ``ir.Tool`` (raises ``ValidationError`` with the reason when it cannot).

    With the schema on ``conn``, two slips the 1.5B model keeps making whatever the feedback says are repaired,
    by reading the SQL: a statement reading ``:x`` that is not a parameter gets parameter ``x`` typed like the
    column ``:x`` is compared with or written into, and a parameter meeting a ``CHECK (c IN (...))`` column
    gets that enum. An error message naming ``{x}`` the tool does not know says ``x`` in words instead. A write
    tool's create never asks for the key the database assigns and answers with the row it inserted
    (``pipeline.stages.tools.created_row``)."""
    writes: list[str] = []
    returns_spec = reply.returns
    for w in getattr(reply, "writes", []):
        if engine.leading_keyword(w) == "SELECT":  # a read listed among the writes: it is the result
            if returns_spec is None:
                returns_spec = ReturnsSpec(sql=w, mode="one")
            continue
        writes.append(w)
    infos = table_infos(conn) if conn is not None else None
    if conn is not None and infos is not None and plan.kind == "write":  # a create's key and result (pipeline.stages.tools.created_row)
        fixed = created_row.repair(created_row.Program(
            tuple(g.sql for g in reply.guards), tuple(writes), returns_spec.sql if returns_spec else None,
            returns_spec is None or returns_spec.mode == "one", frozenset(p.name for p in reply.params),
            {t: unique_sets(conn, t) for t in infos}), infos)
        writes = list(fixed.writes)
        if fixed.returns is not None and returns_spec is not None and (fixed.returns, fixed.one) != \
                (returns_spec.sql, returns_spec.mode == "one"):
            returns_spec = ReturnsSpec(sql=fixed.returns, mode="one" if fixed.one else "all")
    sqls = [g.sql for g in reply.guards] + writes + ([returns_spec.sql] if returns_spec else [])
    in_sql: set[str] = set()
    for sql in sqls:
        in_sql.update(engine.placeholders(sql))
    used = in_sql.union(*(_FIELD.findall(g.error) for g in reply.guards))
    declared = {p.name for p in reply.params}
    undeclared = sorted(in_sql - declared - set(_BUILTINS))
    specs = [p for p in reply.params if p.name in used]
    specs += [ParamSpec(name=n, type="string", description="") for n in undeclared]
    steps = [ir.Step(kind="guard", sql=g.sql.strip(), must=g.must, error=g.error) for g in reply.guards]
    steps += [ir.Step(kind="write", sql=w.strip()) for w in writes]
    returns = ir.Returns(sql=returns_spec.sql.strip(), mode=returns_spec.mode) if returns_spec else None

    def build(params: list[ir.Param]) -> ir.Tool:
        known = {p.name for p in params} | set(_BUILTINS)

        def words(m: re.Match[str]) -> str:
            return m.group(0) if m.group(1) in known else m.group(1).replace("_", " ")

        return ir.Tool(name=plan.name, description=reply.description.strip(), kind=plan.kind, params=params,
                       steps=[s.model_copy(update={"error": _FIELD.sub(words, s.error)}) if s.error else s
                              for s in steps], returns=returns)

    draft = [ir.Param(name=p.name, type=p.type, description=p.description) for p in specs]
    if conn is None or infos is None:
        return build([p for p in draft if p.name not in undeclared])
    enums = {r[0]: check_enums(r[1] or "") for r in
             conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()}
    shape = analyse_tool(build(draft), conn, infos, "read" if plan.kind == "read" else "update")
    params = []
    for p in draft:
        col = shape.column_of(p.name)
        if p.name in undeclared:
            if col is None:
                continue  # the checker reports the unknown placeholder
            ptype = _PARAM_TYPE.get(infos[col[0]].column_type(col[1]), "string")
            p = p.model_copy(update={"type": ptype, "description": f"{p.name.replace('_', ' ')} ({col[0]}.{col[1]})"})
        enum = _enum_for(enums.get(col[0], {}).get(col[1]), p.type) if col is not None else None
        params.append(p.model_copy(update={"enum": enum}) if enum else p)
    return build(params)
