"""A create tool's guards replayed on the calls the seeded rows of its table were made by
(``pipeline.stages.tools.seeded_calls``). Issue 40: the regenerated pharmacy's ``fill_prescription`` kept the guard
``... JOIN prescriptions p ... WHERE p.patient_id = :patient_id AND p.quantity + :quantity > m.quantity`` (the
patient's other prescriptions against a per-drug column): 40 of 153 patients were refused every drug, and it refuses
101 of the 184 existing prescriptions replayed. The fixture below has that shape: 12 patients, 6 drugs of 10 units
a pack, 20 scripts of 8 units (8 patients with two, 4 with one)."""

from __future__ import annotations

import sqlite3
from typing import cast

import pytest

from pipeline import ir
from pipeline.dbmodel.ddl import rows_of
from pipeline.stages.tools import seeded_calls
from pipeline.stages.tools.toolset import Workspace, drop_contradicted
from tests.stages.library_replies import (
    FIND_MEMBER,
    LEND_BOOK,
    LIST_LOANS,
    RETURN_BOOK,
    SCENARIO,
    TOOL_PLAN,
    small_settings,
)
from tests.stages.test_tools import run, seed  # noqa: F401 (fixture)

DDL = [
    "CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT",
    "CREATE TABLE drugs (drug_id INTEGER PRIMARY KEY, name TEXT NOT NULL, pack REAL, stock REAL) STRICT",
    "CREATE TABLE scripts (script_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES "
    "patients(patient_id), drug_id INTEGER NOT NULL REFERENCES drugs(drug_id), qty REAL, day TEXT NOT NULL, "
    "state TEXT NOT NULL CHECK (state IN ('open', 'void'))) STRICT",
    "CREATE TABLE voids (void_id INTEGER PRIMARY KEY, script_id INTEGER NOT NULL REFERENCES scripts(script_id)) STRICT",
]
CLOCK = "2026-01-15T09:00:00"
PARAMS = [ir.Param(name="patient_id", type="integer"), ir.Param(name="drug_id", type="integer"),
          ir.Param(name="qty", type="number")]
INSERT = ("INSERT INTO scripts (patient_id, drug_id, qty, day, state) "
          "VALUES (:patient_id, :drug_id, :qty, :today, 'open')")
DRAW = "UPDATE drugs SET stock = stock - :qty WHERE drug_id = :drug_id"

NONSENSE = ("SELECT 1 FROM drugs d JOIN scripts s ON d.drug_id = s.drug_id "
            "WHERE s.patient_id = :patient_id AND s.qty + :qty > d.pack")  # the pharmacy's guard
DUPLICATE = "SELECT 1 FROM scripts WHERE patient_id = :patient_id AND drug_id = :drug_id"
BUSY = ("SELECT 1 FROM scripts WHERE patient_id = :patient_id AND drug_id <> :drug_id "
        "GROUP BY patient_id HAVING COUNT(*) >= 2")  # a patient with two other drugs gets no third: refuses none
SAME_DAY = ("SELECT 1 FROM scripts s JOIN drugs d ON d.drug_id = s.drug_id "
            "WHERE s.patient_id = :patient_id AND s.day = :today")  # one script a day
REFILL = "SELECT 1 FROM scripts WHERE patient_id = :patient_id AND drug_id = :drug_id AND qty > 0"  # must exist
SHORT = "SELECT 1 FROM drugs WHERE drug_id = :drug_id AND stock < :qty"  # another table, drawn down by the calls


def _scripts() -> list[tuple[int, int, float, str]]:
    out = []
    for p in range(1, 13):
        days = [f"2026-01-0{1 + p % 9}", f"2026-01-1{p % 9}"][:1 if p > 8 else 2]
        for k, day in enumerate(days):
            out.append((p, 1 + (p + k) % 6, 8.0, day))
    return out


