"""SQLite's authorizer decides what tool SQL may do, at build time (checks) and at run time (engine).

Every SELECT form that makes SQLite build temporary b-trees is a read; writes inside reads, SQLite's
internals, PRAGMA, ATTACH and load_extension are refused; non-deterministic SQL is rejected at
build time with a message naming the tool and step.
"""

from __future__ import annotations

import sqlite3

import pytest

from pipeline.envdir import build_database
from pipeline.runtime import engine, static_checks
from tests.fixtures.library import BOOKS_DDL, LOANS_DDL, MEMBERS_DDL, library_env

ENV = library_env()
NOW = "2026-01-15T09:00:00"


@pytest.fixture
def conn():
    c = engine.connect(":memory:")
    build_database(ENV, c)
    yield c
    c.close()


def read_tool(sql, mode="all", steps=(), params=()):
    return {"name": "probe", "description": "probe", "kind": "read", "params": list(params), "steps": list(steps),
            "returns": {"sql": sql, "mode": mode}}


# Forms for which SQLite opens ephemeral tables (OpenEphemeral / OpenWrite on a temp b-tree). The old
# EXPLAIN-opcode check took those for writes; the authorizer never sees them.
READ_FORMS = {
    "distinct": "SELECT DISTINCT author FROM books",
    "count_distinct": "SELECT COUNT(DISTINCT author) AS n FROM books",
    "in_subquery": "SELECT id FROM books WHERE id IN (SELECT book_id FROM loans WHERE returned_at IS NULL)",
    "not_in_subquery": "SELECT id FROM books WHERE id NOT IN (SELECT book_id FROM loans WHERE returned_at IS NULL)",
    "union": "SELECT author AS v FROM books UNION SELECT name FROM members",
    "intersect": "SELECT book_id FROM loans INTERSECT SELECT id FROM books",
    "except": "SELECT id FROM books EXCEPT SELECT book_id FROM loans",
    "cte_used_twice": "WITH a AS (SELECT author, COUNT(*) AS n FROM books GROUP BY author) "
                      "SELECT x.author FROM a x JOIN a y ON x.n = y.n AND x.author < y.author",
    "recursive_cte": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) SELECT i FROM n",
    "window": "SELECT id, rank() OVER (PARTITION BY genre ORDER BY year) AS r FROM books",
    "order_non_key_limit": "SELECT id, title FROM books ORDER BY replacement_cost DESC LIMIT 3",
    "group_join_limit": "SELECT m.name, COUNT(l.id) AS loans FROM members m JOIN loans l ON l.member_id = m.id "
                        "GROUP BY m.id ORDER BY loans DESC LIMIT 2",
    "left_join": "SELECT b.id, l.id AS loan FROM books b LEFT JOIN loans l ON l.book_id = b.id AND l.returned_at IS NULL "
                 "ORDER BY b.title",
    "values": "VALUES (1, 'a'), (2, 'b')",
}


