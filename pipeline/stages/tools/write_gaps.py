"""Writes that cover the state (``[stages.build] covering_writes``): every table users change has the writes its
domain implies, a create and an update of each status-like and quantity column, written by code from the schema
where the planned tools leave a gap.

*Tables users change* are read from the tools' SQL, not from names: the tables some write tool's statements
insert into, update or delete from, plus their child tables (a foreign key to one of them). The tables the
model's failed write tools target count too (``failed``: their SQL says which tables users change even when no
attempt worked), so a domain whose only write tool failed still gets its creates and updates. For each, a gap is:

- ``create_<table>`` when no tool inserts into it: an ``INSERT`` of every column but the generated id and those
  with a DEFAULT (required when NOT NULL), references taken as the parent's key (a finder gives it); its result is
  the new row;
- ``update_<table>_<column>`` for a status-like column (``CHECK (c IN (...))``, its values as an enum) and a
  quantity column (INTEGER/REAL, not a key, a reference, part of the natural key or UNIQUE) that no tool writes a
  parameter into: the row named by its key (the id a finder gives, or the key's own values) must exist, the
  column is set to the value given, the result is the row.

Creates come first (schema order), then status updates, then quantities, so a small budget spreads over tables.

:func:`cover` is the tools stage's pass over its working tools before the finders are added (``fill_gaps``):
parameter names (``pipeline.stages.tools.param_names``), paging (``pipeline.dbmodel.paging``) and these writes, each
behind its own setting and each added tool checked on the seeded rows and recorded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel import paging
from pipeline.dbmodel.analysis import analyse
from pipeline.dbmodel.columns import check_enums, table_columns
from pipeline.dbmodel.keynames import singular
from pipeline.dbmodel.keys import natural_keys
from pipeline.runtime import EnvInstance
from pipeline.runtime import static_checks as checks
from pipeline.runtime.state import TableInfo, qi, table_infos
from pipeline.stages.tools import finder_gaps as coverage
from pipeline.stages.tools.param_names import fix_param_names

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings

STAGE = "tools"


class Workspace(Protocol):
    """What this module uses of the tool stage's ``pipeline.stages.tools.toolset.Workspace`` (which calls it)."""

    env: ir.Environment
    tables: tuple[ir.Table, ...]
    tools: list[ir.Tool]
    schema_conn: sqlite3.Connection
    sampler: Any

    @property
    def instance_conn(self) -> sqlite3.Connection: ...

    def environment(self) -> ir.Environment: ...

    def problems(self, tool: ir.Tool, sample_calls: int) -> str | None: ...

_PARAM_TYPE = {"INTEGER": "integer", "INT": "integer", "REAL": "number", "TEXT": "string"}


@dataclass(frozen=True)
class WriteGap:
    kind: str
    """``create`` or ``update``."""
    table: str
    column: str | None
    """The column an update sets."""
    why: str


def tool_targets(tool: ir.Tool) -> set[tuple[str, str]]:
    """``(statement, table)`` of every ``INSERT``/``UPDATE``/``DELETE`` in ``tool``'s write steps (parsed;
    ``statement`` is ``insert``, ``update`` or ``delete``)."""
    out: set[tuple[str, str]] = set()
    for step in tool.steps:
        if step.kind != "write":
            continue
        try:
            tree = sqlglot.parse_one(step.sql, read="sqlite")
        except Exception:
            continue
        for node in tree.find_all(exp.Insert, exp.Update, exp.Delete):
            target = node.this
            table = target.this if isinstance(target, exp.Schema) else target
            if isinstance(table, exp.Table):
                out.add((type(node).__name__.lower(), table.name))
    return out


def write_targets(env: ir.Environment) -> set[tuple[str, str]]:
    """:func:`tool_targets` of every tool of ``env``."""
    return {target for tool in env.tools for target in tool_targets(tool)}


def changed_tables(env: ir.Environment, infos: dict[str, TableInfo], failed: Collection[str] = ()) -> list[str]:
    """Tables users change: those some tool writes (or some failed write tool targeted: ``failed``), plus their
    child tables, in schema order."""
    written = ({t for _, t in write_targets(env)} | set(failed)) & set(infos)
    children = {t for t, info in infos.items() if any(p in written for _, p, _ in info.foreign_keys)}
    return [t.name for t in env.tables if t.name in written | children]


