"""The model's example rows spread in time as the code-made rows do, once every table is filled.

The model writes a table's first rows (its examples) on the environment's clock: four loans issued today, due a
month later, renewed today and fined today (the library of 2026-11-29: loans 1-4 were four copies of one row). Those
rows are the specification of each column (its side of the clock, the gap between the row's dates, a child's date
against its parent's), which code draws the rest from; seeded as written they are rows no library has.

:func:`respread` moves them, read from values only, never from names:

- an example row of a table whose date column the examples write on a single day, while the code-made rows spread it,
  is moved to a day the code-made rows hold (their quantiles, one per example row: deterministic, no draw), every date
  of the row by the same number of days (its own gaps kept: due a month after its issue);
- a row of a child table that names a moved parent row moves its dates by that parent's days, first (its relation
  to its parent's dates kept: a renewal on its loan's day stays on it, now that day; one code drew after it stays
  after it).

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


def respread(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int]) -> dict[str, Moved]:
    """Move the example rows (the first ``examples[table]`` rows of each table, parents before children as
    ``tables`` is ordered) as the module says, and every other row naming a moved row with it (a renewal code drew
    after its loan's day stays after it); the tables whose example rows moved, with how."""
    out: dict[str, Moved] = {}
    shifted: dict[str, list[tuple[dict[str, Any], int]]] = {}  # table -> (row, days) of every row moved
    for table in tables:
        n = examples.get(table.name, 0)
        if not conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                            (table.name,)).fetchone()[0]:
            continue  # WITHOUT ROWID: left as drawn
        names, rows = _rows(conn, table.name)
        cols = table_columns(conn, table)
        keys = {c.name for c in cols if c.pk or c.ref is not None}
        dated = [c for c in relations.date_columns({k: [r[k] for r in rows] for k in names if k != "__rowid"})
                 if c not in keys]
        if not dated or not rows:
            continue
        moved = Moved(table.name, n, originals={c: [r[c] for r in rows[:n]] for c in dated})
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
            for i, day in zip(left, spread_days(spread, len(left)), strict=True):
                was = relations.as_date(ex[i][col])
                assert was is not None
                if _shift(conn, table.name, ex[i], dated, (day - was).days):
                    moved.days[i] = (day - was).days
                    done[ex[i]["__rowid"]] = (day - was).days
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


