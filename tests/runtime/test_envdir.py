"""Environment directories: building initial.db (with clear seed errors), writing and loading."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from pipeline.envdir import FILES, EnvDirError, SeedError, create_initial_db, load_env_dir, write_env_dir
from pipeline.ir import Environment, SeedRows, Table
from tests.fixtures.library import library_env, library_tasks

ENV = library_env()


def with_seed(table: str, rows: list[dict], env: Environment = ENV) -> Environment:
    seed = [s for s in env.seed if s.table != table]
    order = [t.name for t in env.tables]
    seed.append(SeedRows(table=table, rows=rows))
    seed.sort(key=lambda s: order.index(s.table) if s.table in order else len(order))
    return env.model_copy(update={"seed": seed})


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_write_and_load_round_trip(tmp_path):
    tasks = library_tasks(ENV)
    out = write_env_dir(ENV, tmp_path / "lib", tasks, {"verified": True})
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    env, loaded, report = load_env_dir(out)
    assert env == ENV and env.env_id == ENV.env_id
    assert loaded == tasks
    assert report == {"verified": True}
    text = (out / "env.json").read_text()
    assert text.endswith("}\n") and json.loads(text) == ENV.model_dump(mode="json")
    assert list(json.loads(text)) == sorted(json.loads(text))  # canonical: sorted keys


def test_initial_db_is_deterministic_and_holds_the_seed(tmp_path):
    a = create_initial_db(ENV, tmp_path / "a.db")
    b = create_initial_db(ENV, tmp_path / "sub" / "b.db")
    assert digest(a) == digest(b)
    write_env_dir(ENV, tmp_path / "d1")
    write_env_dir(ENV, tmp_path / "d2")
    for name in FILES:
        assert (tmp_path / "d1" / name).read_bytes() == (tmp_path / "d2" / name).read_bytes(), name
    c = sqlite3.connect(a)
    assert c.execute("SELECT COUNT(*) FROM members").fetchone()[0] == 4
    assert c.execute("SELECT returned_at FROM loans WHERE id = 4").fetchone()[0] is None
    assert "STRICT" in c.execute("SELECT sql FROM sqlite_master WHERE name = 'loans'").fetchone()[0]
    other = ENV.model_copy(update={"clock": "2027-01-01T00:00:00"})
    assert digest(create_initial_db(other, tmp_path / "c.db")) == digest(a)  # clock is not part of the data


def test_missing_keys_keep_column_defaults(tmp_path):
    env = Environment(
        scenario=ENV.scenario,
        tables=[Table(name="t", ddl="CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT NOT NULL DEFAULT 'new') STRICT")],
        seed=[SeedRows(table="t", rows=[{"id": 1, "status": "done"}, {"id": 2}, {"id": 3, "status": "x"}])],
        tools=[],
    )
    c = sqlite3.connect(create_initial_db(env, tmp_path / "t.db"))
    assert c.execute("SELECT status FROM t ORDER BY id").fetchall() == [("done",), ("new",), ("x",)]


def test_foreign_key_violation_names_table_and_row(tmp_path):
    rows = [*library_env().seed[2].rows, {"id": 9, "member_id": 42, "book_id": 1, "borrowed_at": "x", "due_date": "y"}]
    with pytest.raises(SeedError) as err:
        create_initial_db(with_seed("loans", rows), tmp_path / "x.db")
    msg = str(err.value)
    assert "foreign key check failed" in msg and "table 'loans' row 4" in msg and "member_id -> members.id" in msg
    assert (err.value.table, err.value.index) == ("loans", 4)
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"id": 5, "name": "E", "email": "e@x", "tier": "gold", "joined_on": "2025-01-01"}, "CHECK constraint failed"),
        ({"id": 5, "name": "E", "email": "bob@example.org", "tier": "basic", "joined_on": "2025-01-01"}, "UNIQUE constraint failed: members.email"),
        ({"id": 5, "name": None, "email": "e@x", "tier": "basic", "joined_on": "2025-01-01"}, "NOT NULL constraint failed: members.name"),
        ({"id": "five", "name": "E", "email": "e@x", "tier": "basic", "joined_on": "2025-01-01"}, "datatype mismatch (a value does not match its column type)"),
        ({"id": 5, "name": "E", "email": "e@x", "tier": "basic", "joined_on": "2025-01-01", "age": 3}, "unknown columns ['age']"),
    ],
)
def test_bad_seed_row_is_named(tmp_path, row, fragment):
    rows = [*ENV.seed[0].rows, row]
    with pytest.raises(SeedError) as err:
        create_initial_db(with_seed("members", rows), tmp_path / "x.db")
    assert f"table 'members' row {len(rows) - 1}" in str(err.value) and fragment in str(err.value), str(err.value)
    assert err.value.index == len(rows) - 1 and err.value.row == row


def test_bad_ddl_and_unknown_seed_table(tmp_path):
    bad = ENV.model_copy(update={"tables": [*ENV.tables, Table(name="oops", ddl="CREATE TABLE oops (id INTEGER PRIMARY KEY,) STRICT")]})
    with pytest.raises(EnvDirError, match="table 'oops': DDL rejected by SQLite"):
        create_initial_db(bad, tmp_path / "x.db")
    renamed = ENV.model_copy(update={"tables": [*ENV.tables, Table(name="fines", ddl="CREATE TABLE penalties (id INTEGER) STRICT")]})
    with pytest.raises(EnvDirError, match=r"\['fines'\] are declared"):
        create_initial_db(renamed, tmp_path / "x.db")
    with pytest.raises(SeedError, match="unknown table 'ghosts'"):
        create_initial_db(with_seed("ghosts", [{"id": 1}]), tmp_path / "x.db")


def test_task_for_another_env_is_refused(tmp_path):
    other = ENV.model_copy(update={"clock": "2030-01-01T00:00:00"})
    with pytest.raises(EnvDirError, match="belongs to env"):
        write_env_dir(other, tmp_path / "d", library_tasks(ENV))


def test_load_errors_name_file_and_line(tmp_path):
    d = write_env_dir(ENV, tmp_path / "d", library_tasks(ENV))
    lines = (d / "tasks.jsonl").read_text().splitlines()
    (d / "tasks.jsonl").write_text(lines[0] + "\n" + '{"task_id": "t_x"}\n')
    with pytest.raises(EnvDirError, match=r"tasks\.jsonl:2: invalid task record"):
        load_env_dir(d)
    (d / "tasks.jsonl").write_text("")
    (d / "report.json").write_text("[1]")
    with pytest.raises(EnvDirError, match="report.json: must hold a JSON object"):
        load_env_dir(d)
    (d / "env.json").write_text('{"tables": 3}')
    with pytest.raises(EnvDirError, match="env.json: invalid environment IR"):
        load_env_dir(d)
    with pytest.raises(EnvDirError, match="not an environment directory"):
        load_env_dir(tmp_path / "nothing")


def test_schema_sql_recreates_the_schema(tmp_path):
    d = write_env_dir(ENV, tmp_path / "d")
    c = sqlite3.connect(":memory:")
    c.executescript((d / "schema.sql").read_text())
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"members", "books", "loans"}
    assert (d / "tasks.jsonl").read_text() == "" and json.loads((d / "report.json").read_text()) == {}