@pytest.mark.parametrize("sql", READ_FORMS.values(), ids=READ_FORMS.keys())
def test_every_select_form_is_a_read_at_build_and_at_run_time(conn, sql):
    as_step = read_tool("SELECT :q_v AS v", steps=[{"kind": "guard", "sql": sql, "must": "exist", "error": "none"},
                                                    {"kind": "query", "bind": "q", "sql": f"SELECT 1 AS v FROM ({sql})"}])
    for tool in (read_tool(sql), as_step):
        assert static_checks.check_tool(conn, tool) == []
        out = engine.run_tool(conn, tool, {}, now=NOW)
        assert out["ok"], out
    assert conn.execute("PRAGMA query_only").fetchone()[0] == 0  # never set: the authorizer alone refuses writes
    assert engine.run_tool(conn, dict(ENV.tool("add_book").model_dump(mode="json")),
                           {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": 1})["ok"]


REFUSED = {
    "write_in_read": ("WITH x AS (SELECT 1) DELETE FROM loans", "must not modify the database"),
    "insert_in_read": ("WITH x AS (SELECT 1) INSERT INTO members (name, email, tier, joined_on) SELECT 'a', 'b', 'basic', 'c'",
                       "must not modify the database"),
    "sqlite_master": ("SELECT name, sql FROM sqlite_master", "internal table sqlite_master"),
    "sqlite_schema": ("SELECT name FROM sqlite_schema", "internal table sqlite_master"),
    "sqlite_temp_master": ("SELECT name FROM sqlite_temp_master", "internal table sqlite_temp_master"),
    "pragma_database_list": ("SELECT file FROM pragma_database_list", "runs PRAGMA database_list"),
    "pragma_table_info": ("SELECT name FROM pragma_table_info('members')", "runs PRAGMA table_info"),
    "load_extension": ("SELECT load_extension('/tmp/x.so')", "load_extension"),
}


@pytest.mark.parametrize(("sql", "fragment"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_reads_at_build_and_at_run_time(conn, sql, fragment):
    before = conn.execute("SELECT COUNT(*) FROM loans").fetchone()[0]
    for tool, where in ((read_tool(sql), "tool 'probe' returns"),
                        (read_tool("SELECT 1", steps=[{"kind": "guard", "sql": sql, "must": "exist", "error": "x"}]),
                         "tool 'probe' step 1 (guard)")):
        problems = static_checks.check_tool(conn, tool)
        assert any(p.startswith(where) and fragment in p for p in problems), problems
        out = engine.run_tool(conn, tool, {}, now=NOW)
        assert out["ok"] is False and out["kind"] == "sql" and fragment in out["error"], out
        assert "tool definition error" in out["error"]
    assert conn.execute("SELECT COUNT(*) FROM loans").fetchone()[0] == before
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] > 0  # the project itself still may


def test_writes_may_not_touch_internals_or_the_schema(conn):
    conn.execute("CREATE TABLE tickets (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT) STRICT")
    conn.execute("INSERT INTO tickets (note) VALUES ('a')")
    for sql, fragment in (("DELETE FROM sqlite_sequence", "internal table sqlite_sequence"),
                          ("UPDATE sqlite_master SET sql = '' WHERE name = 'loans'", "sqlite_master"),
                          ("INSERT INTO tickets (note) SELECT sql FROM sqlite_master", "internal table sqlite_master")):
        tool = {"name": "w", "description": "w", "kind": "write", "params": [],
                "steps": [{"kind": "write", "sql": sql}], "returns": None}
        assert any(fragment in p for p in static_checks.check_tool(conn, tool)), (sql, static_checks.check_tool(conn, tool))
        for _ in range(2):  # the second time the statement comes from the cache: still refused
            out = engine.run_tool(conn, tool, {})
            assert out["ok"] is False and fragment in out["error"], out
    assert conn.execute("SELECT seq FROM sqlite_sequence").fetchall() == [(1,)]
    assert conn.execute("SELECT COUNT(*) FROM tickets").fetchone()[0] == 1


def test_a_statement_cached_by_the_project_is_authorized_again_for_a_tool(conn):
    sql = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    assert conn.execute(sql).fetchall()  # prepared and cached in open mode
    for _ in range(2):
        out = engine.run_tool(conn, read_tool(sql), {})
        assert out["ok"] is False and "sqlite_master" in out["error"]


def test_a_plain_sqlite3_connection_gets_the_authorizer_for_the_call_only():
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.executescript(f"{MEMBERS_DDL};{BOOKS_DDL};{LOANS_DDL};")
    out = engine.run_tool(c, read_tool("SELECT name FROM sqlite_master"), {})
    assert out["ok"] is False and "sqlite_master" in out["error"]
    assert c.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 4  # removed after the call
    assert engine.run_tool(c, read_tool("SELECT COUNT(*) AS n FROM books", "one"), {}) == {"ok": True, "result": {"n": 0}}


NONDETERMINISTIC = {
    "random": ("SELECT id FROM books ORDER BY random() LIMIT 1", "random()"),
    "randomblob": ("SELECT hex(randomblob(4)) AS token", "randomblob()"),
    "date_now": ("SELECT id FROM loans WHERE due_date < date('now')", "date('now') reads the wall clock"),
    "datetime_no_arg": ("SELECT datetime() AS t", "datetime() reads the wall clock"),
    "strftime_now": ("SELECT strftime('%Y', 'NOW') AS y", "strftime('%Y', 'NOW') reads the wall clock"),
    "julianday_now": ("SELECT julianday('now') - julianday(due_date) AS d FROM loans", "julianday('now')"),
    "unixepoch_now": ("SELECT unixepoch('now') AS t", "unixepoch('now')"),
    "current_date": ("SELECT id FROM loans WHERE due_date < CURRENT_DATE", "CURRENT_DATE reads the wall clock"),
    "current_time": ("SELECT CURRENT_TIME AS t", "CURRENT_TIME reads the wall clock"),
    "current_timestamp": ("SELECT CURRENT_TIMESTAMP AS t", "CURRENT_TIMESTAMP reads the wall clock"),
}


@pytest.mark.parametrize(("sql", "fragment"), NONDETERMINISTIC.values(), ids=NONDETERMINISTIC.keys())
def test_non_deterministic_sql_is_rejected_naming_tool_and_step(conn, sql, fragment):
    problems = static_checks.check_tool(conn, read_tool("SELECT 1", steps=[{"kind": "query", "bind": "x", "sql": sql}]))
    assert len(problems) == 1, problems
    assert problems[0].startswith("tool 'probe' step 1 (query): ") and fragment in problems[0]
    advice = "deterministic" if "random" in fragment else ":now / :today"
    assert advice in problems[0]


def test_non_deterministic_writes_are_rejected_and_fixed_clock_sql_passes(conn):
    bad = {"name": "stamp", "description": "d", "kind": "write", "params": [],
           "steps": [{"kind": "write", "sql": "UPDATE loans SET returned_at = datetime('now') WHERE id = 2"}], "returns": None}
    assert static_checks.check_tool(conn, bad) == ["tool 'stamp' step 1 (write): datetime('now') reads the wall "
                                                   "clock; " + static_checks.CLOCK_ADVICE]
    good = {**bad, "steps": [{"kind": "write", "sql": "UPDATE loans SET returned_at = datetime(:now), "
                                                      "due_date = date(:today, '+7 days') WHERE id = 2 AND 'now' <> ''"}]}
    assert static_checks.check_tool(conn, good) == []
    assert static_checks.check_tools(conn, [good, bad]) == {"stamp": static_checks.check_tool(conn, bad)}


def test_the_build_time_checks_are_not_in_the_embedded_engine(conn):
    assert not hasattr(engine, "check_tool")  # the build-time checks live in static_checks.py, not in the embedded engine


# ---------------------------------------------------------------- schema DDL


def test_clean_ddl_has_no_problems_and_leaves_the_connection_unchanged():
    c = sqlite3.connect(":memory:")
    assert static_checks.check_ddl(c, f"{MEMBERS_DDL};\n{BOOKS_DDL};\n{LOANS_DDL};\n"
                               "CREATE INDEX loans_open ON loans(book_id) WHERE returned_at IS NULL;") == []
    assert c.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    assert not c.in_transaction


DDL_PROBLEMS = {
    "check_current_date": ("CREATE TABLE permits (id INTEGER PRIMARY KEY, start_date TEXT NOT NULL CHECK (start_date >= CURRENT_DATE)) STRICT",
                           "CREATE TABLE permits: CURRENT_DATE reads the wall clock"),
    "check_date_now": ("CREATE TABLE permits (id INTEGER PRIMARY KEY, s TEXT CHECK (s >= date('now'))) STRICT",
                       "date('now') reads the wall clock"),
    "default_current_timestamp": ("CREATE TABLE notes (id INTEGER PRIMARY KEY, created_at TEXT DEFAULT CURRENT_TIMESTAMP) STRICT",
                                  "column created_at DEFAULT CURRENT_TIMESTAMP: CURRENT_TIMESTAMP reads the wall clock"),
    "default_datetime_now": ("CREATE TABLE notes (id INTEGER PRIMARY KEY, created_at TEXT DEFAULT (datetime('now'))) STRICT",
                             "datetime('now') reads the wall clock"),
    "default_random": ("CREATE TABLE codes (id INTEGER PRIMARY KEY, code INTEGER DEFAULT (random())) STRICT",
                       "column code DEFAULT random(): random() gives a different value"),
    "trigger_clock": ("CREATE TABLE t (id INTEGER PRIMARY KEY, at TEXT) STRICT;\n"
                      "CREATE TRIGGER t_at AFTER INSERT ON t BEGIN UPDATE t SET at = datetime('now') WHERE id = new.id; END;",
                      "CREATE TRIGGER t_at: datetime('now') reads the wall clock"),
    "trigger_random": ("CREATE TABLE t (id INTEGER PRIMARY KEY, r INTEGER) STRICT;\n"
                       "CREATE TRIGGER t_r AFTER INSERT ON t BEGIN UPDATE t SET r = RANDOM() WHERE id = new.id; END;",
                       "CREATE TRIGGER t_r: random() gives a different value on every run"),
    "generated": ("CREATE TABLE g (id INTEGER PRIMARY KEY, r REAL GENERATED ALWAYS AS (julianday('now')) VIRTUAL) STRICT",
                  "CREATE TABLE g: julianday('now') reads the wall clock"),
    "attach": ("ATTACH DATABASE ':memory:' AS other", "attaches a database file"),
    "pragma": ("PRAGMA foreign_keys = OFF", "runs PRAGMA foreign_keys"),
    "syntax": ("CREATE TABLE broken (id INTEGER PRIMARY KEY,) STRICT", "syntax error"),
}


@pytest.mark.parametrize(("ddl", "fragment"), DDL_PROBLEMS.values(), ids=DDL_PROBLEMS.keys())
def test_ddl_problems_are_named(ddl, fragment):
    c = engine.connect(":memory:")
    problems = static_checks.check_ddl(c, ddl)
    assert any(fragment in p for p in problems), problems
    assert c.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0] == 0
    assert c.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_ddl_may_reference_tables_already_on_the_connection():
    c = sqlite3.connect(":memory:")
    c.executescript(f"{MEMBERS_DDL};{BOOKS_DDL};")
    assert static_checks.check_ddl(c, LOANS_DDL) == []
    assert [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")] == ["books", "members"]
    assert static_checks.split_statements("CREATE TABLE a (x TEXT DEFAULT ';'); -- c;\nCREATE TABLE b (y)") == [
        "CREATE TABLE a (x TEXT DEFAULT ';');", "-- c;\nCREATE TABLE b (y)"]


# ---------------------------------------------------------------- reads never write, by the authorizer alone

# Every kind of statement that writes (rows, the schema, SQLite's own tables, settings, files, the
# transaction). Reads run with no ``PRAGMA query_only`` (it expired every prepared statement at each
# toggle): the authorizer alone must refuse each of these in a read.
WRITES = {
    "insert": "INSERT INTO members (name, email, tier, joined_on) VALUES ('x', 'x@x', 'basic', '2026-01-01')",
    "insert_select": "INSERT INTO members (name, email, tier, joined_on) SELECT name, name || '@y', tier, joined_on FROM members",
    "insert_or_replace": "INSERT OR REPLACE INTO members (id, name, email, tier, joined_on) VALUES (1, 'x', 'x@x', 'basic', 'd')",
    "replace": "REPLACE INTO members (id, name, email, tier, joined_on) VALUES (1, 'x', 'x@x', 'basic', 'd')",
    "insert_or_ignore": "INSERT OR IGNORE INTO members (id, name, email, tier, joined_on) VALUES (1, 'x', 'x@x', 'basic', 'd')",
    "upsert": "INSERT INTO members (id, name, email, tier, joined_on) VALUES (1, 'x', 'x@x', 'basic', 'd') "
              "ON CONFLICT (id) DO UPDATE SET name = excluded.name",
    "insert_returning": "INSERT INTO books (title, author, genre, year, replacement_cost) VALUES ('t', 'a', 'fiction', 2000, 1) "
                        "RETURNING id",
    "update": "UPDATE books SET replacement_cost = 0",
    "update_from": "UPDATE loans SET returned_at = m.joined_on FROM members m WHERE m.id = loans.member_id",
    "update_returning": "UPDATE books SET year = 2001 RETURNING id",
    "delete": "DELETE FROM loans",
    "delete_returning": "DELETE FROM loans RETURNING id",
    "delete_sqlite_sequence": "DELETE FROM sqlite_sequence",
    "update_sqlite_sequence": "UPDATE sqlite_sequence SET seq = 100",
    "insert_sqlite_sequence": "INSERT INTO sqlite_sequence (name, seq) VALUES ('x', 1)",
    "update_sqlite_master": "UPDATE sqlite_master SET sql = '' WHERE name = 'loans'",
    "insert_through_view": "INSERT INTO open_loans (id) VALUES (99)",  # an INSTEAD OF trigger's write
    "create_table": "CREATE TABLE extra (x INTEGER)",
    "create_table_as": "CREATE TABLE extra AS SELECT * FROM books",
    "create_temp_table": "CREATE TEMP TABLE extra (x INTEGER)",
    "create_index": "CREATE INDEX books_year ON books (year)",
    "create_view": "CREATE VIEW v AS SELECT 1",
    "create_temp_view": "CREATE TEMP VIEW v AS SELECT 1",
    "create_trigger": "CREATE TRIGGER t AFTER INSERT ON books BEGIN DELETE FROM loans; END",
    "create_temp_trigger": "CREATE TEMP TRIGGER t AFTER INSERT ON books BEGIN DELETE FROM loans; END",
    "create_virtual_table": "CREATE VIRTUAL TABLE extra USING fts5 (x)",
    "drop_table": "DROP TABLE loans",
    "drop_index": "DROP INDEX loans_book",
    "drop_view": "DROP VIEW open_loans",
    "drop_trigger": "DROP TRIGGER open_loans_insert",
    "alter_rename": "ALTER TABLE loans RENAME TO old_loans",
    "alter_add_column": "ALTER TABLE books ADD COLUMN extra TEXT",
    "alter_rename_column": "ALTER TABLE books RENAME COLUMN title TO name",
    "alter_drop_column": "ALTER TABLE loans DROP COLUMN returned_at",
    "reindex": "REINDEX",
    "reindex_index": "REINDEX loans_book",
    "analyze": "ANALYZE",
    "vacuum": "VACUUM",
    "vacuum_into": "VACUUM INTO '/tmp/envfoundry-read-must-not-write.db'",
    "attach": "ATTACH DATABASE ':memory:' AS other",
    "detach": "DETACH DATABASE main",
    "pragma_set": "PRAGMA user_version = 7",
    "pragma_foreign_keys": "PRAGMA foreign_keys = OFF",
    "pragma_writable_schema": "PRAGMA writable_schema = ON",
    "pragma_function": "SELECT * FROM pragma_user_version",
    "begin": "BEGIN",
    "commit": "COMMIT",
    "rollback": "ROLLBACK",
    "savepoint": "SAVEPOINT s",
    "release": "RELEASE s",
    "load_extension": "SELECT load_extension('/tmp/x.so')",
}
# The same writes in the forms a read step's verb check lets through (``WITH ...``).
WITH_WRITES = {k: f"WITH w AS (SELECT 1) {WRITES[k]}" for k in (
    "insert", "insert_select", "insert_or_replace", "replace", "insert_or_ignore", "upsert", "insert_returning",
    "update", "update_from", "update_returning", "delete", "delete_returning", "delete_sqlite_sequence",
    "update_sqlite_sequence", "insert_sqlite_sequence", "update_sqlite_master", "insert_through_view")}


@pytest.fixture
def rich(conn):
    """The library with an index, a view with an INSTEAD OF trigger and an AUTOINCREMENT table (sqlite_sequence)."""
    conn.execute("INSERT INTO members (name, email, tier, joined_on) VALUES ('Ann', 'ann@x', 'basic', '2026-01-01')")
    conn.execute("INSERT INTO books (title, author, genre, year, replacement_cost) VALUES ('B', 'A', 'fiction', 2000, 9)")
    conn.execute("INSERT INTO loans (member_id, book_id, borrowed_at, due_date) VALUES (1, 1, '2026-01-02', '2026-01-20')")
    conn.execute("CREATE INDEX loans_book ON loans (book_id)")
    conn.execute("CREATE VIEW open_loans AS SELECT * FROM loans WHERE returned_at IS NULL")
    conn.execute("CREATE TRIGGER open_loans_insert INSTEAD OF INSERT ON open_loans BEGIN DELETE FROM loans; END")
    conn.execute("CREATE TABLE tickets (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT) STRICT")
    conn.execute("INSERT INTO tickets (note) VALUES ('a')")
    return conn


def _state(conn):
    """Everything a write could change: every row of every table (SQLite's own included), the schema, the
    settings, the attached databases and the transaction."""
    temp = conn.execute("SELECT name FROM sqlite_temp_master").fetchall()  # (opens the temp database: first)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    rows = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    pragmas = {p: conn.execute(f"PRAGMA {p}").fetchall() for p in ("user_version", "foreign_keys", "writable_schema",
                                                                   "database_list", "query_only")}
    return rows, conn.execute("SELECT * FROM sqlite_master ORDER BY name").fetchall(), temp, pragmas, conn.in_transaction


def test_the_guard_refuses_every_action_but_reading_in_read_mode():
    guard = engine.Guard()
    allowed = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
    for action in range(0, 64):  # every action code SQLite has (0-33) and codes it may add
        for arg1, arg2 in (("books", "title"), ("sqlite_master", "sql"), ("sqlite_sequence", "seq"), (None, None),
                           ("pragma_table_info", "name")):
            guard.begin(engine.READ)
            got = guard(action, arg1, arg2 if action != sqlite3.SQLITE_FUNCTION else "lower", "main", None)
            if action in allowed and not (arg1 or "").startswith(("sqlite_", "pragma_")) or action in _ALWAYS_ALLOWED:
                assert got == sqlite3.SQLITE_OK, (action, arg1)
            else:  # refused now, or (SQLite's schema table read as NULL) refused once prepared: a reason either way
                assert got in (sqlite3.SQLITE_DENY, sqlite3.SQLITE_IGNORE) and guard.reason(), (action, arg1, got)
                assert got == sqlite3.SQLITE_DENY or action in (sqlite3.SQLITE_READ, sqlite3.SQLITE_UPDATE), (action, arg1)


_ALWAYS_ALLOWED = (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE, sqlite3.SQLITE_FUNCTION)


@pytest.mark.parametrize("sql", WRITES.values(), ids=WRITES.keys())
def test_no_write_of_any_kind_runs_as_a_read(rich, sql):
    """Prepared as a read (past the read steps' verb check): refused by the authorizer, nothing changed,
    with no PRAGMA query_only to fall back on. (A refused function and SQLite's schema table fail as SQLite's
    own errors, the authorizer having said no: its reason is kept; SQLite refuses to write its schema table
    itself, before asking the authorizer, unless ``PRAGMA writable_schema``, which is refused.)"""
    before = _state(rich)
    with pytest.raises((engine.Denied, sqlite3.DatabaseError)) as refused:
        engine._statement(rich, rich.guard, sql, {}, engine.READ)
    assert rich.guard.denied or str(refused.value) == "table sqlite_master may not be modified", refused.value
    assert rich.guard.mode == engine.OPEN
    assert _state(rich) == before
    assert before[3]["query_only"] == [(0,)]


@pytest.mark.parametrize("sql", WITH_WRITES.values(), ids=WITH_WRITES.keys())
def test_no_write_runs_through_any_read_step_of_a_tool(rich, sql):
    """The read steps of a read tool (returns, guard, query) and of a write tool (guard, query, returns):
    each refuses the write as a tool definition error, and the database is unchanged."""
    before = _state(rich)
    write = {"kind": "write", "sql": "UPDATE books SET year = 1999 WHERE id = 1"}
    tools = [
        read_tool(sql),
        read_tool("SELECT 1 AS v", steps=[{"kind": "guard", "sql": sql, "must": "not_exist", "error": "x"}]),
        read_tool("SELECT 1 AS v", steps=[{"kind": "query", "bind": "q", "sql": sql}]),
        {"name": "w", "description": "w", "kind": "write", "params": [], "returns": None,
         "steps": [{"kind": "guard", "sql": sql, "must": "not_exist", "error": "x"}, write]},
        {"name": "w", "description": "w", "kind": "write", "params": [], "returns": None,
         "steps": [write, {"kind": "query", "bind": "q", "sql": sql}]},
        {"name": "w", "description": "w", "kind": "write", "params": [], "steps": [write],
         "returns": {"sql": sql, "mode": "all"}},
    ]
    for tool in tools:
        for _ in range(2):  # and again, as a statement seen before
            out = engine.run_tool(rich, tool, {}, now=NOW)
            assert out["ok"] is False and out["kind"] == "sql" and "tool definition error" in out["error"], (tool, out)
            assert "not authorized" not in out["error"] and any(
                f in out["error"] for f in ("must not modify the database", "internal table", "may not be modified")), out
            assert _state(rich) == before
