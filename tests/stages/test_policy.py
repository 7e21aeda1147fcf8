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
from pipeline.stages.policy.candidates import Candidate, check, propose
from pipeline.stages.policy.house_rules import make_policy, unsaid, whole
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


BREWERY_PROSE = {"rules": ["A batch that is still fermenting cannot fill kegs.",
                           "A beer may have at most 2 batches on record at a time.",
                           "The head brewer must approve a new beer stronger than 6.2 percent.",
                           "Staff must wear safety goggles."]}
PERMIT_PROSE = {"rules": ["A permit that is only submitted cannot be inspected.",
                          "A permit gets at most 3 inspections.",
                          "Fees above 1200 need a supervisor.",
                          "Applicants must be over 18."]}


def test_brewery_rules_are_the_llms_prose_grounded_in_checked_candidates_and_worded_by_it() -> None:
    """The LLM writes its rules in prose first; each grounds in the checked candidate that says it (MiniLM), prose
    that grounds in nothing is dropped with a Rejection, candidates no prose supports are not used; the LLM then
    words the grounded rules (one request listing them with its own prose), and each holds on real calls."""
    env = brewery_env()
    client = fake_client([BREWERY_PROSE, picking({
        "\"Record a keg filled from a batch\" is forbidden when the batch's status is 'fermenting'":
            "A batch whose status is fermenting cannot fill kegs.",
        "\"Record a new batch of a beer as brewed (it starts fermenting)\" is forbidden when the beer already has":
            "A beer may have at most 2 batches on record at once.",
        "\"Add a beer to the brewery's range\" is forbidden when the abv given is above":
            "The head brewer must approve any new beer with an abv above 6.2 percent.",
    })])
    res = make_policy(env, client, SETTINGS)
    rules = res.value.rules
    assert [(r.kind, r.tools, r.worded_by) for r in rules] == [
        ("state", ["fill_keg"], "llm"), ("limit", ["start_batch"], "llm"), ("approval", ["add_beer"], "llm")]
    assert rules[0].condition == ('SELECT 1 FROM "batches" WHERE "batches"."id" = :batch_id AND "status" = '
                                  "'fermenting'")
    assert rules[1].message == "A beer may have at most 2 batches on record at once."
    assert_rules_hold(res.value)
    assert len(client.requests) == 2
    prose_prompt, word_prompt = client.requests[0][0]["content"], client.requests[1][0]["content"]
    assert "Craft brewery production" in prose_prompt and "r1" not in prose_prompt  # no candidate shown yet
    # the wording request lists the three grounded rules, each with the prose it grounds, and nothing else
    assert len(re.findall(r"^r\d+: ", word_prompt, re.M)) == 3 and "fill_keg" not in word_prompt
    assert '(your rule: "A batch that is still fermenting cannot fill kegs.")' in word_prompt
    notes = {r.item: r for r in res.rejections if not r.reason.startswith("rule dropped: ")}
    assert notes["prose"].evidence["prose"] == "Staff must wear safety goggles."
    assert notes["prose"].evidence["similarity"] < 0.45
    assert "fill_keg_batches_status_conditioning" in notes["unsupported"].evidence["candidates"]


