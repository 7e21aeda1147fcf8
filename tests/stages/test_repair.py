"""The tool fixer the verify loop calls when the checker blames a tool (scripted fake LLM, real SQLite)."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.build import BuildSettings
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.stages.rows.repair import repair_data
from pipeline.stages.tools.repair import repair_tool
from tests.fixtures.library import library_env

FIXED = {
    "description": "Change a member's email address.",
    "params": [{"name": "member_id", "type": "integer", "description": "member id"},
               {"name": "email", "type": "string", "description": "new email"}],
    "guards": [{"sql": "SELECT 1 FROM members WHERE id = :member_id", "must": "exist",
                "error": "member {member_id} does not exist"}],
    "writes": ["UPDATE members SET email = :email WHERE id = :member_id"],
    "returns": {"sql": "SELECT id, email FROM members WHERE id = :member_id", "mode": "one"},
}


def test_repair_rewrites_the_blamed_tool_with_the_fault_fed_in():
    env = library_env()
    fault = SimpleNamespace(kind="tool", target="update_member_email",
                            reason="it reported success but the email column did not change")
    broken_reply = {**FIXED, "writes": ["UPDATE members SET emial = :email WHERE id = :member_id"]}
    client = fake_client([broken_reply, FIXED])
    new = repair_tool(env, fault, client, BuildSettings(max_attempts=2))
    assert new is not None
    assert new.tool("update_member_email").steps[-1].sql == FIXED["writes"][0]
    assert [t.name for t in new.tools] == [t.name for t in env.tools]  # the others are untouched
    assert "did not change" in client.requests[0][-1]["content"]  # the checker's finding reached the agent
    assert "emial" in client.requests[1][-1]["content"]  # and the SQLite error of the first try was fed back


def test_repair_gives_up_cleanly():
    env = library_env()
    fault = SimpleNamespace(kind="tool", target="update_member_email", reason="wrong")
    assert repair_tool(env, fault, fake_client(["{}", "{}", "{}"] * 3), BuildSettings(max_attempts=1)) is None
    assert repair_tool(env, SimpleNamespace(kind="tool", target="no_such_tool", reason="x"),
                       fake_client([]), BuildSettings()) is None


LOANS = {"rows": [[1, 1, "2026-01-10T10:00:00", "2026-01-24", None],
                  [2, 2, "2026-01-11T10:00:00", "2026-01-25", None],
                  [3, 3, "2026-01-12T10:00:00", "2026-01-26", "2026-01-14T09:00:00"],
                  [4, 4, "2026-01-13T10:00:00", "2026-01-27", None]]}


def test_repair_data_rewrites_the_blamed_leaf_table_with_the_fault_fed_in():
    env = library_env()
    fault = SimpleNamespace(kind="data", target="loans.due_date",
                            reason="every loan is already overdue, so no task can renew one in time")
    client = fake_client([LOANS])
    new = repair_data(env, fault, client, BuildSettings(rows_per_call=12, max_attempts=1))
    assert new is not None and new.env_id != env.env_id
    loans = next(s for s in new.seed if s.table == "loans")
    assert [r["due_date"] for r in loans.rows] == ["2026-01-24", "2026-01-25", "2026-01-26", "2026-01-27"]
    assert [s for s in new.seed if s.table != "loans"] == [s for s in env.seed if s.table != "loans"]
    prompt = client.requests[0][-1]["content"]
    assert "already overdue" in prompt  # the checker's finding reached the seed-data agent
    with EnvInstance(new) as inst:  # the repaired seed loads with foreign keys on
        assert inst.conn.execute("SELECT COUNT(*) FROM loans").fetchone()[0] == 4


def test_repair_data_refuses_what_it_cannot_repair_safely():
    env = library_env()
    # members is referenced by loans: new member rows would orphan the loans
    assert repair_data(env, SimpleNamespace(kind="data", target="members", reason="x"), fake_client([]),
                       BuildSettings()) is None
    assert repair_data(env, SimpleNamespace(kind="data", target="the task's wording", reason="x"), fake_client([]),
                       BuildSettings()) is None
    # a reply whose rows all break the schema leaves the data as it was
    bad = {"rows": [[99, 99, "2026-01-10T10:00:00", "2026-01-24", None]] * 4}
    assert repair_data(env, SimpleNamespace(kind="data", target="loans", reason="x"), fake_client([bad] * 3),
                       BuildSettings(max_attempts=1, rows_per_call=12)) is None
