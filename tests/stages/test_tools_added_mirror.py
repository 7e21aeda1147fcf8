"""A column the tools stage adds for a tool, whose values repeat a child table's CHECK-listed state, is filled from
each row's latest child, not dealt at random (issue 40: the library's books.status, added for change_book_status and
described as 'pending' or 'returned', the values of loans.status, was dealt 6 and 6 over 12 books, and a reader
rejected 9: 'returned' books out on a loan, 'pending' books never lent). A row with no child takes the column's
DEFAULT, else stays NULL. Real SQLite; the end-to-end case runs the stage with a scripted fake LLM."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from pipeline import ir
from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.stages.rows.populate import generate_seed
from pipeline.stages.tools import added_values
from pipeline.stages.tools.toolset import generate_tools
from tests.stages.library_replies import small_settings

BOOKS_DDL = "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, status TEXT{}) STRICT"
LOANS_DDL = ("CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id), "
             "loaned_on TEXT NOT NULL, status TEXT CHECK (status IN ('pending', 'returned'))) STRICT")
# loans by (book, day, state), keys not in date order: book 1's latest loan is its first row, book 2's its second
LOANS = [(1, "2026-01-20", "pending"), (1, "2026-01-02", "returned"), (2, "2025-12-01", "pending"),
         (2, "2026-01-10", "returned"), (3, "2026-01-05", "returned"), (3, "2026-01-06", None)]


def change_status(doc: str = "The new status ('pending' or 'returned')", enum: list[str | int] | None = None) -> ir.Tool:
    return ir.Tool(name="change_book_status", description="Change the status of a book.", kind="write", params=[
        ir.Param(name="book_id", type="integer", description="The book (books.book_id)"),
        ir.Param(name="new_status", type="string", description=doc, enum=enum)],
        steps=[ir.Step(kind="write", sql="UPDATE books SET status = :new_status WHERE book_id = :book_id")])


def library(default: str = "") -> tuple[sqlite3.Connection, list[ir.Table]]:
    tables = [ir.Table(name="books", ddl=BOOKS_DDL.format(default)), ir.Table(name="loans", ddl=LOANS_DDL)]
    c = sqlite3.connect(":memory:")
    for t in tables:
        c.execute(t.ddl)
    c.executemany("INSERT INTO books (title) VALUES (?)", [(f"Book {i}",) for i in range(1, 6)])
    c.executemany("INSERT INTO loans (book_id, loaned_on, status) VALUES (?, ?, ?)", LOANS)
    c.execute("UPDATE books SET status = NULL")
    return c, tables


@pytest.fixture
def conn() -> Iterator[tuple[sqlite3.Connection, list[ir.Table]]]:
    c, tables = library()
    yield c, tables
    c.close()


def statuses(c: sqlite3.Connection) -> list[object]:
    return [r[0] for r in c.execute("SELECT status FROM books ORDER BY book_id")]


def test_each_row_takes_the_state_of_its_latest_child(conn) -> None:
    c, tables = conn
    notes = added_values.fill(c, tables, [("books", "status")], [change_status()])
    # by the loan's day, not its key; a loan without a state is passed over; books 4-5 were never lent
    assert statuses(c) == ["pending", "returned", "returned", None, None]
    assert notes[0].reason == (
        "column books.status added for a tool: its 5 seeded rows filled from their loans rows, as the values the "
        "tools name are loans.status's: each row takes the status of its latest loans row (by loaned_on): "
        "'pending' in 1, 'returned' in 2; 2 rows with no loans row stay NULL (the tools give no value for one)")
    assert notes[0].evidence["mirror"] == "loans.status" and notes[0].evidence["without_child"] == 2


def test_a_row_with_no_child_takes_the_default() -> None:
    c, tables = library(" DEFAULT 'shelved'")
    try:
        tool = change_status("The new status", enum=["returned", "pending"])  # a DEFAULT: the enum names the values
        notes = added_values.fill(c, tables, [("books", "status")], [tool])
        assert statuses(c) == ["pending", "returned", "returned", "shelved", "shelved"]
        assert notes[0].reason.endswith("; 2 rows with no loans row take the DEFAULT 'shelved'")
    finally:
        c.close()


def test_without_a_date_the_latest_child_is_the_last_key() -> None:
    c, tables = library()
    try:
        c.execute("UPDATE loans SET loaned_on = 'day ' || loan_id")  # no ISO date: the key tells the latest
        added_values.fill(c, tables, [("books", "status")], [change_status()])
        assert statuses(c) == ["returned", "returned", "returned", None, None]
    finally:
        c.close()


def test_only_values_all_in_the_childs_list_and_at_least_two_are_mirrored() -> None:
    got = {}
    for doc in ["The new status ('returned' or 'pending')", "The new status ('pending' or 'lost')",
                "The new status ('returned')"]:
        c, tables = library()
        try:
            note = added_values.fill(c, tables, [("books", "status")], [change_status(doc)])[0]
            got[doc] = (statuses(c), note.evidence.get("mirror"))
        finally:
            c.close()
    assert list(got.values())[0] == (["pending", "returned", "returned", None, None], "loans.status")
    for rows, mirrored in list(got.values())[1:]:  # a value loans.status does not list, or one value: dealt
        assert mirrored is None and None not in rows


# ------------------------------------------------------------------ through the stage, with the library's tool

SCENARIO = ir.Scenario(name="Village library", description="A village library lends its books to members.")
STAGE_TABLES = (ir.Table(name="books", ddl="CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL "
                                           "UNIQUE, author TEXT NOT NULL) STRICT", natural_key=["title"]),
                ir.Table(name="loans", ddl=LOANS_DDL.replace("loaned_on TEXT NOT NULL, ", "loaned_on TEXT NOT NULL, "
                                                             "member TEXT NOT NULL, ")))
TITLES = ["Middlemarch", "Persuasion", "Emma", "Dracula", "Ulysses", "Beloved"]
BOOK_ROWS = {"rows": [[t, "Some Author"] for t in TITLES]}
LOAN_ROWS = {"rows": [[b, day, m, s] for b, day, m, s in [
    (1, "2026-01-20", "Ada Byrne", "pending"), (1, "2026-01-02", "Ola Nowak", "returned"),
    (2, "2025-12-01", "Ida Lund", "pending"), (2, "2026-01-10", "Tom Reyes", "returned"),
    (3, "2026-01-05", "Eva Kim", "returned"), (4, "2026-01-07", "Sam Ode", "pending")]]}
FIND_BOOK = {
    "description": "Find a book by its title.",
    "params": [{"name": "title", "type": "string", "description": "The title"}],
    "guards": [],
    "returns": {"sql": "SELECT book_id, title, author FROM books WHERE title = :title", "mode": "one"},
}
BOOK_LOANS = {
    "description": "List the loans of a book.",
    "params": [{"name": "book_id", "type": "integer", "description": "The book (books.book_id)"}],
    "guards": [],
    "returns": {"sql": "SELECT loan_id, loaned_on, status FROM loans WHERE book_id = :book_id", "mode": "all"},
}
CHANGE_STATUS = {  # as the library's model wrote it: books has no status column, it is added
    "description": "Change the status of a book and return the updated book's id.",
    "params": [{"name": "book_id", "type": "integer", "description": "The ID of the book (books.book_id)"},
               {"name": "new_status", "type": "string", "description": "The new status ('pending' or 'returned')"}],
    "guards": [],
    "writes": ["UPDATE books SET status = :new_status WHERE book_id = :book_id"],
    "returns": {"sql": "SELECT book_id FROM books WHERE book_id = :book_id", "mode": "one"},
}


def test_the_stage_fills_the_library_status_from_the_loans_and_the_tool_still_works() -> None:
    seeded = generate_seed(SCENARIO, STAGE_TABLES, fake_client([BOOK_ROWS, LOAN_ROWS]),
                           small_settings(row_generators=False, rows_per_table=6, rows_per_call=6))
    assert seeded.ok and seeded.value is not None, [r.reason for r in seeded.rejections]
    plan = {"tools": [{"name": "find_book", "kind": "read", "purpose": "find a book", "tables": ["books"],
                       "goals": [1]},
                      {"name": "book_loans", "kind": "read", "purpose": "list a book's loans", "tables": ["loans"],
                       "goals": [1]},
                      {"name": "change_book_status", "kind": "write", "purpose": "change the status of a book",
                       "tables": ["books"], "goals": [2]}]}
    client = fake_client([plan, FIND_BOOK, BOOK_LOANS, CHANGE_STATUS])
    res = generate_tools(SCENARIO, (Intent(goal="Find a book", kind="read"), Intent(goal="Change a book's status",
                                                                                     kind="write")),
                         STAGE_TABLES, seeded.value, client,
                         small_settings(tools_min=2, gap_tools_max=0, fix_param_names=False, paged_listers=False,
                                        covering_writes=False))
    assert res.ok and res.value is not None, [r.reason for r in res.rejections]
    env = res.value
    assert [t.name for t in env.tools] == ["find_book", "book_loans", "change_book_status"]
    assert len(client.requests) == 4  # each tool worked at once
    books = next(s for s in env.seed if s.table == "books").rows
    assert [b["status"] for b in books] == ["pending", "returned", "returned", "pending", None, None]
    note = next(r for r in res.rejections if r.item == "books.status")
    assert note.evidence["mirror"] == "loans.status"
    with EnvInstance(env) as inst:  # the tool works on a mirrored row and on a never-lent one
        assert inst.call("change_book_status", {"book_id": 1, "new_status": "returned"})["ok"]
        assert inst.call("change_book_status", {"book_id": 6, "new_status": "pending"})["ok"]
        assert inst.conn.execute("SELECT status FROM books WHERE book_id = 6").fetchone()[0] == "pending"
