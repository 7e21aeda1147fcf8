"""The tool engine on real SQLite: validation, every step kind, rollback, constraint errors, checks."""

from __future__ import annotations

import math

import pytest

from pipeline.envdir import build_database
from pipeline.runtime import engine, static_checks
from tests.fixtures.library import library_env

ENV = library_env()
TOOLS = {t.name: t.model_dump(mode="json") for t in ENV.tools}
NOW = "2026-01-15T09:00:00"


@pytest.fixture
def conn():
    c = engine.connect(":memory:")
    build_database(ENV, c)
    yield c
    c.close()


def call(conn, name, args, **kw):
    tool = TOOLS[name] if isinstance(name, str) else name
    return engine.run_tool(conn, tool, args, now=NOW, **kw)


def count(conn, sql):
    return conn.execute(sql).fetchone()[0]


def tool(kind="write", params=(), steps=(), returns=None, name="t"):
    return {"name": name, "description": "test tool", "kind": kind, "params": list(params), "steps": list(steps), "returns": returns}


# ---------------------------------------------------------------- argument validation


@pytest.mark.parametrize(
    ("args", "parameter", "fragment"),
    [
        ({"member_id": True, "book_id": 2}, "member_id", "expected an integer, got a boolean"),
        ({"member_id": "4", "book_id": 2}, "member_id", "expected an integer, got a string"),
        ({"member_id": 2.5, "book_id": 2}, "member_id", "expected an integer, got a number: 2.5"),
        ({"member_id": [4], "book_id": 2}, "member_id", "got an array"),
        ({"member_id": {"id": 4}, "book_id": 2}, "member_id", "got an object"),
        ({"member_id": 2**70, "book_id": 2}, "member_id", "out of range for a 64-bit integer"),
        ({"member_id": 0, "book_id": 2}, "member_id", "must be >= 1; got 0"),
        ({"member_id": 4, "book_id": 2, "days": 29}, "days", "must be <= 28; got 29"),
        ({"book_id": 2}, "member_id", "missing required argument 'member_id'"),
        ({"member_id": None, "book_id": 2}, "member_id", "null given for required argument 'member_id'"),
        ({"member_id": 4, "book_id": 2, "dayz": 3}, "dayz", "unknown argument \"dayz\""),
    ],
)
def test_validation_errors_name_the_parameter(conn, args, parameter, fragment):
    out = call(conn, "borrow_book", args)
    assert out["ok"] is False and out["kind"] == "validation"
    assert out["parameter"] == parameter
    assert fragment in out["error"], out["error"]
    assert count(conn, "SELECT COUNT(*) FROM loans") == 4