def test_permit_office_messages_are_fed_back_until_plain_whole_and_saying_their_condition() -> None:
    env = permit_env()
    limit = "\"Book an inspection of a permit on a date\" is forbidden when the permit already has 3"
    fee = "\"Correct the fee charged for a permit\" is forbidden when the fee given is above 1200"
    status = "\"Book an inspection of a permit on a date\" is forbidden when the permit's status is 'submitted'"
    first = picking({status: "A permit still waiting for approval cannot be inspected.",
                     limit: "Use book_inspection at most three times per permit.",
                     fee: "Fees above 1200 need a supervisor."})
    second = picking({status: "A submitted permit cannot be inspected until it is approved.",
                      limit: "A permit gets at most three inspections.",  # its cap not said as the check has it
                      fee: "Any fee above 1200 needs a supervisor, and"})  # cut mid-sentence
    third = picking({status: "A submitted permit cannot be inspected until it is approved.",
                     limit: "A permit gets at most three inspections.",
                     fee: "Any fee above 1200 needs a supervisor."})
    client = fake_client([PERMIT_PROSE, first, second, third])
    res = make_policy(env, client, SETTINGS)
    assert len(client.requests) == 4
    assert "names book_inspection; say it in plain words" in client.requests[2][-1]["content"]
    assert "is not one whole sentence" in client.requests[3][-1]["content"]
    rules = res.value.rules
    assert [(r.kind, r.tools[0], r.worded_by) for r in rules] == [
        ("state", "book_inspection", "llm"), ("limit", "book_inspection", "code"), ("approval", "correct_fee", "llm")]
    # a message that leaves out what its condition checks is code's wording of the rule
    assert rules[1].message == "At most 3 inspections per permit."
    assert rules[2].condition == "SELECT 1 WHERE :fee > 1200"
    assert_rules_hold(res.value)
    with EnvInstance(res.value, enforce_policy=True) as inst:  # the message, not the tool's own words
        out = inst.call("book_inspection", {"permit_id": 2, "inspected_on": "2026-02-02"})  # SG-2025-101, submitted
        assert out["error"] == "A submitted permit cannot be inspected until it is approved."
        assert inst.call("book_inspection", {"permit_id": 7, "inspected_on": "2026-02-02"})["ok"]  # approved
        assert inst.call("correct_fee", {"permit_id": 99, "fee": 200})["error"] == "permit 99 not found"


def test_code_picks_and_words_the_rules_when_the_llm_writes_no_prose() -> None:
    env = permit_env()
    client = fake_client([{"rules": []}] * 9)
    res = make_policy(env, client, SETTINGS)
    rules = res.value.rules
    assert len(rules) == SETTINGS.policy_rules and {r.worded_by for r in rules} == {"code"}
    assert len({r.tools[0] for r in rules}) == 4  # every write tool before one twice
    assert {r.kind for r in rules} >= {"state", "limit", "approval", "precondition"}
    # the permit office has more candidates than are checked: those left are said (``unchecked``), then the prose
    assert [r.item for r in res.rejections if not r.reason.startswith("rule dropped")] == ["unchecked", "prose"]
    # no pick: without prose the LLM does not choose among code's candidates (the requests: the prose, retried)
    assert all(r[0]["content"].startswith('You know how a real "City permit office"') for r in client.requests)
    assert_rules_hold(res.value)


def test_no_rule_turns_on_a_personal_characteristic_or_a_whole_category() -> None:
    """A column the schema stage's LLM classified as personal carries no candidate; nor does a CHECK-listed column
    no tool changes (a beer's style is what the beer is, not a state it is in), but as a frozen state of a tool that
    updates the row itself (``Finder.frozen``: marked, used only where the LLM's prose names its value, never by code's
    pick; tests/stages/test_policy_frozen.py)."""
    env = brewery_env()
    with EnvInstance(env) as inst:
        cands = propose(env, inst.conn)
    before = {c.key for c in cands}
    assert any("status_fermenting" in k for k in before)
    assert all(c.words.get("frozen") for c in cands if "style" in c.key)
    tables = [t.model_copy(update={"personal": ["status"]}) if t.name == "batches" else t for t in env.tables]
    marked = env.model_copy(update={"tables": tables})
    with EnvInstance(marked) as inst:
        after = {c.key for c in propose(marked, inst.conn)}
    assert not any("status" in k for k in after - before) and not any("batches_status" in k for k in after)
    assert {k for k in before if "batches_status" not in k} >= after - {k for k in after if k not in before}


def test_whole_and_unsaid_read_any_script() -> None:
    assert whole("Ein Antrag, der nur eingereicht ist, wird nicht geprüft.") and whole("申請は審査できません。")
    assert not whole("Any fee above 1200 needs a supervisor, and") and not whole("Instead, set it to non-")
    env = permit_env()
    with EnvInstance(env) as inst:
        cands = {c.key: c for c in propose(env, inst.conn)}
    checked, _ = check(env, [cands["correct_fee_fee_over_1200"]])
    c = checked[0]
    assert unsaid("Fees above 1200 need a supervisor.", c) is None
    assert unsaid("Large fees need a supervisor.", c) == "'1200'"
    assert unsaid("Anything above 1200 needs a supervisor.", c) == "fee"


