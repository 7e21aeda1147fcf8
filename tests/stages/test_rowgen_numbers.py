"""Numbers and dates agree with the model's own example values (issue 40; the u1 root cause, items 2 and 4): a
range far wider than the examples or leaving them out is narrowed by code, a choice without its range or dates
gets them from the examples at once (no feedback round trip the embedded model never fixes), and a fallback
reaches beyond the 3-4 examples. The replies below are the embedded model's, as /work/out/u1 and /work/out/g1's
caches hold them (2026-11-28)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline import ir
from pipeline.meaning import relations
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import BOOK_ROWS, BOOKS_DDL, SCENARIO
from tests.stages.test_rowgen import BOOKS_GEN, LIBRARY, _cols, _seeded, gen_settings, scripted

BILLING = ir.Scenario(name="Project Billing", description="Consultants log hours against projects and clients are "
                                                          "invoiced.")
INVOICES_DDL = "CREATE TABLE invoices (invoice_id INTEGER PRIMARY KEY, amount_due REAL CHECK (amount_due > 0)) STRICT"
INVOICE_ROWS = {"rows": [[50.0], [75.0], [None], [100.0]]}
PARTICIPANTS_DDL = ("CREATE TABLE participants (participant_id INTEGER PRIMARY KEY, age INTEGER NOT NULL, "
                    "visits INTEGER NOT NULL) STRICT")
PARTICIPANT_ROWS = {"rows": [[30, 2], [25, 1], [40, 4], [35, 3]]}
PROJECTS_DDL = ("CREATE TABLE projects (project_id INTEGER PRIMARY KEY, start_date TEXT NOT NULL, end_date TEXT NOT "
                "NULL) STRICT")
PROJECT_ROWS = {"rows": [["2026-01-01", "2026-03-31"], ["2026-04-01", "2026-05-31"], ["2026-06-01", "2026-07-31"],
                         ["2026-08-01", "2026-09-30"]]}


def _fill(ddl: str, rows: dict[str, Any], replies: list[Any], **settings: Any) -> tuple[rowgen.Made, Any, Any]:
    name = ddl.split()[2]
    client = scripted(replies)  # the example rows are in the database already
    conn = _seeded([ddl], name, rows)
    made = rowgen.fill_table(BILLING, ir.Table(name=name, ddl=ddl), conn, client,
                             gen_settings(entity_rows=(60, 60), **settings), "en_US")
    return made, client, conn


def _asked(client: Any) -> list[list[dict[str, Any]]]:
    """The generator-choice requests (first turns and feedback turns)."""
    return [m for m in client.requests if "pick the generator" in m[0]["content"]]


# ------------------------------------------------------------------ the rule, on the measured replies


@pytest.mark.parametrize(("examples", "integer", "expected"), [
    ([30, 25, 40, 35], True, (18, 47)),  # clinical ages: 17.5..47.5 rounded inwards, no minor
    ([50.0, 75.0, None, 100.0], False, (25, 125)),  # invoices
    ([5.0, 3.5, 4.0, 6.0], False, (2.25, 7.25)),  # fines
    ([5, 3, 2, 1], True, (1, 7)),  # positive: never 0 or below
    ([0, 0, 0, 0], True, (0, 0)),  # one value: half its magnitude (at least 1) each side, never below zero
    ([1925, 1960, 1949, 1813], True, (1740, 2033)),
    ([-4.0, 2.0], False, (-7.0, 5.0)),  # examples on both sides of zero: no bound at zero
])
def test_the_examples_range_is_widened_by_half_its_span(examples: list[Any], integer: bool,
                                                        expected: tuple[float, float]) -> None:
    assert relations.number_range(examples, integer) == expected


def test_no_range_without_a_number() -> None:
    assert relations.number_range([None, "x", True], True) is None
    assert relations.range_misfit(0, 1000, [None, "50"]) is None


def test_a_range_far_wider_than_the_examples_or_beside_them_is_told_apart_from_one_that_fits() -> None:
    # refused: 8-40 times the examples' spread, or an example outside
    assert "8 times as wide" in (relations.range_misfit(0, 120, [30, 25, 40, 35]) or "")
    assert "20 times as wide" in (relations.range_misfit(0, 1000, [50.0, 75.0, None, 100.0]) or "")
    assert "not all within 60..70" in (relations.range_misfit(60, 70, [50, 75]) or "")
    # kept: 1-3 times
    assert relations.range_misfit(18, 65, [30, 25, 45, 32]) is None
    assert relations.range_misfit(1800, 2026, [1925, 1960, 1949, 1813]) is None
    assert relations.range_misfit(10, 200, [100, 50, 200, 15]) is None
    assert relations.range_misfit(0, 3, [0, 0, 0, 0]) is None


def test_a_fallback_reaches_beyond_the_examples() -> None:
    inv = _cols(INVOICES_DDL, "invoices")["amount_due"]
    part = _cols(PARTICIPANTS_DDL, "participants")["age"]
    ctx = rowgen.Context(rows=60, singles=frozenset(), examples={"amount_due": [50.0, 75.0, None, 100.0],
                                                                  "age": [30, 25, 40, 35]})
    amount = rowgen.fallback(inv, ctx, "why")
    age = rowgen.fallback(part, ctx, "why")
    assert amount is not None and (amount.kind, amount.min, amount.max) == ("amount", 25, 125)
    assert age is not None and (age.kind, age.min, age.max) == ("integer", 18, 47)
    unique = rowgen.fallback(part, rowgen.Context(rows=60, singles=frozenset({"age"}), examples=ctx.examples), "")
    assert unique is not None and unique.max is not None and unique.max - unique.min >= 600  # room for 60 rows


# ------------------------------------------------------------------ in the table: code, no round trip


def test_a_range_far_wider_than_the_examples_is_narrowed_without_asking_again() -> None:
    made, client, conn = _fill(INVOICES_DDL, INVOICE_ROWS,
                               [{"columns": {"amount_due": {"kind": "integer", "min": 0, "max": 1000}}}])
    g = made.plan.generators[0]
    # the examples' 25..125, reaching up by their own ratio (100/50) to 200 (relations.upper_reach), inside 0..1000
    assert (g.kind, g.min, g.max, g.by) == ("integer", 25, 200, "code")
    assert "20 times as wide" in (g.note or "") and "25..200" in (g.note or "")
    assert len(_asked(client)) == 1 and made.rejections == []
    drawn = [r[0] for r in conn.execute("SELECT amount_due FROM invoices WHERE invoice_id > 4")]
    values = [v for v in drawn if v is not None]  # one example of four is NULL: too few to keep a share, every
    assert len(values) == len(drawn)  # row gets an amount (relations.MIN_NULLS; a quarter of them before)
    assert len(values) >= 30 and all(25 <= v <= 200 for v in values)
    assert any(v < 50 or v > 100 for v in values)  # not only inside the four examples


def test_clinical_ages_stay_near_the_examples_and_a_fitting_range_is_kept() -> None:
    made, client, conn = _fill(PARTICIPANTS_DDL, PARTICIPANT_ROWS, [{"columns": {
        "age": {"kind": "integer", "min": 0, "max": 120, "distribution": "uniform"},  # as the model chose
        "visits": {"kind": "integer", "min": 1, "max": 6}}}])
    gens = {g.column: g for g in made.plan.generators}
    assert (gens["age"].min, gens["age"].max, gens["age"].by) == (18, 64, "code")  # 40 * 40/25, no minor, not 120
    assert (gens["visits"].min, gens["visits"].max, gens["visits"].by) == (1, 6, "llm")  # 1.7 times: kept
    ages = [r[0] for r in conn.execute("SELECT age FROM participants")]
    assert min(ages) >= 18 and max(ages) <= 64 and len(_asked(client)) == 1


def test_a_choice_without_its_range_gets_the_examples_at_once_and_a_rejection_says_so() -> None:
    no_range = {"columns": {**BOOKS_GEN["columns"], "copies_available": {"kind": "integer", "weights": [1, 1]}}}
    client = scripted([no_range])  # the same wrong reply would come back: it must not be asked again
    conn = _seeded([BOOKS_DDL], "books", BOOK_ROWS)
    made = rowgen.fill_table(SCENARIO, LIBRARY[1], conn, client, gen_settings(), "en_US")
    g = next(g for g in made.plan.generators if g.column == "copies_available")
    assert (g.kind, g.min, g.max, g.by) == ("integer", 0, 4, "fallback")  # examples 0-3, never below zero
    assert 'no usable range (integer needs "min" and "max")' in (g.note or "")
    assert len(_asked(client)) == 1  # no feedback turn
    rejected = [r for r in made.rejections if r.item == "books.copies_available" and "fell back" in r.reason]
    assert len(rejected) == 1 and "no usable range" in str(rejected[0].evidence)
    copies = [r[0] for r in conn.execute("SELECT copies_available FROM books")]
    assert set(copies) <= {0, 1, 2, 3, 4} and 4 in copies


@pytest.mark.parametrize("choice", [
    {"kind": "date", "min": 0, "max": 31},  # days where dates belong (u1, projects)
    {"kind": "date_after", "min": 0, "max": 31},  # no "after"
])
def test_dates_without_usable_settings_come_from_the_examples(choice: dict[str, Any]) -> None:
    made, client, conn = _fill(PROJECTS_DDL, PROJECT_ROWS, [{"columns": {"start_date": choice, "end_date": choice}}])
    assert len(_asked(client)) == 1
    gens = {g.column: g for g in made.plan.generators}
    assert gens["start_date"].kind == "date" and gens["start_date"].by == "fallback"
    assert "no usable dates" in (gens["start_date"].note or "") or "was unusable" in (gens["start_date"].note or "")
    rows = conn.execute("SELECT start_date, end_date FROM projects").fetchall()
    assert len(rows) >= 40
    assert all(s <= e for s, e in rows)  # the examples' order holds in every row
    assert {r.item for r in made.rejections if "fell back" in r.reason} == {"projects.start_date", "projects.end_date"}


def test_a_date_after_without_days_takes_the_examples_gaps() -> None:
    made, client, conn = _fill(PROJECTS_DDL, PROJECT_ROWS, [{"columns": {
        "start_date": {"kind": "date", "start": "2025-06-01", "end": "2026-08-01"},
        "end_date": {"kind": "date_after", "after": "start_date", "distribution": "uniform"}}}])
    g = next(g for g in made.plan.generators if g.column == "end_date")
    # the examples' 60-89 days widened by half their span (relations.gap_range)
    assert (g.kind, g.after, g.min, g.max, g.by) == ("date_after", "start_date", 46, 103, "fallback")
    assert len(_asked(client)) == 1


def test_a_date_range_may_reach_the_years_its_examples_show() -> None:
    col = _cols(PROJECTS_DDL, "projects")["start_date"]
    g = ir.ColumnGenerator(column="start_date", kind="date", start="1813-08-17", end="1960-07-11")
    old = rowgen.Context(rows=60, singles=frozenset(), examples={"start_date": ["1925-04-10", "1813-08-17"]})
    assert rowgen.check_column(col, g, old, {"start_date": g}) is None  # a book of 1813 among the examples
    none = rowgen.Context(rows=60, singles=frozenset(), examples={"start_date": ["1925-04-10", "1949-06-25"]})
    assert "not plausible" in (rowgen.check_column(col, g, none, {"start_date": g}) or "")


def test_a_narrowed_range_of_positive_numbers_reaches_up_by_their_ratio_and_stays_in_bounds() -> None:
    """Four examples are not a population (issue 40: a pharmacy's 129 patients all 18-47, from ages 25-40): a range
    the model chose far wider is narrowed to the examples' padded range, its top raised to the largest example times
    the examples' ratio, never past the model's own range or the width the rule keeps; a range with a zero or
    negative example, and the model's bounds themselves (age 120), are not reached."""
    assert relations.upper_reach([25, 30, 35, 40], 18, True) == 64
    assert relations.upper_reach([5, 7, 9, 11], 2, True) == 24
    assert relations.upper_reach([1, 2, 3], 1, True) == 9  # 3 * 3, also the width the rule keeps (1 + 4 * 2)
    assert relations.upper_reach([1, 10], 1, True) == 37  # 10 * 10 cut to 1 + 4 * 9
    assert relations.upper_reach([0, 0, 0], 0, True) is None and relations.upper_reach([-5, 5], -10, True) is None
    assert relations.range_misfit(18, 64, [25, 30, 35, 40]) is None  # what it gives is a range the rule keeps
    ctx = rowgen.Context(rows=60, singles=frozenset(), examples={"age": [30, 25, 40, 35]})
    age = _cols(PARTICIPANTS_DDL, "participants")["age"]
    for chosen, top in (((0, 120), 64), ((0, 62), 62), ((20, 300), 64)):  # never past the model's 62
        g = ir.ColumnGenerator(column="age", kind="integer", min=chosen[0], max=chosen[1])
        fit = rowgen.fit_examples(age, g, ctx, {})
        assert (fit.min, fit.max) == (max(18, chosen[0]), top), chosen
    years = ir.ColumnGenerator(column="age", kind="integer", min=0, max=2026)  # 1813-1960: 2118, cut to 2026
    fit = rowgen.fit_examples(age, years, rowgen.Context(rows=60, singles=frozenset(),
                                                         examples={"age": [1925, 1960, 1949, 1813]}), {})
    assert (fit.min, fit.max) == (1740, 2026)


def test_a_gap_the_examples_show_is_widened_by_half_its_spread_but_a_fixed_one_stays() -> None:
    """A prescription's course of 3-15 days in four examples gives 2-21 (not 0, not 3-15 for every row); a loan due
    31 days after in every example stays 31 (a rule of the house)."""
    assert relations.gap_range(relations.DateOrder("start", "end", 3, 15)) == (2, 21)
    assert relations.gap_range(relations.DateOrder("loan", "due", 31, 31)) == (31, 31)
    assert relations.gap_range(relations.DateOrder("a", "b", 0, 10)) == (0, 15)
    assert relations.gap_range(relations.DateOrder("a", "b", 1, 2)) == (1, 2)