def _conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    for ddl in DDL:
        c.execute(ddl)
    c.executemany("INSERT INTO patients (name) VALUES (?)", [(f"p{i}",) for i in range(1, 13)])
    c.executemany("INSERT INTO drugs (name, pack, stock) VALUES (?, 10, 3)", [(f"d{i}",) for i in range(1, 7)])
    c.executemany("INSERT INTO scripts (patient_id, drug_id, qty, day, state) VALUES (?, ?, ?, ?, 'open')",
                  _scripts())
    c.execute("INSERT INTO voids (script_id) VALUES (1)")  # a row referencing a replayed one: deleted all the same
    c.commit()
    return c


def _tool(guards: list[tuple[str, str]], writes: tuple[str, ...] = (INSERT, DRAW), name: str = "fill") -> ir.Tool:
    steps = [ir.Step(kind="guard", sql=sql, must=must, error="no") for sql, must in guards]  # type: ignore[arg-type]
    steps += [ir.Step(kind="write", sql=w) for w in writes]
    return ir.Tool(name=name, description=name, kind="write", params=PARAMS, steps=steps)


def test_a_guard_refusing_most_of_the_seeded_calls_is_found_and_the_duplicate_guard_kept() -> None:
    conn = _conn()
    tool = _tool([(DUPLICATE, "not_exist"), (NONSENSE, "not_exist"), (BUSY, "not_exist")])
    (found,) = seeded_calls.judge(conn, [tool], tool, CLOCK)
    assert found.sql == NONSENSE and found.must == "not_exist"
    assert (found.refused, found.rows) == (16, 20)  # every patient with another script
    assert found.examples[0] == {"patient_id": 1, "drug_id": 2, "qty": 8.0}  # a call, the clock aside
    assert "16 of 20" in found.describe() and found.evidence()["finding"] == "contradicts_seeded_rows"
    assert [s.sql for s in seeded_calls.without(tool, [found]).steps if s.kind == "guard"] == [DUPLICATE, BUSY]
    assert conn.execute("SELECT COUNT(*) FROM scripts").fetchone()[0] == 20  # only a copy was changed


def test_the_row_replayed_is_first_removed_and_a_minority_refused_is_kept() -> None:
    conn = _conn()
    # a patient has at most two scripts: with its own row present every patient with two would be refused
    at_most_two = "SELECT 1 FROM scripts s JOIN patients p ON p.patient_id = s.patient_id " \
                  "WHERE s.patient_id = :patient_id GROUP BY s.patient_id HAVING COUNT(*) >= 2"
    conn.executemany("INSERT INTO scripts (patient_id, drug_id, qty, day, state) VALUES (?, 5, 8, '2026-01-20', "
                     "'open')", [(1,), (2,), (3,)])  # three patients with three scripts: 9 of 23 refused
    tool = _tool([(at_most_two, "not_exist")])
    assert seeded_calls.judge(conn, [tool], tool, CLOCK) == []
    conn.executemany("INSERT INTO scripts (patient_id, drug_id, qty, day, state) VALUES (?, 6, 8, '2026-01-21', "
                     "'open')", [(4,), (5,), (6,)])  # now 18 of 26
    (found,) = seeded_calls.judge(conn, [tool], tool, CLOCK)
    assert (found.refused, found.rows) == (18, 26)


def test_the_clock_an_insert_writes_is_the_rows_own_value() -> None:
    conn = _conn()
    tool = _tool([(SAME_DAY, "not_exist")])
    assert seeded_calls.judge(conn, [tool], tool, CLOCK) == []  # each script on its own day: none refused
    conn.execute("UPDATE scripts SET day = '2026-01-03'")  # every patient's scripts on one day, not the clock's
    (found,) = seeded_calls.judge(conn, [tool], tool, CLOCK)
    assert (found.refused, found.rows) == (16, 20)


def test_a_guard_that_must_find_a_row_the_calls_did_not_have_is_found() -> None:
    conn = _conn()
    tool = _tool([(REFILL, "exist"), ("SELECT 1 FROM patients WHERE patient_id = :patient_id", "exist")])
    (found,) = seeded_calls.judge(conn, [tool], tool, CLOCK)
    assert found.sql == REFILL and found.must == "exist" and (found.refused, found.rows) == (20, 20)


