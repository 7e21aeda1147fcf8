"""The states a row moves through: which value of a status-like column a new row has, and which values come after
which (a task creates a row in the state new rows have, and moves a row only forward).

A status-like column is a text column whose values come from a short list: its ``CHECK (col IN (...))`` list, else a
tool's enum for it, else the few distinct values its rows hold (at most :data:`MAX_STATES`, each held by several
rows). What a new row holds and what comes later is read from evidence the environment has, never from the values'
words (any language):

1. the column's DEFAULT, when it is one of the states: the schema says what a new row holds;
2. else the model's example rows dated at the clock (a row's earliest date within :data:`NEAR_DAYS` of it: a row
   made "today"): the state most of them hold, a tie broken by the list's order (a CHECK list is written in the
   order its states come: the first a row starts in). The examples are what the model wrote for its domain; the
   rows code made at scale draw a state independently of their dates, so they say nothing here;
3. else the table's rows by age (examples and seeded rows): the state whose rows are clearly the youngest
   (:func:`_younger`: a difference of means of at least :data:`T_MIN` standard errors, each state held by at least
   :data:`MIN_ROWS` dated rows; older rows hold the later states).

When none of them decides, there is no initial state and the planner does what it did before (a new row copies the
state of an existing row; a change takes any other value). The order after the initial state is the rows' age when
it is clear between each pair of neighbours, else the list's order; a change moves a row only to a later state, so a
row in the last state has no change of it (the planner then picks another task). The one exception is a write a rule
forbids (:func:`behind`): the request a rule-bound task refuses may ask for the state a row holds or an earlier one,
since the refused write changes nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from datetime import date
from itertools import pairwise
from typing import Any, Protocol

from pipeline import ir
from pipeline.dbmodel.analysis import ToolShape
from pipeline.dbmodel.columns import check_enums
from pipeline.dbmodel.examples import as_written
from pipeline.meaning import relations
from pipeline.runtime.state import TableInfo, qi

NEAR_DAYS = 7
"""An example row whose earliest date is this close to the clock (either side) was made "now"."""
MAX_STATES = 8
"""A column without a closed list is status-like when its rows hold at most this many distinct values..."""
MIN_PER_STATE = 3
"""...and at least this many rows per distinct value on average."""
MIN_ROWS = 5
"""Dated rows a state needs before its rows' age says anything."""
T_MIN = 3.0
"""Standard errors by which one state's rows must be younger than another's (a state drawn at random with the
dates passes this about 3 times in 1000)."""


class Rows(Protocol):
    """What the states of a column are read from: the environment, its initial rows (``conn``), their tables'
    infos and the tools' shapes, with a cache per environment (the task planner is one; the policy stage's
    :class:`Evidence` another)."""

    env: ir.Environment
    conn: Any
    infos: dict[str, TableInfo]
    shapes: dict[str, ToolShape]
    _cache: dict[str, Any]


class Evidence:
    """:class:`Rows` of one environment's initial state, for a stage other than the planner (the policy stage)."""

    def __init__(self, env: ir.Environment, conn: Any, infos: dict[str, TableInfo],
                 shapes: dict[str, ToolShape]) -> None:
        self.env, self.conn, self.infos, self.shapes = env, conn, infos, shapes
        self._cache: dict[str, Any] = {}


def states(p: Rows, table: str, col: str) -> tuple[str, ...] | None:
    """The values ``table.col`` holds as a short list, in the list's order (CHECK list, else a tool's enum, else the
    rows' distinct values in the order the examples, then the rows, first hold them); None when it is no such column."""
    cache = f"states:{table}.{col}"
    if cache not in p._cache:
        p._cache[cache] = _states(p, table, col)
    out: tuple[str, ...] | None = p._cache[cache]
    return out


def _states(p: Rows, table: str, col: str) -> tuple[str, ...] | None:
    info = p.infos.get(table)
    if info is None or col not in info.columns or info.column_type(col) not in ("TEXT", "ANY", ""):
        return None
    ddl = next((t.ddl for t in p.env.tables if t.name == table), "")
    listed = check_enums(ddl).get(col)
    if listed is None:
        listed = tuple(enum_of(p, table, col) or ()) or None
    if listed is not None:
        vals = tuple(v for v in listed if isinstance(v, str))
        return vals if len(vals) >= 2 and len(vals) == len(listed) else None
    if col in p.infos[table].key or any(c == col for c, _, _ in info.foreign_keys):
        return None
    counts = Counter(r[0] for r in p.conn.execute(f"SELECT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL"))
    if not 2 <= len(counts) <= MAX_STATES or sum(counts.values()) < MIN_PER_STATE * len(counts) \
            or not all(isinstance(v, str) for v in counts):
        return None
    seen = [v for v in _examples(p, table).get(col, []) if v in counts]
    return tuple(dict.fromkeys(seen + list(counts)))


def _examples(p: Rows, table: str) -> dict[str, list[Any]]:
    return example_rows(p, table)


def enum_of(p: Rows, table: str, col: str) -> list[Any] | None:
    for t in p.env.tools:
        for prm in t.params:
            if prm.enum and p.shapes[t.name].column_of(prm.name) == (table, col):
                return list(prm.enum)
    return None


def example_rows(p: Rows, table: str) -> dict[str, list[Any]]:
    """``table``'s rows the model wrote as examples, column -> values (every seeded row when code made none), with
    their dates as the model wrote them (:func:`~pipeline.dbmodel.examples.as_written`: the seed spreads them
    among the code-made rows' days, but a new row is dated as the model dated its examples: a loan issued today)."""
    rows: list[dict[str, Any]] = []
    for s in p.env.seed:
        if s.table == table:
            rows += as_written(s)
    names = list(dict.fromkeys(c for r in rows for c in r))
    return {c: [r.get(c) for r in rows] for c in names}


