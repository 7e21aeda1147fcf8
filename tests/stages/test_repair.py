"""The tool fixer the verify loop calls when the checker blames a tool (scripted fake LLM, real SQLite)."""

from __future__ import annotations

from types import SimpleNamespace

from pipeline.build import BuildSettings
from pipeline.llm import fake_client
from pipeline.stages.repair import repair_tool
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