def test_seeded_rows_that_break_a_kept_rule_are_put_right() -> None:
    """No seeded row is one a rule would have forbidden writing: "any new beer with an abv above 6.2 needs the head
    brewer" finds the 6.8 IPA, which takes the highest abv within the rule; the rules are checked again on the new
    rows and still hold."""
    env = brewery_env()
    client = fake_client([BREWERY_PROSE, picking({
        "\"Add a beer to the brewery's range\" is forbidden when the abv given is above":
            "The head brewer must approve any new beer with an abv above 6.2 percent.",
        "'fermenting'": "A batch whose status is fermenting cannot fill kegs.",
        "already has": "A beer may have at most 2 batches on record at once."})])
    res = make_policy(env, client, SETTINGS)
    [found] = [r for r in res.rejections if "seeded rows broke" in r.reason]
    assert (found.item, found.evidence["rows"], found.evidence["changed"]) == ("add_beer_abv_over_6_2", 1, 1)
    beers = next(s for s in res.value.seed if s.table == "beers").rows
    assert [(b["name"], b["abv"]) for b in beers] == [("Harbor Stout", 6.2), ("Ridge Line IPA", 6.2),
                                                      ("Morning Lager", 4.6)]
    assert len(res.value.rules) == 3 and {r.worded_by for r in res.value.rules} == {"llm"}
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


def prose_saying(env: ir.Environment, needles: list[str]) -> dict[str, Any]:
    """A scripted prose reply whose rules ground in the candidates whose prompt lines contain ``needles`` (each the
    candidate's own gist, so MiniLM grounds it there), padded with prose that grounds in nothing to three rules."""
    from pipeline.stages.policy.house_rules import Words, describe, gist

    with EnvInstance(env) as inst:
        checked, _ = check(env, propose(env, inst.conn))
    words = Words()
    rules = [gist(next(c for c in checked if needle in describe(c, "r", env, words)), env, words) + "."
             for needle in needles]
    pad = ["Staff must wear safety goggles.", "Visitors sign in at the front desk.", "Umbrellas stay at the door."]
    return {"rules": rules + pad[:max(0, 3 - len(rules))]}


def test_a_date_condition_grounds_only_prose_that_names_its_date() -> None:
    """The library of 2026-11-28 (meaning-wip): the model's "A book cannot be returned before it is due." grounded,
    at MiniLM's word, in "adding a book is forbidden when the publication date given is before today"."""
    from types import SimpleNamespace

    from pipeline.stages.policy.house_rules import may_ground

    def cand(section: str, label: str) -> Any:
        return SimpleNamespace(candidate=SimpleNamespace(words={"section": section, "label": label}))

    published = cand("value_past", "publication date")
    assert not may_ground("A book cannot be returned before it is due.", published)
    assert may_ground("A book cannot be added before its publication date.", published)
    assert may_ground("Un livre ne peut être ajouté avant sa date de publication.", published)  # the schema's word
    assert may_ground("A renewal request must be made within 30 days of the original loan date.",
                      cand("row_past", "loan date"))
    # a threshold by a word of its column or by its value ("stronger than 6.2 percent" for the abv)
    strong = SimpleNamespace(candidate=SimpleNamespace(words={"section": "value_over", "label": "abv", "value": "6.2"},
                                                       values=(4.6, 6.2, 6.8)))
    assert may_ground("The head brewer must approve a new beer stronger than 6.2 percent.", strong)
    assert may_ground("The head brewer must approve a new beer with an abv above 6 percent.", strong)
    assert not may_ground("The head brewer must approve a new beer.", strong)
    assert not may_ground("The head brewer must approve a beer stronger than 60 percent.", strong)  # not its values
    assert not may_ground("The head brewer must approve a new beer with a high abv.", strong)  # no number
