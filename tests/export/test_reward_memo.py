"""The exported task runtime reuses a verifier's checks (``reward.db_checks``) for an episode that made the same
write calls from the same state as an earlier one of the same task (``taskrt.Bundle.score(..., session=)``), and
takes an assertion's outcome on the initial state when its query reads only tables no statement wrote
(``Bundle.initial_checks``): the score is always the one the whole database gives (``reward.score`` reading every
table), any write makes another key or runs the query again, and nothing is reused where the database might not
be a function of the writes (SQLite rolled the episode back, SQL that is not deterministic, arguments that are
not plain JSON)."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from pipeline.export import export_catalog
from tests.export.conftest import build_catalog

CALLS = [  # the library's writes (some refused by its rules), and reads, which change nothing
    ("borrow_book", {"member_id": 4, "book_id": 2, "days": 7}),
    ("borrow_book", {"member_id": 4, "book_id": 2, "days": 14}),
    ("borrow_book", {"member_id": 2, "book_id": 5}),
    ("borrow_book", {"member_id": 4, "book_id": 3}),  # already on loan: refused
    ("return_book", {"book_id": 3}),
    ("return_book", {"book_id": 2}),
    ("update_member_email", {"member_id": 1, "email": "alice.park@example.org"}),
    ("update_member_email", {"member_id": 1, "email": "alice@example.org"}),
    ("add_book", {"title": "Emma", "author": "Jane Austen", "genre": "fiction", "year": 1815, "replacement_cost": 9.5}),
    ("add_book", {"title": "Emma", "author": "Jane Austen", "genre": "fiction", "year": 1815, "replacement_cost": 9}),
    ("delete_member", {"member_id": 5}),
    ("find_member_by_name", {"name": "Dan"}),
    ("search_books", {"query": "History"}),
]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """The OpenEnv export's vendored ``taskrt`` (stdlib only) and a bundle of the library's three tasks."""
    tmp = tmp_path_factory.mktemp("memo")
    build_catalog(tmp / "catalog")
    (root,) = export_catalog(tmp / "catalog", "openenv", tmp / "export").paths
    name = f"memo_server_{id(tmp)}"
    spec = importlib.util.spec_from_file_location(name, root / "server" / "__init__.py",
                                                  submodule_search_locations=[str(root / "server")])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    taskrt = importlib.import_module(f"{name}.taskrt")
    return taskrt, Path(root) / "data"


def _answers(task):
    return [None, "2", "Done.", "I could not do it."] if task["verifier"].get("answer") else [None]


def test_reused_checks_score_what_the_database_scores(runtime):
    """Random episodes (writes, refused writes, reads) on sessions reused across episodes: each score, with the
    memo and without, equals ``reward.score`` reading every table of the database, and the memo was hit."""
    taskrt, data = runtime
    b = taskrt.Bundle(data)
    tasks = [b.task(t) for t in b.tasks]
    rng = random.Random(7)
    sessions = [taskrt.Session(b) for _ in range(3)]
    computed = []
    real = taskrt.reward.db_checks

    def counting(*args, **kwargs):
        computed.append(1)
        return real(*args, **kwargs)

    taskrt.reward.db_checks = counting
    try:
        scored = 0
        for episode in range(120):
            s = sessions[episode % len(sessions)]
            s.reset()
            for name, args in rng.sample(CALLS, rng.randint(0, 3)):
                s.call(name, dict(args))
            for task in tasks:
                for answer in _answers(task):
                    for partial in (False, True):
                        whole = taskrt.reward.score(task["verifier"], s.conn, answer=answer, partial=partial,
                                                    initial=b.initial_snapshot())
                        fresh = b.score(task, s.conn, answer=answer, partial=partial)  # no session: computed
                        memo = b.score(task, s.conn, answer=answer, partial=partial, session=s)
                        assert memo == fresh == whole, (task["task_id"], s.memo_key(), answer)
                        scored += 1
    finally:
        taskrt.reward.db_checks = real
    assert len(computed) < 3 * scored - scored // 2  # the memo answered many of them
    assert len(b._memo) < 120 * len(tasks)


def test_a_write_makes_another_key(runtime):
    taskrt, data = runtime
    b = taskrt.Bundle(data)
    task = next(t for t in b.tasks.values() if any(c["tool"] == "borrow_book" for c in t["reference_solution"]))
    s = taskrt.Session(b)

    def play(calls):
        s.reset()
        for c in calls:
            s.call(c["tool"], dict(c["arguments"]))
        return b.score(task, s.conn, session=s).reward

    ref = task["reference_solution"]
    assert play([]) == 0.0 and play(ref) == 1.0
    assert play(ref) == 1.0 and len(b._memo) == 2  # the same writes: the same key
    # The reference, then one more write (to a table the task must not change): the score follows it.
    extra = {"tool": "update_member_email", "arguments": {"member_id": 1, "email": "alice.new@example.org"}}
    assert play([*ref, extra]) == 0.0 and len(b._memo) == 3
    # The same writes in another order or with another argument type are other keys.
    assert taskrt.write_key("t", {"a": 1}) != taskrt.write_key("t", {"a": 1.0}) != taskrt.write_key("t", {"a": True})
    assert play([]) == 0.0 and play(ref) == 1.0 and len(b._memo) == 3
    # A refused write changes nothing and is not part of the key.
    refused = {"tool": "borrow_book", "arguments": {"member_id": 4, "book_id": 3}}
    assert play([refused, *ref]) == 1.0 and len(b._memo) == 3
    s.close()


def test_nothing_reused_where_the_database_may_not_follow_from_the_writes(runtime):
    taskrt, data = runtime
    b = taskrt.Bundle(data)
    task = next(iter(b.tasks.values()))
    s = taskrt.Session(b)
    s.call("update_member_email", {"member_id": 1, "email": "a@example.org"})
    assert s.memo_key() is not None
    # SQLite rolled the episode back (as after a call stopped by its time limit): the writes are replayed,
    # and the episode's checks are not reused.
    s.conn.execute("ROLLBACK")
    s.call("find_member_by_name", {"name": "Dan"})
    assert s.memo_key() is None
    b.score(task, s.conn, session=s)
    assert not b._memo
    s.reset()
    assert s.memo_key() == (None, ())
    # Arguments that are not plain JSON values.
    assert taskrt.write_key("t", {"a": (1, 2)}) is None and taskrt.write_key("t", {"a": [1, {"b": None}]})
    # A write tool whose SQL is not deterministic: no bundle-wide reuse.
    other = taskrt.Bundle(data)
    tool = other.tools["add_book"]
    other.tools["add_book"] = {**tool, "steps": [{**tool["steps"][0], "sql": tool["steps"][0]["sql"].replace(
        ":replacement_cost", "abs(random()) % 10")}]}
    assert not other.deterministic()
    s2 = taskrt.Session(other)
    other.score(task, s2.conn, session=s2)
    assert not other._memo
    # A verifier whose SQL reads the wall clock.
    clock = {**task, "verifier": {**task["verifier"], "assertions": [
        {"sql": "SELECT date('now') >= '2026-01-01'", "expect": 1}, *task["verifier"]["assertions"]]}}
    b.score(clock, s.conn, session=s)
    assert not b._memo
    b.score(task, s.conn, session=s)
    assert len(b._memo) == 1
    s.close()
    s2.close()


def test_an_assertion_on_unwritten_tables_is_answered_from_the_initial_state(runtime):
    """An assertion whose query reads only tables no statement wrote takes its outcome on the initial state; a
    write to one of its tables (even one that changes nothing) makes it run again, on the rollout's database."""
    taskrt, data = runtime
    b = taskrt.Bundle(data)
    task = next(t for t in b.tasks.values() if any(c["tool"] == "borrow_book" for c in t["reference_solution"]))
    known = b.initial_checks(task["verifier"])
    assert set(known) == {1, 2, 3} and all(reads == {"loans"} for reads, _, _ in known.values())
    assert known[3][1:] == (False, "expected 5, got 4")  # SELECT COUNT(*) FROM loans, on the initial state
    ran = []
    real = taskrt.reward.query_value

    def counting(conn, sql):
        ran.append(sql)
        return real(conn, sql)

    taskrt.reward.query_value = counting
    try:
        s = taskrt.Session(b)
        s.call("update_member_email", {"member_id": 2, "email": "bo@example.net"})  # members only
        assert b.score(task, s.conn).failures[0].startswith("goal 1") and not ran
        assert s.call("borrow_book", {"member_id": 4, "book_id": 2, "days": 14})["ok"]  # loans: 14 days, not 7
        score = b.score(task, s.conn)
        assert len(ran) == 3 and score.goals == (True, False, True), score
        s.reset()
        ran.clear()
        for c in task["reference_solution"]:
            s.call(c["tool"], dict(c["arguments"]))
        assert b.score(task, s.conn).reward == 1.0 and len(ran) == 3
        s.close()
    finally:
        taskrt.reward.query_value = real
    # A query through a view, or of SQLite's own tables, is always run.
    view = {"assertions": [{"sql": "SELECT COUNT(*) FROM sqlite_master", "expect": 3}], "mutable_tables": []}
    assert b.initial_checks(view) == {}