def _unique(conn: sqlite3.Connection, table: str) -> set[str]:
    out = set()
    for idx in conn.execute(f"PRAGMA index_list({qi(table)})").fetchall():
        if idx[2]:
            cols = [r[2] for r in conn.execute(f"PRAGMA index_info({qi(idx[1])})").fetchall()]
            out |= set(cols)
    return out


def write_gaps(env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
               failed: Collection[str] = ()) -> list[WriteGap]:
    """The creates and column updates ``env``'s tools lack (creates, then status columns, then quantities) on the
    tables users change (``failed``: the tables failed write tools targeted, see :func:`changed_tables`)."""
    shapes = analyse(env, conn, infos)
    inserted = {t for verb, t in write_targets(env) if verb == "insert"}
    only_failed = set(failed) - {t for _, t in write_targets(env)}
    set_by_param = {u.column for s in shapes.values() if s.kind == "write" for us in s.uses.values() for u in us
                    if u.role == "value" and u.column is not None}
    keys = natural_keys(env, conn, infos)
    ddl = {t.name: t.ddl for t in env.tables}
    creates, statuses, quantities = [], [], []
    for table in changed_tables(env, infos, failed):
        info = infos[table]
        if table not in inserted:
            why = f"users change {table} rows and no tool creates one"
            if table in only_failed:
                why += " (the model's write tools for it failed)"
            creates.append(WriteGap("create", table, None, why))
        enums = check_enums(ddl.get(table, ""))
        fixed = set(info.key) | {c for c, _, _ in info.foreign_keys} | _unique(conn, table) | set(
            keys[table].columns if table in keys else ())
        for col in info.columns:
            if col in fixed or (table, col) in set_by_param:
                continue
            if enums.get(col):
                statuses.append(WriteGap("update", table, col, f"no tool sets {table}.{col} (a status-like column)"))
            elif info.column_type(col) in ("INTEGER", "REAL"):
                quantities.append(WriteGap("update", table, col, f"no tool sets {table}.{col} (a quantity column)"))
    return creates + statuses + quantities


def _value_param(info: TableInfo, col: str, enums: dict[str, tuple], required: bool, what: str) -> ir.Param:
    ptype = _PARAM_TYPE.get(info.column_type(col), "string")
    enum = [v for v in enums.get(col, ()) if not isinstance(v, float)] or None
    if enum is not None and not all(isinstance(v, str if ptype == "string" else int) for v in enum):
        enum = None
    return ir.Param(name=col, type=ptype, description=what, required=required, enum=enum)  # type: ignore[arg-type]


def thing(table: str) -> str:
    """A table's name as a user says one of its records: words, the last in the singular ("kegs" -> "keg")."""
    words = table.replace("_", " ").split()
    return " ".join(words[:-1] + [singular(words[-1])]) if words else table


def _key_params(info: TableInfo) -> list[ir.Param]:
    """The parameters naming one row of ``info`` by its primary key."""
    return [ir.Param(name=k, type=_PARAM_TYPE.get(info.column_type(k), "string"),  # type: ignore[arg-type]
                     description=f"the {k} of the {thing(info.name)} to change ({info.name}.{k})") for k in info.key]