@pytest.mark.parametrize(
    ("name", "args", "parameter", "fragment"),
    [
        ("search_books", {"query": "a", "genre": "poetry"}, "genre", "must be one of \"fiction\""),
        ("search_books", {"query": "a", "available_only": 1}, "available_only", "expected a boolean"),
        ("search_books", {"query": "a", "available_only": "true"}, "available_only", "expected a boolean"),
        ("search_books", {"query": 7}, "query", "expected a string, got an integer"),
        ("search_books", {"query": "x" * 101}, "query", "too long: 101 characters (the maximum is 100)"),
        ("search_books", {"query": "\ud800"}, "query", "lone surrogate"),
        ("add_book", {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": True}, "replacement_cost", "expected a number"),
        ("add_book", {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": math.inf}, "replacement_cost", "finite"),
        ("add_book", {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": math.nan}, "replacement_cost", "finite"),
        ("add_book", {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": -1}, "replacement_cost", "must be >= 0"),
        ("add_book", {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": 10**400}, "replacement_cost", "too large"),
    ],
)
def test_type_enum_and_range_checks(conn, name, args, parameter, fragment):
    out = call(conn, name, args)
    assert (out["ok"], out["kind"], out["parameter"]) == (False, "validation", parameter)
    assert fragment in out["error"], out["error"]


@pytest.mark.parametrize("args", [[], "member_id=1", 3, None, True])
def test_arguments_must_be_an_object(conn, args):
    out = call(conn, "get_book", args)
    assert out["kind"] == "validation" and out["parameter"] is None
    assert "must be a JSON object" in out["error"]


def test_integral_float_is_an_integer_and_optional_null_is_absent(conn):
    out = call(conn, "borrow_book", {"member_id": 4.0, "book_id": 2, "days": None})
    assert out["ok"], out
    assert out["result"]["member_id"] == 4 and isinstance(out["result"]["member_id"], int)
    assert out["result"]["due_date"] == "2026-01-29"  # default 14 days from :today


def test_big_integer_for_number_parameter_is_accepted_as_float(conn):
    args = {"title": "T", "author": "A", "genre": "fiction", "year": 2000, "replacement_cost": 10**20}
    out = call(conn, "add_book", args)
    assert out["kind"] == "validation" and "must be <= 1000" in out["error"]


# ---------------------------------------------------------------- steps and returns


def test_write_binds_now_today_last_id_and_returns_one(conn):
    out = call(conn, "borrow_book", {"member_id": 4, "book_id": 2, "days": 7})
    assert out == {"ok": True, "result": {"id": 5, "member_id": 4, "book_id": 2, "borrowed_at": NOW, "due_date": "2026-01-22"}}
    assert conn.in_transaction is False  # committed
    assert count(conn, "SELECT COUNT(*) FROM loans WHERE book_id = 2 AND returned_at IS NULL") == 1


def test_guard_must_not_exist_formats_parameters(conn):
    out = call(conn, "borrow_book", {"member_id": 4, "book_id": 3})
    assert out == {"ok": False, "error": "book 3 is already on loan", "parameter": None, "kind": "guard"}


def test_guard_must_exist(conn):
    out = call(conn, "borrow_book", {"member_id": 99, "book_id": 2})
    assert (out["kind"], out["error"]) == ("guard", "member 99 not found")


def test_query_bind_feeds_later_guard_and_its_message(conn):
    out = call(conn, "borrow_book", {"member_id": 3, "book_id": 2})
    assert (out["kind"], out["error"]) == ("guard", "member 3 (basic) already has 2 open loans")
    # a premium member with the same count is fine: the bound tier decides
    conn.execute("UPDATE members SET tier = 'premium' WHERE id = 3")
    assert call(conn, "borrow_book", {"member_id": 3, "book_id": 2})["ok"]


def test_query_with_error_and_no_row_is_not_found(conn):
    out = call(conn, "return_book", {"book_id": 2})
    assert (out["kind"], out["error"]) == ("not_found", "book 2 is not on loan")


def test_query_without_error_binds_nulls(conn):
    t = tool(kind="read", steps=[{"kind": "query", "bind": "m", "sql": "SELECT id, name FROM members WHERE id = 99"}],
             returns={"sql": "SELECT :m_id IS NULL AS missing, :m_name AS name", "mode": "one"})
    assert call(conn, t, {}) == {"ok": True, "result": {"missing": 1, "name": None}}


def test_update_binds_changes_and_returns(conn):
    out = call(conn, "return_book", {"book_id": 3})
    assert out["ok"] and out["result"] == {"id": 2, "member_id": 1, "book_id": 3, "returned_at": NOW, "updated": 1}


def test_returns_all_is_a_list_of_objects(conn):
    out = call(conn, "search_books", {"query": "Austen"})
    assert out["ok"] and [r["title"] for r in out["result"]] == ["Emma", "Persuasion"]
    assert call(conn, "search_books", {"query": "Austen", "available_only": True})["result"] == [
        {"id": 1, "title": "Emma", "author": "Jane Austen", "genre": "fiction", "year": 1815}
    ]
    assert call(conn, "search_books", {"query": "zzz"}) == {"ok": True, "result": []}
    assert len(call(conn, "search_books", {"query": "", "limit": 2})["result"]) == 2


def test_returns_one_without_row_is_not_found(conn):
    t = tool(kind="read", params=[{"name": "book_id", "type": "integer"}],
             returns={"sql": "SELECT * FROM books WHERE id = :book_id", "mode": "one"})
    out = call(conn, t, {"book_id": 42})
    assert out["kind"] == "not_found" and "no matching record" in out["error"] and '"book_id": 42' in out["error"]


def test_no_returns_gives_changes_and_last_id(conn):
    out = call(conn, "delete_member", {"member_id": 4})
    assert out == {"ok": True, "result": {"changes": 1, "last_id": None}}
    t = tool(params=[{"name": "name", "type": "string"}],
             steps=[{"kind": "write", "sql": "INSERT INTO members (name, email, tier, joined_on) VALUES (:name, :name || '@x', 'basic', :today)"}])
    assert call(conn, t, {"name": "Eve"}) == {"ok": True, "result": {"changes": 1, "last_id": 4}}  # id 4 reused
    assert conn.execute("SELECT name, joined_on FROM members WHERE id = 4").fetchone() == ("Eve", "2026-01-15")


def test_guard_failure_rolls_back_earlier_writes(conn):
    before = conn.execute("SELECT * FROM loans ORDER BY id").fetchall()
    t = tool(steps=[
        {"kind": "write", "sql": "DELETE FROM loans"},
        {"kind": "write", "sql": "UPDATE members SET email = 'x@y' WHERE id = 1"},
        {"kind": "guard", "sql": "SELECT 1 FROM loans", "must": "exist", "error": "no loans left after {changes} changes"},
    ])
    out = call(conn, t, {})
    assert out == {"ok": False, "error": "no loans left after 1 changes", "parameter": None, "kind": "guard"}
    assert conn.execute("SELECT * FROM loans ORDER BY id").fetchall() == before
    assert conn.execute("SELECT email FROM members WHERE id = 1").fetchone()[0] == "alice@example.org"
    assert conn.in_transaction is False


def test_rollback_keeps_callers_outer_transaction(conn):
    conn.execute("BEGIN")
    conn.execute("UPDATE members SET name = 'Outer' WHERE id = 2")
    assert call(conn, "borrow_book", {"member_id": 1, "book_id": 3})["kind"] == "guard"
    assert conn.in_transaction
    assert conn.execute("SELECT name FROM members WHERE id = 2").fetchone()[0] == "Outer"
    conn.execute("ROLLBACK")


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("INSERT INTO loans (member_id, book_id, borrowed_at, due_date) VALUES (99, 1, :now, :today)", "FOREIGN KEY constraint failed"),
        ("INSERT INTO members (name, email, tier, joined_on) VALUES ('Z', 'bob@example.org', 'basic', :today)", "UNIQUE constraint failed: members.email"),
        ("INSERT INTO members (name, email, tier, joined_on) VALUES ('Z', 'z@z', 'gold', :today)", "CHECK constraint failed"),
        ("INSERT INTO members (name, email, tier, joined_on) VALUES (NULL, 'z@z', 'basic', :today)", "NOT NULL constraint failed: members.name"),
        ("INSERT INTO books (title, author, genre, year, replacement_cost) VALUES ('T', 'A', 'fiction', 'old', 1.0)", "cannot store TEXT value in INTEGER column"),
    ],
)
def test_constraint_failures_become_tool_errors_and_roll_back(conn, sql, fragment):
    t = tool(steps=[{"kind": "write", "sql": "DELETE FROM loans WHERE id = 1"}, {"kind": "write", "sql": sql}])
    out = call(conn, t, {})
    assert out["ok"] is False and out["kind"] == "sql"
    assert out["error"].startswith("rejected by the database: ") and fragment in out["error"], out["error"]
    assert count(conn, "SELECT COUNT(*) FROM loans") == 4


def test_foreign_key_on_delete_through_fixture_tool(conn):
    # deleting a member referenced by loans (without the loan cleanup) is refused by SQLite
    t = tool(params=[{"name": "member_id", "type": "integer"}], steps=[{"kind": "write", "sql": "DELETE FROM members WHERE id = :member_id"}])
    out = call(conn, t, {"member_id": 2})
    assert out["kind"] == "sql" and "FOREIGN KEY" in out["error"] and "refer" in out["error"]
    assert count(conn, "SELECT COUNT(*) FROM members") == 4


@pytest.mark.parametrize(
    ("t", "fragment"),
    [
        (tool(steps=[{"kind": "write", "sql": "UPDATE nosuch SET x = 1"}]), "no such table: nosuch"),
        (tool(steps=[{"kind": "write", "sql": "DROP TABLE loans"}]), "must be INSERT, UPDATE or DELETE, not DROP"),
        (tool(steps=[{"kind": "write", "sql": "INSERT INTO members DEFAULT VALUES; DROP TABLE loans"}]), "one statement"),
        (tool(kind="read", steps=[{"kind": "write", "sql": "DELETE FROM loans"}], returns={"sql": "SELECT 1", "mode": "one"}), "a read tool may not write"),
        (tool(kind="read", steps=[{"kind": "query", "bind": "q", "sql": "DELETE FROM loans"}], returns={"sql": "SELECT 1"}), "must be a SELECT statement, not DELETE"),
        (tool(kind="read", steps=[{"kind": "query", "bind": "q", "sql": "PRAGMA foreign_keys = OFF"}], returns={"sql": "SELECT 1"}), "not PRAGMA"),
        (tool(kind="read", returns={"sql": "WITH x AS (SELECT 1) DELETE FROM loans"}), "must not modify the database"),
        (tool(kind="read", returns={"sql": "SELECT :missing"}), "supply a value for binding parameter"),
        (tool(steps=[{"kind": "teleport", "sql": "SELECT 1"}], returns={"sql": "SELECT 1"}), "unknown step kind"),
        (tool(), "neither a write step nor a returns query"),
    ],
)
def test_tool_definition_errors_are_reported_not_raised(conn, t, fragment):
    out = call(conn, t, {})
    assert out["ok"] is False and out["kind"] == "sql"
    assert fragment in out["error"], out["error"]
    assert count(conn, "SELECT COUNT(*) FROM loans") == 4
    assert count(conn, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'loans'") == 1
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


@pytest.mark.parametrize("bad", [{}, {"name": "x", "params": [{"type": "string"}]}, {"name": "x", "steps": [{}], "kind": "write"}, "not a tool"])
def test_malformed_tool_dict_never_raises(conn, bad):
    out = engine.run_tool(conn, bad, {})
    assert out["ok"] is False and out["kind"] in ("sql", "validation")


def test_closed_connection_is_an_error_result_not_an_exception():
    c = engine.connect(":memory:")
    c.close()
    out = engine.run_tool(c, TOOLS["get_book"], {"book_id": 1})
    assert out["ok"] is False and out["kind"] == "sql" and "could not run" in out["error"]


def test_runaway_query_is_stopped_by_timeout(conn):
    t = tool(kind="read", returns={
        "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) AS c FROM n", "mode": "one"})
    out = call(conn, t, {}, timeout=0.05)
    assert out == {"ok": False, "error": "the tool took too long and was stopped (the limit is 0.05 s per call)",
                   "parameter": None, "kind": "sql"}
    assert call(conn, "get_book", {"book_id": 1})["ok"]  # connection still usable


def test_bound_columns_never_shadow_parameters(conn):
    t = tool(kind="read", params=[{"name": "member_id", "type": "integer"}],
             steps=[{"kind": "query", "bind": "member", "sql": "SELECT 77 AS id, 'x' AS now"}],
             returns={"sql": "SELECT :member_id AS member_id, :member_now AS bound", "mode": "one"})
    assert call(conn, t, {"member_id": 3})["result"] == {"member_id": 3, "bound": "x"}


def test_blob_and_non_finite_values_are_json_safe(conn):
    t = tool(kind="read", returns={"sql": "SELECT x'00ff' AS b, 1e999 AS inf", "mode": "one"})
    assert call(conn, t, {})["result"] == {"b": "00ff", "inf": "inf"}


def test_format_message_is_safe():
    values = {"a": 1, "b": None, "c": True, "d": "x"}
    assert engine.format_message("{a} {b} {c} {d} {unknown} {0} {a!r} {{a}}", values) == "1 null true x {unknown} {0} {a!r} {1}"


def test_placeholders_ignore_literals_and_comments():
    sql = "SELECT ':not_a_param', \"col:x\" FROM t WHERE a = :real -- :comment\n AND b = :other /* :c */"
    assert engine.placeholders(sql) == ["other", "real"]
    assert engine.leading_keyword("  /* c */ (-- x\n WITH a AS (SELECT 1) SELECT * FROM a)") == "WITH"


# ---------------------------------------------------------------- static checker


def test_fixture_tools_pass_the_checker(conn):
    assert static_checks.check_tools(conn, list(TOOLS.values())) == {}


@pytest.mark.parametrize(
    ("t", "fragment"),
    [
        (tool(kind="read", returns={"sql": "SELECT * FROM nosuch"}), "no such table: nosuch"),
        (tool(kind="read", returns={"sql": "SELECT nosuch FROM books"}), "no such column: nosuch"),
        (tool(kind="read", returns={"sql": "SELECT * FROM books WHERE id = :book"}), "unknown placeholder :book"),
        (tool(kind="read", returns={"sql": "SELECT * FROM books WHERE id = ?"}), "placeholder ? is not allowed"),
        (tool(kind="read", returns={"sql": "SELECT * FROM books WHERE id = @id"}), "placeholder @id is not allowed"),
        (tool(kind="read", returns={"sql": "SELECT 1; SELECT 2"}), "one statement"),
        (tool(kind="read", returns={"sql": "WITH x AS (SELECT 1) DELETE FROM loans"}), "must not modify"),
        (tool(kind="read", returns={"sql": "DELETE FROM loans"}), "must start with SELECT/WITH/VALUES"),
        (tool(kind="read", steps=[{"kind": "write", "sql": "DELETE FROM loans"}], returns={"sql": "SELECT 1"}), "a read tool has a write step"),
        (tool(kind="write", returns={"sql": "SELECT 1"}), "declared 'write' but has no write step"),
        (tool(steps=[{"kind": "write", "sql": "CREATE TABLE x (a)"}]), "must start with INSERT/UPDATE/DELETE"),
        (tool(kind="read", returns={"sql": "SELECT * FROM loans WHERE id = :last_id"}), "uses :last_id before any write step"),
        (tool(kind="read", steps=[{"kind": "guard", "sql": "SELECT 1", "must": "exist", "error": "no {thing}"}], returns={"sql": "SELECT 1"}), "error message uses {thing}, which is not a parameter"),
        (tool(kind="read", params=[{"name": "member_id", "type": "integer"}], steps=[{"kind": "query", "bind": "member", "sql": "SELECT id FROM members"}], returns={"sql": "SELECT 1"}), "bound column :member_id"),
        (tool(kind="read", params=[{"name": "g", "type": "integer", "enum": ["a"]}], returns={"sql": "SELECT :g"}), "enum value \"a\" expected an integer"),
        (tool(kind="read", params=[{"name": "g", "type": "integer", "minimum": 5, "maximum": 1}], returns={"sql": "SELECT :g"}), "minimum 5 is greater than maximum 1"),
        (tool(kind="read", params=[{"name": "g", "type": "string", "minimum": 5}], returns={"sql": "SELECT :g"}), "only apply to integer or number"),
        (tool(kind="read"), "neither a write step nor a returns query"),
    ],
)
def test_checker_reports_problems(conn, t, fragment):
    problems = static_checks.check_tool(conn, t)
    assert any(fragment in p for p in problems), problems


def test_checker_knows_binds_and_write_builtins(conn):
    t = tool(params=[{"name": "member_id", "type": "integer"}], steps=[
        {"kind": "query", "bind": "m", "sql": "SELECT tier, email AS mail FROM members WHERE id = :member_id", "error": "member {member_id} ({m_tier}) missing"},
        {"kind": "write", "sql": "UPDATE members SET email = :m_mail || '.old' WHERE id = :member_id"},
        {"kind": "guard", "sql": "SELECT 1 WHERE :changes = 1", "must": "exist", "error": "changed {changes}"},
    ], returns={"sql": "SELECT :m_tier AS tier, :last_id AS last, :now AS now", "mode": "one"})
    assert static_checks.check_tool(conn, t) == []


@pytest.mark.parametrize("bad", [{}, "nope", {"name": "x", "kind": "read", "params": [3]}, {"name": "x", "steps": [None]}])
def test_checker_never_raises_on_malformed_tools(conn, bad):
    problems = static_checks.check_tool(conn, bad)
    assert problems and all(isinstance(p, str) for p in problems)

