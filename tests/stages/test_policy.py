"""The policy stage on two unrelated domains (a brewery, a permit office), real SQLite, a scripted LLM for the pick:
rules proposed and checked by code on real calls, picked and worded by the LLM (fed back on a problem) or by code
when its reply fails; a rule no working call breaks is dropped with its reason; env.json and policy.md."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pipeline import ir
from pipeline.build import build_environment
from pipeline.catalog.env_dir import POLICY, load_env_dir, write_env_dir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, reward
from pipeline.settings import BuildSettings, TaskSettings
from pipeline.stages.policy.candidates import Candidate, check
from pipeline.stages.policy.house_rules import make_policy
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from tests.stages.library_replies import SCENARIO, all_replies, small_settings

SETTINGS = BuildSettings(policy=True, max_attempts=3)


def picking(wanted: dict[str, str]) -> Any:
    """A scripted reply: for each (text found in a candidate line -> message), the id of the first such line."""
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        lines = re.findall(r"^(r\d+): (.*)$", messages[0]["content"], re.M)
        rules = []
        for needle, message in wanted.items():
            rid = next(i for i, text in lines if needle in text)
            rules.append({"id": rid, "message": message})
        return {"rules": rules}

    return reply


def assert_rules_hold(env: ir.Environment) -> None:
    """Every rule's calls are real: each works on a permissive instance; with the rule enforced (alone: another
    rule may forbid a call this one allows), the allowed ones still work and the forbidden ones are refused with
    the rule's message and change nothing."""
    with EnvInstance(env) as free:
        initial = reward.snapshot(free.conn)
        for rule in env.rules:
            assert rule.allowed and rule.forbidden, rule.id
            for call in [*rule.allowed, *rule.forbidden]:
                free.reset()
                assert free.call(call.tool, call.arguments)["ok"], (rule.id, call)
                assert reward.snapshot(free.conn) != initial, (rule.id, call)
            with EnvInstance(env.model_copy(update={"rules": [rule]}), enforce_policy=True) as ruled:
                for call in rule.allowed:
                    ruled.reset()
                    assert ruled.call(call.tool, call.arguments)["ok"], (rule.id, call)
                for call in rule.forbidden:
                    ruled.reset()
                    out = ruled.call(call.tool, call.arguments)
                    assert out == {"ok": False, "error": rule.message, "parameter": None, "kind": "guard"}, rule.id
                    assert reward.snapshot(ruled.conn) == initial


def test_brewery_rules_are_picked_and_worded_by_the_llm_and_hold_on_real_calls() -> None:
    env = brewery_env()
    client = fake_client([picking({
        "\"Record a keg filled from a batch\" is forbidden when the batch's status is 'fermenting'":
            "A batch still fermenting cannot fill kegs.",
        "\"Record a new batch of a beer as brewed (it starts fermenting)\" is forbidden when the beer already has":
            "Only two batches of a beer may be on record at once.",
        "\"Add a beer to the brewery's range\" is forbidden when the abv given is above":
            "The head brewer must approve any new beer stronger than 6.2 percent.",
    })])
    res = make_policy(env, client, SETTINGS)
    rules = res.value.rules
    assert [(r.kind, r.tools, r.worded_by) for r in rules] == [
        ("state", ["fill_keg"], "llm"), ("limit", ["start_batch"], "llm"), ("approval", ["add_beer"], "llm")]
    assert rules[0].condition == ('SELECT 1 FROM "batches" WHERE "batches"."id" = :batch_id AND "status" = '
                                  "'fermenting'")
    assert rules[1].message == "Only two batches of a beer may be on record at once."
    assert_rules_hold(res.value)
    # one request: a shortlist of at most ten candidates, each an id, the action in words and when it is forbidden
    assert len(client.requests) == 1
    prompt = client.requests[0][0]["content"]
    assert len(re.findall(r"^r\d+: ", prompt, re.M)) == 10 and "fill_keg" not in prompt
    # the candidates that do not hold are recorded with their reason
    assert all(r.stage == "policy" and r.reason.startswith("rule dropped: ") for r in res.rejections)


def test_permit_office_pick_is_fed_back_until_its_messages_are_plain_words() -> None:
    env = permit_env()
    limit = "\"Book an inspection of a permit on a date\" is forbidden when the permit already has 2"
    fee = "\"Correct the fee charged for a permit\" is forbidden when the fee given is above 1200"
    status = "\"Book an inspection of a permit on a date\" is forbidden when the permit's status is 'submitted'"
    expired = "\"Extend a permit to a new expiry date\" is forbidden when the permit's expires on is before today"
    first = picking({limit: "Use book_inspection at most twice per permit.", fee: "Fees above 1200 need a supervisor.",
                     status: "A permit still waiting for approval cannot be inspected."})
    second = picking({limit: "A permit gets at most two inspections.", fee: "Fees above 1200 need a supervisor.",
                      status: "A permit still waiting for approval cannot be inspected.",
                      expired: "An expired permit cannot be extended; apply for a new one."})
    client = fake_client([first, second])
    res = make_policy(env, client, SETTINGS)
    assert len(client.requests) == 2
    assert "names book_inspection; say it in plain words" in client.requests[1][-1]["content"]
    rules = res.value.rules
    assert [(r.kind, r.tools[0]) for r in rules] == [("limit", "book_inspection"), ("approval", "correct_fee"),
                                                     ("state", "book_inspection"), ("precondition", "renew_permit")]
    assert rules[1].condition == "SELECT 1 WHERE :fee > 1200"
    assert rules[3].condition == ('SELECT 1 FROM "permits" WHERE "permits"."permit_id" = :permit_id AND '
                                  '"expires_on" < :today')
    assert_rules_hold(res.value)
    with EnvInstance(res.value, enforce_policy=True) as inst:  # the message, not the tool's own words
        out = inst.call("book_inspection", {"permit_id": 2, "inspected_on": "2026-02-02"})  # SG-2025-101, submitted
        assert out["error"] == "A permit still waiting for approval cannot be inspected."
        assert inst.call("book_inspection", {"permit_id": 7, "inspected_on": "2026-02-02"})["ok"]  # approved, 1 so far
        assert inst.call("book_inspection", {"permit_id": 1, "inspected_on": "2026-02-02"})["error"] == \
            "A permit gets at most two inspections."
        assert inst.call("renew_permit", {"permit_id": 3, "expires_on": "2026-12-31"})["error"].startswith(
            "An expired permit")
        assert inst.call("correct_fee", {"permit_id": 99, "fee": 200})["error"] == "permit 99 not found"


