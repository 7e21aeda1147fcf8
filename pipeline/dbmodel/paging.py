"""Paged, filtered listers (``[stages.build] paged_listers``): with hundreds of rows a table, a list tool that
returns every row shows an agent the whole table, so nothing needs a search, a filter or a count.

A paged lister's result is still a list of row objects (the engine, every ``server.py`` and the reward read
results as before; nothing about existing environments changes): its ``returns`` query takes two optional
parameters, ``limit`` (1..``PAGE_MAX``, ``PAGE_DEFAULT`` when not given) and ``offset`` (0 when not given), and
each row carries ``total_matched``, how many rows match the filters before the page is cut (a window
``COUNT(*) OVER ()``, computed before ``LIMIT``)::

    SELECT COUNT(*) OVER () AS total_matched, * FROM "loans" WHERE "member_id" = :member_id
      AND (:status IS NULL OR "status" = :status) ... ORDER BY "loan_id"
      LIMIT COALESCE(:limit, 20) OFFSET COALESCE(:offset, 0)

An offset past the last row gives an empty page. Code-written listers also take optional filters read from the
schema and the rows: a ``CHECK (c IN (...))`` column (its values as an enum) and a date range on a column
holding ISO dates (``<c>_from``/``<c>_to``, both ends included). An LLM-written read tool returning all the rows
of a plain ``SELECT`` with no ``LIMIT`` gets the same page parameters and count field, added to its SQL text.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.runtime import engine
from pipeline.runtime.state import TableInfo, qi

COUNT_FIELD = "total_matched"
PAGE_DEFAULT = 20
PAGE_MAX = 50
MAX_ENUM_FILTERS = 2
MAX_DATE_FILTERS = 1
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HEAD = re.compile(r"^\s*SELECT\b", re.I)
_PAGED = re.compile(r"^\s*SELECT\s+COUNT\(\*\)\s+OVER\s*\(\)\s+AS\s+(\w+),.*\bLIMIT\s+COALESCE\(:(\w+),\s*\d+\)\s+"
                    r"OFFSET\s+COALESCE\(:(\w+),\s*0\)\s*$", re.I | re.S)


@dataclass(frozen=True)
class Page:
    """How a paged tool pages: its limit and offset parameters and the result field counting the matches."""

    limit: str
    offset: str
    count: str


def page_of(tool: ir.Tool) -> Page | None:
    """The paging of ``tool`` when its ``returns`` query was paged here (read from its SQL), else None."""
    if tool.returns is None or tool.returns.mode != "all":
        return None
    m = _PAGED.match(tool.returns.sql)
    return Page(m.group(2), m.group(3), m.group(1)) if m else None


def free_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3``... the first not in ``taken``."""
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def taken_names(tool: ir.Tool) -> set[str]:
    """Names a new parameter of ``tool`` must not take: its parameters, every placeholder its SQL reads (bound
    columns of query steps included) and the built-ins."""
    sqls = [s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else [])
    return {p.name for p in tool.params} | {n for s in sqls for n in engine.placeholders(s)} | ir.RESERVED_PARAMS


def page_params(taken: set[str]) -> tuple[Page, list[ir.Param]]:
    """The limit and offset parameters (names free of ``taken``); the count field is named by the caller."""
    limit = free_name("limit", taken)
    offset = free_name("offset", taken | {limit})
    params = [
        ir.Param(name=limit, type="integer", required=False, minimum=1, maximum=PAGE_MAX,
                 description=f"How many matching rows to return at most (1-{PAGE_MAX}; {PAGE_DEFAULT} when not given)"),
        ir.Param(name=offset, type="integer", required=False, minimum=0,
                 description="How many matching rows to skip before the first one returned (0 when not given): "
                             f"the next page starts at offset + limit; {COUNT_FIELD} says how many rows match"),
    ]
    return Page(limit, offset, COUNT_FIELD), params


def page_clause(page: Page) -> str:
    return f" LIMIT COALESCE(:{page.limit}, {PAGE_DEFAULT}) OFFSET COALESCE(:{page.offset}, 0)"


def count_projection(page: Page) -> str:
    return f"COUNT(*) OVER () AS {page.count}"


def iso_date_columns(conn: sqlite3.Connection, info: TableInfo, skip: set[str]) -> list[str]:
    """TEXT columns of ``info`` whose seeded values are all ISO dates (``YYYY-MM-DD``), read from the rows."""
    out = []
    for col in info.columns:
        if col in skip or info.column_type(col) != "TEXT":
            continue
        vals = [r[0] for r in conn.execute(f"SELECT {qi(col)} FROM {qi(info.name)} WHERE {qi(col)} IS NOT NULL "
                                           f"ORDER BY {', '.join(qi(k) for k in info.key)} LIMIT 50")]
        if vals and all(isinstance(v, str) and _ISO_DATE.match(v) for v in vals):
            out.append(col)
    return out