def test_guards_not_about_the_inserted_row_or_the_state_now_are_not_judged() -> None:
    conn = _conn()
    # about another table: the stock the calls drew down (3 left, 8 asked) refuses every call, and is left alone
    assert seeded_calls.judge(conn, [_tool([(SHORT, "not_exist")])], _tool([(SHORT, "not_exist")]), CLOCK) == []
    # a column another tool sets to a literal holds the state now: a guard reading it is left alone
    voiding = ir.Tool(name="void", description="v", kind="write", params=[ir.Param(name="script_id", type="integer")],
                      steps=[ir.Step(kind="write", sql="UPDATE scripts SET state = 'void' WHERE script_id = :script_id")])
    on_state = NONSENSE + " AND s.state = 'open'"
    tool = _tool([(on_state, "not_exist")])
    assert len(seeded_calls.judge(conn, [tool], tool, CLOCK)) == 1
    assert seeded_calls.judge(conn, [tool, voiding], tool, CLOCK) == []
    # another tool inserting into the same table: the rows are not all this tool's calls
    other = _tool([], writes=(INSERT,), name="fill_again")
    tool = _tool([(NONSENSE, "not_exist")])
    assert seeded_calls.judge(conn, [tool, other], tool, CLOCK) == []
    # only rows holding the INSERT's literals are its calls; too few of them decide nothing
    conn.execute(f"UPDATE scripts SET state = 'void' WHERE script_id > {seeded_calls.MIN_ROWS - 1}")
    assert seeded_calls.judge(conn, [tool], tool, CLOCK) == []
    # a conflict guard is the conflict judge's (guards.wrong_guards), even when the seed breaks it
    conn = _conn()
    conflict = "SELECT 1 FROM scripts WHERE patient_id = :patient_id"
    assert seeded_calls.judge(conn, [_tool([(conflict, "not_exist")])], _tool([(conflict, "not_exist")]), CLOCK) == []


@pytest.fixture
def workspace():
    conn = _conn()
    tables = [ir.Table(name=n, ddl=d) for n, d in zip(["patients", "drugs", "scripts", "voids"], DDL, strict=True)]
    seeded = [rows_of(conn, t) for t in tables]
    tool = _tool([("SELECT 1 FROM patients WHERE patient_id = :patient_id", "exist"), (DUPLICATE, "not_exist"),
                  (NONSENSE, "not_exist")])
    with Workspace(SCENARIO, tables, seeded, CLOCK, [tool]) as ws:
        yield ws


def test_the_stage_drops_the_contradicted_guard_with_a_note(workspace) -> None:
    (note,) = drop_contradicted(workspace, small_settings())
    assert note.item == "fill" and note.reason.startswith("guard dropped")
    assert note.evidence["guard"] == NONSENSE and (note.evidence["refused"], note.evidence["rows"]) == (16, 20)
    (tool,) = workspace.tools
    assert [s.sql for s in tool.steps if s.kind == "guard"] == [
        "SELECT 1 FROM patients WHERE patient_id = :patient_id", DUPLICATE]


def test_the_tools_stage_drops_a_guard_its_seeded_calls_contradict(seed, monkeypatch) -> None:  # noqa: F811
    # the library fixture's open loans: member 1 has two (books 2 and 4), member 3 one (book 3)
    nonsense = ("SELECT 1 FROM books b JOIN loans l ON l.book_id = b.book_id "
                "WHERE l.member_id = :member_id AND l.book_id + :book_id > 5")  # refuses both of member 1's
    copies = cast(list, LEND_BOOK["guards"])[1]  # about the books: not judged
    lend = {**LEND_BOOK, "guards": [copies, {"sql": nonsense, "must": "not_exist", "error": "No room for {book_id}"}]}
    monkeypatch.setattr(seeded_calls, "MIN_ROWS", 3)
    res, _ = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, lend, RETURN_BOOK])
    assert res.ok
    (note,) = [r for r in res.rejections if r.reason.startswith("guard dropped")]
    assert note.item == "lend_book" and note.evidence["guard"] == nonsense
    assert (note.evidence["refused"], note.evidence["rows"]) == (2, 3)
    lent = next(t for t in res.value.tools if t.name == "lend_book")
    assert [s.sql for s in lent.steps if s.kind == "guard"] == [copies["sql"]]
