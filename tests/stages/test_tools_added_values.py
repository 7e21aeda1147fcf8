"""A column the tools stage adds for a tool gets values in the seeded rows from what the tools say about it
(``pipeline.stages.tools.added_values``): the states their guards let through and refuse, the values they write,
a parameter's enum, the column's DEFAULT. A column no tool tells a value for stays NULL, with a note. Scripted fake
LLM, real SQLite; the values are read back from the environment's seed and from the database built from it."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline import ir
from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.stages.rows.populate import generate_seed
from pipeline.stages.tools import added_values
from pipeline.stages.tools.toolset import generate_tools
from tests.stages.library_replies import small_settings

SCENARIO = ir.Scenario(name="Village library", description="A village library lends its books to members.")
BOOKS_DDL = ("CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL) "
             "STRICT")
LOANS_DDL = ("CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id), "
             "member TEXT NOT NULL, loaned_on TEXT NOT NULL) STRICT")
TABLES = (ir.Table(name="books", ddl=BOOKS_DDL, natural_key=["title"]),
          ir.Table(name="loans", ddl=LOANS_DDL))
TITLES = ["Middlemarch", "Persuasion", "Emma", "Dracula", "Ulysses", "Beloved", "Rebecca", "Ivanhoe"]
BOOK_ROWS = {"rows": [[t, "Some Author"] for t in TITLES]}
MEMBERS = ["Ada Byrne", "Ola Nowak", "Ida Lund", "Tom Reyes", "Eva Kim", "Sam Ode", "Lia Berg", "Max Roth"]
LOAN_ROWS = {"rows": [[1 + i % 3, m, f"2026-01-{5 + i:02d}"] for i, m in enumerate(MEMBERS)]}  # books 1-3 only
INTENTS = (Intent(goal="Find a book by title", kind="read"), Intent(goal="Lend a book", kind="write"),
           Intent(goal="Take a book back", kind="write"))

FIND_BOOK = {
    "description": "Find a book by its title.",
    "params": [{"name": "title", "type": "string", "description": "The title"}],
    "guards": [],
    "returns": {"sql": "SELECT book_id, title, author FROM books WHERE title = :title", "mode": "one"},
}
LEND_BOOK = {  # books has no status column: the guard and the write name it, it is added
    "description": "Lend an available book.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book"}],
    "guards": [{"sql": "SELECT 1 FROM books WHERE book_id = :book_id AND status = 'available'", "must": "exist",
                "error": "Book {book_id} is not available"}],
    "writes": ["UPDATE books SET status = 'on_loan' WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id, status FROM books WHERE book_id = :book_id", "mode": "one"},
}
RETURN_BOOK = {
    "description": "Take a lent book back.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book"}],
    "guards": [{"sql": "SELECT 1 FROM books WHERE book_id = :book_id AND status = 'on_loan'", "must": "exist",
                "error": "Book {book_id} is not on loan"}],
    "writes": ["UPDATE books SET status = 'available' WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id, status FROM books WHERE book_id = :book_id", "mode": "one"},
}
SHELVE_BOOK = {  # books has no shelf column: added, and nothing says what a seeded book's shelf is
    "description": "Put a book on a shelf.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book"},
               {"name": "shelf", "type": "string", "description": "The shelf"}],
    "guards": [],
    "writes": ["UPDATE books SET shelf = :shelf WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id, shelf FROM books WHERE book_id = :book_id", "mode": "one"},
}
SEED_SETTINGS = small_settings(row_generators=False, rows_per_table=8, rows_per_call=8)
LLM_TOOLS = {"gap_tools_max": 0, "fix_param_names": False, "paged_listers": False, "covering_writes": False}


def plan(*tools: tuple[str, str, list[str], list[int]]) -> dict:
    return {"tools": [{"name": n, "kind": k, "purpose": n.replace("_", " "), "tables": t, "goals": g}
                      for n, k, t, g in tools]}


@pytest.fixture(scope="module")
def seed() -> tuple[ir.SeedRows, ...]:
    res = generate_seed(SCENARIO, TABLES, fake_client([BOOK_ROWS, LOAN_ROWS]), SEED_SETTINGS)
    assert res.ok, [r.reason for r in res.rejections]
    return res.value


def run(seed, replies):
    client = fake_client(replies)
    res = generate_tools(SCENARIO, INTENTS, TABLES, seed, client, small_settings(tools_min=2, **LLM_TOOLS))
    assert res.ok, [r.reason for r in res.rejections]
    return res, client


def statuses(env: ir.Environment, column: str = "status") -> list:
    return [r[column] for r in next(s for s in env.seed if s.table == "books").rows]


def test_an_added_status_takes_the_states_the_guards_read(seed) -> None:
    p = plan(("find_book", "read", ["books", "loans"], [1]), ("lend_book", "write", ["books"], [2]),
             ("return_book", "write", ["books"], [3]))
    res, client = run(seed, [p, FIND_BOOK, LEND_BOOK, RETURN_BOOK])
    assert len(client.requests) == 4  # each tool worked at once on the filled rows (no guard refused them all)
    env = res.value
    got = statuses(env)
    assert set(got) == {"available", "on_loan"} and None not in got
    assert got.count("available") == got.count("on_loan") == 4  # both guards accept a state: dealt in turn
    note = next(r for r in res.rejections if r.item == "books.status")
    assert note.reason.startswith("column books.status added for a tool: its 8 seeded rows filled from what the "
                                  "tools say about it")
    assert note.evidence["accept"] == ["available", "on_loan"]
    assert statuses(env) == statuses(run(seed, [p, FIND_BOOK, LEND_BOOK, RETURN_BOOK])[0].value)  # deterministic
    with EnvInstance(env) as inst:  # the database the later stages read holds them, and each write has rows
        db = dict(inst.conn.execute("SELECT status, COUNT(*) FROM books GROUP BY status").fetchall())
        assert db == {"available": 4, "on_loan": 4}
        lent = inst.conn.execute("SELECT book_id FROM books WHERE status = 'available' LIMIT 1").fetchone()[0]
        away = inst.conn.execute("SELECT book_id FROM books WHERE status = 'on_loan' LIMIT 1").fetchone()[0]
        assert not inst.call("lend_book", {"book_id": away})["ok"]  # a guard has rows to refuse
        assert not inst.call("return_book", {"book_id": lent})["ok"]
        assert inst.call("lend_book", {"book_id": lent})["ok"]
        assert inst.call("return_book", {"book_id": away})["ok"]


def test_with_one_guard_most_rows_start_in_its_state_and_some_in_the_state_written(seed) -> None:
    p = plan(("find_book", "read", ["books", "loans"], [1]), ("lend_book", "write", ["books"], [2]),
             ("shelve_book", "write", ["books"], [3]))  # shelve_book says nothing about status
    res, _ = run(seed, [p, FIND_BOOK, LEND_BOOK, SHELVE_BOOK])
    got = statuses(res.value)
    assert got.count("available") == 6 and got.count("on_loan") == 2
    # the books loans refer to keep the state the guard accepts
    lent = {r["book_id"] for r in next(s for s in res.value.seed if s.table == "loans").rows}
    assert lent and all(got[i - 1] == "available" for i in lent)


def test_a_column_no_tool_tells_a_value_for_stays_null_with_a_note(seed) -> None:
    p = plan(("find_book", "read", ["books", "loans"], [1]), ("lend_book", "write", ["books"], [2]),
             ("shelve_book", "write", ["books"], [3]))
    res, _ = run(seed, [p, FIND_BOOK, LEND_BOOK, SHELVE_BOOK])
    assert statuses(res.value, "shelf") == [None] * 8
    assert None not in statuses(res.value)
    note = next(r for r in res.rejections if r.item == "books.shelf")
    assert note.reason == ("column books.shelf added for a tool: its 8 seeded rows stay NULL: no tool writes, "
                           "compares or guards it with a value, and it has no DEFAULT")


# ------------------------------------------------------------------ the reading of the SQL, on a database


def _tool(name: str, steps: list[tuple[str, str, str | None]], params: list[dict] | None = None,
          kind: str = "write") -> ir.Tool:
    return ir.Tool(name=name, description=name, kind=kind, params=params or [],
                   steps=[ir.Step(kind=k, sql=s, must=m, error="no" if k == "guard" else None) for k, s, m in steps])


@pytest.fixture
def conn():
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE parcels (parcel_id INTEGER PRIMARY KEY, code TEXT NOT NULL, state TEXT, "
              "priority INTEGER, lane TEXT DEFAULT 'north') STRICT")
    c.execute("CREATE TABLE scans (scan_id INTEGER PRIMARY KEY, parcel_id INTEGER REFERENCES parcels(parcel_id)) STRICT")
    c.executemany("INSERT INTO parcels (code) VALUES (?)", [(f"P{i}",) for i in range(12)])
    c.executemany("INSERT INTO scans (parcel_id) VALUES (?)", [(i,) for i in range(1, 7)])
    c.execute("UPDATE parcels SET lane = NULL")
    yield c
    c.close()


TABLE = ir.Table(name="parcels", ddl="CREATE TABLE parcels (parcel_id INTEGER PRIMARY KEY, code TEXT NOT NULL, "
                                     "state TEXT, priority INTEGER, lane TEXT DEFAULT 'north') STRICT")


def test_guards_that_must_not_exist_and_not_in_lists_read_the_other_way(conn) -> None:
    tool = _tool("ship", [
        ("guard", "SELECT 1 FROM parcels WHERE parcel_id = :parcel_id AND state NOT IN ('lost', 'held')", "exist"),
        ("guard", "SELECT 1 FROM parcels p WHERE p.parcel_id = :parcel_id AND p.state = 'shipped'", "not_exist"),
        ("write", "UPDATE parcels SET state = :state WHERE parcel_id = :parcel_id AND state <> 'returned'", None)],
        params=[{"name": "parcel_id", "type": "integer"},
                {"name": "state", "type": "string", "enum": ["sorted", "shipped"]}])
    ev = added_values.evidence([tool], TABLE, "state", conn)
    assert ev.accept == [] and ev.refuse == ["lost", "held", "shipped", "returned"] and ev.known == ["sorted", "shipped"]
    assert ev.before() == ["sorted"]  # the one value no guard refuses
    notes = added_values.fill(conn, [TABLE], [("parcels", "state")], [tool])
    got = [r[0] for r in conn.execute("SELECT state FROM parcels ORDER BY parcel_id")]
    assert got.count("sorted") == 9 and len(got) == 12 and "counts" in notes[0].evidence
    # the rows scans refer to (parcels 1-6) keep the state the guards accept
    assert set(got[:6]) == {"sorted"}


def test_the_default_and_the_column_type_are_honoured(conn) -> None:
    tool = _tool("prioritise", [
        ("guard", "SELECT 1 FROM parcels WHERE parcel_id = :parcel_id AND priority = 'high'", "exist"),
        ("write", "UPDATE parcels SET priority = 2 WHERE parcel_id = :parcel_id AND priority IN (0, 1)", None),
        ("write", "UPDATE parcels SET lane = 'south' WHERE parcel_id = :parcel_id", None)])
    ev = added_values.evidence([tool], TABLE, "priority", conn)
    assert ev.accept == [0, 1] and ev.known == [2]  # 'high' is no INTEGER: ignored
    lane = added_values.evidence([tool], TABLE, "lane", conn)
    assert lane.default == "north" and lane.before() == ["north"]
    added_values.fill(conn, [TABLE], [("parcels", "lane")], [tool])
    assert dict(conn.execute("SELECT lane, COUNT(*) FROM parcels GROUP BY lane").fetchall()) == {"north": 9, "south": 3}


def test_only_refused_values_leave_the_column_null_with_a_note(conn) -> None:
    tool = _tool("close", [("guard", "SELECT 1 FROM parcels WHERE parcel_id = :parcel_id AND state != 'closed'",
                            "exist"), ("write", "UPDATE parcels SET code = :code WHERE parcel_id = :parcel_id", None)])
    notes = added_values.fill(conn, [TABLE], [("parcels", "state")], [tool])
    assert conn.execute("SELECT COUNT(*) FROM parcels WHERE state IS NOT NULL").fetchone()[0] == 0
    assert notes[0].reason == ("column parcels.state added for a tool: its 12 seeded rows stay NULL: the tools name "
                               "only values their guards refuse ('closed')")
