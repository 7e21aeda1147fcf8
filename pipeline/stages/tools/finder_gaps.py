"""Tool coverage: the finders and listers a tool set needs before tasks can chain through it.

An agent knows what the user tells it: a title, a name, a date, never a row id. A write tool that takes an id
(``cancel_loan(loan_id)``) is only usable in a task if some read tool turns what users know into that id, and a
question such as "how many loans does Grace have" needs a tool that lists the rows of a parent. Small models
plan few such tools, so after the planned tools are written this module finds the gaps in the tool-dependency
graph (``pipeline.dbmodel.analysis`` reads every tool's SQL) and fills each with a tool written by code
from the schema, not by the LLM:

- a **finder** ``find_<table>_by_<key columns>`` for every table whose id some tool takes (directly or through a
  foreign key) and that no read tool yields from a user-known value: ``SELECT * FROM t WHERE k1 = :k1 ...``
  over the table's natural key (declared, or found unique in the seeded rows; a key may be made of references,
  which the finders of the parents resolve: the loan of a book by a member);
- a **lister** ``list_<child>_by_<fk>`` for every foreign key that no read tool filters by while giving the
  rows' key (a child table whose rows no column combination names, such as a loan's fines, is reached that way);
- with ``whole_tables``, a lister ``list_<table>`` for every table no read tool lists.

Given the seeded database (``rows``), listers are paged and take optional filters (``pipeline.dbmodel.paging``).

The tools are plain parameterised SELECTs over one table (checked like any other tool by the caller), so what
they return is exactly the table's rows; their descriptions say what they take and give. Domain-neutral: the
only inputs are the schema, the seeded rows and the other tools' SQL.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline import ir
from pipeline.dbmodel import paging
from pipeline.dbmodel.analysis import ToolShape, analyse
from pipeline.dbmodel.columns import check_enums
from pipeline.dbmodel.keys import natural_keys
from pipeline.runtime.state import TableInfo, qi

__all__ = ["Gap", "gap_tools", "gaps"]

_PARAM_TYPE = {"INTEGER": "integer", "INT": "integer", "REAL": "number", "TEXT": "string"}


@dataclass(frozen=True)
class Gap:
    kind: str
    """``finder`` or ``lister``."""
    table: str
    columns: tuple[str, ...]
    """The key columns a finder takes, the reference a lister filters by (none: it lists the whole table)."""
    why: str


def _needed_ids(shapes: dict[str, ToolShape], infos: dict[str, TableInfo]) -> dict[str, str]:
    """Tables whose integer id some tool takes as a parameter (its own key or a foreign key pointing at it),
    with the first tool that does (for the record)."""
    out: dict[str, str] = {}
    for shape in shapes.values():
        for uses in shape.uses.values():
            for u in uses:
                if u.column is None:
                    continue
                table, col = u.column
                info = infos.get(table)
                if info is None:
                    continue
                if info.int_pk and col == info.key[0]:
                    out.setdefault(table, shape.name)
                for c, parent, pcol in info.foreign_keys:
                    pinfo = infos.get(parent)
                    if c == col and pinfo is not None and pinfo.int_pk and (pcol or pinfo.key[0]) == pinfo.key[0]:
                        out.setdefault(parent, shape.name)
    return out


def _reachable(shapes: dict[str, ToolShape], infos: dict[str, TableInfo]) -> set[str]:
    """Tables whose integer id some chain of read tools gives, starting from values a user knows: a read tool
    yields its result's ids when each of its parameters is a user-known value or an id already reachable."""
    def target(col: tuple[str, str]) -> str | None:  # the table whose id a surrogate column holds
        table, name = col
        info = infos.get(table)
        if info is None:
            return None
        if info.int_pk and name == info.key[0]:
            return table
        return next((p for c, p, _ in info.foreign_keys if c == name), None)

    reached: set[str] = set()
    while True:
        before = len(reached)
        for s in shapes.values():
            if s.kind != "read":
                continue
            cols = [s.column_of(p) for p in s.uses]
            if any(c is None for c in cols):
                continue
            if all(target(c) is None or target(c) in reached for c in cols if c is not None):
                reached |= {t for t, i in infos.items() if i.int_pk and s.output_for((t, i.key[0])) is not None}
        if len(reached) == before:
            return reached