def write_tool(gap: WriteGap, env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo]
               ) -> ir.Tool | None:
    """The tool filling ``gap``, or None (a reserved column name, a table keyed by rowid only)."""
    info = infos[gap.table]
    table = next(t for t in env.tables if t.name == gap.table)
    enums = check_enums(table.ddl)
    t = qi(gap.table)
    try:
        if gap.kind == "create":
            cols = [c for c in table_columns(conn, table) if not c.auto_id and not c.has_default]
            fks = {c: (p, pc) for c, p, pc in info.foreign_keys}
            new = thing(gap.table)
            params = [_value_param(info, c.name, enums, c.notnull,
                                   f"the {thing(fks[c.name][0])} it belongs to, by its {fks[c.name][1]} "
                                   f"({gap.table}.{c.name})" if c.name in fks else
                                   f"the new {new}'s {c.name.replace('_', ' ')} ({gap.table}.{c.name})") for c in cols]
            if not params:
                return None
            sql = (f"INSERT INTO {t} ({', '.join(qi(c.name) for c in cols)}) "
                   f"VALUES ({', '.join(':' + c.name for c in cols)})")
            returns = ir.Returns(sql=f"SELECT * FROM {t} WHERE {qi(info.key[0])} = :last_id", mode="one") \
                if info.int_pk else None
            gives = "; returns it as recorded" if returns is not None else ""
            return ir.Tool(name=f"create_{gap.table}".lower(), kind="write", params=params,
                           description=f"Record a new {new}{gives}.",
                           steps=[ir.Step(kind="write", sql=sql)], returns=returns)
        assert gap.column is not None
        if info.key == ("rowid",) or gap.column in info.key:
            return None
        keyp = _key_params(info)
        where = " AND ".join(f"{qi(p.name)} = :{p.name}" for p in keyp)
        named = " and ".join(f"{p.name} {{{p.name}}}" for p in keyp)
        what, column = thing(gap.table), gap.column.replace("_", " ")
        value = _value_param(info, gap.column, enums, True, f"the new {column} ({gap.table}.{gap.column})")
        return ir.Tool(
            name=f"update_{gap.table}_{gap.column}".lower(), kind="write", params=[*keyp, value],
            description=f"Set the {column} of one {what}; returns the {what} as changed.",
            steps=[ir.Step(kind="guard", sql=f"SELECT 1 FROM {t} WHERE {where}", must="exist",
                           error=f"no {what} has {named}"),
                   ir.Step(kind="write", sql=f"UPDATE {t} SET {qi(gap.column)} = :{gap.column} WHERE {where}")],
            returns=ir.Returns(sql=f"SELECT * FROM {t} WHERE {where}", mode="one"))
    except ValueError:  # a column name no parameter may have
        return None


def covering_writes(env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
                    taken: Sequence[str], failed: Collection[str] = ()) -> list[tuple[ir.Tool, WriteGap]]:
    """One tool per write gap of ``env`` (``conn``: its database with the seeded rows; ``failed``: the tables
    failed write tools targeted); names in ``taken`` are skipped."""
    names = set(taken)
    out = []
    for gap in write_gaps(env, conn, infos, failed):
        tool = write_tool(gap, env, conn, infos)
        if tool is None or tool.name in names:
            continue
        names.add(tool.name)
        out.append((tool, gap))
    return out


# ------------------------------------------------------------------ the tools stage's covering pass


def _added(tool: ir.Tool, kind: str, table: str, columns: Sequence[str], why: str) -> ir.Rejection:
    return ir.Rejection(stage=STAGE, item=tool.name, reason=f"tool added by code ({kind}): {why}",
                        evidence={"gap": kind, "table": table, "columns": list(columns)})


def _not_added(tool: ir.Tool, kind: str, table: str, error: str) -> ir.Rejection:
    return ir.Rejection(stage=STAGE, item=tool.name, reason=f"gap tool not added: {error}",
                        evidence={"gap": kind, "table": table})


def paged_problems(env: ir.Environment, tool: ir.Tool, paged: ir.Tool, arg_sets: Sequence[dict[str, Any]]) -> str | None:
    """Why ``paged`` (``tool`` with a page size added) does not give ``tool``'s rows, a page at a time with the
    count of all of them, or None."""
    page = paging.page_of(paged)
    assert page is not None
    with EnvInstance(env.model_copy(update={"tools": [tool]})) as a, \
            EnvInstance(env.model_copy(update={"tools": [paged]})) as b:
        for args in arg_sets:
            before, after = a.call(tool.name, args), b.call(paged.name, args)
            if before.get("ok") != after.get("ok"):
                return f"called with {args} it gave {after} where the tool gave {before}"
            if not before.get("ok"):
                continue
            rows = before["result"]
            got = after["result"]
            if [{k: v for k, v in r.items() if k != page.count} for r in got] != rows[:paging.PAGE_DEFAULT] or \
                    any(r.get(page.count) != len(rows) for r in got):
                return f"called with {args} its page differs from the first {paging.PAGE_DEFAULT} rows of the tool"
    return None