def filters(conn: sqlite3.Connection, info: TableInfo, enums: dict[str, tuple[str | int | float, ...]],
            skip: set[str], taken: set[str]) -> tuple[list[ir.Param], list[str]]:
    """Optional filter parameters of a lister over ``info`` and their conditions: its CHECK-listed columns (at
    most ``MAX_ENUM_FILTERS``) and a date range on its ISO-date columns (at most ``MAX_DATE_FILTERS``); keys,
    references and ``skip`` columns are left out."""
    keys = set(info.key) | {c for c, _, _ in info.foreign_keys} | skip
    params: list[ir.Param] = []
    where: list[str] = []
    names = set(taken)
    for col in info.columns:
        values = [v for v in enums.get(col, ()) if not isinstance(v, float)]
        if col in keys or not values or len(where) >= MAX_ENUM_FILTERS or col in names:
            continue
        ptype = "string" if all(isinstance(v, str) for v in values) else "integer" \
            if all(isinstance(v, int) for v in values) else None
        if ptype is None:
            continue
        try:
            params.append(ir.Param(name=col, type=ptype, required=False, enum=values,  # type: ignore[arg-type]
                                   description=f"Only the rows whose {col} is this value ({info.name}.{col})"))
        except ValueError:  # a column name no parameter may have
            continue
        where.append(f"(:{col} IS NULL OR {qi(col)} = :{col})")
        names.add(col)
    for col in [c for c in iso_date_columns(conn, info, keys) if ir.IDENT.match(f"{c}_from")][:MAX_DATE_FILTERS]:
        lo, hi = free_name(f"{col}_from", names), free_name(f"{col}_to", names | {f"{col}_from"})
        names |= {lo, hi}
        params += [ir.Param(name=lo, type="string", required=False, max_length=10,
                            description=f"Only the rows whose {col} is on or after this date, YYYY-MM-DD "
                                        f"({info.name}.{col})"),
                   ir.Param(name=hi, type="string", required=False, max_length=10,
                            description=f"Only the rows whose {col} is on or before this date, YYYY-MM-DD "
                                        f"({info.name}.{col})")]
        where.append(f"(:{lo} IS NULL OR {qi(col)} >= :{lo}) AND (:{hi} IS NULL OR {qi(col)} <= :{hi})")
    return params, where


def lister(name: str, info: TableInfo, key_params: list[ir.Param], conn: sqlite3.Connection,
           enums: dict[str, tuple[str | int | float, ...]], what: str) -> ir.Tool:
    """A paged lister of ``info``'s rows: each of ``key_params`` (named for its column) must equal its column,
    the filters are optional. ``what`` says which rows, for the description."""
    taken = {p.name for p in key_params} | ir.RESERVED_PARAMS
    extra, conds = filters(conn, info, enums, {p.name for p in key_params}, taken)
    page, paging = page_params(taken | {p.name for p in extra})
    page = Page(page.limit, page.offset, free_name(COUNT_FIELD, set(info.columns)))
    where = [f"{qi(p.name)} = :{p.name}" for p in key_params] + conds
    order = " ORDER BY " + ", ".join(qi(k) for k in info.key)
    sql = (f"SELECT {count_projection(page)}, * FROM {qi(info.name)}" + (" WHERE " + " AND ".join(where) if where
                                                                          else "") + order + page_clause(page))
    by = f", optionally only those with the given {', '.join(p.name for p in extra)}" if extra else ""
    desc = f"List {what}{by}, with all their columns and {page.count} (how many match in all)."
    return ir.Tool(name=name, description=desc, kind="read", params=[*key_params, *extra, *paging],
                   returns=ir.Returns(sql=sql, mode="all"))


def page_tool(tool: ir.Tool, conn: sqlite3.Connection) -> ir.Tool | None:
    """``tool`` paged when it is a read tool returning all the rows of a plain ``SELECT`` with no ``LIMIT``,
    ``DISTINCT``, compound or ``WITH`` (the count would then not count the rows returned), else None. The SQL text
    is kept as written, with the count projection after ``SELECT`` and the page clause at its end; the description
    too (the page parameters' own descriptions say how to page)."""
    if tool.kind != "read" or tool.returns is None or tool.returns.mode != "all" or page_of(tool) is not None:
        return None
    sql = tool.returns.sql.strip().rstrip(";").rstrip()
    head = _HEAD.match(sql)
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except Exception:
        return None
    if head is None or not isinstance(tree, exp.Select) or "--" in sql or "/*" in sql:
        return None
    if any(tree.args.get(k) for k in ("limit", "offset", "distinct", "with")):
        return None
    if not tree.args.get("group") and any(p.find(exp.AggFunc) for p in tree.expressions):
        return None  # an aggregate without GROUP BY gives one row
    try:
        columns = engine.result_columns(conn, sql)
    except sqlite3.Error:
        return None
    page, paging = page_params(taken_names(tool))
    page = Page(page.limit, page.offset, free_name(COUNT_FIELD, set(columns)))
    new_sql = f"{sql[:head.end()]} {count_projection(page)},{sql[head.end():]}{page_clause(page)}"
    return tool.model_copy(update={"params": [*tool.params, *paging], "returns": ir.Returns(sql=new_sql, mode="all")})
