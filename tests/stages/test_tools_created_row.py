"""A create tool never asks for the key the database assigns, answers with the row it inserted, and no column is
added to a table only for a built-in the model wrote as a column (``pipeline.stages.tools.created_row``).

Seen on an outside domain built with the quickstart configuration (reader audit 2026-11-29, HR leave): the model
wrote ``SELECT last_id FROM employees WHERE name = :name AND position = :position`` as the result of its create
(an amendment then added ``employees.last_id TEXT``, NULL in all 231 rows, and the tool never gave the new id),
``UPDATE employees SET last_id = :last_id`` after inserting a request, and a result ``... WHERE request_id =
:request_id`` that code turned into a required ``request_id`` parameter: the core write asked every caller for the
key of a row that did not exist yet, and answered with another row. The replies below are those slips on the
library fixture's schema."""

from __future__ import annotations

import shutil

import pytest

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.envdir import write_env_dir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, static_checks
from pipeline.stages.tools import amend_schema
from pipeline.stages.tools.toolset import ToolPlanItem, WriteToolReply, generate_tools, to_tool
from tests.fixtures.server import http, running_server
from tests.stages.library_replies import FIND_MEMBER, LIST_LOANS, RETURN_BOOK, SCENARIO, small_settings
from tests.stages.test_tools import INTENTS, LLM_TOOLS, TABLES, base_env, seed  # noqa: F401 (fixture)

ADD = ToolPlanItem(name="add_member", kind="write", purpose="Register a member")
LEND = ToolPlanItem(name="lend_book", kind="write", purpose="Lend a book")


def reply(**over: object) -> WriteToolReply:
    base = {"description": "Register a member.",
            "params": [{"name": "name", "type": "string", "description": "The member's name"},
                       {"name": "email", "type": "string", "description": "The member's email"}],
            "guards": [], "writes": ["INSERT INTO members (name, email, status) VALUES (:name, :email, 'active')"],
            "returns": None}
    return WriteToolReply.model_validate({**base, **over})


def lend(**over: object) -> WriteToolReply:
    base = {"description": "Lend a book.",
            "params": [{"name": "member_id", "type": "integer", "description": "The member"},
                       {"name": "book_id", "type": "integer", "description": "The book"}],
            "guards": [],
            "writes": ["INSERT INTO loans (member_id, book_id, loan_date, due_date, status) "
                       "VALUES (:member_id, :book_id, :today, date(:today, '+14 days'), 'open')"],
            "returns": None}
    return WriteToolReply.model_validate({**base, **over})


def call(seed, tool: ir.Tool, args: dict) -> tuple[dict, int]:  # noqa: F811
    """The tool's answer on the seeded rows, and the id the database gave the row it inserted."""
    env = base_env(seed).model_copy(update={"tools": [tool]})
    with EnvInstance(env) as inst:
        out = inst.call(tool.name, args)
        table = "members" if tool.name == ADD.name else "loans"
        (new,) = inst.conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()
    return out, new


def test_a_result_reading_a_builtin_as_a_column_becomes_the_inserted_row(seed) -> None:  # noqa: F811
    conn = scratch_db(TABLES)
    slip = reply(returns={"sql": "SELECT last_id FROM members WHERE name = :name", "mode": "one"})
    tool = to_tool(ADD, slip, conn)
    assert tool.returns == ir.Returns(sql='SELECT * FROM "members" WHERE "member_id" = :last_id', mode="one")
    assert static_checks.check_tool(conn, tool.model_dump(mode="json")) == []
    out, new = call(seed, tool, {"name": "Noor Haddad", "email": "noor@example.org"})
    assert out["ok"] and out["result"] == {"member_id": new, "name": "Noor Haddad", "email": "noor@example.org",
                                           "status": "active"}
    # a result naming the row by its values may find an older row with the same values: the new row, by its key
    by_values = to_tool(ADD, reply(returns={"sql": "SELECT member_id, name FROM members WHERE name = :name",
                                            "mode": "all"}), conn)
    assert by_values.returns == tool.returns  # members.name is not UNIQUE
    unique = reply(returns={"sql": "SELECT member_id, name FROM members WHERE email = :email", "mode": "one"})
    assert to_tool(ADD, unique, conn).returns == ir.Returns(  # members.email is: only the new row holds it
        sql="SELECT member_id, name FROM members WHERE email = :email", mode="one")
    # left as written: a create answering with another table's row (the parent), or with the engine's
    # {changes, last_id}; an insert that may insert nothing (:last_id would not be its row); a read tool
    parent = lend(returns={"sql": "SELECT * FROM members WHERE member_id = :member_id", "mode": "one"})
    assert to_tool(LEND, parent, conn).returns == ir.Returns(
        sql="SELECT * FROM members WHERE member_id = :member_id", mode="one")
    assert to_tool(LEND, lend(), conn).returns is None
    ignore = reply(writes=["INSERT OR IGNORE INTO members (name, email, status) VALUES (:name, :email, 'active')"],
                   returns={"sql": "SELECT last_id FROM members WHERE email = :email", "mode": "one"})
    assert to_tool(ADD, ignore, conn).returns == ir.Returns(sql="SELECT last_id FROM members WHERE email = :email",
                                                            mode="one")
    read = to_tool(ToolPlanItem(name="find", kind="read", purpose="p"), WriteToolReply.model_validate(
        {**FIND_MEMBER, "writes": ["INSERT INTO members (name, email, status) VALUES ('a', 'b', 'active')"]}), conn)
    assert read.returns is not None and read.returns.sql == FIND_MEMBER["returns"]["sql"]


