"""EnvInstance: isolation between instances, reset, state inspection, thread safety."""

from __future__ import annotations

import threading

from pipeline.envdir import create_initial_db, open_instance
from pipeline.runtime import EnvInstance
from pipeline.runtime.reward import snapshot
from pipeline.runtime.state import diff, table_infos
from tests.fixtures.library import library_env

ENV = library_env()
BORROW = {"member_id": 4, "book_id": 2, "days": 7}


def test_two_instances_never_see_each_others_writes():
    a, b = EnvInstance(ENV), EnvInstance(ENV)
    assert a.call("borrow_book", BORROW)["ok"]
    assert a.query("SELECT COUNT(*) FROM loans") == 5
    assert b.query("SELECT COUNT(*) FROM loans") == 4
    # b can make the same loan: a's write is invisible to it
    assert b.call("borrow_book", BORROW)["ok"]
    assert b.call("delete_member", {"member_id": 2})["ok"]
    assert a.query("SELECT COUNT(*) FROM members") == 4
    assert EnvInstance(ENV).query("SELECT COUNT(*) FROM loans") == 4  # the template is untouched
    a.close()
    b.close()


def test_reset_restores_the_initial_state():
    inst = EnvInstance(ENV)
    initial = snapshot(inst.conn)
    assert inst.call("borrow_book", BORROW)["ok"]
    assert inst.call("update_member_email", {"member_id": 1, "email": "new@example.org"})["ok"]
    assert snapshot(inst.conn) != initial
    inst.reset()
    assert snapshot(inst.conn) == initial
    assert inst.call("borrow_book", BORROW)["result"]["id"] == 5  # same ids after reset: deterministic replays
    assert inst.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_reset_discards_an_open_transaction():
    inst = EnvInstance(ENV)
    inst.conn.execute("BEGIN")
    inst.conn.execute("DELETE FROM loans")
    inst.reset()
    assert inst.query("SELECT COUNT(*) FROM loans") == 4
    assert not inst.conn.in_transaction


def test_initial_db_file_gives_the_same_state_as_the_ir(tmp_path):
    db = create_initial_db(ENV, tmp_path / "initial.db")
    from_file, from_ir = EnvInstance(ENV, db), EnvInstance(ENV)
    assert snapshot(from_file.conn) == snapshot(from_ir.conn)
    assert from_file.call("borrow_book", BORROW) == from_ir.call("borrow_book", BORROW)
    from_file.reset()
    assert snapshot(from_file.conn) == snapshot(EnvInstance(ENV).conn)


def test_from_dir(tmp_path):
    from pipeline.envdir import write_env_dir

    d = write_env_dir(ENV, tmp_path / "d")
    inst = open_instance(d)
    assert inst.env == ENV and snapshot(inst.conn) == snapshot(EnvInstance(ENV).conn)


def test_edited_initial_db_file_is_not_served_from_a_stale_template(tmp_path):
    import sqlite3

    db = create_initial_db(ENV, tmp_path / "initial.db")
    assert EnvInstance(ENV, db).query("SELECT COUNT(*) FROM books") == 6
    with sqlite3.connect(db) as c:
        c.execute("DELETE FROM books WHERE id = 6")
    import os

    st = os.stat(db)
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert EnvInstance(ENV, db).query("SELECT COUNT(*) FROM books") == 5