def gaps(env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
         whole_tables: bool = False) -> list[Gap]:
    """The finders and listers ``env``'s tools lack, in schema order (finders first); with ``whole_tables`` also
    a lister for each table that no read tool lists rows of (last)."""
    shapes = analyse(env, conn, infos)
    reached = _reachable(shapes, infos)
    searchable = {u.column for s in shapes.values() if s.kind == "read" for us in s.uses.values() for u in us
                  if u.column is not None and u.role == "filter"}
    keys = natural_keys(env, conn, infos, searchable)
    needed = _needed_ids(shapes, infos)
    out: list[Gap] = []
    order = [t.name for t in env.tables if t.name in infos]
    for table in order:
        info = infos[table]
        if table not in needed or table in reached or table not in keys:
            continue
        out.append(Gap("finder", table, tuple(keys[table].columns),
                       f"{needed[table]} takes {table}.{info.key[0]} and no read tool leads to it from what users "
                       "know"))
    # filtered: some read tool filters by the reference and gives the rows' own key (a tool that filters by it and
    # gives only an amount does not lead an agent to the row a write needs)
    filtered = {u.column for s in shapes.values() if s.kind == "read" for us in s.uses.values() for u in us
                if u.column is not None and u.role == "filter"
                and all(s.output_for((u.column[0], k)) for k in infos[u.column[0]].key if u.column[0] in infos)}
    for table in order:
        for col, parent, _ in infos[table].foreign_keys:
            if (table, col) not in filtered and parent in infos:
                out.append(Gap("lister", table, (col,), f"no read tool lists the {table} of one {parent} row"))
    if whole_tables:  # listed: some read tool taking no required value lists its rows (their key among the fields)
        free = {t.name for t in env.tools if not any(p.required for p in t.params)}
        listed = {t for s in shapes.values() if s.kind == "read" and s.many and s.name in free
                  for t, i in infos.items() if all(s.output_for((t, k)) for k in i.key)}
        out += [Gap("lister", t, (), f"no read tool lists the {t} rows") for t in order if t not in listed]
    return out


def _param(info: TableInfo, col: str, enums: dict[str, tuple[str | int | float, ...]],
           parent: tuple[str, str] | None) -> ir.Param:
    ptype = _PARAM_TYPE.get(info.column_type(col), "string")
    enum = [v for v in enums.get(col, ()) if not isinstance(v, float)] or None
    if enum is not None and not all(isinstance(v, str if ptype == "string" else int) for v in enum):
        enum = None
    what = f"the {parent[1]} of the {parent[0]} row" if parent else f"the {col} of the {info.name} row"
    return ir.Param(name=col, type=ptype, description=f"{what} ({info.name}.{col})", enum=enum)  # type: ignore[arg-type]


def _fit(name: str, most: int = 64) -> str:
    """``name`` as a tool's name may be (an identifier of at most ``most`` characters): the joining "_and_"s dropped,
    then cut with a short digest of the whole, so that two long names stay apart. The regenerated pharmacy's finder
    by (patient_id, medication_id, start_date) was 67 characters long, and its build failed on it."""
    if len(name) <= most:
        return name
    name = name.replace("_and_", "_")
    if len(name) <= most:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:most - 9]}_{digest}"


def gap_tools(found: Sequence[Gap], tables: Sequence[ir.Table], infos: dict[str, TableInfo],
              taken: set[str], rows: sqlite3.Connection | None = None) -> list[tuple[ir.Tool, Gap]]:
    """One tool per gap (a gap whose name is taken or that has no usable parameter is skipped). Given the seeded
    database ``rows``, listers are paged and filtered (``paging.lister``); a whole-table lister needs it."""
    ddl = {t.name: t.ddl for t in tables}
    out: list[tuple[ir.Tool, Gap]] = []
    names = set(taken)
    for gap in found:
        info = infos[gap.table]
        fks = {c: (p, pc or (infos[p].key[0] if p in infos else "")) for c, p, pc in info.foreign_keys}
        verb = "find" if gap.kind == "finder" else "list"
        name = _fit(f"{verb}_{gap.table}_by_{'_and_'.join(gap.columns)}".lower() if gap.columns else f"list_{gap.table}")
        if name in names or any(c in ir.RESERVED_PARAMS for c in gap.columns) or (not gap.columns and rows is None):
            continue
        enums = check_enums(ddl.get(gap.table, ""))
        try:
            params = [_param(info, c, enums, fks.get(c)) for c in gap.columns]
        except ValueError:
            continue
        where = " AND ".join(f"{qi(c)} = :{c}" for c in gap.columns)
        order = " ORDER BY " + ", ".join(qi(k) for k in info.key) if info.key != ("rowid",) else ""
        given = " and ".join(gap.columns)
        if gap.kind == "lister" and rows is not None:
            words = gap.table.replace("_", " ")
            what = f"the {words} with the given {given.replace('_', ' ')}" if gap.columns else f"all {words}"
            try:
                tool = paging.lister(name, info, params, rows, enums, what)
            except ValueError:
                continue
            out.append((tool, gap))
            names.add(name)
            continue
        if gap.kind == "finder":
            desc = f"Find the {gap.table} row with the given {given}; gives its {info.key[0]} and all its columns."
            returns = ir.Returns(sql=f"SELECT * FROM {qi(gap.table)} WHERE {where}", mode="one")
        else:
            desc = f"List the {gap.table} rows with the given {given}, with all their columns."
            returns = ir.Returns(sql=f"SELECT * FROM {qi(gap.table)} WHERE {where}{order}", mode="all")
        out.append((ir.Tool(name=name, description=desc, kind="read", params=params, returns=returns), gap))
        names.add(name)
    return out
