"""Parity: the same calls through EnvInstance and through server.py over HTTP give the same results
and the same final database (one implementation of tool semantics, two transports)."""

from __future__ import annotations

import shutil
import sqlite3

from pipeline.envdir import write_env_dir
from pipeline.runtime import EnvInstance, reward
from tests.fixtures.library import library_env, library_tasks
from tests.fixtures.server import http, running_server

ENV = library_env()

CALLS = [
    ("find_member_by_name", {"name": "a"}),
    ("search_books", {"query": "", "available_only": True, "limit": 3}),
    ("search_books", {"query": "Austen", "genre": "poetry"}),
    ("get_book", {"book_id": 3}),
    ("get_book", {"book_id": 99}),
    ("borrow_book", {"member_id": 1, "book_id": 3}),
    ("borrow_book", {"member_id": 3, "book_id": 2}),
    ("borrow_book", {"member_id": 4, "book_id": 2, "days": 3}),
    ("borrow_book", {"member_id": 4, "book_id": 6, "days": 40}),
    ("borrow_book", {"member_id": "4", "book_id": 6}),
    ("return_book", {"book_id": 3}),
    ("return_book", {"book_id": 3}),
    ("borrow_book", {"member_id": 2, "book_id": 3}),
    ("update_member_email", {"member_id": 1, "email": "bob@example.org"}),
    ("update_member_email", {"member_id": 1, "email": "alice.p@example.org"}),
    ("add_book", {"title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965, "replacement_cost": 10.5}),
    ("add_book", {"title": "Old", "author": "Anon", "genre": "history", "year": 1200, "replacement_cost": 1}),
    ("delete_member", {"member_id": 3}),
    ("delete_member", {"member_id": 2}),
    ("list_loans_for_member", {"member_id": 2}),
    ("list_loans_for_member", {"member_id": 4, "status": "open"}),
    ("no_such_tool", {}),
    ("get_book", {"book_id": 7, "extra": True}),
]


def dump(conn: sqlite3.Connection) -> list[str]:
    return list(conn.iterdump())


def test_instance_and_http_agree_call_by_call_and_on_final_state(tmp_path):
    env_dir = write_env_dir(ENV, tmp_path / "library", library_tasks(ENV))
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    inst = EnvInstance(ENV, env_dir / "initial.db")
    outcomes = set()
    with running_server(env_dir, db) as base:
        for name, args in CALLS:
            expected = inst.call(name, args)
            outcomes.add("ok" if expected["ok"] else expected["kind"])
            status, body = http("POST", f"{base}/tools/{name}", args)
            assert body == expected, (name, args)
            assert (status == 200) == expected["ok"]
    assert outcomes == {"ok", "validation", "guard", "not_found", "sql"}  # every kind of outcome was compared
    with sqlite3.connect(db) as served:
        assert dump(served) == dump(inst.conn)
    final = EnvInstance(ENV, db)
    assert reward.snapshot(final.conn) == reward.snapshot(inst.conn)
    assert final.query("SELECT COUNT(*) FROM books") == 7 and final.query("SELECT COUNT(*) FROM loans") == 6
