"""A column the tools stage adds as a running amount (``SET stock = stock - :quantity``) is typed a number and filled
with amounts (``pipeline.stages.tools.amend_schema``, ``pipeline.stages.tools.added_values.amounts``). Issue 40: the
regenerated pharmacy's ``medications.stock``, added for ``fill_prescription``, was typed TEXT and NULL in all 51
rows, and ``NULL - 2`` is NULL: no fill ever changed it. Real SQLite; the fake LLM only where the stage asks it."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import table_infos
from pipeline.stages.tools import added_values, amend_schema
from tests.stages.test_tools_added_values import (  # noqa: F401 - the seed fixture
    FIND_BOOK,
    SHELVE_BOOK,
    plan,
    run,
    seed,
)

DRUGS_DDL = ("CREATE TABLE drugs (drug_id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock REAL, doses INTEGER, "
             "note TEXT) STRICT")
FILLS_DDL = ("CREATE TABLE fills (fill_id INTEGER PRIMARY KEY, drug_id INTEGER NOT NULL REFERENCES drugs(drug_id), "
             "quantity REAL NOT NULL) STRICT")
DRUGS = ir.Table(name="drugs", ddl=DRUGS_DDL)
FILLS = ir.Table(name="fills", ddl=FILLS_DDL)


def _tool(name: str, writes: list[str], params: list[dict]) -> ir.Tool:
    return ir.Tool(name=name, description=name, kind="write", params=params,
                   steps=[ir.Step(kind="write", sql=s) for s in writes])


FILL = _tool("fill", ["INSERT INTO fills (drug_id, quantity) VALUES (:drug_id, :quantity)",
                      "UPDATE drugs SET stock = stock - :quantity WHERE drug_id = :drug_id"],
             [{"name": "drug_id", "type": "integer"}, {"name": "quantity", "type": "number"}])
DOSE = _tool("dose", ["UPDATE drugs SET doses = (doses + 1) WHERE drug_id = :drug_id"],
             [{"name": "drug_id", "type": "integer"}])
NOTE = _tool("note", ["UPDATE drugs SET note = note || :text WHERE drug_id = :drug_id"],
             [{"name": "drug_id", "type": "integer"}, {"name": "text", "type": "string"}])


@pytest.fixture
def conn():
    c = sqlite3.connect(":memory:")
    c.execute(DRUGS_DDL)
    c.execute(FILLS_DDL)
    c.executemany("INSERT INTO drugs (name) VALUES (?)", [(f"Drug {i}",) for i in range(10)])
    c.executemany("INSERT INTO fills (drug_id, quantity) VALUES (?, ?)",
                  [(1 + i % 10, q) for i, q in enumerate([30.0, 30.0, 60.0, 90.0, 30.0, 14.0, 28.0])])
    yield c
    c.close()


def test_a_sum_or_difference_is_typed_a_number() -> None:
    tables = [ir.Table(name="drugs", ddl="CREATE TABLE drugs (drug_id INTEGER PRIMARY KEY, name TEXT) STRICT")]
    con = sqlite3.connect(":memory:")
    con.execute(tables[0].ddl)
    got = amend_schema.propose(FILL.model_copy(update={"steps": FILL.steps[1:]}), tables, con)
    assert [(a.column, a.kind, a.value) for a in got] == [("stock", "add_column", "REAL")]  # was TEXT
    assert [(a.column, a.value) for a in amend_schema.propose(DOSE, tables, con)] == [("doses", "INTEGER")]
    assert [(a.column, a.value) for a in amend_schema.propose(NOTE, tables, con)] == [("note", "TEXT")]


def test_an_amount_drawn_down_starts_at_several_of_its_moves_as_the_rows_hold_them(conn) -> None:
    counter = added_values.amounts([FILL], DRUGS, "stock", conn, table_infos(conn))
    assert counter is not None and counter.sign == -1 and counter.unit == 30.0 and counter.whole
    assert counter.moves == (14.0, 28.0, 30.0, 60.0, 90.0)
    notes = added_values.fill(conn, [DRUGS, FILLS], [("drugs", "stock")], [FILL])
    got = [r[0] for r in conn.execute("SELECT stock FROM drugs ORDER BY drug_id")]
    assert None not in got and all(150 <= s <= 600 and float(s).is_integer() for s in got), got
    assert len(set(got)) > 3  # drawn per row, not one number
    assert notes[0].reason.startswith("column drugs.stock added for a tool: its 10 seeded rows filled with amounts")
    assert "a tool draws it down by its quantity in fill (as fills.quantity hold it)" in notes[0].reason
    conn.execute("UPDATE drugs SET stock = NULL")
    added_values.fill(conn, [DRUGS, FILLS], [("drugs", "stock")], [FILL])
    assert [r[0] for r in conn.execute("SELECT stock FROM drugs ORDER BY drug_id")] == got  # deterministic


def test_a_count_kept_by_a_literal_starts_at_a_few_and_a_text_joined_on_stays_null(conn) -> None:
    notes = added_values.fill(conn, [DRUGS, FILLS], [("drugs", "doses"), ("drugs", "note")], [DOSE, NOTE])
    doses = [r[0] for r in conn.execute("SELECT doses FROM drugs")]
    assert all(isinstance(d, int) and 0 <= d <= 5 for d in doses) and len(set(doses)) > 1, doses
    assert "a tool counts it up by 1 in dose" in notes[0].reason
    assert conn.execute("SELECT COUNT(*) FROM drugs WHERE note IS NOT NULL").fetchone()[0] == 0  # not an amount
    assert "stay NULL" in notes[1].reason


BOOK_COPIES = {  # books has no copies column: the write draws it down by one
    "description": "Lend a copy of a book.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book"}],
    "guards": [{"sql": "SELECT 1 FROM books WHERE book_id = :book_id AND copies < 1", "must": "not_exist",
                "error": "No copy of book {book_id} is left"}],
    "writes": ["UPDATE books SET copies = copies - 1 WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id, copies FROM books WHERE book_id = :book_id", "mode": "one"},
}


def test_the_stage_adds_the_amount_as_a_number_and_its_write_moves_every_seeded_row(seed) -> None:  # noqa: F811
    p = plan(("find_book", "read", ["books", "loans"], [1]), ("lend_copy", "write", ["books"], [2]),
             ("shelve_book", "write", ["books"], [3]))
    res, _ = run(seed, [p, FIND_BOOK, BOOK_COPIES, SHELVE_BOOK])
    env = res.value
    books = next(t for t in env.tables if t.name == "books")
    assert "copies INTEGER" in books.ddl, books.ddl
    copies = [r["copies"] for r in next(s for s in env.seed if s.table == "books").rows]
    assert all(isinstance(c, int) and 5 <= c <= 20 for c in copies), copies
    with EnvInstance(env) as inst:
        before = inst.conn.execute("SELECT copies FROM books WHERE book_id = 1").fetchone()[0]
        assert inst.call("lend_copy", {"book_id": 1})["ok"]
        assert inst.conn.execute("SELECT copies FROM books WHERE book_id = 1").fetchone()[0] == before - 1
