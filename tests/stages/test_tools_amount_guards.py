"""A write that draws a running amount down gets a guard that the amount holds the move
(``pipeline.stages.tools.amount_guards``). Issue 40: the regenerated pharmacy's ``fill_prescription`` took 20 tablets
from a stock of 15 and kept -5 (its own "not enough stock" guard compared another column). Real SQLite, the
engine's own tool runner; the stage through the scripted fake LLM."""

from __future__ import annotations

import sqlite3

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.runtime.engine import run_tool
from pipeline.stages.tools import amount_guards
from tests.stages.test_tools_added_values import (  # noqa: F401 - the seed fixture
    FIND_BOOK,
    SHELVE_BOOK,
    plan,
    run,
    seed,
)

DDL = "CREATE TABLE drugs (drug_id INTEGER PRIMARY KEY, name TEXT NOT NULL, stock REAL, doses INTEGER) STRICT"
PARAMS = [{"name": "drug_id", "type": "integer"}, {"name": "quantity", "type": "number"}]


def _tool(name: str, steps: list[tuple[str, str, str | None]], params: list[dict] = PARAMS) -> ir.Tool:
    return ir.Tool(name=name, description=name, kind="write", params=params,
                   steps=[ir.Step(kind=k, sql=s, must=m, error="no" if k == "guard" else None) for k, s, m in steps])


FILL = _tool("fill", [("guard", "SELECT 1 FROM drugs WHERE drug_id = :drug_id", "exist"),
                      ("write", "UPDATE drugs SET stock = stock - :quantity WHERE drug_id = :drug_id", None)])


def _conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute(DDL)
    c.executemany("INSERT INTO drugs (name, stock, doses) VALUES (?, ?, 0)", [("Aspirin", 15.0), ("Naproxen", None)])
    c.commit()
    return c


def test_a_write_that_draws_an_amount_down_is_refused_past_what_the_row_holds() -> None:
    (tool,), notes = amount_guards.add([FILL])
    assert [s.kind for s in tool.steps] == ["guard", "guard", "write"]
    guard = tool.steps[1]
    assert guard.must == "not_exist" and guard.sql == (
        'SELECT 1 FROM "drugs" WHERE (drug_id = :drug_id) AND "stock" < :quantity')
    assert guard.error == "Not enough stock left ({quantity} asked)"
    assert notes[0].item == "fill" and notes[0].evidence["column"] == "stock"
    conn = _conn()
    spec = tool.model_dump(mode="json")
    refused = run_tool(conn, spec, {"drug_id": 1, "quantity": 20})
    assert not refused["ok"] and "Not enough stock left (20" in str(refused), refused
    assert conn.execute("SELECT stock FROM drugs WHERE drug_id = 1").fetchone()[0] == 15.0  # untouched
    assert run_tool(conn, spec, {"drug_id": 1, "quantity": 15})["ok"]  # all of it
    assert conn.execute("SELECT stock FROM drugs WHERE drug_id = 1").fetchone()[0] == 0.0
    assert run_tool(conn, spec, {"drug_id": 2, "quantity": 3})["ok"]  # an unknown (NULL) amount is not short
    # without the guard the same write keeps a negative stock
    bare = _conn()
    assert run_tool(bare, FILL.model_dump(mode="json"), {"drug_id": 1, "quantity": 20})["ok"]
    assert bare.execute("SELECT stock FROM drugs WHERE drug_id = 1").fetchone()[0] == -5.0


def test_a_tool_that_guards_its_amount_and_a_count_kept_up_are_left_alone() -> None:
    guarded = _tool("fill_checked", [
        ("guard", "SELECT 1 FROM drugs WHERE drug_id = :drug_id AND stock >= :quantity", "exist"),
        ("write", "UPDATE drugs SET stock = stock - :quantity WHERE drug_id = :drug_id", None)])
    counted = _tool("dose", [("write", "UPDATE drugs SET doses = doses + 1 WHERE drug_id = :drug_id", None)],
                    params=PARAMS[:1])
    everywhere = _tool("write_off", [("write", "UPDATE drugs SET stock = stock - :quantity", None)])
    tools, notes = amount_guards.add([guarded, counted, everywhere])
    assert tools == [guarded, counted, everywhere] and notes == []


BOOK_COPIES = {  # books has no copies column: it is added, and the write draws it down with no guard on it
    "description": "Lend a copy of a book.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book"}],
    "guards": [],
    "writes": ["UPDATE books SET copies = copies - 1 WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id, copies FROM books WHERE book_id = :book_id", "mode": "one"},
}


def test_the_stage_guards_a_copy_lent_from_a_book_with_none_left(seed) -> None:  # noqa: F811
    p = plan(("find_book", "read", ["books", "loans"], [1]), ("lend_copy", "write", ["books"], [2]),
             ("shelve_book", "write", ["books"], [3]))
    res, _ = run(seed, [p, FIND_BOOK, BOOK_COPIES, SHELVE_BOOK])
    lend = next(t for t in res.value.tools if t.name == "lend_copy")
    assert [s.kind for s in lend.steps] == ["guard", "write"], lend.steps
    assert any(r.reason.startswith("guard added to lend_copy") for r in res.rejections)
    with EnvInstance(res.value) as inst:
        assert inst.call("lend_copy", {"book_id": 1})["ok"]  # the seeded copies hold a lend
        inst.conn.execute("UPDATE books SET copies = 0 WHERE book_id = 2")
        out = inst.call("lend_copy", {"book_id": 2})
        assert not out["ok"] and "Not enough copies left" in str(out), out