def test_code_picks_and_words_the_rules_when_the_llm_reply_fails() -> None:
    env = permit_env()
    client = fake_client([{"rules": [{"id": "r1", "message": "x"}]}] * 9)
    res = make_policy(env, client, SETTINGS)
    rules = res.value.rules
    assert len(rules) == SETTINGS.policy_rules and {r.worded_by for r in rules} == {"code"}
    assert len({r.tools[0] for r in rules}) == 4  # every write tool before one twice
    assert {r.kind for r in rules} >= {"state", "limit", "approval", "precondition"}
    assert any(r.message == "A permit may have at most 2 inspections." for r in rules)
    assert [r.item for r in res.rejections if not r.reason.startswith("rule dropped")] == ["pick"]
    assert_rules_hold(res.value)


def test_a_rule_that_no_working_call_breaks_is_dropped_with_its_reason() -> None:
    env = permit_env()
    never = Candidate("correct_fee_over_100000", "approval", "correct_fee",
                      'SELECT 1 FROM "permits" WHERE permit_id = :permit_id AND fee > 100000', "permit_id",
                      (1, 2, 3, 4), {"section": "row_over", "thing": "permit", "label": "fee", "value": "100000"})
    always = Candidate("renew_always", "state", "renew_permit", "SELECT 1 FROM permits WHERE permit_id = :permit_id",
                       "permit_id", (1, 2, 3), {"section": "state"})
    writes = Candidate("sneaky", "state", "renew_permit", "DELETE FROM permits WHERE permit_id = :permit_id",
                       "permit_id", (1,), {})
    internals = Candidate("peek", "state", "renew_permit", "SELECT 1 FROM sqlite_master WHERE name = 'permits'",
                          "permit_id", (1,), {})
    unknown = Candidate("other_param", "state", "correct_fee", "SELECT 1 WHERE :status = 'approved'", "permit_id",
                        (1,), {})
    kept, dropped = check(env, [never, always, writes, internals, unknown])
    assert kept == []
    reasons = {r.item: r.reason for r in dropped}
    assert reasons["correct_fee_over_100000"].startswith(
        "rule dropped: no real call of correct_fee that works is one it forbids (")
    assert reasons["renew_always"].startswith("rule dropped: no real call of renew_permit that works is one it allows")
    assert "must start with SELECT" in reasons["sneaky"]
    assert "internal table sqlite_master" in reasons["peek"]
    assert "unknown placeholder :status" in reasons["other_param"]
    assert dropped[0].evidence["condition"] == never.condition


def test_env_json_and_policy_md(tmp_path) -> None:
    env = make_policy(permit_env(), fake_client([{"rules": []}] * 9), SETTINGS).value
    d = write_env_dir(env, tmp_path / "permits")
    text = (d / POLICY).read_text(encoding="utf-8")
    assert text.startswith("# Policy: City permit office\n\nA city office issues building")
    for i, rule in enumerate(env.rules, 1):
        assert f"\n{i}. {rule.message} (applies to: `{rule.tools[0]}`)" in text
    loaded, _, _ = load_env_dir(d)
    assert loaded == env and loaded.env_id == env.env_id
    assert json.loads((d / "env.json").read_text())["rules"][0]["forbidden"]
    # without rules: no policy.md (an earlier one is removed), no "rules" key, the same id as before rules existed
    plain = permit_env()
    write_env_dir(plain, d)
    assert not (d / POLICY).exists() and "rules" not in json.loads((d / "env.json").read_text())
    assert plain.env_id == env.model_copy(update={"rules": []}).env_id != env.env_id


def test_the_switches_are_off_by_default_and_left_out_of_dumps() -> None:
    assert not BuildSettings().policy and not TaskSettings().rule_tasks
    assert not {"policy", "policy_rules"} & set(BuildSettings().model_dump())
    assert "rule_tasks" not in TaskSettings().model_dump()
    assert BuildSettings(policy=True).model_dump()["policy"] is True


@pytest.mark.parametrize("policy", [False, True])
def test_the_build_graph_adds_the_policy_after_the_tools(policy: bool) -> None:
    off = dict(row_generators=False, fix_key_names=False, fix_param_names=False, paged_listers=False,
               covering_writes=False)
    client = fake_client(all_replies() + [{"rules": []}] * 3)
    res = build_environment(SCENARIO, client, small_settings(policy=policy, **off))
    assert res.ok
    if not policy:
        assert res.env.rules == [] and len(client.remaining) == 3 and "policy" not in res.usage
        return
    assert len(res.env.rules) >= 3 and {r.worded_by for r in res.env.rules} == {"code"}
    assert res.usage["policy"]["calls"] == 3 and any(r.stage == "policy" for r in res.rejections)
    assert_rules_hold(res.env)
