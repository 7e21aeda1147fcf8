"""A create tool's conflict guard tried on the seeded rows, and the parameters a write tool takes but never uses.

A *conflict guard* is a ``must="not_exist"`` guard whose one table is a table the tool inserts into, comparing
that table's columns with parameters the ``INSERT`` writes into it (``garage_id = :garage_id AND start_date <=
:end_date AND end_date >= :start_date``). It is evaluated alone (its SQL, on the seeded rows, other guards
aside) on inputs made from the rows, read from the SQL by a parser, never from names:

- inputs it should refuse: an existing row's own values (each parameter the value the row holds in the column the
  ``INSERT`` writes it into), for a few rows spread over the table;
- inputs it should allow: when it compares parameters by order (``<``, ``<=``, ``>``, ``>=``), the same row with
  those parameters moved after, then before, every value the rows of the same group (the rows its equality
  comparisons match) hold in the compared columns, their order kept; else one equality parameter changed to a
  value (a key of the parent it references, another row's value) that no row holds together with the others.

A guard that refuses every input it should allow (an ``OR`` where ``AND`` was meant: no date is free), or allows
every input it should refuse (it lets a copy of an existing row through), is wrong (:func:`wrong_guards`, with the
inputs tried). Guards with aggregates, joins, subqueries or placeholders that are no parameter are not judged.

:func:`unused_params`: a write tool's parameters whose value reaches no write, query or result and only guards
that compare it with nothing else the call gives (``SELECT 1 FROM users WHERE user_id = :user_id`` before an
``INSERT`` that leaves ``user_id`` out): the value is checked and dropped.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from pipeline import ir
from pipeline.runtime.engine import placeholders
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import qi

ROWS = 6
"""Existing rows an input is made from (spread over the table)."""

_ORDER = (exp.LT, exp.LTE, exp.GT, exp.GTE)


@dataclass
class GuardFinding:
    tool: str
    sql: str
    why: str
    """``refuses_all`` (every input it should allow refused) or ``allows_all`` (every input it should refuse let
    through)."""
    allowed: list[dict[str, Any]] = field(default_factory=list)
    """Inputs it should allow (each tried)."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """Inputs it should refuse (each tried)."""

    def describe(self) -> str:
        if self.why == "refuses_all":
            return (f"its guard `{self.sql}` refused every call it should let through: each of "
                    f"{_some(self.allowed)} "
                    f"(values an existing row holds, with the compared values moved away from every row they "
                    f"could conflict with, or a parent no row has); a guard must refuse only a conflict with an "
                    f"existing row (check how its conditions are joined: AND, OR)")
        return (f"its guard `{self.sql}` let through every call it should refuse: each of {_some(self.refused)} "
                f"(the values of an existing row); a guard must refuse a conflict with an existing row")

    def evidence(self) -> dict[str, Any]:
        return {"guard": self.sql, "finding": self.why, "should_allow": self.allowed, "should_refuse": self.refused}


def _some(inputs: list[dict[str, Any]], k: int = 3) -> str:
    more = f" and {len(inputs) - k} more" if len(inputs) > k else ""
    return ", ".join(str(a) for a in inputs[:k]) + more


def _unique(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({repr(sorted(a.items())): a for a in inputs}.values())


def inserted(tool: ir.Tool) -> dict[str, dict[str, str]]:
    """Table -> {parameter: column} of the ``INSERT ... (cols) VALUES (...)`` write steps of ``tool`` (a value that
    is the parameter itself)."""
    out: dict[str, dict[str, str]] = {}
    for s in tool.steps:
        if s.kind != "write":
            continue
        tree = _parse(s.sql)
        if not isinstance(tree, exp.Insert) or not isinstance(tree.this, exp.Schema):
            continue
        table = tree.this.this
        values = tree.expression
        if not isinstance(table, exp.Table) or not isinstance(values, exp.Values) or len(values.expressions) != 1:
            continue
        cols = [c.name for c in tree.this.expressions]
        row = values.expressions[0].expressions
        mine = out.setdefault(table.name, {})
        for col, val in zip(cols, row, strict=False):
            if isinstance(val, exp.Placeholder) and val.name:
                mine.setdefault(val.name, col)
    return out


@dataclass
class _Shape:
    table: str
    equal: dict[str, str]
    """Parameter -> the column it is compared with by ``=``."""
    ordered: dict[str, str]
    """Parameter -> the column it is compared with by order."""


def _shape(sql: str, params: set[str]) -> _Shape | None:
    tree = _parse(sql)
    if not isinstance(tree, exp.Select) or tree.find(exp.AggFunc, exp.Join, exp.Subquery, exp.Union) is not None:
        return None
    if len(tree.selects) != 1 or tree.args.get("group") or tree.args.get("having"):
        return None
    tables = list(tree.find_all(exp.Table))
    if len(tables) != 1 or len(list(tree.find_all(exp.Select))) != 1:
        return None
    names = set(placeholders(sql))
    if not names or not names <= params:
        return None
    equal: dict[str, str] = {}
    ordered: dict[str, str] = {}
    for node in tree.find_all(exp.EQ, *_ORDER):
        left, right = node.this, node.expression
        if isinstance(left, exp.Placeholder) and isinstance(right, exp.Column):
            left, right = right, left
        if not (isinstance(left, exp.Column) and isinstance(right, exp.Placeholder)):
            continue
        (equal if isinstance(node, exp.EQ) else ordered).setdefault(right.name, left.name)
    if set(equal) | set(ordered) != names or set(equal) & set(ordered):
        return None
    return _Shape(tables[0].name, equal, ordered)


def _day(value: Any) -> dt.date | None:
    if not isinstance(value, str) or len(value) < 10:
        return None
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        return None


def _shift(value: Any, k: int) -> Any:
    """``value`` moved by ``k`` steps: a number by ``k``, a date ('YYYY-MM-DD', a time after it kept) by ``k``
    days; None for any other value."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value + k
    day = _day(value)
    if day is None:
        return None
    try:
        return (day + dt.timedelta(days=k)).isoformat() + value[10:]
    except OverflowError:
        return None


