"""The one reward (pipeline/runtime/reward.py): goals earn, gates only take away, typed answers extracted strictly.
The answer cases are the ways a guessing agent games a loose check (ANCHORS: reward hacking)."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline.runtime import reward


@pytest.fixture
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.execute("CREATE TABLE kegs (id INTEGER PRIMARY KEY, batch TEXT NOT NULL, litres REAL NOT NULL, state TEXT NOT NULL)")
    c.execute("CREATE TABLE log (id INTEGER PRIMARY KEY, note TEXT)")
    c.executemany("INSERT INTO kegs VALUES (?, ?, ?, ?)",
                  [(1, "Dry Stout", 30.0, "full"), (2, "Red Ale", 50.0, "full"), (3, "Pale Ale", 20.0, "empty")])
    return c


def _verifier() -> dict:
    return {"assertions": [
        {"sql": "SELECT state FROM kegs WHERE id = 1", "expect": "empty"},
        {"sql": "SELECT COUNT(*) FROM kegs WHERE state = 'empty' AND id = 3", "expect": 1},
        {"sql": "SELECT COUNT(*) FROM kegs", "expect": 3, "name": "gate"}],
        "mutable_tables": ["kegs"], "answer": None}


def test_doing_nothing_scores_zero_even_with_partial_credit(conn) -> None:
    initial = reward.snapshot(conn)
    s = reward.score(_verifier(), conn, initial=initial, partial=True)
    assert s.gates_ok and not s.passed and s.reward == 0.5  # one goal already held: the planner makes such a gate
    v = _verifier()
    v["assertions"][1]["name"] = "gate"
    assert reward.score(v, conn, initial=initial, partial=True).reward == 0.0


def test_goals_earn_gates_take_away(conn) -> None:
    initial = reward.snapshot(conn)
    conn.execute("UPDATE kegs SET state = 'empty' WHERE id = 1")
    s = reward.score(_verifier(), conn, initial=initial)
    assert s.passed and s.reward == 1.0 and s.goals == (True, True)
    conn.execute("INSERT INTO log (note) VALUES ('collateral')")  # a table outside mutable_tables
    s = reward.score(_verifier(), conn, initial=initial, partial=True)
    assert not s.passed and s.reward == 0.0 and not s.gates_ok and "log" in s.failures[-1]


def test_a_gate_violation_scores_zero_whatever_the_goals(conn) -> None:
    initial = reward.snapshot(conn)
    conn.execute("UPDATE kegs SET state = 'empty' WHERE id = 1")
    conn.execute("INSERT INTO kegs VALUES (4, 'Extra', 1.0, 'full')")
    assert reward.score(_verifier(), conn, initial=initial, partial=True).reward == 0.0


def test_type_sensitive_frame(conn) -> None:
    initial = reward.snapshot(conn)
    conn.execute("CREATE TABLE t2 (x)")  # not in the initial snapshot: ignored
    conn.execute("UPDATE kegs SET litres = 30 WHERE id = 1")  # 30.0 -> 30 (REAL affinity keeps 30.0)
    assert reward.changed_tables(initial, reward.snapshot(conn), ["kegs"]) == []


@pytest.mark.parametrize("expected,given,ok", [
    ({"type": "number", "value": 12}, "There are 12 kegs.", True),
    ({"type": "number", "value": 12}, "10 or maybe 12", False),
    ({"type": "number", "value": 12}, '[{"id": 1, "litres": 30.0}, {"id": 12}]', False),
    ({"type": "number", "value": 3, "stated": ["2025"]}, "In 2025 batch B-102 filled 3 kegs", True),
    ({"type": "number", "value": 3.3333333}, "about 3.33", True),
    ({"type": "number", "value": 3.3333333}, "3", False),
    ({"type": "number", "value": 1234.5}, "$1,234.50", True),
    ({"type": "text", "value": "fiction", "others": ["non-fiction"]}, "It is non-fiction", False),
    ({"type": "text", "value": "fiction", "others": ["non-fiction"]}, "It is fiction.", True),
    ({"type": "text", "value": "Fiction", "others": ["Science Fiction"]}, "Science Fiction", False),
    ({"type": "text", "value": "Dry Stout", "others": ["Red Ale", "Pale Ale"], "stated": ["Red Ale"]},
     "The **Dry Stout** holds more than the Red Ale", True),
    ({"type": "text", "value": "Dry Stout", "others": ["Red Ale", "Pale Ale"]}, "Dry Stout, Red Ale, Pale Ale", False),
    ({"type": "enum", "value": "empty", "others": ["full"]}, "Full or empty", False),
    ({"type": "date", "value": "2026-01-05"}, "It was brewed on January 5, 2026.", True),
    ({"type": "date", "value": "2026-01-05"}, "05.01.2026", True),
    ({"type": "date", "value": "2026-01-05"}, "2026-01-05 or 2026-01-06", False),
    ({"type": "list", "value": ["Emma", "Dune"], "others": ["Ulysses"]}, "Emma and Dune", True),
    ({"type": "list", "value": ["Emma", "Dune"], "others": ["Ulysses"]}, "Emma, Dune, Ulysses", False),
    ({"type": "boolean", "value": True}, "Yes, it is.", True),
    ({"type": "boolean", "value": True}, "yes and no", False),
    ({"type": "text", "value": "Müller"}, "MÜLLER", True),
    ({"type": "text", "value": "Jane Austen"}, '{"title": "Emma", "author": "Jane Austen", "year": 1815}', False),
    ({"type": "text", "value": "Jane Austen"}, 'Emma (1815) is by Jane Austen: "a classic".', True),
    ({"type": "text", "value": "x"}, None, False),
])
def test_typed_answers(expected, given, ok) -> None:
    assert reward.check_answer(expected, given)[0] is ok


def test_the_module_is_stdlib_only() -> None:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(reward.__file__).read_text())
    mods = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
        {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert mods <= {"__future__", "math", "re", "sqlite3", "unicodedata", "dataclasses", "datetime", "typing"}