def test_an_undeclared_placeholder_compared_with_the_new_rows_key_is_that_key(seed) -> None:  # noqa: F811
    slip = lend(returns={"sql": "SELECT loan_id, member_id, book_id, status FROM loans WHERE loan_id = :loan_id",
                         "mode": "one"})
    tool = to_tool(LEND, slip, scratch_db(TABLES))
    assert [p.name for p in tool.params] == ["member_id", "book_id"]  # no required loan_id no caller can know
    assert tool.returns == ir.Returns(
        sql="SELECT loan_id, member_id, book_id, status FROM loans WHERE loan_id = :last_id", mode="one")
    out, new = call(seed, tool, {"member_id": 1, "book_id": 2})
    assert out["ok"] and out["result"] == {"loan_id": new, "member_id": 1, "book_id": 2, "status": "open"}


def test_a_declared_key_parameter_read_only_by_the_result_is_dropped(seed) -> None:  # noqa: F811
    slip = lend(params=[{"name": "member_id", "type": "integer", "description": "The member"},
                        {"name": "book_id", "type": "integer", "description": "The book"},
                        {"name": "loan_id", "type": "integer", "description": "The loan"}],
                returns={"sql": "SELECT * FROM loans l WHERE l.loan_id = :loan_id", "mode": "one"})
    tool = to_tool(LEND, slip, scratch_db(TABLES))
    assert [p.name for p in tool.params] == ["member_id", "book_id"]
    assert tool.returns is not None and tool.returns.sql == "SELECT * FROM loans l WHERE l.loan_id = :last_id"
    out, new = call(seed, tool, {"member_id": 2, "book_id": 1})
    assert out["ok"] and out["result"]["loan_id"] == new
    # a declared key that a later write uses is an existing row (one the new row replaces): kept
    replace = lend(params=slip.model_dump()["params"],
                   writes=[*lend().writes, "UPDATE loans SET status = 'returned' WHERE loan_id = :loan_id"])
    kept = to_tool(LEND, replace, scratch_db(TABLES))
    assert [p.name for p in kept.params] == ["member_id", "book_id", "loan_id"]
    assert kept.steps[-1].sql.endswith("WHERE loan_id = :loan_id")


def test_an_insert_giving_the_key_a_parameter_leaves_it_to_the_database(seed) -> None:  # noqa: F811
    slip = reply(params=[{"name": "member_id", "type": "integer", "description": "The new member's id"},
                         {"name": "name", "type": "string", "description": "n"},
                         {"name": "email", "type": "string", "description": "e"}],
                 writes=["INSERT INTO members (member_id, name, email, status) "
                         "VALUES (:member_id, :name, :email, 'active')"],
                 returns={"sql": "SELECT * FROM members WHERE member_id = :member_id", "mode": "one"})
    tool = to_tool(ADD, slip, scratch_db(TABLES))
    assert [p.name for p in tool.params] == ["name", "email"]
    assert ":member_id" not in tool.steps[0].sql and "member_id" not in tool.steps[0].sql.split("VALUES")[0]
    out, new = call(seed, tool, {"name": "Ida Berg", "email": "ida@example.org"})
    assert out["ok"] and out["result"]["member_id"] == new and out["result"]["name"] == "Ida Berg"


