"""Dates of generated rows keep what the model's example rows show (issue 40; the HR leave audit of 2026-11-29,
benchmarks/results/dates_2026-11-29.md): a fallback range on the clock's sides in the examples' shares, a date no
two rows may share as far apart as its examples (not every day of half a year), the examples' spread of a row's
duration, and a repeated date made unique as a day of the calendar ('2025-10-55' was one)."""

from __future__ import annotations

import itertools
from datetime import date
from typing import Any

from pipeline import ir
from pipeline.dbmodel.arguments import variants
from pipeline.dbmodel.columns import table_columns
from pipeline.meaning import spans
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.maker import Shape, ValueMaker, fill, key_sets
from tests.stages.test_rowgen import _cols, _seeded, gen_settings, scripted

TODAY = date(2026, 1, 15)  # gen_settings' clock
SCENARIO = ir.Scenario(name="Leave Tracker", description="Employees ask for leave; the office keeps its holidays.")
HOLIDAYS_DDL = "CREATE TABLE holidays (holiday_id INTEGER PRIMARY KEY, day TEXT NOT NULL UNIQUE) STRICT"
HOLIDAY_ROWS = {"rows": [["2026-01-01"], ["2026-01-04"], ["2026-01-05"], ["2026-01-13"]]}  # the model's, u3
LEAVES_DDL = "CREATE TABLE leaves (leave_id INTEGER PRIMARY KEY, start_date TEXT NOT NULL, end_date TEXT NOT NULL) STRICT"
LEAVE_ROWS = {"rows": [["2026-01-15", "2026-01-17"], ["2026-01-18", "2026-01-20"], ["2026-01-21", "2026-01-25"],
                       ["2026-01-26", "2026-01-28"]]}  # the model's leaves of u3: 2, 2, 4 and 2 days after the start
VISITS_DDL = "CREATE TABLE visits (visit_id INTEGER PRIMARY KEY, visit_date TEXT NOT NULL) STRICT"
VISIT_ROWS = {"rows": [["2025-12-20"], ["2026-01-05"], ["2026-01-20"], ["2026-02-10"]]}  # two before today, two after


def _fill(ddl: str, rows: dict[str, Any], replies: list[Any], n: int) -> tuple[rowgen.Made, list[tuple[Any, ...]]]:
    name = ddl.split()[2]
    conn = _seeded([ddl], name, rows)
    made = rowgen.fill_table(SCENARIO, ir.Table(name=name, ddl=ddl), conn, scripted(replies),
                             gen_settings(entity_rows=(n, n)), "en_US")
    return made, conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()


def _plan(made: rowgen.Made, column: str) -> ir.ColumnGenerator:
    return next(g for g in made.plan.generators if g.column == column)


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


# ------------------------------------------------------------------ the span, on the clock's sides


def test_a_fallback_range_keeps_the_examples_share_before_and_after_the_clock() -> None:
    # the model gave no dates: the fallback's range used to reach 180 days back from the latest example, so 2 of 4
    # examples after today became 1 in 7 rows
    made, rows = _fill(VISITS_DDL, VISIT_ROWS, [{"columns": {"visit_date": {"kind": "date"}}}], 200)
    g = _plan(made, "visit_date")
    start, end = date.fromisoformat(g.start or ""), date.fromisoformat(g.end or "")
    assert start <= date(2025, 12, 20) and end >= date(2026, 2, 10)
    assert 0.4 <= (TODAY - start).days / (end - start).days <= 0.6
    # the note says what the examples hold and what was drawn (it used to call the drawn range the examples')
    assert g.by == "fallback" and "the examples' dates 2025-12-20..2026-02-10, drawn from" in (g.note or "")
    days = [date.fromisoformat(r[1]) for r in rows[4:]]
    assert 0.35 <= sum(d < TODAY for d in days) / len(days) <= 0.65


def test_a_span_stays_on_the_side_and_the_distance_from_the_clock_the_examples_show() -> None:
    ahead = ["2026-02-14", "2026-02-20", "2026-03-01", "2026-03-16"]  # a month ahead and more
    assert spans.example_span(ahead, TODAY) == (date(2026, 2, 14), date(2026, 8, 13))
    behind = ["2018-05-01", "2019-03-15", "2020-07-05", "2021-09-20"]  # hire dates: the examples' own years
    assert spans.example_span(behind, TODAY) == (date(2018, 5, 1), date(2021, 9, 20))
    assert spans.example_span(["2026-01-15"] * 4, TODAY) == (date(2025, 7, 19), TODAY)  # all today: up to today
    assert spans.clock_counts(["2026-01-15", "2026-01-18", None, "x"], TODAY) == (0, 1, 1)
    assert spans.example_span([None, "n/a"], TODAY) is None