def lister_problems(ws: Workspace, tool: ir.Tool, gap: coverage.Gap) -> str | None:
    """Why a code-written paged lister does not work here: its SQL is checked like any tool's, then, called with
    the values of the first seeded row that has them, it must list that row's matches and count them all."""
    found = checks.check_tool(ws.schema_conn, tool.model_dump(mode="json"))
    if found:
        return "; ".join(found)
    page = paging.page_of(tool)
    assert page is not None
    conn = ws.instance_conn
    cols = list(gap.columns)
    where = " AND ".join(f"{qi(c)} IS NOT NULL" for c in cols) or "1"
    order = ", ".join(qi(k) for k in ws.sampler.infos[gap.table].key)
    row = conn.execute(f"SELECT {', '.join(qi(c) for c in cols) or '1'} FROM {qi(gap.table)} WHERE {where} "
                       f"ORDER BY {order} LIMIT 1").fetchone()
    if row is None:
        return f"no seeded {gap.table} row has values for {', '.join(cols)}"
    args = dict(zip(cols, row, strict=True)) if cols else {}
    match = " AND ".join(f"{qi(c)} = ?" for c in cols) or "1"
    n = conn.execute(f"SELECT COUNT(*) FROM {qi(gap.table)} WHERE {match}", tuple(args.values())).fetchone()[0]
    with EnvInstance(ws.env.model_copy(update={"tools": [tool]})) as inst:
        out = inst.call(tool.name, args)
    rows = out.get("result") if out.get("ok") else None
    if not rows or rows[0].get(page.count) != n or len(rows) != min(n, paging.PAGE_DEFAULT):
        return f"called with the values of a seeded {gap.table} row it did not list its {n} matches: {out}"
    return None


def cover(ws: Workspace, settings: BuildSettings, failed: Collection[str] = ()) -> list[ir.Rejection]:
    """The tools stage's covering pass over the working tools of ``ws`` (each part behind its setting, all off by
    default): parameters named for their columns (``fix_param_names``), LLM-written listers paged and code-written
    paged, filtered listers added (``paged_listers``), the creates and updates changed tables lack added
    (``covering_writes``; ``failed``: the tables the failed write tools targeted count as changed). At most ``gap_tools_max`` listers and as many writes are added; each added tool is
    checked on the seeded rows and recorded like the finders ``fill_gaps`` adds afterwards."""
    notes: list[ir.Rejection] = []
    if not (settings.fix_param_names or settings.paged_listers or settings.covering_writes):
        return notes
    infos = table_infos(ws.instance_conn)
    if settings.fix_param_names:
        tools, renamed = fix_param_names(ws.environment(), ws.schema_conn, infos)
        ws.tools[:] = tools
        notes += renamed
    if settings.paged_listers:
        for i, tool in enumerate(list(ws.tools)):
            paged = paging.page_tool(tool, ws.schema_conn)
            if paged is None:
                continue
            sets = [{k: v for k, v in a.items() if k in {p.name for p in tool.params}}
                    for a in ws.sampler.arguments(tool, settings.sample_calls)]
            error = "; ".join(checks.check_tool(ws.schema_conn, paged.model_dump(mode="json"))) or \
                paged_problems(ws.env, tool, paged, sets)
            if error:
                notes.append(ir.Rejection(stage=STAGE, item=tool.name, reason=f"not paged: {error}"))
                continue
            ws.tools[i] = paged
            notes.append(ir.Rejection(stage=STAGE, item=tool.name, reason="paged by code: it returned every row "
                                      "it matched; it now takes a page size and says how many rows match"))
    if settings.covering_writes:
        added = 0
        for tool, gap in covering_writes(ws.environment(), ws.instance_conn, infos, [t.name for t in ws.tools],
                                          failed):
            if added >= settings.gap_tools_max:
                break
            error = ws.problems(tool, settings.sample_calls)
            if error is not None:
                notes.append(_not_added(tool, gap.kind, gap.table, error))
                continue
            ws.tools.append(tool)
            added += 1
            notes.append(_added(tool, gap.kind, gap.table, [gap.column] if gap.column else [], gap.why))
    if settings.paged_listers:
        found = [g for g in coverage.gaps(ws.environment(), ws.instance_conn, infos, whole_tables=True)
                 if g.kind == "lister"]
        added = 0
        for lister, lgap in coverage.gap_tools(found, ws.tables, infos, {t.name for t in ws.tools}, ws.instance_conn):
            if added >= settings.gap_tools_max:
                break
            error = lister_problems(ws, lister, lgap)
            if error is not None:
                notes.append(_not_added(lister, lgap.kind, lgap.table, error))
                continue
            ws.tools.append(lister)
            added += 1
            notes.append(_added(lister, lgap.kind, lgap.table, lgap.columns, lgap.why))
    return notes