def test_a_statement_storing_a_builtin_into_a_missing_column_is_dropped_and_never_added() -> None:
    conn = scratch_db(TABLES)
    slip = lend(writes=[*lend().writes, "UPDATE members SET last_id = :last_id WHERE member_id = :member_id"],
                returns={"sql": "SELECT * FROM loans WHERE loan_id = :last_id", "mode": "one"})
    tool = to_tool(LEND, slip, conn)
    assert [s.sql for s in tool.steps] == lend().writes
    assert amend_schema.propose(tool, TABLES, conn) == []
    # whatever statement names it, a built-in is never made a column: the tool is wrong, not the schema
    guard = ir.Tool(name="approve", description="d", kind="write", params=[ir.Param(name="loan_id", type="integer")],
                    steps=[ir.Step(kind="guard", must="exist", error="e",
                                   sql="SELECT 1 FROM loans WHERE loan_id = :loan_id AND member_id = "
                                       "(SELECT m.member_id FROM members m WHERE m.last_id = :loan_id)"),
                           ir.Step(kind="write", sql="UPDATE loans SET status = 'returned' WHERE loan_id = :loan_id")])
    assert amend_schema.propose(guard, TABLES, conn) == []
    other = guard.model_copy(update={"steps": [guard.steps[0].model_copy(update={"sql": guard.steps[0].sql.replace(
        "last_id", "referrer")}), guard.steps[1]]})
    assert [(a.table, a.column) for a in amend_schema.propose(other, TABLES, conn)] == [("members", "referrer")]


PLAN = {"tools": [
    {"name": "find_member", "kind": "read", "purpose": "Find a member by email", "tables": ["members"], "goals": [1]},
    {"name": "list_member_loans", "kind": "read", "purpose": "List a member's open loans", "tables": ["loans"],
     "goals": [2]},
    {"name": "add_member", "kind": "write", "purpose": "Register a member", "tables": ["members"], "goals": []},
    {"name": "lend_book", "kind": "write", "purpose": "Lend a book", "tables": ["loans"], "goals": [3]},
    {"name": "return_book", "kind": "write", "purpose": "Return a book", "tables": ["loans", "books"], "goals": [4]},
]}
ADD_SLIP = reply(returns={"sql": "SELECT last_id FROM members WHERE name = :name AND email = :email",
                          "mode": "one"}).model_dump()
LEND_SLIP = lend(writes=[*lend().writes, "UPDATE members SET last_id = :last_id WHERE member_id = :member_id"],
                 returns={"sql": "SELECT loan_id, member_id, book_id, status FROM loans WHERE loan_id = :loan_id",
                          "mode": "one"}).model_dump()


@pytest.fixture(scope="module")
def built(seed):  # noqa: F811
    client = fake_client([PLAN, FIND_MEMBER, LIST_LOANS, ADD_SLIP, LEND_SLIP, RETURN_BOOK])
    res = generate_tools(SCENARIO, INTENTS, TABLES, seed, client, small_settings(**LLM_TOOLS))
    assert res.ok, res.rejections
    return res


def test_the_stage_adds_no_column_for_a_builtin_and_its_creates_answer_with_their_rows(built) -> None:
    env = built.value
    assert [t.ddl for t in env.tables] == [t.ddl for t in TABLES]  # no employees.last_id-like column
    assert not [r for r in built.rejections if "schema amended" in r.reason or "added for a tool" in r.reason]
    with EnvInstance(env) as inst:
        added = inst.call("add_member", {"name": "Noor Haddad", "email": "noor@example.org"})
        lent = inst.call("lend_book", {"member_id": added["result"]["member_id"], "book_id": 1})
        assert added["ok"] and added["result"]["name"] == "Noor Haddad" and added["result"]["member_id"]
        assert lent["ok"] and lent["result"]["member_id"] == added["result"]["member_id"]
        assert inst.conn.execute("SELECT MAX(loan_id) FROM loans").fetchone()[0] == lent["result"]["loan_id"]
    assert [p.name for p in env.tool("lend_book").params] == ["member_id", "book_id"]


def test_the_generated_server_serves_the_repaired_creates_without_a_server_error(built, tmp_path) -> None:
    env_dir = write_env_dir(built.value, tmp_path / "env", [])
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db) as base:
        status, body = http("POST", base + "/tools/add_member", {"name": "Noor Haddad", "email": "noor@example.org"})
        assert status == 200 and body["result"]["name"] == "Noor Haddad"
        new = body["result"]["member_id"]
        status, body = http("POST", base + "/tools/lend_book", {"member_id": new, "book_id": 1})
        assert status == 200 and body["result"]["member_id"] == new and body["result"]["loan_id"]
        for bad in ({"member_id": new, "book_id": 1, "loan_id": 1}, {"member_id": "x", "book_id": 1}, {},
                    {"member_id": 10**30, "book_id": -1}, []):
            status, body = http("POST", base + "/tools/lend_book", bad)
            assert 400 <= status < 500, (bad, status, body)