# ------------------------------------------------------------------ distinct dates, as far apart as the examples


def test_a_date_no_two_rows_share_is_as_sparse_as_its_examples() -> None:
    # the model's reply of u3 (a year of datetimes); dated up to today as every example, it left half a year for
    # 275 different dates: every day of it, then '2025-10-55'
    made, rows = _fill(HOLIDAYS_DDL, HOLIDAY_ROWS, [{"columns": {"day": {
        "kind": "datetime", "start": "2026-01-01", "end": "2026-12-31"}}}], 275)
    g = _plan(made, "day")
    assert g.kind == "date" and g.end == "2026-01-15"
    assert (date.fromisoformat(g.end) - date.fromisoformat(g.start or "")).days >= 4 * 275  # 4 days apart
    days = [_day(r[1]) for r in rows]
    assert len(days) == 275 and None not in days and len(set(days)) == 275
    assert max(d for d in days if d is not None) <= TODAY
    ordered = sorted(d for d in days if d is not None)
    next_day = sum((b - a).days == 1 for a, b in itertools.pairwise(ordered))
    assert next_day < 275 // 2  # not a calendar: most holidays have no holiday the next day


def test_a_fallback_for_a_distinct_date_takes_the_examples_spacing() -> None:
    col = _cols(HOLIDAYS_DDL, "holidays")["day"]
    ctx = rowgen.Context(rows=275, singles=frozenset({"day"}), examples={"day": [r[0] for r in HOLIDAY_ROWS["rows"]]},
                         today=TODAY)
    g = rowgen.fit_examples(col, ir.ColumnGenerator(column="day", kind="date"), ctx, {})
    assert g.by == "fallback" and g.end == "2026-01-13"
    assert (date.fromisoformat(g.end) - date.fromisoformat(g.start or "")).days >= 1100
    g = rowgen.fallback(col, ctx, "no reply")
    assert (date.fromisoformat(g.end or "") - date.fromisoformat(g.start or "")).days >= 1100  # type: ignore[union-attr]
    assert spans.spacing(["2026-01-01", "2026-01-04", "2026-01-05", "2026-01-13"]) == 4.0
    assert spans.dense_width(["2026-01-01"] * 3, 50) == 50  # one date: one day a row at least


def test_a_repeated_date_is_made_unique_as_a_day_of_the_calendar() -> None:
    assert list(itertools.islice(variants("2025-10-30"), 3)) == ["2025-10-31", "2025-11-01", "2025-11-02"]
    assert next(iter(variants("2025-12-31T09:00:00"))) == "2026-01-01T09:00:00"
    assert next(iter(variants("AB-0099"))) == "AB-0100"  # codes still count their digits up
    # a week for twelve different days: the last draws repeat a day, and the repeated day moves on
    conn = _seeded([HOLIDAYS_DDL], "holidays", {"rows": []})
    table = ir.Table(name="holidays", ddl=HOLIDAYS_DDL)
    cols = table_columns(conn, table)
    gens = [ir.ColumnGenerator(column="day", kind="date", start="2026-01-25", end="2026-01-31")]
    maker = ValueMaker("en_US", 3, gens, cols, {})
    fill(conn, table, cols, maker, Shape(fixed=[{} for _ in range(12)]), key_sets(conn, table, ["day"]))
    days = [r[0] for r in conn.execute("SELECT day FROM holidays")]
    assert len(days) >= 8 and all(_day(d) is not None for d in days), days


# ------------------------------------------------------------------ the spread of a row's duration


def test_a_duration_keeps_the_spread_of_the_examples() -> None:
    start = {"kind": "date", "start": "2026-01-15", "end": "2026-07-14"}
    for days, kept in (((2, 2), False), ((2, 60), False), ((2, 5), True)):
        made, rows = _fill(LEAVES_DDL, LEAVE_ROWS, [{"columns": {"start_date": start, "end_date": {
            "kind": "date_after", "after": "start_date", "min": days[0], "max": days[1]}}}], 60)
        g = _plan(made, "end_date")
        assert (g.kind, g.after) == ("date_after", "start_date")
        # refused: the examples' gaps 2-4 widened by half their span (relations.gap_range), never under half of 2
        assert (g.min, g.max) == ((float(days[0]), float(days[1])) if kept else (1.0, 5.0)), days
        gaps = {(date.fromisoformat(r[2]) - date.fromisoformat(r[1])).days for r in rows}
        assert gaps <= set(range(int(g.min or 0), int(g.max or 0) + 1)) and len(gaps) >= 3, (days, gaps)
