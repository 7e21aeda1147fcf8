"""Shares the example rows show, kept in the rows code draws (issue 40): a nullable column left NULL in the
examples' share of rows (2 of 4 employees without a termination date: about half, not 2 of 231), a later date of
the row that the examples leave NULL in some rows kept on their side of the clock (no termination date after
today), and a value the examples repeat drawn with their share ('None' in 2 of 4 patients' allergies: about half,
not 1 in 12 of the continued list). Values and shares are read, never names or words."""

from __future__ import annotations

import random
from collections import Counter
from datetime import date, timedelta

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import relations
from pipeline.settings import BuildSettings
from pipeline.stages.rows.maker import ValueMaker, child_relations, fill, key_sets, table_shape

TODAY = date(2026, 1, 15)

# the u3 HR leave domain's employees (2026-11-28): 2 of 4 examples without a termination date, both others past
EMPLOYEES = ir.Table(name="employees", ddl="CREATE TABLE employees (employee_id INTEGER PRIMARY KEY, name TEXT NOT "
                                           "NULL, hire_date TEXT NOT NULL, termination_date TEXT) STRICT")
EMPLOYEE_ROWS = [("Karen Velez", "2018-05-01", None), ("Pamela Valenzuela", "2019-03-15", "2024-06-30"),
                 ("Hayley Gibbs", "2020-07-05", "2023-08-15"), ("Alexis Freeman", "2021-09-20", None)]
EMPLOYEE_GENS = [
    ir.ColumnGenerator(column="name", kind="person_name"),
    ir.ColumnGenerator(column="hire_date", kind="date", start="2018-05-01", end="2021-09-20"),
    ir.ColumnGenerator(column="termination_date", kind="date_after", after="hire_date", min=1136, max=1934),
]
# the quickstart pharmacy's patients: 'None' in 2 of 4 examples, a continued list of 12 values
ALLERGIES = ["Allergies to nuts and eggs", "None", "Allergies to milk and soy", "Allergies to fish",
             "Allergies to shrimp", "Allergies to beef", "Allergies to pork", "Allergies to chicken",
             "Allergies to rabbit", "Allergies to duck", "Allergies to goose", "Allergies to turkey"]
ALLERGY_EXAMPLES = ["Allergies to nuts and eggs", "None", "Allergies to milk and soy", "None"]


def _employees(table: ir.Table = EMPLOYEES, rows: list[tuple[object, ...]] = EMPLOYEE_ROWS,
               gens: list[ir.ColumnGenerator] = EMPLOYEE_GENS, n: int = 300) -> list[dict[str, object]]:
    """``n`` rows of ``table`` drawn by the maker as ``fill`` draws them, its clock relations inferred from the
    example ``rows`` (inserted first)."""
    conn = scratch_db([table])
    cols = table_columns(conn, table)
    names = [c.name for c in cols if not c.auto_id]
    for r in rows:
        conn.execute(f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in names)})', r)
    examples = {c: [r[i] for r in rows] for i, c in enumerate(names)}
    maker = ValueMaker("en_US", 3, gens, cols, examples)
    maker.relate(child_relations(conn, table.name, cols, examples, {g.column for g in gens}, TODAY), TODAY)
    settings = BuildSettings(entity_rows=(n + len(rows), n + len(rows)))
    sets = key_sets(conn, table, names)
    shape = table_shape(conn, table, cols, sets, len(rows), settings, random.Random(3))
    fill(conn, table, cols, maker, shape, sets)
    cur = conn.execute(f'SELECT {", ".join(names)} FROM "{table.name}" ORDER BY rowid LIMIT -1 OFFSET {len(rows)}')
    return [dict(zip(names, r, strict=True)) for r in cur]


# ------------------------------------------------------------------ the shares (relations.py)


def test_null_share_only_when_the_examples_hold_both() -> None:
    assert relations.null_share([None, "2024-06-30", "2023-08-15", None]) == 0.5
    assert relations.null_share([None, None, None, 3]) == 0.75
    assert relations.null_share([1, 2, 3]) is None
    assert relations.null_share([None, None]) is None  # a column NULL in every example is filled, not kept empty
    assert relations.null_share([]) is None