def _refuses(conn: sqlite3.Connection, sql: str, args: dict[str, Any]) -> bool | None:
    """Whether the ``not_exist`` guard ``sql`` refuses ``args`` on ``conn``'s rows (None: it does not run)."""
    try:
        row = conn.execute(f"SELECT EXISTS ({sql})", {n: args.get(n) for n in placeholders(sql)}).fetchone()
    except sqlite3.Error:
        return None
    return bool(row and row[0])


def _spread(conn: sqlite3.Connection, table: str, cols: list[str]) -> list[tuple]:
    where = " AND ".join(f"{qi(c)} IS NOT NULL" for c in cols)
    rows = conn.execute(f"SELECT {', '.join(qi(c) for c in cols)} FROM {qi(table)} WHERE {where} "
                        "ORDER BY rowid").fetchall()
    if len(rows) <= ROWS:
        return rows
    step = (len(rows) - 1) / (ROWS - 1)
    return [rows[round(i * step)] for i in range(ROWS)]


def _moved(conn: sqlite3.Connection, shape: _Shape, cols: dict[str, str], base: dict[str, Any]) -> list[dict]:
    """``base`` with its order-compared parameters moved after, then before, every value the rows of its group
    hold in the compared columns (their order kept); [] when the values cannot be moved."""
    group = " AND ".join(f"{qi(c)} = :{p}" for p, c in shape.equal.items()) or "1"
    span = sorted({*shape.ordered.values(), *(cols[p] for p in shape.ordered)})
    values = [v for row in conn.execute(f"SELECT {', '.join(qi(c) for c in span)} FROM {qi(shape.table)} "
                                        f"WHERE {group}", {p: base[p] for p in shape.equal}).fetchall()
              for v in row if v is not None]
    values += [base[p] for p in shape.ordered]
    try:
        hi, lo = max(values), min(values)
        ranks = {v: i for i, v in enumerate(sorted({base[p] for p in shape.ordered}))}
    except TypeError:  # values of different kinds
        return []
    out = []
    for edge, start in ((hi, 1), (lo, -len(ranks))):
        moved = dict(base)
        for p in shape.ordered:
            moved[p] = _shift(edge, start + ranks[base[p]])
            if moved[p] is None:
                return []
        out.append(moved)
    return out


def _parent_values(conn: sqlite3.Connection, table: str, col: str) -> list[Any]:
    """The values ``table.col`` may take: the keys of the parent it references, then its own values."""
    out: list[Any] = []
    for fk in conn.execute(f"PRAGMA foreign_key_list({qi(table)})").fetchall():
        if fk[3] == col and fk[4]:
            out += [r[0] for r in conn.execute(f"SELECT {qi(fk[4])} FROM {qi(fk[2])} ORDER BY rowid")]
    out += [r[0] for r in conn.execute(f"SELECT DISTINCT {qi(col)} FROM {qi(table)} ORDER BY rowid")]
    return list(dict.fromkeys(v for v in out if v is not None))


def _unmatched(conn: sqlite3.Connection, shape: _Shape, base: dict[str, Any]) -> dict[str, Any] | None:
    """``base`` with one equality parameter changed to a value no row holds together with the others'."""
    match = " AND ".join(f"{qi(c)} = :{p}" for p, c in shape.equal.items())
    for p, col in shape.equal.items():
        for v in _parent_values(conn, shape.table, col):
            args = {**base, p: v}
            if conn.execute(f"SELECT 1 FROM {qi(shape.table)} WHERE {match} LIMIT 1",
                            {q: args[q] for q in shape.equal}).fetchone() is None:
                return args
    return None