def test_query_and_state_changes():
    inst = EnvInstance(ENV)
    assert inst.query("SELECT name FROM members WHERE id = ?", (2,)) == "Bob Stone"
    assert inst.query("SELECT id, tier FROM members WHERE id <= 2 ORDER BY id") == [[1, "basic"], [2, "premium"]]
    assert inst.query("SELECT id FROM members WHERE id > 100") == []
    infos = table_infos(inst.conn)
    before = snapshot(inst.conn)
    assert set(before) == {"members", "books", "loans"} and len(before["loans"]) == 4
    assert diff(before, snapshot(inst.conn)) == []
    inst.call("return_book", {"book_id": 3})
    inst.call("add_book", {"title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965, "replacement_cost": 10})
    changes = diff(before, snapshot(inst.conn, {n: (i.columns, i.key) for n, i in infos.items()}))
    assert [(c.table, c.op, c.key) for c in changes] == [("books", "insert", (7,)), ("loans", "update", (2,))]
    assert changes[0].after == {"id": 7, "title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965,
                                "replacement_cost": 10.0}
    assert changes[1].changed_columns == ("returned_at",) and changes[1].after["returned_at"] == "2026-01-15T09:00:00"


def test_unknown_tool_and_default_arguments():
    inst = EnvInstance(ENV)
    out = inst.call("fly_to_moon", {})
    assert out["ok"] is False and out["kind"] == "not_found" and "borrow_book" in out["error"]
    assert inst.call(None, {})["kind"] == "not_found"  # type: ignore[arg-type]
    assert inst.call("get_book")["parameter"] == "book_id"
    assert inst.tool_names[0] == "find_member_by_name"


def test_instances_share_one_template_per_environment():
    a, b = EnvInstance(ENV), EnvInstance(library_env())
    assert a._template is b._template


def test_concurrent_instances_in_threads_stay_isolated():
    errors: list[str] = []

    def worker(k: int) -> None:
        try:
            inst = EnvInstance(ENV)
            for _ in range(30):
                out = inst.call("borrow_book", {"member_id": 4, "book_id": 2})
                if not out["ok"] or inst.query("SELECT COUNT(*) FROM loans") != 5:
                    errors.append(f"thread {k}: {out}")
                inst.reset()
                if inst.query("SELECT COUNT(*) FROM loans") != 4:
                    errors.append(f"thread {k}: reset failed")
            inst.close()
        except Exception as exc:  # collected and asserted below
            errors.append(f"thread {k}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_context_manager_closes():
    with EnvInstance(ENV) as inst:
        assert inst.call("get_book", {"book_id": 1})["ok"]
    import sqlite3

    try:
        inst.conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return
    raise AssertionError("connection still open after the with block")


def test_env_id_is_the_content_hash_of_the_whole_ir_for_every_copy():
    """``Environment.env_id`` is remembered per object and each seed table's JSON per ``SeedRows``; copies that
    share the seed but change anything else, or change one seed table, still get the hash of their own content."""
    from pipeline import ir
    from pipeline.hashing import content_hash

    def expected(env: ir.Environment) -> str:
        return env.env_id.rsplit("_", 1)[0] + "_" + content_hash(env, 10)

    env = library_env()
    assert env.env_id == expected(env) and env.env_id == env.env_id
    fewer_tools = env.model_copy(update={"tools": env.tools[:2]})
    rows = env.seed[0].rows[:-1]
    fewer_rows = env.model_copy(update={"seed": [env.seed[0].model_copy(update={"rows": rows}), *env.seed[1:]]})
    ids = {env.env_id, fewer_tools.env_id, fewer_rows.env_id}
    assert len(ids) == 3
    for e in (fewer_tools, fewer_rows):
        assert e.env_id == expected(e)
        assert ir.Environment.model_validate_json(e.model_dump_json()).env_id == e.env_id


def test_watch_sees_what_a_full_read_sees_across_resets():
    """``pipeline.runtime.replay.Watch`` re-reads only the tables written since it began; after each reset and call its
    changes are those of a full snapshot's diff, for a tool called again (its statements run once more) and for
    a read, a failing call and another write in between."""
    from pipeline.runtime.replay import Watch

    inst = EnvInstance(ENV)
    watch = Watch(inst)
    calls = [("borrow_book", BORROW), ("borrow_book", BORROW), ("find_member_by_name", {"name": "Carla"}),
             ("delete_member", {"member_id": 2}), ("borrow_book", {"member_id": 99, "book_id": 2, "days": 7}),
             ("borrow_book", BORROW)]
    seen = []
    for tool, args in calls:
        inst.reset()
        inst.call(tool, args)
        full = diff(watch.initial, snapshot(inst.conn))
        assert watch.changes() == full, tool
        seen.append(bool(full))
    assert seen == [True, True, False, True, False, True]
    inst.close()
