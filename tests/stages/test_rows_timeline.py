"""The model's example rows spread in time as the code-made rows do (pipeline.stages.rows.timeline): four loans the
model wrote on the clock's day, renewed and fined that day (the library of 2026-11-29, loans 1-4), moved to days the
other loans hold, with their children."""

from __future__ import annotations

import sqlite3
from datetime import date, timedelta

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.dbmodel.examples import as_written
from pipeline.stages.rows import timeline

TODAY = date(2026, 1, 15)
LOANS = ir.Table(name="loans", ddl=(
    "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book TEXT NOT NULL, loan_date TEXT NOT NULL, "
    "due_date TEXT NOT NULL) STRICT"))
RENEWALS = ir.Table(name="renewals", ddl=(
    "CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), "
    "renewal_date TEXT NOT NULL) STRICT"))
FINES = ir.Table(name="fines", ddl=(
    "CREATE TABLE fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), "
    "amount REAL NOT NULL) STRICT"))


def _day(days: int) -> str:
    return (TODAY + timedelta(days=days)).isoformat()


def _library() -> sqlite3.Connection:
    conn = scratch_db((LOANS, RENEWALS, FINES))
    for i in range(4):  # the model's examples: issued today, due in 31 days
        conn.execute("INSERT INTO loans (book, loan_date, due_date) VALUES (?, ?, ?)", (f"b{i}", _day(0), _day(31)))
    for back in (-120, -90, -60, -45, -30, -10):  # code-made: spread over the past months
        conn.execute("INSERT INTO loans (book, loan_date, due_date) VALUES (?, ?, ?)",
                     (f"c{back}", _day(back), _day(back + 31)))
    for loan in (1, 2):  # the model's renewals: today, on its first loans
        conn.execute("INSERT INTO renewals (loan_id, renewal_date) VALUES (?, ?)", (loan, _day(0)))
    conn.execute("INSERT INTO renewals (loan_id, renewal_date) VALUES (3, ?)", (_day(5),))  # code-made, on loan 3
    conn.execute("INSERT INTO renewals (loan_id, renewal_date) VALUES (6, ?)", (_day(-80),))  # code-made
    for loan in (1, 2, 3):
        conn.execute("INSERT INTO fines (loan_id, amount) VALUES (?, 5.0)", (loan,))
    return conn


def _rows(conn: sqlite3.Connection, table: str) -> list[tuple]:
    return conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()


def test_examples_on_one_day_move_to_the_days_the_drawn_rows_hold_with_their_gaps() -> None:
    conn = _library()
    moved = timeline.respread(conn, (LOANS, RENEWALS, FINES), {"loans": 4, "renewals": 2, "fines": 3})
    loans = _rows(conn, "loans")
    drawn = {r[2] for r in loans[4:]}
    starts = [r[2] for r in loans[:4]]
    assert set(starts) <= drawn and len(set(starts)) == 4  # spread, each a day a code-made loan holds
    for r in loans[:4]:  # due 31 days after issue, as the model wrote them
        assert (date.fromisoformat(r[3]) - date.fromisoformat(r[2])).days == 31
    assert loans[4:] == [(5 + i, f"c{b}", _day(b), _day(b + 31)) for i, b in enumerate((-120, -90, -60, -45, -30, -10))]
    assert moved["loans"].originals == {"loan_date": [_day(0)] * 4, "due_date": [_day(31)] * 4}
    assert sorted(moved["loans"].days) == [0, 1, 2, 3] and not moved["loans"].with_parent


def test_a_child_moves_with_the_parent_it_names_and_keeps_its_relation() -> None:
    conn = _library()
    moved = timeline.respread(conn, (LOANS, RENEWALS, FINES), {"loans": 4, "renewals": 2, "fines": 3})
    loans = {r[0]: r for r in _rows(conn, "loans")}
    ren = _rows(conn, "renewals")
    assert ren[0][2] == loans[1][2] and ren[1][2] == loans[2][2]  # renewed on its loan's day, as the model wrote
    assert (date.fromisoformat(ren[2][2]) - date.fromisoformat(loans[3][2])).days == 5  # code-made: 5 days after
    assert ren[3][2] == _day(-80)  # on a loan that did not move: left
    assert moved["renewals"].with_parent == {0, 1}
    assert _rows(conn, "fines") == [(1, 1, 5.0), (2, 2, 5.0), (3, 3, 5.0)]  # no date: nothing to move
    assert "fines" not in moved


def test_examples_already_spread_or_drawn_rows_on_one_day_are_left() -> None:
    conn = scratch_db((LOANS,))
    for back in (-3, -2, -1):  # examples spread already
        conn.execute("INSERT INTO loans (book, loan_date, due_date) VALUES (?, ?, ?)", ("x", _day(back), _day(9)))
    for _ in range(3):
        conn.execute("INSERT INTO loans (book, loan_date, due_date) VALUES (?, ?, ?)", ("y", _day(-50), _day(9)))
    before = _rows(conn, "loans")
    assert timeline.respread(conn, (LOANS,), {"loans": 3}) == {}  # due_date: one day in the drawn rows as well
    assert _rows(conn, "loans") == before
    assert timeline.respread(conn, (LOANS,), {}) == {}  # no examples: nothing is the model's


def test_a_unique_date_that_would_collide_is_left() -> None:
    uniq = ir.Table(name="slots", ddl="CREATE TABLE slots (slot_id INTEGER PRIMARY KEY, day TEXT NOT NULL UNIQUE) STRICT")
    conn = scratch_db((uniq,))
    conn.execute("INSERT INTO slots (day) VALUES (?)", (_day(0),))
    conn.execute("INSERT INTO slots (day) VALUES (?)", (_day(0) + "T10:00:00",))
    conn.execute("INSERT INTO slots (day) VALUES (?)", (_day(-5),))
    conn.execute("INSERT INTO slots (day) VALUES (?)", (_day(-7),))
    moved = timeline.respread(conn, (uniq,), {"slots": 2})
    days = [r[1] for r in _rows(conn, "slots")]
    # the quantiles of (-7, -5) are -7 and -5: the first example's move is refused (day -7 is taken), it stays;
    # the second's time keeps it apart from day -5's value, it moves
    assert days == [_day(0), _day(-5) + "T10:00:00", _day(-5), _day(-7)]
    assert moved["slots"].days == {1: -5}


def test_the_plan_keeps_what_the_model_wrote() -> None:
    conn = _library()
    moved = timeline.respread(conn, (LOANS, RENEWALS, FINES), {"loans": 4, "renewals": 2, "fines": 3})
    plan = timeline.noted(ir.RowPlan(seed=1, examples=4), moved["loans"])
    rows = [dict(zip(("loan_id", "book", "loan_date", "due_date"), r, strict=True)) for r in _rows(conn, "loans")]
    seed = ir.SeedRows(table="loans", rows=rows, plan=plan)
    assert [r["loan_date"] for r in as_written(seed)] == [_day(0)] * 4
    assert [r["loan_date"] for r in seed.rows[:4]] != [_day(0)] * 4
    assert "example_dates" in seed.model_dump()["plan"]
    assert "example_dates" not in ir.RowPlan(seed=1, examples=4).model_dump()  # other plans keep their bytes
    assert timeline.noted(plan, None) is plan
    notes = timeline.rejections(moved, "seed_data")
    assert [n.item for n in notes] == ["loans", "renewals"] and notes[0].evidence["kind"] == "example_dates"
