"""The model's example rows spread in time as the code-made rows do, once every table is filled.

The model writes a table's first rows (its examples) on the environment's clock: four loans issued today, due a
month later, renewed today and fined today (the library of 2026-11-29: loans 1-4 were four copies of one row). Those
rows are the specification of each column (its side of the clock, the gap between the row's dates, a child's date
against its parent's), which code draws the rest from; seeded as written they are rows no library has.

:func:`respread` moves them, read from values only, never from names:

- an example row of a table whose date column the examples write on a single day, while the code-made rows spread it,
  is moved to a day the code-made rows hold (their quantiles, one per example row: deterministic, no draw), every date
  of the row by the same number of days (its own gaps kept: due a month after its issue); where every example is
  under way at the clock (:func:`pipeline.meaning.relations.currents`: issued by today, due after it), to a day
  that keeps it so (the library of 2026-11-29: its four current loans moved wholly into the past, pending and
  overdue);
- a row of a child table that names a moved parent row moves its dates by that parent's days, first (its relation
  to its parent's dates kept: one code drew after its loan's day stays after it);
- an example child whose date then breaks what the examples show of it against its parent's
  (:func:`pipeline.meaning.relations.parent_orders`: a renewal after its loan began, by its due date; the model's
  renewals written on their loans' day, both today) moves to the middle of the days that hold it.

Done once all tables are filled, so that no prompt changes (a child's prompt shows its parents' dates as the model
wrote them; the model's replies stay those of the cache). What the model wrote is kept in the plan
(``RowPlan.example_dates``), for the steps that read the examples as the specification (a new row a task writes is
dated as the model dated its examples: a new loan today).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import row_order
from pipeline.meaning import relations

MIN_SAME = 2
"""Example rows needed on one day before the day is taken as the model's habit (its examples all on the clock), not
the column's spec."""


@dataclass
class Moved:
    """A table's example rows that moved: row (by its position among the examples) -> days moved, the original
    values of each moved column (in example order), and which rows moved with a parent (``with_parent``)."""

    table: str
    examples: int = 0
    days: dict[int, int] = field(default_factory=dict)
    originals: dict[str, list[Any]] = field(default_factory=dict)
    with_parent: set[int] = field(default_factory=set)


def single_day(values: Sequence[Any]) -> bool:
    """Whether the non-null date ``values`` are at least :data:`MIN_SAME` and all on one day."""
    days = {d for d in (relations.as_date(v) for v in values) if d is not None}
    return len(days) == 1 and sum(relations.as_date(v) is not None for v in values) >= MIN_SAME


def spread_days(drawn: Sequence[date], n: int) -> list[date]:
    """``n`` days the ``drawn`` days hold, at their quantiles (i + 1/2) / n: spread as they are, the same every run."""
    days = sorted(drawn)
    return [days[min(len(days) - 1, int((i + 0.5) * len(days) / n))] for i in range(n)]


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    cur = conn.execute(f'SELECT rowid AS "__rowid", * FROM "{table}" ORDER BY {row_order(conn, table)}')
    names = [d[0] for d in cur.description]
    return names, [dict(zip(names, r, strict=True)) for r in cur]


def _row_of(conn: sqlite3.Connection, table: str, key: str, value: Any) -> dict[str, Any] | None:
    cur = conn.execute(f'SELECT * FROM "{table}" WHERE "{key}" = ? LIMIT 1', (value,))
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row, strict=True))


def _shift(conn: sqlite3.Connection, table: str, row: Mapping[str, Any], cols: Sequence[str], days: int) -> bool:
    """Move ``row``'s date ``cols`` by ``days``; False (nothing changed) when SQLite refuses it (a UNIQUE date)."""
    new = {c: relations.moved(row[c], day + timedelta(days=days))
           for c in cols for day in [relations.as_date(row.get(c))] if day is not None}
    if not new or days == 0:
        return False
    sets = ", ".join(f'"{c}" = ?' for c in new)
    try:
        conn.execute("SAVEPOINT respread")
        conn.execute(f'UPDATE "{table}" SET {sets} WHERE rowid = ?', [*new.values(), row["__rowid"]])
        conn.execute("RELEASE respread")
    except sqlite3.Error:
        conn.execute("ROLLBACK TO respread")
        conn.execute("RELEASE respread")
        return False
    return True


