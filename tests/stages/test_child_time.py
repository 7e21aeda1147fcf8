"""Time across tables, two more relations the example rows show (issue 40): a child's date strictly after its
parent's when no example child is on its parent's day (8 of the library's 18 renewals fell on the day their loan
was issued), and a child without a date of its own only on parents past a date by their own end where they have one
(a fine only on a loan past due when it came back or now, never on one returned before its due date)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import relations
from tests.stages.test_time_relations import LOANS, RENEWALS, TODAY, _db, _fill, _loans

RETURNS = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, loan_date TEXT NOT NULL, "
                                     "due_date TEXT NOT NULL, returned_date TEXT) STRICT")
FINES = ir.Table(name="fines", ddl="CREATE TABLE fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL "
                                   "REFERENCES loans(loan_id), fine_amount REAL NOT NULL) STRICT")


def test_a_renewal_is_never_on_its_loans_day_when_no_example_is() -> None:
    loans = _loans(40)
    conn = _db(LOANS, RENEWALS, loans)
    examples = [(k, (date.fromisoformat(loans[k]["loan_date"]) + timedelta(days=d)).isoformat())
                for k, d in ((3, 1), (5, 4), (8, 2), (12, 9))]
    day = ir.ColumnGenerator(column="renewal_date", kind="date", start="2025-06-01", end=TODAY.isoformat())
    rel, filled = _fill(conn, RENEWALS, examples, [day])
    assert ("renewal_date", "loan_id", True, 1) in {(b[0], b[1], b[3], b[4]) for b in rel.bounds}
    rows = conn.execute("SELECT r.renewal_date, l.loan_date, l.due_date FROM renewals r JOIN loans l "
                        "USING (loan_id)").fetchall()
    assert len(rows) > 30 and filled.inserted == len(rows) - 4
    assert [r for r in rows if r[0] <= r[1]] == []  # after the loan's day, never on it
    assert all(r[0] < r[2] for r in rows)


def test_a_renewal_may_fall_on_its_loans_day_when_the_examples_do() -> None:
    loans = _loans(40)
    conn = _db(LOANS, RENEWALS, loans)
    examples = [(k, loans[k]["loan_date"]) for k in (3, 5, 8, 12)]  # renewed the day they were lent
    day = ir.ColumnGenerator(column="renewal_date", kind="date", start="2025-06-01", end=TODAY.isoformat())
    rel, _ = _fill(conn, RENEWALS, examples, [day])
    assert ("renewal_date", True, 0) in {(b[0], b[3], b[4]) for b in rel.bounds}


def _returned_loans() -> dict[int, dict[str, Any]]:
    """30 loans of 21 days made over the 60 days before today; every third returned 5 days early, every third 4 days
    late (when that is by today), the rest still out."""
    out = {}
    for k in range(1, 31):
        start = TODAY - timedelta(days=2 * k)
        due = start + timedelta(days=21)
        back = {0: due - timedelta(days=5), 1: due + timedelta(days=4)}.get(k % 3)
        out[k] = {"loan_id": k, "loan_date": start.isoformat(), "due_date": due.isoformat(),
                  "returned_date": back.isoformat() if back is not None and back <= TODAY else None}
    return out


def test_fines_only_on_loans_late_by_their_return_or_by_today() -> None:
    loans = _returned_loans()
    late = [k for k, r in loans.items() if r["due_date"] <= (r["returned_date"] or TODAY.isoformat())]
    early = [k for k, r in loans.items() if r["returned_date"] and r["returned_date"] < r["due_date"]]
    assert early and len(late) > 8
    examples = {"loan_id": [late[5], late[2], late[8], late[6]], "fine_amount": [1.0, 2.0, 3.0, 4.0]}
    got = relations.parent_clocks(examples, "loan_id", loans, TODAY, listed=list(loans))
    rel = relations.ParentClock("loan_id", "due_date", "past", "returned_date")
    assert rel in got
    assert not any(rel.holds(loans[k], TODAY) for k in early)
    # held in the rows: no fine on a loan returned before its due date
    conn = scratch_db([RETURNS, FINES])
    for r in loans.values():
        conn.execute("INSERT INTO loans VALUES (?, ?, ?, ?)", tuple(r.values()))
    amount = ir.ColumnGenerator(column="fine_amount", kind="amount", min=1, max=20)
    _, filled = _fill(conn, FINES, list(zip(examples["loan_id"], examples["fine_amount"], strict=True)), [amount])
    fined = {k for (k,) in conn.execute("SELECT loan_id FROM fines")}
    assert fined <= set(late) and not fined & set(early)
    # one fine per loan (its examples each name another loan: maker.one_each)
    count = conn.execute("SELECT COUNT(*) FROM fines").fetchone()[0]
    assert count == len(fined) == filled.inserted + 4 and len(fined) > 8


def test_no_return_relation_when_no_example_parent_was_returned() -> None:
    loans = _returned_loans()
    out = [k for k, r in loans.items() if r["returned_date"] is None and r["due_date"] <= TODAY.isoformat()]
    examples = {"loan_id": out[1:5], "fine_amount": [1.0, 2.0, 3.0, 4.0]}
    got = relations.parent_clocks(examples, "loan_id", loans, TODAY, listed=list(loans))
    assert all(r.until is None for r in got)
