"""Scripted LLM replies for a small library scenario, shared by the stage and build tests.

They are what a well-behaved model would answer to each stage's prompt, in order: intents, schema,
seed rows per table (parents first), tool plan, then one reply per planned tool.
"""

from __future__ import annotations

from typing import Any

from pipeline import ir

SCENARIO = ir.Scenario(name="Neighbourhood library", description="A small public library lends books to members.")

INTENTS = {"intents": [
    {"goal": "Look up a member by email", "kind": "read"},
    {"goal": "List the open loans of a member", "kind": "read"},
    {"goal": "Lend a book to a member", "kind": "write"},
    {"goal": "Return a borrowed book", "kind": "write"},
]}

MEMBERS_DDL = ("CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL "
               "UNIQUE, status TEXT NOT NULL CHECK (status IN ('active', 'suspended'))) STRICT")
BOOKS_DDL = ("CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, author TEXT NOT NULL, "
             "copies_available INTEGER NOT NULL CHECK (copies_available >= 0)) STRICT")
LOANS_DDL = ("CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, member_id INTEGER NOT NULL REFERENCES "
             "members(member_id), book_id INTEGER NOT NULL REFERENCES books(book_id), loan_date TEXT NOT NULL, "
             "due_date TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'returned'))) STRICT")

SCHEMA = {"tables": [
    {"name": "members", "ddl": MEMBERS_DDL, "natural_key": ["email"]},
    {"name": "books", "ddl": BOOKS_DDL, "natural_key": ["title"]},
    {"name": "loans", "ddl": LOANS_DDL, "natural_key": ["member_id", "loan_date"]},
]}

MEMBER_ROWS = {"rows": [
    ["Alice Park", "alice@example.org", "active"],
    ["Bob Stone", "bob@example.org", "active"],
    ["Carla Diaz", "carla@example.org", "suspended"],
    ["Dan Wu", "dan@example.org", "active"],
]}
BOOK_ROWS = {"rows": [
    ["Emma", "Jane Austen", 2],
    ["Cosmos", "Carl Sagan", 0],
    ["Matilda", "Roald Dahl", 1],
    ["Persuasion", "Jane Austen", 3],
]}
LOAN_ROWS = {"rows": [
    [1, 2, "2026-01-02", "2026-01-16", "open"],
    [2, 1, "2025-12-01", "2025-12-15", "returned"],
    [3, 3, "2026-01-10", "2026-01-24", "open"],
    [1, 4, "2026-01-12", "2026-01-26", "open"],
]}

TOOL_PLAN = {"tools": [
    {"name": "find_member", "kind": "read", "purpose": "Find a member in members by email", "tables": ["members"],
     "goals": [1]},
    {"name": "list_member_loans", "kind": "read", "purpose": "List the open loans of a member from loans",
     "tables": ["loans", "books"], "goals": [2]},
    {"name": "lend_book", "kind": "write", "purpose": "Create an open loan if a copy is available",
     "tables": ["loans", "books"], "goals": [3]},
    {"name": "return_book", "kind": "write", "purpose": "Mark an open loan returned and put the copy back",
     "tables": ["loans", "books"], "goals": [4]},
]}

FIND_MEMBER = {
    "description": "Find a member by email.",
    "params": [{"name": "email", "type": "string", "description": "The member's email"}],
    "guards": [],
    "returns": {"sql": "SELECT member_id, name, email, status FROM members WHERE email = :email", "mode": "one"},
}
LIST_LOANS = {
    "description": "List the open loans of a member.",
    "params": [{"name": "member_id", "type": "integer", "description": "The member"}],
    "guards": [{"sql": "SELECT 1 FROM members WHERE member_id = :member_id", "must": "exist",
                "error": "Member {member_id} does not exist"}],
    "returns": {"sql": "SELECT l.loan_id, b.title, l.due_date FROM loans l JOIN books b ON b.book_id = l.book_id "
                       "WHERE l.member_id = :member_id AND l.status = 'open' ORDER BY l.loan_id", "mode": "all"},
}
LEND_BOOK = {
    "description": "Lend a book to an active member.",
    "params": [{"name": "member_id", "type": "integer", "description": "The member"},
               {"name": "book_id", "type": "integer", "description": "The book"}],
    "guards": [
        {"sql": "SELECT 1 FROM members WHERE member_id = :member_id AND status = 'active'", "must": "exist",
         "error": "Member {member_id} is not an active member"},
        {"sql": "SELECT 1 FROM books WHERE book_id = :book_id AND copies_available > 0", "must": "exist",
         "error": "No copy of book {book_id} is available"},
    ],
    "writes": [
        "INSERT INTO loans (member_id, book_id, loan_date, due_date, status) "
        "VALUES (:member_id, :book_id, :today, date(:today, '+14 days'), 'open')",
        "UPDATE books SET copies_available = copies_available - 1 WHERE book_id = :book_id",
    ],
    "returns": {"sql": "SELECT loan_id, member_id, book_id, due_date FROM loans WHERE loan_id = :last_id",
                "mode": "one"},
}
RETURN_BOOK = {
    "description": "Return the book of an open loan.",
    "params": [{"name": "loan_id", "type": "integer", "description": "The loan"}],
    "guards": [{"sql": "SELECT 1 FROM loans WHERE loan_id = :loan_id AND status = 'open'", "must": "exist",
                "error": "Loan {loan_id} is not open"}],
    "writes": [
        "UPDATE books SET copies_available = copies_available + 1 "
        "WHERE book_id = (SELECT book_id FROM loans WHERE loan_id = :loan_id)",
        "UPDATE loans SET status = 'returned' WHERE loan_id = :loan_id",
    ],
    "returns": None,
}


def all_replies() -> list[Any]:
    """Every reply of a clean build with ``small_settings()``, in request order."""
    return [INTENTS, SCHEMA, MEMBER_ROWS, BOOK_ROWS, LOAN_ROWS, TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK,
            RETURN_BOOK]


def small_settings(**overrides: Any):
    """Settings these replies satisfy: 3 tables and 4 tools asked for (one more than the minimum)."""
    from pipeline.build import BuildSettings

    values: dict[str, Any] = dict(intents_min=4, intents_max=6, tables_min=2, tables_max=4, rows_per_table=4,
                                  rows_per_call=4, rows_min=3, tools_min=3, tools_max=6, sample_calls=3)
    values.update(overrides)
    return BuildSettings(**values)