def window(current: Sequence[relations.Current], row: Mapping[str, Any], today: date) -> tuple[int, int] | None:
    """The days ``row`` may move by (the least, the most) to have every pair of ``current`` under way at ``today``;
    None when it has no pair or no move does it for all."""
    spans = [s for s in (c.shift(row, today) for c in current) if s is not None]
    if not spans:
        return None
    lo, hi = max(s[0] for s in spans), min(s[1] for s in spans)
    return (lo, hi) if lo <= hi else None


def _targets(current: Sequence[relations.Current], today: date | None, col: str, ex: Sequence[Mapping[str, Any]],
             left: Sequence[int], drawn: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """The days each example row of ``left`` moves by: to the days the drawn rows hold of ``col`` (their quantiles);
    where every example is under way at the clock (``current``), to the days of the drawn rows under way (else
    spread over the row's own window, :func:`window`), kept within the row's window (a loan the model wrote
    issued today and due in a month stays out now and not yet due, wherever it moves)."""
    spread = [d for d in (relations.as_date(r.get(col)) for r in drawn) if d is not None]
    near = [d for r in drawn if today is not None and current and window(current, r, today) is not None
            and all(c.holds(r, today) for c in current) for d in [relations.as_date(r.get(col))] if d is not None]
    out = {}
    for j, (i, day) in enumerate(zip(left, spread_days(near if len(set(near)) >= 2 else spread, len(left)),
                                     strict=True)):
        was = relations.as_date(ex[i][col])
        assert was is not None
        days = (day - was).days
        span = window(current, ex[i], today) if today is not None else None
        if span is not None:
            lo, hi = span
            if len(set(near)) < 2:
                days = lo + int((j + 0.5) * (hi - lo + 1) / len(left))
            days = min(max(days, lo), hi)
        out[i] = days
    return out


def _within_parents(orders: Sequence[relations.ParentOrder], side: Mapping[str, str | None], col: str,
                    row: Mapping[str, Any], parents: Mapping[str, Mapping[str, Any]], today: date | None
                    ) -> int | None:
    """The days ``row`` moves by so that its ``col`` is within the dates of the parents it names as every example
    child is (``orders``: after its loan's issue and by its due date), and on its examples' ``side`` of the clock:
    to the middle of the days that fit; None when it is within them already, or none fits."""
    day = relations.as_date(row.get(col))
    if day is None:
        return None
    lows: list[date] = []
    highs: list[date] = []
    for po in orders:
        par = parents.get(po.via)
        base = relations.as_date(par.get(po.parent_column)) if par is not None and po.column == col else None
        if base is not None:
            step = timedelta(days=int(po.strict))
            (lows if po.after else highs).append(base + step if po.after else base - step)
            if po.same_day:  # on the parent's day (an order's line)
                (highs if po.after else lows).append(base)
    if not lows and not highs:
        return None
    if today is not None and side.get(col) is not None:
        (highs if side[col] == "past" else lows).append(today)
    low, high = max(lows, default=None), min(highs, default=None)
    if (low is None or low <= day) and (high is None or day <= high):
        return None
    if low is not None and high is not None and high < low:
        return None
    target = low + timedelta(days=(high - low).days // 2) if low is not None and high is not None else low or high
    assert target is not None
    return (target - day).days


def respread(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int],
             today: date | None = None) -> dict[str, Moved]:
    """Move the example rows (the first ``examples[table]`` rows of each table, parents before children as
    ``tables`` is ordered) as the module says, and every other row naming a moved row with it (a renewal code drew
    after its loan's day stays after it); the tables whose example rows moved, with how. With ``today`` (the
    environment's clock), example rows all under way at it stay so (:func:`_targets`), and an example child is
    moved within the dates of the parent it names as the examples show them (:func:`_within_parents`)."""
    out: dict[str, Moved] = {}
    shifted: dict[str, list[tuple[dict[str, Any], int]]] = {}  # table -> (row, days) of every row moved
    written: dict[str, list[dict[str, Any]]] = {}  # table -> its rows as the model and code wrote them
    for table in tables:
        n = examples.get(table.name, 0)
        if not conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                            (table.name,)).fetchone()[0]:
            continue  # WITHOUT ROWID: left as drawn
        names, rows = _rows(conn, table.name)
        written[table.name] = rows
        cols = table_columns(conn, table)
        keys = {c.name for c in cols if c.pk or c.ref is not None}
        dated = [c for c in relations.date_columns({k: [r[k] for r in rows] for k in names if k != "__rowid"})
                 if c not in keys]
        if not dated or not rows:
            continue
        moved = Moved(table.name, n, originals={c: [r[c] for r in rows[:n]] for c in dated})
        as_written = {c: [r[c] for r in rows[:n]] for c in names if c != "__rowid"}
        current = relations.currents(as_written, today) if today is not None else []
        orders = [o for c in cols if c.ref is not None and c.ref[0] in written and c.ref[0] != table.name
                  for o in relations.parent_orders(as_written, c.name, {
                      r[c.ref[1]]: r for r in written[c.ref[0]] if r.get(c.ref[1]) is not None})]
        side = {c: relations.clock_side(as_written[c], today) if today is not None else None for c in dated}
        done: dict[int, int] = {}  # rowid -> days
        for i, r in enumerate(rows):  # with the parent it names
            for c in cols:
                if c.ref is None or c.ref[0] not in shifted or r.get(c.name) is None:
                    continue
                days = next((d for p, d in shifted[c.ref[0]] if p.get(c.ref[1]) == r[c.name]), None)
                if days is not None and _shift(conn, table.name, r, dated, days):
                    done[r["__rowid"]] = days
                    if i < n:
                        moved.days[i] = days
                        moved.with_parent.add(i)
                    break
        _, rows = _rows(conn, table.name)
        ex, drawn = rows[:n], rows[n:]
        for col in dated:  # on one day while the code-made rows spread: to the days those hold
            left = [i for i in range(len(ex)) if i not in moved.days]
            spread = [d for d in (relations.as_date(r.get(col)) for r in drawn) if d is not None]
            if len(left) < MIN_SAME or not single_day([ex[i][col] for i in left]) or len(set(spread)) < 2:
                continue
            for i, days in _targets(current, today, col, ex, left, drawn).items():
                if _shift(conn, table.name, ex[i], dated, days):
                    moved.days[i] = days
                    done[ex[i]["__rowid"]] = days
            _, rows = _rows(conn, table.name)
            ex = rows[:n]
        for col in dated if orders else ():  # an example child within its parent's dates (after the loan began)
            for i, r in enumerate(ex):
                parents = {c.name: p for c in cols if c.ref is not None and r.get(c.name) is not None
                           for p in [_row_of(conn, c.ref[0], c.ref[1], r[c.name])] if p is not None}
                days = _within_parents(orders, side, col, r, parents, today)
                if days is not None and _shift(conn, table.name, r, dated, days):
                    moved.days[i] = moved.days.get(i, 0) + days
                    done[r["__rowid"]] = done.get(r["__rowid"], 0) + days
            _, rows = _rows(conn, table.name)
            ex = rows[:n]
        if done:
            shifted[table.name] = [(r, done[r["__rowid"]]) for r in rows if r["__rowid"] in done]
        if moved.days:
            moved.originals = {c: v for c, v in moved.originals.items()
                               if any(ex[i][c] != v[i] for i in range(len(ex)))}
            out[table.name] = moved
    return out


def noted(plan: ir.RowPlan, moved: Moved | None) -> ir.RowPlan:
    """``plan`` with the example dates as the model wrote them, when its example rows moved."""
    if moved is None or not moved.originals:
        return plan
    return plan.model_copy(update={"example_dates": dict(moved.originals)})


def rejections(moved: Mapping[str, Moved], stage: str) -> list[ir.Rejection]:
    """One note per table whose example rows moved (``report.json`` lists them)."""
    return [ir.Rejection(
        stage=stage, item=m.table,
        reason=f"{len(m.days)} example rows of {m.table} dated on one day moved to days the other rows hold "
               f"({len(m.with_parent)} with the parent row they name), their own gaps kept",
        evidence={"kind": "example_dates", "days": {str(i): d for i, d in sorted(m.days.items())},
                  "columns": sorted(m.originals)}) for m in moved.values()]


