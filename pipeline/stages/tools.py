"""Stage 4, tools: typed tools whose implementation is a declarative SQL program (``pipeline.ir.Tool``).

``generate_tools(scenario, intents, tables, seed, client, settings) -> StageResult[tuple[ir.Tool, ...]]``.

One call plans the tools (name, read/write, purpose) over the schema; then each tool is written in
its own call (the DDL is in every prompt; the prompt's fixed part comes first so the server's
prompt cache reuses it). A reply maps onto ``ir.Tool``: params, guards (``must`` exist/not_exist
with the agent-facing error), writes, returns. Deterministic touch-ups need no round trip:
parameters used by no statement are dropped, a parameter named like a column constrained by
``CHECK (c IN (...))`` gets that enum, and a SELECT listed among the writes becomes the result (or
is dropped when the tool has one).

Each tool is then checked for real:

1. ``ir.Tool`` validation and ``pipeline.runtime.engine.check_tool`` (every statement EXPLAINed
   against the schema, placeholders known, reads do not write);
2. execution on a scratch :class:`pipeline.runtime.EnvInstance` built from the seeded rows, with
   argument sets drawn from those rows (:func:`sample_arguments`). A tool definition error fails
   the tool; so does a tool none of whose calls succeeds while one is refused by a database
   constraint, and a write tool whose successful calls change nothing. Refusals by the tool's own
   guards are what guards are for and do not fail it.

Failures go back to the LLM verbatim (bounded by ``max_attempts``); a tool that never passes is
dropped with a Rejection. Fewer than ``tools_min`` working tools, or no working read or write,
rejects the stage.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model

from pipeline import ir
from pipeline.runtime import EnvInstance, engine
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, render_section, user
from pipeline.stages.schema import Column, ask_min, scratch_db, table_columns

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings
    from pipeline.stages.intents import Intent

STAGE = "tools"
_IDENT = r"^[a-z][a-z0-9_]*$"
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


# ------------------------------------------------------------------ response models


class ToolPlanItem(BaseModel):
    name: str = Field(pattern=_IDENT)
    kind: Literal["read", "write"]
    purpose: str


@cache
def plan_model(lo: int, hi: int) -> type[BaseModel]:
    return create_model("ToolPlan", tools=(list[ToolPlanItem], Field(min_length=lo, max_length=hi)),
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


def _all_sql(guards: list[GuardSpec], writes: list[str], returns: ReturnsSpec | None) -> list[str]:
    return [g.sql for g in guards] + list(writes) + ([returns.sql] if returns else [])


_BUILTINS = ("now", "today", "last_id", "changes")
_PARAM_TYPE = {"INTEGER": "integer", "REAL": "number", "TEXT": "string"}


def schema_columns(conn: sqlite3.Connection) -> dict[str, tuple[str, str]]:
    """Column name -> (its first table, its parameter type), over every table of ``conn``."""
    out: dict[str, tuple[str, str]] = {}
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").fetchall():
        for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall():
            if r[2].upper() in _PARAM_TYPE:
                out.setdefault(r[1], (table, _PARAM_TYPE[r[2].upper()]))
    return out


def _column_of(name: str, columns: dict[str, Any]) -> str | None:
    """The column an argument stands for: ``status`` for ``status`` or ``new_status``; else None."""
    for n in [name] + [name[len(p):] for p in _PREFIXES if name.startswith(p)]:
        if n in columns:
            return n
    return None


def to_tool(plan: ToolPlanItem, reply: ReadToolReply | WriteToolReply, enums: dict[str, tuple[Any, ...]],
            columns: dict[str, tuple[str, str]] | None = None) -> ir.Tool:
    """Map a reply onto ``ir.Tool`` (raises ``ValidationError`` with the reason when it cannot).

    Two slips the 1.5B model keeps making whatever the feedback says are repaired here, deterministically:
    a statement reading ``:x`` that is not a parameter gets parameter ``x`` when ``x`` is a column of the
    schema (``columns``: typed like it), and an error message naming ``{x}`` the tool does not know says
    ``x`` in words instead."""
    writes: list[str] = []
    returns_spec = reply.returns
    for w in getattr(reply, "writes", []):
        if engine.leading_keyword(w) == "SELECT":  # a read listed among the writes: it is the result
            if returns_spec is None:
                returns_spec = ReturnsSpec(sql=w, mode="one")
            continue
        writes.append(w)
    in_sql: set[str] = set()
    for sql in _all_sql(reply.guards, writes, returns_spec):
        in_sql.update(engine.placeholders(sql))
    used = in_sql.union(*(_FIELD.findall(g.error) for g in reply.guards))
    specs = list(reply.params)
    declared = {p.name for p in specs}
    for name in sorted(in_sql - declared - set(_BUILTINS)):
        col = _column_of(name, columns or {})
        if col is not None:
            table, ptype = columns[col]  # type: ignore[index]
            specs.append(ParamSpec(name=name, type=ptype,  # type: ignore[arg-type]
                                   description=f"The {name.replace('_', ' ')} ({table}.{col})"))
    params = []
    for p in specs:
        if p.name not in used:
            continue  # an argument no statement reads would only mislead the agent
        col = _column_of(p.name, enums)
        enum = enums.get(col) if col is not None else None
        ok_enum = enum is not None and (
            (p.type == "string" and all(isinstance(v, str) for v in enum))
            or (p.type == "integer" and all(isinstance(v, int) for v in enum)))
        params.append(ir.Param(name=p.name, type=p.type, description=p.description,
                               enum=list(enum) if ok_enum and enum else None))
    known = {p.name for p in params} | set(_BUILTINS)

    def words(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) in known else m.group(1).replace("_", " ")

    steps = [ir.Step(kind="guard", sql=g.sql.strip(), must=g.must, error=_FIELD.sub(words, g.error))
             for g in reply.guards]
    steps += [ir.Step(kind="write", sql=w.strip()) for w in writes]
    returns = ir.Returns(sql=returns_spec.sql.strip(), mode=returns_spec.mode) if returns_spec else None
    return ir.Tool(name=plan.name, description=reply.description.strip(), kind=plan.kind, params=params,
                   steps=steps, returns=returns)


# ------------------------------------------------------------------ sample arguments

_PREFIXES = ("new_", "old_", "current_", "min_", "max_", "target_", "from_", "to_")
_LATER = ("end", "until", "due", "out", "return", "to_", "last")


class Sampler:
    """Argument sets for a tool drawn from the seeded rows of ``conn`` (deterministic)."""

    def __init__(self, conn: sqlite3.Connection, tables: tuple[ir.Table, ...], today: str) -> None:
        self.conn = conn
        self.today = dt.date.fromisoformat(today[:10])
        self.tables = tables
        self.columns: dict[str, list[tuple[str, Column]]] = {}
        self.unique: set[tuple[str, str]] = set()
        self.table_cols: dict[str, list[str]] = {}
        for t in tables:
            for c in table_columns(conn, t):
                self.table_cols.setdefault(t.name, []).append(c.name)
                self.columns.setdefault(c.name, []).append((t.name, c))
                if c.pk == 1 and not c.auto_id:
                    self.unique.add((t.name, c.name))
            for idx in conn.execute(f'PRAGMA index_list("{t.name}")').fetchall():
                if idx[2]:
                    cols = conn.execute(f'PRAGMA index_info("{idx[1]}")').fetchall()
                    if len(cols) == 1:
                        self.unique.add((t.name, cols[0][2]))

    def source(self, pname: str, sql: str) -> tuple[str, Column] | None:
        names = [pname] + [pname[len(p):] for p in _PREFIXES if pname.startswith(p)]
        for n in names:
            cands = self.columns.get(n)
            if cands:
                order = [t.name for t in self.tables]
                return sorted(cands, key=lambda tc: (f" {tc[0]}" not in f" {sql} ", not tc[1].pk,
                                                     order.index(tc[0])))[0]
        return None

    def _row_value(self, table: str, col: str, i: int, k: int) -> Any:
        n = self.conn.execute(f'SELECT COUNT(*) FROM "{table}" WHERE "{col}" IS NOT NULL').fetchone()[0]
        if not n:
            return None
        offset = (i * max(1, n // k)) % n
        return self.conn.execute(f'SELECT "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL ORDER BY rowid '
                                 f"LIMIT 1 OFFSET {offset}").fetchone()[0]

    def _drawn(self, p: ir.Param, sql: str, i: int, k: int) -> Any:
        """The ``i``-th of ``k`` values for ``p``: from its enum, else from the seeded column it stands for
        (spread over the table), else None."""
        if p.enum:
            return p.enum[i % len(p.enum)]
        src = self.source(p.name, sql)
        return None if src is None else self._coerce(p, self._row_value(src[0], src[1].name, i, k))

    def _fallback(self, p: ir.Param, i: int) -> Any:
        low = p.name.lower()
        if p.type == "string":
            if "date" in low or low.endswith(("_on", "_at", "_day")):
                days = 7 + i + (2 if any(w in low for w in _LATER) else 0)
                return (self.today + dt.timedelta(days=days)).isoformat()
            if "email" in low:
                return f"sample{i}@example.com"
            return f"Sample {low.replace('_', ' ')} {i + 1}"
        if p.type == "integer":
            return 1 + i
        if p.type == "number":
            return 10.0 * (i + 1)
        return i % 2 == 0

    @staticmethod
    def _coerce(p: ir.Param, v: Any) -> Any:
        if v is None:
            return None
        if p.type == "string":
            return v if isinstance(v, str) else str(v)
        if p.type == "integer":
            if isinstance(v, float) and v.is_integer():
                return int(v)
            if isinstance(v, str) and v.lstrip("-").isdigit():
                return int(v)
            return v if isinstance(v, int) else None
        if p.type == "number":
            return v if isinstance(v, (int, float)) else None
        return bool(v) if isinstance(v, int) else None

    def grounded(self, tool: ir.Tool) -> bool:
        """Whether every argument comes from an enum or a column of the seeded rows."""
        sql = " ".join(s.sql for s in tool.steps)
        return all(p.enum or self.source(p.name, sql) is not None for p in tool.params)

    def arguments(self, tool: ir.Tool, k: int) -> list[dict[str, Any]]:
        """``k`` sets from existing rows (spread over each table), plus, for write tools, a set whose
        values for UNIQUE columns are new (so a create-style tool is not refused as a duplicate)."""
        sql = " ".join(s.sql for s in tool.steps) + (f" {tool.returns.sql}" if tool.returns else "")
        sets: list[dict[str, Any]] = []
        fresh: dict[str, Any] = {}
        for i in range(k):
            args: dict[str, Any] = {}
            for p in tool.params:
                v = self._drawn(p, sql, i, k)
                src = None if p.enum else self.source(p.name, sql)
                if i == 0 and isinstance(v, str) and src is not None and (src[0], src[1].name) in self.unique:
                    fresh[p.name] = f"new.{v}" if "@" in v else f"{v} (new)"
                args[p.name] = self._fallback(p, i) if v is None else v
            if args not in sets:
                sets.append(args)
        if tool.kind == "write" and len(tool.params) > 1:
            # one more set whose arguments come from different rows: drawn from the same row, an "assign
            # mechanic 1 to order 1" may be what the seed already says, and a tool that works changes nothing
            mixed = {p.name: v if (v := self._drawn(p, sql, j, k)) is not None else self._fallback(p, j)
                     for j, p in enumerate(tool.params)}
            if mixed not in sets:
                sets.append(mixed)
        if tool.kind == "write" and sets and fresh:
            first = {**sets[0], **fresh}
            sets.insert(0, first)
        return sets or [{}]


# ------------------------------------------------------------------ execution check


def _definition_error(res: dict[str, Any]) -> bool:
    return res.get("kind") == "sql" and not str(res.get("error", "")).startswith("rejected by the database")


def exercise(env: ir.Environment, tool: ir.Tool, arg_sets: list[dict[str, Any]],
             grounded: bool = False) -> tuple[list[tuple], str | None]:
    """Run ``tool`` on each argument set (fresh state each time); returns (calls, error or None).

    ``calls`` is ``[(arguments, result, changed)]``; the error says why the tool does not work:
    a definition error in any call; no successful call but a database refusal; a write tool
    whose ``returns`` finds nothing after its writes, or whose successes change nothing; a read
    tool that finds nothing for any of its ``grounded`` arguments (all drawn from existing rows).
    """
    calls: list[tuple] = []
    with EnvInstance(env) as inst:
        for args in arg_sets:
            inst.reset()
            before = inst.snapshot()
            res = inst.call(tool.name, args)
            changed = bool(inst.diff(before)) if res.get("ok") else False
            calls.append((args, res, changed))
    for args, res, _ in calls:
        if _definition_error(res):
            return calls, f"called with {args} it failed: {res['error']}"
        if tool.kind == "write" and res.get("kind") == "not_found":
            return calls, (f"called with {args} its writes ran but its returns query found no row "
                           f"({res['error']}); select the changed row by the arguments or :last_id")
    oks = [c for c in calls if c[1].get("ok")]
    if not oks:
        for args, res, _ in calls:
            if res.get("kind") == "sql":
                return calls, f"called with {args} it failed: {res['error']}"
        kinds = {c[1].get("kind") for c in calls}
        if grounded and kinds == {"not_found"}:
            return calls, (f"called with {calls[0][0]} (values of existing rows) it found nothing: "
                           f"{calls[0][1]['error']}")
    if tool.kind == "write" and oks and not any(c[2] for c in oks):
        return calls, (f"called with {oks[0][0]} it succeeded but changed nothing in the database; "
                       "its writes must match the rows named by the arguments")
    return calls, None


# ------------------------------------------------------------------ the stage


def ddl_text(tables: list[ir.Table] | tuple[ir.Table, ...]) -> str:
    return "\n".join(f"{t.ddl.strip()};" for t in tables)


def _stem(table: str) -> str:
    t = table.lower()
    for suffix in ("ies", "es", "s"):
        if t.endswith(suffix) and len(t) > len(suffix) + 2:
            return t[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return t


def uncovered_tables(items: list[ToolPlanItem], tables: tuple[ir.Table, ...]) -> list[str]:
    """Tables that no planned tool names (in its name or purpose, singular or plural)."""
    text = " ".join(f"{it.name.replace('_', ' ')} {it.purpose}" for it in items).lower()
    return [t.name for t in tables if _stem(t.name) not in text and _stem(t.name).replace("_", " ") not in text]


def _plan(scenario: ir.Scenario, intents: tuple[Intent, ...], tables: tuple[ir.Table, ...], client: Any,
          settings: BuildSettings):
    prompt = render_section("tools", "plan", name=scenario.name, description=scenario.description,
                            ddl=ddl_text(tables), intents="\n".join(f"- {i.goal} ({i.kind})" for i in intents),
                            min=ask_min(settings.tools_min, settings.tools_max), max=settings.tools_max)
    def check(reply: Any) -> tuple[list[ToolPlanItem] | None, str | None]:
        items: list[ToolPlanItem] = []
        for it in reply.tools:
            if it.name not in {x.name for x in items}:
                items.append(it)
        kinds = {it.kind for it in items}
        problems = [f"no {k} tool" for k in ("read", "write") if k not in kinds]
        if len(items) < settings.tools_min:
            problems.append(f"only {len(items)} distinct tool names, at least {settings.tools_min} needed")
        if problems:
            return None, "; ".join(problems) + "."
        missing = uncovered_tables(items, tables)
        if missing:  # coverage is asked for, not required: this plan is kept if no better one comes
            return items, f"no tool works with the table(s) {', '.join(missing)}; replace a tool to cover them."
        return items, None

    model = plan_model(ask_min(settings.tools_min, settings.tools_max), settings.tools_max)
    return ask_with_feedback(
        client, model, user(prompt), check, stage=STAGE, max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature,
        max_tokens=settings.max_tokens_tool_plan, feedback=lambda e: render_section("tools", "plan_feedback", error=e),
    )


_NOT_NULL = re.compile(r"NOT NULL constraint failed: (\w+)\.(\w+)")


def _column_hint(error: str, sampler: Sampler) -> str:
    """After 'no such column' the columns that do exist (the model tends to invent a status column); after a
    NOT NULL failure, what to do about it (the model tends to leave a required column out of its INSERT)."""
    hints = []
    if "no such column" in error or "no such table" in error:
        listing = "; ".join(f"{t}({', '.join(cols)})" for t, cols in sampler.table_cols.items())
        hints.append(f"The tables have only these columns: {listing}")
    for table, col in dict.fromkeys(_NOT_NULL.findall(error)):
        hints.append(f"{table}.{col} is required: an INSERT INTO {table} must list {col} and give it a value "
                     f"(a parameter :{col}, or a fixed value), and an UPDATE must not set it to NULL")
    return "".join(f"\n{h}" for h in hints)


def _write_tool(plan: ToolPlanItem, scenario: ir.Scenario, base_env: ir.Environment, conn: sqlite3.Connection,
                sampler: Sampler, enums: dict[str, tuple[Any, ...]], client: Any, settings: BuildSettings):
    prompt = render_section(
        "tools", "tool", name=scenario.name, description=scenario.description, ddl=ddl_text(base_env.tables),
        kind=plan.kind, tool=plan.name, purpose=plan.purpose,
        kind_rule=render_section("tools", f"{plan.kind}_rule"),
    )
    columns = schema_columns(conn)

    def check(reply: Any) -> tuple[ir.Tool | None, str | None]:
        try:
            tool = to_tool(plan, reply, enums, columns)
        except ValidationError as e:
            return None, "; ".join(err["msg"] for err in e.errors())
        problems = engine.check_tool(conn, tool.model_dump(mode="json"))
        if problems:
            return None, "\n".join(f"- {p}" for p in problems)
        env = base_env.model_copy(update={"tools": [tool]})
        _, error = exercise(env, tool, sampler.arguments(tool, settings.sample_calls), sampler.grounded(tool))
        return (tool, None) if error is None else (None, error)

    model = ReadToolReply if plan.kind == "read" else WriteToolReply
    return ask_with_feedback(
        client, model, user(prompt), check, stage=STAGE, max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature,
        max_tokens=settings.max_tokens_tool,
        feedback=lambda e: render_section("tools", "feedback", tool=plan.name, error=e + _column_hint(e, sampler)),
    )


def generate_tools(
    scenario: ir.Scenario, intents: tuple[Intent, ...], tables: tuple[ir.Table, ...],
    seed: tuple[ir.SeedRows, ...], client: Any, settings: BuildSettings,
) -> StageResult[tuple[ir.Tool, ...]]:
    base_env = ir.Environment(scenario=scenario, clock=settings.clock, tables=list(tables), seed=list(seed))
    rejections: list[ir.Rejection] = []
    plan = _plan(scenario, intents, tables, client, settings)
    attempts = plan.attempts
    if plan.value is None:
        rejections.append(ir.Rejection(stage=STAGE, item=scenario.name, reason=f"no usable tool plan: {plan.error}"))
        return StageResult(None, tuple(rejections), attempts)

    with EnvInstance(base_env) as seeded:
        conn = seeded.conn
        sampler = Sampler(conn, tables, settings.clock)
        enums = {c.name: c.enum for t in tables for c in table_columns(conn, t) if c.enum}
        schema_conn = scratch_db(tables)
        try:
            tools: list[ir.Tool] = []
            for item in plan.value:
                out = _write_tool(item, scenario, base_env, schema_conn, sampler, enums, client, settings)
                attempts += out.attempts
                if out.value is None:
                    rejections.append(ir.Rejection(stage=STAGE, item=item.name, reason=out.error or "failed",
                                                   evidence={"kind": item.kind, "purpose": item.purpose,
                                                             "attempts": out.attempts}))
                else:
                    tools.append(out.value)
        finally:
            schema_conn.close()

    kinds = {t.kind for t in tools}
    problems = [f"no working {k} tool" for k in ("read", "write") if k not in kinds]
    if len(tools) < settings.tools_min:
        problems.append(f"only {len(tools)} working tools, at least {settings.tools_min} needed")
    if problems:
        rejections.append(ir.Rejection(stage=STAGE, item=scenario.name, reason="; ".join(problems),
                                       evidence={"working": [t.name for t in tools]}))
        return StageResult(None, tuple(rejections), attempts)
    return StageResult(tuple(tools), tuple(rejections), attempts)