def test_repeated_shares_of_the_values_held_twice_or_more() -> None:
    assert relations.repeated_shares(ALLERGY_EXAMPLES) == {"None": 0.5}
    assert relations.repeated_shares(["a", "b", "c", "d"]) == {}
    assert relations.repeated_shares(["x", "x", "x", "x"]) == {}  # one value everywhere: the list is drawn as is
    assert relations.repeated_shares([None, "無", "無", "ぶどう"]) == {"無": 2 / 3}  # shares of the set values


def test_share_weights_give_the_share_and_spread_the_rest() -> None:
    w = relations.share_weights(ALLERGIES, {"None": 0.5})
    assert w is not None and abs(sum(w) - 1) < 1e-9
    assert w[1] == 0.5 and all(abs(x - 0.5 / 11) < 1e-9 for i, x in enumerate(w) if i != 1)
    assert relations.share_weights(ALLERGIES, {"absent": 0.5}) is None


# ------------------------------------------------------------------ the maker keeps them (maker.py)


def test_a_nullable_column_is_null_in_the_examples_share_of_rows() -> None:
    rows = _employees()
    empty = sum(r["termination_date"] is None for r in rows)
    assert 0.4 * len(rows) <= empty <= 0.6 * len(rows), empty  # 2 of 4 examples; 0 of 300 before
    assert all(r["name"] and r["hire_date"] for r in rows)  # NOT NULL columns are never left empty


def test_a_date_ending_the_row_stays_on_the_examples_side_of_the_clock() -> None:
    rows = _employees()
    ended = [r for r in rows if r["termination_date"] is not None]
    assert ended
    assert all(str(r["termination_date"]) <= TODAY.isoformat() for r in ended)  # some were after it before
    # still 1136-1934 days after the hire, as the examples
    for r in ended:
        days = (date.fromisoformat(str(r["termination_date"])) - date.fromisoformat(str(r["hire_date"]))).days
        assert 1136 <= days <= 1934, r


def test_a_row_whose_end_cannot_be_past_yet_has_none() -> None:
    # hired in the last year, 3+ years before any termination the examples show: no past day fits, so no end
    gens = [EMPLOYEE_GENS[0], ir.ColumnGenerator(column="hire_date", kind="date", start="2025-03-01",
                                                 end="2026-01-15"), EMPLOYEE_GENS[2]]
    rows = _employees(gens=gens, n=60)
    assert rows and all(r["termination_date"] is None for r in rows)


def test_names_and_language_are_not_read() -> None:
    # the same shape under Polish-like names and another language's values: the same shares
    table = ir.Table(name="pracownicy", ddl="CREATE TABLE pracownicy (nr INTEGER PRIMARY KEY, kto TEXT NOT NULL, "
                                            "od TEXT NOT NULL, do TEXT, uwagi TEXT NOT NULL) STRICT")
    rows = [("Anna", "2018-05-01", None, "brak"), ("Jan", "2019-03-15", "2024-06-30", "brak"),
            ("Ewa", "2020-07-05", "2023-08-15", "astma"), ("Piotr", "2021-09-20", None, "brak")]
    pool = ["brak", "astma", "katar", "kaszel", "gorączka", "ból", "alergia", "wysypka"]
    gens = [ir.ColumnGenerator(column="kto", kind="person_name"),
            ir.ColumnGenerator(column="od", kind="date", start="2018-05-01", end="2021-09-20"),
            ir.ColumnGenerator(column="do", kind="date_after", after="od", min=1136, max=1934),
            ir.ColumnGenerator(column="uwagi", kind="text_pool", pool=pool)]
    got = _employees(table, rows, gens, n=300)
    assert 0.4 * 300 <= sum(r["do"] is None for r in got) <= 0.6 * 300
    assert all(str(r["do"]) <= TODAY.isoformat() for r in got if r["do"] is not None)
    brak = Counter(r["uwagi"] for r in got)["brak"]
    assert 0.65 * 300 <= brak <= 0.85 * 300, brak  # 3 of 4 examples; 1 in 8 drawn uniformly


def test_a_value_the_examples_repeat_keeps_their_share_of_the_list() -> None:
    col_table = ir.Table(name="patients", ddl="CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, "
                                              "allergies TEXT NOT NULL) STRICT")
    cols = table_columns(scratch_db([col_table]), col_table)
    g = ir.ColumnGenerator(column="allergies", kind="text_pool", pool=ALLERGIES)
    maker = ValueMaker("en_US", 7, [g], cols, {"allergies": ALLERGY_EXAMPLES})
    drawn = Counter(maker.row({}, {})["allergies"] for _ in range(400))
    assert 0.4 * 400 <= drawn["None"] <= 0.6 * 400, drawn  # 2 of 4 examples; 12 of 179 in the stored pharmacy
    assert len(drawn) == len(ALLERGIES)  # every continued value still drawn


