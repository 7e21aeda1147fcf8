"""One open child per parent where the model says so (issue 40): the library of 2026-11-29 lent Brave New World on
loans 4 and 20 at once. Each loan's state is drawn on its own (pending 0.7) and every pending loan is moved to be
under way today, so two pending loans of one book overlapped. The model is asked, per reference and the examples'
state, whether one parent may have two such children at once (both wordings: possible? impossible?); where it says
no, a later child that would be a parent's second open one is drawn in a state the examples do not show. A scripted
fake answers here: no for the book, yes for the member; its two wordings disagreeing hold nothing."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.llm import fake_client
from pipeline.settings import BuildSettings
from pipeline.stages.rows import single
from pipeline.stages.rows.maker import ValueMaker, child_relations, fill, key_sets, table_shape

TODAY = date(2026, 1, 15)
SCENARIO = ir.Scenario(name="Book Lending System", description="Members borrow, renew and return books.")
BOOKS = ir.Table(name="books", ddl="CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL) STRICT")
MEMBERS = ir.Table(name="members", ddl="CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL) "
                                       "STRICT")
LOANS = ir.Table(name="loans", ddl=(
    "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id), "
    "member_id INTEGER NOT NULL REFERENCES members(member_id), loan_date TEXT NOT NULL, due_date TEXT NOT NULL, "
    "status TEXT CHECK (status IN ('pending', 'returned'))) STRICT"))


def _day(days: int) -> str:
    return (TODAY + timedelta(days=days)).isoformat()


def _answers(no: set[str], disagree: bool = False) -> Any:
    """Per question, by the reference column the prompt names: 'no' to possible and 'yes' to impossible for the
    columns in ``no``, the other way round for the rest; ``disagree``: 'yes' to both (the 1.5B model's habit)."""
    def reply(messages: list[dict[str, Any]]) -> Any:
        text = messages[0]["content"]
        column = text.split("(the same ", 1)[1].split(")", 1)[0]
        impossible = "impossible" in text
        if disagree:
            return {"answer": "yes"}
        return {"answer": "yes" if (column in no) == impossible else "no"}
    return reply


def _library(client: Any, seed: int = 3) -> tuple[sqlite3.Connection, single.Asked]:
    conn = scratch_db((BOOKS, MEMBERS, LOANS))
    conn.executemany("INSERT INTO books (title) VALUES (?)", [(f"t{i}",) for i in range(12)])
    conn.executemany("INSERT INTO members (name) VALUES (?)", [(f"m{i}",) for i in range(30)])
    rows = [(k, k + 4, _day(0), _day(31), "pending") for k in (1, 2, 3, 4)]  # the model's four: four books
    conn.executemany("INSERT INTO loans (book_id, member_id, loan_date, due_date, status) VALUES (?, ?, ?, ?, ?)",
                     rows)
    cols = table_columns(conn, LOANS)
    names = [c.name for c in cols if not c.auto_id]
    examples = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    gens = [ir.ColumnGenerator(column=c.name, kind="reference", by="code", parent=c.ref[0], key=c.ref[1])
            for c in cols if c.ref is not None]
    gens += [ir.ColumnGenerator(column="loan_date", kind="date", start=_day(-180), end=_day(0)),
             ir.ColumnGenerator(column="due_date", kind="date_after", after="loan_date", min=31, max=31),
             ir.ColumnGenerator(column="status", kind="enum", values=["pending", "returned"], weights=[0.7, 0.3])]
    rel = child_relations(conn, "loans", cols, examples, {g.column for g in gens if g.kind != "reference"}, TODAY)
    sets = key_sets(conn, LOANS, names)
    settings = BuildSettings(child_fanout=(0, 4), child_rows_max=200)
    shape = table_shape(conn, LOANS, cols, sets, len(rows), settings, random.Random(seed))
    maker = ValueMaker("en_US", seed, gens, cols, examples)
    maker.relate(rel, TODAY)
    asked = single.one_open(SCENARIO, LOANS, cols, maker.states, maker.current, client)
    maker.single.held(asked.single, [dict(zip(names, r, strict=True)) for r in rows], maker.states)
    fill(conn, LOANS, cols, maker, shape, sets)
    return conn, asked


def _open_twice(conn: sqlite3.Connection, column: str) -> int:
    per = Counter(r[0] for r in conn.execute(f"SELECT {column} FROM loans WHERE status = 'pending'"))
    return sum(1 for n in per.values() if n > 1)


def test_a_book_is_on_one_pending_loan_at_a_time_a_member_on_several() -> None:
    conn, asked = _library(fake_client([_answers({"book_id"})] * 10))
    assert asked.single == ("book_id",) and asked.calls == 4
    assert [r.evidence["answer"] for r in asked.rejections] == ["no", "yes"]
    assert _open_twice(conn, "book_id") == 0
    shares = Counter(r[0] for r in conn.execute("SELECT status FROM loans"))
    assert shares["pending"] > 4 and shares["returned"] > 0  # code-made loans still out, others returned
    for a, b in conn.execute("SELECT loan_date, due_date FROM loans WHERE status = 'pending'"):
        assert a <= TODAY.isoformat() < b  # the open ones still under way today


def test_without_the_answer_books_go_out_twice_and_disagreeing_wordings_hold_nothing() -> None:
    conn, asked = _library(fake_client([_answers(set(), disagree=True)] * 10))
    assert asked.single == () and [r.evidence["answer"] for r in asked.rejections] == [None, None]
    assert _open_twice(conn, "book_id") > 0  # as the committed example: what the question is for


def test_no_question_without_a_state_under_way() -> None:
    cols = table_columns(scratch_db((BOOKS, MEMBERS, LOANS)), LOANS)
    assert single.questions("loans", cols, {}, []) == []
    assert single.questions("loans", cols, {"status": frozenset({"pending"})}, []) == []


def test_the_questions_are_asked_of_an_endpoint_not_of_the_embedded_model() -> None:
    """``[stages.build] ask_single_open``: "auto" asks a configured endpoint and not the embedded 1.5B model (it agrees
    with both wordings every time: 2 calls per question that hold nothing); "on" and "off" say so whatever the client."""
    endpoint = fake_client([])
    embedded = fake_client([])
    embedded.embedded = True
    assert BuildSettings().ask_single_open == "off"  # the same calls whatever serves the model
    assert single.wanted("auto", endpoint) and not single.wanted("auto", embedded)
    assert single.wanted("on", embedded) and not single.wanted("off", endpoint)
    assert "ask_single_open" not in BuildSettings().model_dump()  # a run made before it keeps its fingerprint
    assert BuildSettings(ask_single_open="on").model_dump()["ask_single_open"] == "on"