def default_of(p: Rows, table: str, col: str) -> str | None:
    """The column's DEFAULT when it is a text literal (``DEFAULT 'pending'``), else None."""
    for _cid, name, _typ, _nn, dflt, _pk in p.conn.execute(f"PRAGMA table_info({qi(table)})"):
        if name == col and isinstance(dflt, str):
            m = re.fullmatch(r"\s*'((?:[^']|'')*)'\s*", dflt)
            return m.group(1).replace("''", "'") if m else None
    return None


def _row_day(row: dict[str, Any], dated: Sequence[str]) -> date | None:
    days = [d for c in dated if (d := relations.as_date(row.get(c))) is not None]
    return min(days) if days else None


def _ages(p: Rows, table: str, col: str, dated: Sequence[str], today: date) -> dict[str, list[int]]:
    """The age in days (clock minus the row's earliest date) of every dated row of ``table``, per value of ``col``."""
    cols = [col, *dated]
    out: dict[str, list[int]] = {}
    for r in p.conn.execute(f"SELECT {', '.join(qi(c) for c in cols)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL"):
        day = _row_day(dict(zip(cols, r, strict=True)), dated)
        if day is not None and isinstance(r[0], str):
            out.setdefault(r[0], []).append((today - day).days)
    return out


def _younger(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether the rows ``a`` (ages in days) are clearly younger than the rows ``b`` (Welch's t of at least
    :data:`T_MIN`, at least :data:`MIN_ROWS` rows each)."""
    if len(a) < MIN_ROWS or len(b) < MIN_ROWS:
        return False
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1)
    se = math.sqrt(va / len(a) + vb / len(b))
    return mb - ma >= T_MIN * se if se > 0 else mb > ma


def _today(p: Rows) -> date:
    return date.fromisoformat(p.env.clock[:10])


def initial_state(p: Rows, table: str, col: str) -> str | None:
    """The state a new row of ``table`` holds in ``col`` (see the module's rules), None when the evidence does not
    decide it or the column is not status-like."""
    order = lifecycle(p, table, col)
    return order[0] if order else None


def lifecycle(p: Rows, table: str, col: str) -> tuple[str, ...] | None:
    """The states of ``table.col`` in the order a row goes through them, the initial state first; None when no
    initial state is known (see the module's rules)."""
    cache = f"lifecycle:{table}.{col}"
    if cache not in p._cache:
        p._cache[cache] = _lifecycle(p, table, col)
    out: tuple[str, ...] | None = p._cache[cache]
    return out


def _lifecycle(p: Rows, table: str, col: str) -> tuple[str, ...] | None:
    listed = states(p, table, col)
    if listed is None:
        return None
    ex = _examples(p, table)
    dated = relations.date_columns({c: v for c, v in ex.items() if c != col})
    today = _today(p)
    ages = _ages(p, table, col, dated, today) if dated else {}
    first = default_of(p, table, col)
    if first not in listed:
        first = None
    if first is None and dated:
        n = len(ex.get(col, []))
        rows = [{c: ex[c][i] for c in ex} for i in range(n)]
        near = Counter(r[col] for r in rows if r.get(col) in listed
                       and (d := _row_day(r, dated)) is not None and abs((d - today).days) <= NEAR_DAYS)
        if near:
            top = max(near.values())
            first = next(s for s in listed if near.get(s) == top)  # a tie: the list's order
    if first is None:
        young = [s for s in listed if s in ages and all(_younger(ages[s], ages[o]) for o in ages if o != s)]
        first = young[0] if len(young) == 1 else None
    if first is None:
        return None
    rest = [s for s in listed if s != first]
    by_age = sorted(rest, key=lambda s: (s not in ages, sum(ages.get(s, [0])) / max(1, len(ages.get(s, [])))))
    if all(s in ages for s in by_age) and all(_younger(ages[a], ages[b]) for a, b in pairwise(by_age)):
        rest = by_age
    return (first, *rest)


def moved(p: Rows, table: str, col: str) -> bool:
    """Whether a write other than a create sets ``table.col`` from a parameter (an update tool): a state a row moves
    through after it is made, read from the tools' SQL. A column only a create writes (a donation's blood type) is a
    property the new row is given, not a state it starts in, however many example rows hold one value of it."""
    return any(s.kind == "write" and s.op == "update" and any(s.column_of(q, "value") == (table, col) for q in s.uses)
               for s in p.shapes.values())


def later(p: Rows, table: str, col: str, current: Any) -> list[str] | None:
    """The states a row of ``table`` in state ``current`` may move to, nearest first: those after it in
    :func:`lifecycle` (the initial state from a row that holds none, or holds a value off the list); None when the
    order is not known (any other value will do, as before)."""
    order = lifecycle(p, table, col)
    if order is None:
        return None
    if current not in order:
        return list(order)
    return list(order[order.index(current) + 1:])


def behind(p: Rows, table: str, col: str, current: Any) -> list[str] | None:
    """The states a row of ``table`` in state ``current`` may not move to (:func:`later` gives those it may): the
    state it holds (asked for again: "return a loan already returned"), then those before it, nearest first; [] for
    a value off the list, None when the order is not known. Only a write a rule forbids asks for one of them (a
    refused write changes nothing, so it need not go forward: ``shapes.refused_writes``)."""
    order = lifecycle(p, table, col)
    if order is None:
        return None
    if current not in order:
        return []
    return list(reversed(order[: order.index(current) + 1]))
