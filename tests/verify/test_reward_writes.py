"""The reward's cheap path (cached table layouts, only the tables a statement may have written) gives the
same score as reading every table: a change to a table outside ``mutable_tables`` is never missed, also
when a trigger, a foreign-key action or a REPLACE makes it."""

from __future__ import annotations

import random
import sqlite3

import pytest

from pipeline.runtime import reward

SCHEMA = """
PRAGMA foreign_keys = ON;
CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, tier TEXT);
CREATE TABLE books (isbn TEXT PRIMARY KEY, title TEXT NOT NULL, copies INTEGER NOT NULL);
CREATE TABLE loans (id INTEGER PRIMARY KEY, member_id INTEGER REFERENCES members(id) ON DELETE CASCADE
                    ON UPDATE CASCADE, isbn TEXT REFERENCES books(isbn) ON DELETE SET NULL, days REAL);
CREATE TABLE fines (loan_id INTEGER REFERENCES loans(id) ON DELETE CASCADE, amount REAL);
CREATE TABLE audit (note TEXT);
CREATE TRIGGER loan_made AFTER INSERT ON loans BEGIN INSERT INTO audit VALUES ('loan ' || new.id); END;
CREATE TRIGGER member_gone AFTER DELETE ON members BEGIN UPDATE books SET copies = copies + 0; END;
"""

ROWS = """
INSERT INTO members VALUES (1, 'Ann', 'gold'), (2, 'Bo', NULL), (3, 'Cy', 'basic');
INSERT INTO books VALUES ('b1', 'Dune', 2), ('b2', 'Emma', 1);
INSERT INTO loans VALUES (1, 1, 'b1', 7.0), (2, 2, 'b2', 14.0), (3, 3, 'b1', 3.5);
INSERT INTO fines VALUES (1, 2.5), (3, 1.0);
"""

WRITES = [
    "UPDATE members SET tier = 'gold' WHERE id = 2",
    "UPDATE members SET tier = tier WHERE id = 1",  # written, unchanged
    "UPDATE members SET id = 9 WHERE id = 3",  # cascades into loans
    "DELETE FROM members WHERE id = 1",  # cascades into loans and fines; the trigger touches books
    "INSERT INTO loans (member_id, isbn, days) VALUES (2, 'b1', 1.0)",  # the trigger writes audit
    "DELETE FROM books WHERE isbn = 'b2'",  # SET NULL in loans
    "REPLACE INTO members VALUES (2, 'Bo', 'basic')",  # deletes member 2 first: cascades
    "UPDATE loans SET days = 7 WHERE id = 1",  # 7.0 -> 7 under no affinity: REAL stays 7.0
    "UPDATE fines SET amount = 2.5 WHERE loan_id = 1",
    "INSERT INTO members (name) VALUES ('Di') ON CONFLICT(name) DO NOTHING",
    "INSERT INTO members (name) VALUES ('Ann') ON CONFLICT(name) DO UPDATE SET tier = 'x'",
    "UPDATE books SET copies = copies - 1 WHERE isbn = 'b1'",
    "DELETE FROM audit",
    "INSERT INTO fines VALUES (2, 0.0)",
]


def _fresh() -> tuple[sqlite3.Connection, reward.WriteLog]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(SCHEMA + ROWS)
    return conn, reward.track_writes(conn)


def _verifier(mutable: list[str]) -> dict:
    return {"assertions": [{"sql": "SELECT COUNT(*) FROM members", "expect": 3}], "mutable_tables": mutable,
            "answer": None}


@pytest.mark.parametrize("seed", range(40))
def test_the_cheap_path_scores_what_reading_every_table_scores(seed: int) -> None:
    rng = random.Random(seed)
    conn, log = _fresh()
    initial = reward.snapshot(conn)
    layouts = reward.table_keys(conn)
    for sql in rng.sample(WRITES, rng.randint(0, 4)):
        try:
            conn.execute(sql)
        except sqlite3.IntegrityError:
            pass
    tables = sorted(layouts)
    for mutable in ([], tables, *([t] for t in tables), rng.sample(tables, 2)):
        v = _verifier(mutable)
        slow = reward.score(v, conn, initial=initial, partial=True)
        fast = reward.score(v, conn, initial=initial, partial=True, layouts=layouts, written=log.tables)
        assert fast == slow, (mutable, log.tables)


def test_triggers_and_foreign_key_actions_are_written_tables() -> None:
    conn, log = _fresh()
    conn.execute("DELETE FROM members WHERE id = 1")
    assert log.tables == {"members", "loans", "fines", "books"}
    conn, log = _fresh()
    conn.execute("INSERT INTO loans (member_id, isbn, days) VALUES (2, 'b1', 1.0)")
    assert log.tables == {"loans", "audit"}
    conn, log = _fresh()
    conn.execute("SELECT * FROM loans JOIN members ON members.id = loans.member_id").fetchall()
    assert log.tables == set()


def test_a_frozen_table_changed_through_a_cascade_scores_zero() -> None:
    conn, log = _fresh()
    initial, layouts = reward.snapshot(conn), reward.table_keys(conn)
    conn.execute("DELETE FROM members WHERE id = 1")  # fines lose a row through loans
    v = {"assertions": [{"sql": "SELECT COUNT(*) FROM members", "expect": 2}],
         "mutable_tables": ["members", "loans", "books"], "answer": None}
    s = reward.score(v, conn, initial=initial, layouts=layouts, written=log.tables)
    assert s.reward == 0.0 and not s.gates_ok and "fines" in s.failures[-1]
    assert s == reward.score(v, conn, initial=initial)


def test_an_authorizer_in_front_still_decides() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(SCHEMA + ROWS)

    def deny_audit(action, arg1, arg2, db, source):
        return sqlite3.SQLITE_DENY if arg1 == "audit" else sqlite3.SQLITE_OK

    log = reward.track_writes(conn, deny_audit)
    with pytest.raises(sqlite3.DatabaseError):
        conn.execute("DELETE FROM audit")
    conn.execute("UPDATE books SET copies = 3")
    assert log.tables == {"audit", "books"}  # a refused write is listed too: more, never fewer