@dataclass
class _Trial:
    allow: list[dict[str, Any]]
    allowed: list[bool]
    """For each input it should allow: whether it refused it."""
    refuse: list[dict[str, Any]]
    refused: list[bool]


def _trial(conn: sqlite3.Connection, tool: ir.Tool, step: ir.Step) -> _Trial | None:
    """The guard ``step`` of ``tool`` tried on ``conn``'s seeded rows, or None when it is no conflict guard this
    module judges (see the module docstring)."""
    if step.kind != "guard" or step.must != "not_exist":
        return None
    shape = _shape(step.sql, {p.name for p in tool.params})
    if shape is None:
        return None
    cols = inserted(tool).get(shape.table, {})
    params = [*shape.equal, *shape.ordered]
    if not all(p in cols for p in params):
        return None
    try:
        rows = _spread(conn, shape.table, [cols[p] for p in params])
        refuse: list[dict] = [dict(zip(params, row, strict=True)) for row in rows]
        allow: list[dict] = []
        for base in refuse:
            if shape.ordered:
                allow += _moved(conn, shape, cols, base)
            elif (other := _unmatched(conn, shape, base)) is not None:
                allow.append(other)
    except sqlite3.Error:
        return None
    allow, refuse = _unique(allow), _unique(refuse)
    allowed = [_refuses(conn, step.sql, a) for a in allow]
    refused = [_refuses(conn, step.sql, a) for a in refuse]
    if None in allowed or None in refused:
        return None
    return _Trial(allow, [bool(v) for v in allowed], refuse, [bool(v) for v in refused])


def judge(conn: sqlite3.Connection, tool: ir.Tool, step: ir.Step) -> GuardFinding | None:
    """Whether the guard ``step`` of ``tool`` is wrong on ``conn``'s seeded rows (see the module docstring)."""
    t = _trial(conn, tool, step)
    if t is None:
        return None
    if t.allow and all(t.allowed):
        return GuardFinding(tool.name, step.sql, "refuses_all", t.allow, t.refuse)
    if t.refuse and not any(t.refused):
        return GuardFinding(tool.name, step.sql, "allows_all", t.allow, t.refuse)
    return None


def conflict_guard(conn: sqlite3.Connection, tool: ir.Tool, step: ir.Step) -> bool:
    """Whether the guard ``step`` of ``tool`` is a conflict guard this module judges (see the module docstring)."""
    return _trial(conn, tool, step) is not None


def free_inputs(conn: sqlite3.Connection, tool: ir.Tool) -> list[dict[str, Any]]:
    """Inputs every conflict guard of ``tool`` lets through (each made for one guard and tried on the others):
    a create tool sampled with an existing row's own values is rightly refused by its conflict guard, and is
    exercised on these as well."""
    if tool.kind != "write":
        return []
    trials = [(s, t) for s in tool.steps if (t := _trial(conn, tool, s)) is not None]
    out = []
    for _, t in trials:
        for args, refused in zip(t.allow, t.allowed, strict=True):
            if not refused and not any(_refuses(conn, s.sql, args) for s, _ in trials):
                out.append(args)
    return out


def wrong_guards(conn: sqlite3.Connection, tool: ir.Tool) -> list[GuardFinding]:
    """The conflict guards of the write tool ``tool`` that are wrong on ``conn``'s seeded rows."""
    if tool.kind != "write":
        return []
    return [f for s in tool.steps if (f := judge(conn, tool, s)) is not None]


def without(tool: ir.Tool, found: list[GuardFinding]) -> ir.Tool:
    """``tool`` without the guards of ``found``."""
    drop = {f.sql for f in found}
    return tool.model_copy(update={"steps": [s for s in tool.steps if not (s.kind == "guard" and s.sql in drop)]})


def unused_params(tool: ir.Tool) -> list[str]:
    """The parameters of the write tool ``tool`` whose value reaches no write, query or result, only guards that
    compare it with nothing else the call gives (see the module docstring)."""
    if tool.kind != "write":
        return []
    used: set[str] = set()
    sqls = [(s.kind, s.sql) for s in tool.steps] + ([("returns", tool.returns.sql)] if tool.returns else [])
    for kind, sql in sqls:
        names = set(placeholders(sql)) - {"now", "today"}
        if kind != "guard" or len(names) > 1:
            used |= names
    return [p.name for p in tool.params if p.name not in used]


def unused_note(tool: ir.Tool, unused: list[str]) -> str:
    return (f"its parameters {unused} are taken but their values reach no write and no result (at most a guard "
            f"that checks them alone): store each where it belongs, or leave it out")