def test_same_seed_same_rows() -> None:
    assert _employees(n=50) == _employees(n=50)


# ------------------------------------------------------------------ one NULL example is no share (issue 40)

# the u4 project billing domain (2026-11-29): the model's 4th example invoice had no amount, and the drawn rows kept
# its 25%: 18 of 56 invoices without an amount
INVOICES = ir.Table(name="invoices", ddl="CREATE TABLE invoices (invoice_id INTEGER PRIMARY KEY, "
                                         "amount_due REAL CHECK (amount_due > 0)) STRICT")
INVOICE_ROWS = [(50.0,), (75.0,), (60.0,), (None,)]
AMOUNT = [ir.ColumnGenerator(column="amount_due", kind="amount", min=25, max=125)]
# a library's loans: three returned, one still out (no return date), the model's examples of 2026-11
LOANS = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, loan_date TEXT NOT NULL, "
                                   "returned_date TEXT) STRICT")
LOAN_ROWS = [("2025-11-02", "2025-11-20"), ("2025-11-20", "2025-12-08"), ("2025-12-01", "2025-12-29"),
             ("2026-01-10", None)]
LOAN_GENS = [ir.ColumnGenerator(column="loan_date", kind="date", start="2025-09-01", end="2026-01-15"),
             ir.ColumnGenerator(column="returned_date", kind="date_after", after="loan_date", min=10, max=30)]


def test_one_null_example_is_no_share_two_are() -> None:
    assert relations.null_share([50.0, 75.0, 60.0, None]) is None  # the model's habit in its last row
    assert relations.null_share([None, "x", "y", "z", "w", "v"]) is None
    assert relations.null_share([None, 1, None, 2, 3, 4]) == 2 / 6
    assert relations.some_null([50.0, 75.0, 60.0, None]) and not relations.some_null([1, 2])
    assert not relations.some_null([None, None])


def test_a_single_null_example_leaves_no_drawn_row_empty() -> None:
    rows = _employees(INVOICES, INVOICE_ROWS, AMOUNT, n=200)
    assert len(rows) == 200 and all(r["amount_due"] is not None for r in rows)  # 1 of 4 examples: ~50 before


def test_a_single_null_end_date_stays_null_while_the_row_is_open() -> None:
    # one loan of four still out: no share of NULL is drawn, but a loan whose return would fall after today is out
    rows = _employees(LOANS, LOAN_ROWS, LOAN_GENS, n=300)
    out = [r for r in rows if r["returned_date"] is None]
    back = [r for r in rows if r["returned_date"] is not None]
    assert out and back
    assert all(str(r["returned_date"]) <= TODAY.isoformat() for r in back)  # no return in the future
    # an old loan (its return due by today) always has one: NULL only where no day by today fits
    assert all(str(r["loan_date"]) > (TODAY - timedelta(days=10)).isoformat() for r in out), out[:3]


def test_an_example_rows_lone_null_is_filled_an_open_end_is_kept() -> None:
    from pipeline.stages.rows.generators import fill_lone_nulls

    for table, rows, gens, column, kept in ((INVOICES, INVOICE_ROWS, AMOUNT, "amount_due", 0),
                                            (LOANS, LOAN_ROWS, LOAN_GENS, "returned_date", 1)):
        conn = scratch_db([table])
        cols = table_columns(conn, table)
        names = [c.name for c in cols if not c.auto_id]
        for r in rows:
            conn.execute(f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES '
                         f'({", ".join("?" for _ in names)})', r)
        examples = {c: [r[i] for r in rows] for i, c in enumerate(names)}
        filled = fill_lone_nulls(conn, table, cols, gens, "en_US", 5, examples)
        empty = conn.execute(f'SELECT COUNT(*) FROM "{table.name}" WHERE "{column}" IS NULL').fetchone()[0]
        assert empty == kept and filled == ([column] if not kept else [])
        if not kept:
            value = conn.execute(f'SELECT "{column}" FROM "{table.name}" WHERE rowid = 4').fetchone()[0]
            assert 25 <= value <= 125
