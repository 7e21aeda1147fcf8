"""Keyed snapshots, row diffs, SQL literals and verifier evaluation on real SQLite."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline.ir import Assertion, Verifier
from pipeline.runtime.replay import fresh
from pipeline.runtime.state import diff, equals, lit, query_value, snapshot, table_infos
from tests.fixtures.library import library_env
from verify.evaluate import answer_matches, evaluate


@pytest.fixture
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL) STRICT")
    c.execute("CREATE TABLE pair (a TEXT, b INTEGER, note TEXT, PRIMARY KEY (a, b)) WITHOUT ROWID")
    c.execute("CREATE TABLE bag (x TEXT)")
    c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(1, "a", 1.5), (2, "b's", None)])
    c.executemany("INSERT INTO pair VALUES (?, ?, ?)", [("k", 1, "one"), ("k", 2, "two")])
    c.executemany("INSERT INTO bag VALUES (?)", [("p",), ("p",)])
    return c


def test_table_keys(conn) -> None:
    infos = table_infos(conn)
    assert infos["t"].key == ("id",) and infos["t"].int_pk
    assert infos["pair"].key == ("a", "b") and not infos["pair"].int_pk
    assert infos["bag"].key == ("rowid",)


def test_diff_by_key(conn) -> None:
    infos = table_infos(conn)
    before = snapshot(conn, infos)
    conn.execute("UPDATE t SET score = 2.0 WHERE id = 1")
    conn.execute("DELETE FROM pair WHERE b = 2")
    conn.execute("INSERT INTO bag VALUES ('q')")
    changes = diff(before, snapshot(conn, infos))
    assert [(c.table, c.op, c.key) for c in changes] == [("bag", "insert", (3,)), ("pair", "delete", ("k", 2)),
                                                          ("t", "update", (1,))]
    assert changes[2].changed_columns == ("score",)
    assert changes[2].to_json()["set"] == {"score": 2.0}


def test_literals_round_trip(conn) -> None:
    for value in [None, 0, -7, 1.5, "b's", "", b"\x00\xff"]:
        assert conn.execute(f"SELECT {lit(value)}").fetchone()[0] == value
    quoted = "b's"
    assert query_value(conn, f"SELECT COUNT(*) FROM t WHERE {equals('name', quoted)}") == 1
    assert query_value(conn, f"SELECT COUNT(*) FROM t WHERE {equals('score', None)}") == 1
    assert query_value(conn, f"SELECT COUNT(*) FROM t WHERE {equals('score', 1.5)}") == 1
    assert query_value(conn, "SELECT id, name FROM t ORDER BY id") == [[1, "a"], [2, "b's"]]


def test_evaluate_assertions_frame_and_answer() -> None:
    env = library_env()
    v = Verifier(assertions=[Assertion(sql="SELECT COUNT(*) FROM members", expect=4, description="four members")],
                 mutable_tables=["loans"], answer="Dan Wu")
    with fresh(env) as run:
        ev = evaluate(v, run.inst.conn, initial=run.initial, answer="It is Dan Wu.", infos=run.infos)
        assert ev.passed and ev.reward == 1.0
        assert not evaluate(v, run.inst.conn, initial=run.initial, answer="Alice").passed
        run.inst.call("update_member_email", {"member_id": 4, "email": "d@x.org"})
        ev = evaluate(v, run.inst.conn, initial=run.initial, answer="Dan Wu")
        assert not ev.passed and "members" in ev.failures[0] and ev.partial == 0.0  # a gate: no credit at all
        assert evaluate(v, run.inst.conn, answer="Dan Wu").passed  # without the initial state: assertions only
        bad = Verifier(assertions=[Assertion(sql="SELECT nope FROM members", expect=1)])
        ev = evaluate(bad, run.inst.conn)
        assert not ev.passed and "errored" in ev.failures[0]


@pytest.mark.parametrize("expected,given,ok", [
    ("Emma; Persuasion", "The books are 'Emma' and Persuasion.", True),
    ("Emma; Persuasion", "Emma", False),
    ("12.5", "It costs $12.50", True),
    ("12.5", "It costs 125", False),
    ("12", "10 or maybe 12", False),
    ("3", "three", False),
    ("yes", "Yes, it is on loan.", True),
    ("yes", "No.", False),
    ("no", "No, it is available", True),
    ("yes", "yes and no", False),
    ("2026-01-22", "Due on 2026-01-22.", True),
    ("alice@example.org", "ALICE@example.org", True),
    ("x", None, False),
    ("x", "   ", False),
])
def test_answer_matching(expected, given, ok) -> None:
    assert answer_matches(expected, given) is ok
