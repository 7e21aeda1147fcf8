"""Exception paths (issue 28) on two unrelated domains (the permit office, the brewery), real SQLite, a scripted LLM:
code proposes compliant alternatives to a rule's forbidden write (another write on the same row with a CHECK-listed
value) and checks them on the rule's forbidden calls; the pick names one (a message that does not say its value is
fed back, then worded by code); the exception shape asks for the forbidden write and has the alternative as its
gold, proved against the initial state, doing nothing, overreach and blind; a rule with no valid alternative, and an
environment with none, stay as they were."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from pipeline import ir
from pipeline.catalog.env_dir import POLICY, load_env_dir, write_env_dir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, reward
from pipeline.runtime.replay import fresh, play
from pipeline.sampler import Want, sample
from pipeline.server import check_server
from pipeline.settings import BuildSettings, TaskSettings
from pipeline.stages.policy.candidates import alternatives, check, propose
from pipeline.stages.policy.house_rules import make_policy, names_value, shortlist
from pipeline.stages.tasks.bank import generate_tasks, lint_request, rederive_task
from pipeline.stages.tasks.planner import plan_chains
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from tests.fixtures.server import http, running_server
from tests.stages.test_policy import prose_saying
from verify.proofs import blind_calls, overreach_calls, prove

SETTINGS = BuildSettings(policy=True, max_attempts=3)
TIERS = {1: 0.3, 2: 0.4, 3: 0.3}
EXPIRED = "\"Extend a permit to a new expiry date\" is forbidden when the permit's expires on is before today"
SUBMITTED = "\"Book an inspection of a permit on a date\" is forbidden when the permit's status is 'submitted'"
FEE = "\"Correct the fee charged for a permit\" is forbidden when the fee given is above 1200"
FERMENTING = "\"Record a keg filled from a batch\" is forbidden when the batch's status is 'fermenting'"
STRONG = "\"Add a beer to the brewery's range\" is forbidden when the abv given is above"
TWO_BATCHES = "\"Record a new batch of a beer as brewed (it starts fermenting)\" is forbidden when the beer already has"


def picking(wanted: list[tuple[str, str | None, str]]) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    """A scripted reply: per (text of a candidate line, value of one of its alternatives or None, message), the
    candidate's id, the id of that alternative (read from the line under it) and the message."""
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompt = messages[0]["content"]
        lines = prompt.splitlines()
        rules = []
        for needle, value, message in wanted:
            at = next(i for i, line in enumerate(lines) if re.match(r"^r\d+: ", line) and needle in line)
            item = {"id": lines[at].split(":")[0], "message": message}
            if value is not None:
                block = "\n".join(lines[at + 1:at + 3])
                item["instead"] = re.search(rf"(a\d+) '{re.escape(value)}'", block).group(1)  # type: ignore[union-attr]
            rules.append(item)
        return {"rules": rules}

    return reply


def permit_policy() -> ir.Environment:
    reply = picking([(SUBMITTED, None, "A permit that is only submitted cannot be inspected."),
                     (EXPIRED, "submitted", "An expired permit cannot be extended; instead, it goes back to submitted "
                                            "for a new review."),
                     (FEE, None, "Fees above 1200 need a supervisor.")])
    return make_policy(permit_env(), fake_client([prose_saying(permit_env(), [SUBMITTED, EXPIRED, FEE]), reply]),
                       SETTINGS).value


def brewery_policy() -> ir.Environment:
    reply = picking([(FERMENTING, "conditioning", "A batch still fermenting cannot fill kegs; instead, move it on to "
                                                  "conditioning first."),
                     (TWO_BATCHES, None, "Only 2 batches of a beer may be on record at once."),
                     (STRONG, None, "The head brewer must approve any new beer with an abv above 6.2 percent.")])
    return make_policy(brewery_env(), fake_client([prose_saying(brewery_env(), [FERMENTING, TWO_BATCHES, STRONG]),
                                                   reply]), SETTINGS).value


# ------------------------------------------------------------------ candidates, checked on real rows


@pytest.mark.parametrize("make, governed, tool, column", [
    (permit_env, "renew_permit", "set_permit_status", "status"),
    (brewery_env, "fill_keg", "set_batch_status", "status"),
], ids=["permits", "brewery"])
def test_alternatives_are_other_writes_on_the_same_row_with_listed_values_that_work_where_the_rule_forbids(
        make, governed: str, tool: str, column: str) -> None:
    env = make()
    with EnvInstance(env) as inst:
        candidates = propose(env, inst.conn)
    checked, _ = check(env, candidates)
    found = alternatives(env, checked)
    ours = [c for c in checked if c.candidate.tool == governed and c.candidate.key in found]
    assert ours, sorted(found)
    table = {"set_permit_status": "permits", "set_batch_status": "batches"}[tool]
    listed = next(t for t in env.tables if t.name == table).ddl
    for c in ours:
        for o in found[c.candidate.key]:
            alt = o.alternative
            assert alt.tool != governed and set(alt.fixed) == {column} and alt.value == alt.fixed[column]
            assert f"'{alt.value}'" in listed  # the value is one of the schema's CHECK list, not a word of ours
            # on every row the rule forbids its write, the alternative works on the same row and some change it
            changed = 0
            with EnvInstance(env) as inst:
                initial = reward.snapshot(inst.conn)
                for args in c.forbidden:
                    inst.reset()
                    call = alt.call(args)
                    assert call.arguments[next(iter(alt.same))] == args[next(iter(alt.same.values()))]
                    assert inst.call(call.tool, call.arguments)["ok"]
                    changed += reward.snapshot(inst.conn) != initial
            assert changed
            # the candidates that would forbid it there are named (a policy picking one cannot offer it)
            assert o.conflicts <= {d.candidate.key for d in checked if d.candidate.tool == tool}
    # a value the row already holds on every forbidden row changes nothing: no alternative (fermenting -> fermenting)
    if governed == "fill_keg":
        fermenting = next(c for c in ours if c.candidate.words.get("value") == "fermenting")
        assert "fermenting" not in {o.alternative.value for o in found[fermenting.candidate.key]}


# ------------------------------------------------------------------ the pick


def test_the_pick_names_an_alternative_and_policy_md_env_json_and_the_enforced_refusal_carry_it(tmp_path) -> None:
    env = permit_policy()
    renew = next(r for r in env.rules if r.tools == ["renew_permit"])
    assert renew.worded_by == "llm" and renew.alternative == ir.Alternative(
        tool="set_permit_status", same={"permit_id": "permit_id"}, fixed={"status": "submitted"}, value="submitted")
    assert [r.alternative for r in env.rules if r is not renew] == [None, None]
    d = write_env_dir(env, tmp_path / "permits")
    text = (d / POLICY).read_text(encoding="utf-8")
    assert (f"{renew.message} (applies to: `renew_permit`) Instead: `set_permit_status` with status 'submitted'."
            in text)
    assert "(applies to: `correct_fee`)\n" in text  # a rule without one keeps its line
    data = json.loads((d / "env.json").read_text())
    assert [("alternative" in r) for r in data["rules"]] == [r is renew for r in env.rules]
    loaded, _, _ = load_env_dir(d)
    assert loaded == env and loaded.env_id == env.env_id
    # an env.json written before alternatives existed still loads (the field is optional)
    old = {**data, "rules": [{k: v for k, v in r.items() if k != "alternative"} for r in data["rules"]]}
    assert ir.Environment.model_validate(old).rules[1].alternative is None
    with EnvInstance(env, enforce_policy=True) as inst:  # enforcing: the refusal names the alternative
        out = inst.call("renew_permit", {"permit_id": 3, "expires_on": "2026-12-31"})  # EV-2025-333, expired
        assert out["kind"] == "guard" and names_value(out["error"], "submitted")
        assert inst.call("set_permit_status", {"permit_id": 3, "status": "submitted"})["ok"]


def test_a_message_that_does_not_name_its_alternative_is_fed_back_then_worded_by_code() -> None:
    unnamed = picking([(EXPIRED, "submitted", "An expired permit cannot be extended."),
                       (FEE, None, "Fees above 1200 need a supervisor."),
                       (SUBMITTED, None, "A permit that is only submitted cannot be inspected.")])
    named = picking([(EXPIRED, "submitted", "An expired permit cannot be extended; it is set back to submitted."),
                     (FEE, None, "Fees above 1200 need a supervisor."),
                     (SUBMITTED, None, "A permit that is only submitted cannot be inspected.")])
    said = prose_saying(permit_env(), [EXPIRED, FEE, SUBMITTED])
    client = fake_client([said, unnamed, named])
    rules = make_policy(permit_env(), client, SETTINGS).value.rules
    assert len(client.requests) == 3
    feedback = client.requests[2][-1]["content"]
    assert "must say what to do instead" in feedback and "'submitted'" in feedback
    assert (rules[0].message, rules[0].worded_by) == (
        "An expired permit cannot be extended; it is set back to submitted.", "llm")
    # no better reply: the rule keeps its alternative with code's words, which name it
    client = fake_client([said] + [unnamed] * 6)
    rules = make_policy(permit_env(), client, BuildSettings(policy=True, max_attempts=2)).value.rules
    assert rules[0].worded_by == "code" and rules[0].alternative is not None
    assert rules[0].message == ("Extend a permit to a new expiry date: not allowed after the permit's expires on. "
                                "Instead, the permit's status can be set to submitted.")
    assert [r.worded_by for r in rules[1:]] == ["llm", "llm"]


def test_an_alternative_of_another_rule_is_fed_back_and_the_rule_kept_without_one() -> None:
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        lines = messages[0]["content"].splitlines()
        expired = next(line.split(":")[0] for line in lines if EXPIRED in line)
        foreign = re.findall(r"(a\d+) '", "\n".join(lines))
        mine = re.findall(r"(a\d+) '", "\n".join(lines[lines.index(next(x for x in lines if EXPIRED in x)) + 1:][:1]))
        other = next(a for a in foreign if a not in mine)
        submitted = next(line.split(":")[0] for line in lines if SUBMITTED in line)
        return {"rules": [{"id": expired, "instead": other, "message": "An expired permit cannot be extended."},
                          {"id": submitted, "message": "A permit that is only submitted cannot be inspected."}]}

    client = fake_client([prose_saying(permit_env(), [EXPIRED, SUBMITTED])] + [reply] * 8)
    res = make_policy(permit_env(), client, BuildSettings(policy=True, max_attempts=2, policy_rules=2))
    assert "is not an alternative of" in client.requests[2][-1]["content"]
    # the LLM's rules are kept; the one given another's alternative offers nothing and is worded by code
    assert [(r.tools, r.alternative, r.worded_by) for r in res.value.rules][0] == (["renew_permit"], None, "code")
    assert not [r for r in res.rejections if r.item == "pick"]


def test_an_alternative_that_another_picked_rule_forbids_is_fed_back_and_dropped() -> None:
    # the brewery: a fermenting batch's alternative (conditioning) is a status change, which a rule on batches
    # brewed before today forbids for the rows concerned
    past = "\"Move a batch to another stage of production\" is forbidden when the batch's brewed on is before today"
    first = picking([(FERMENTING, "conditioning", "A batch still fermenting cannot fill kegs; move it to conditioning."),
                     (past, None, "A batch brewed in the past stays where it is.")])
    second = picking([(FERMENTING, None, "A batch still fermenting cannot fill kegs."),
                      (past, None, "A batch brewed in the past stays where it is.")])
    client = fake_client([prose_saying(brewery_env(), [FERMENTING, past]), first, second])
    rules = make_policy(brewery_env(), client, BuildSettings(policy=True, max_attempts=3, policy_rules=2)).value.rules
    feedback = client.requests[2][-1]["content"]
    assert re.search(r"the alternative a\d+ of r\d+ breaks rule r\d+, which you also picked", feedback), feedback
    assert [(r.message, r.alternative, r.worded_by) for r in rules] == [
        ("A batch still fermenting cannot fill kegs.", None, "llm"),
        ("A batch brewed in the past stays where it is.", None, "llm")]


def test_a_rule_without_a_valid_alternative_and_an_environment_without_any_stay_as_before() -> None:
    env = brewery_policy()
    strong = next(r for r in env.rules if r.tools == ["add_beer"])
    assert strong.alternative is None and strong.message.startswith("The head brewer must approve")
    keg = next(r for r in env.rules if r.tools == ["fill_keg"])
    assert keg.alternative is not None and keg.alternative.fixed == {"status": "conditioning"}
    # no other write takes a permit with only listed values left to fix: the request of old, rules without one
    plain = permit_env()
    plain = plain.model_copy(update={"tools": [t for t in plain.tools if t.name != "set_permit_status"]})
    client = fake_client([prose_saying(plain, [EXPIRED, FEE])] + [{"rules": []}] * 4)
    rules = make_policy(plain, client, SETTINGS).value.rules
    prompt = client.requests[1][0]["content"]
    assert "instead" not in prompt and prompt.rstrip().endswith('"message": "<the message>"}, ...]}')
    assert rules and all(r.alternative is None for r in rules)
    assert all("alternative" not in r.model_dump(mode="json") for r in rules)
    with EnvInstance(plain) as inst:
        short = shortlist(check(plain, propose(plain, inst.conn))[0])
    assert alternatives(plain, short) == {}


# ------------------------------------------------------------------ the exception shape, planned and proved


def test_an_enforcing_server_refuses_with_the_message_that_names_the_alternative(tmp_path) -> None:
    env = permit_policy()
    env_dir = write_env_dir(env, tmp_path / "env")
    assert check_server(env_dir)
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db, args=("--enforce-policy",)) as base:
        status, body = http("POST", f"{base}/tools/renew_permit", {"permit_id": 3, "expires_on": "2026-12-31"})
        assert status == 400 and body["kind"] == "guard" and names_value(body["error"], "submitted")
        status, body = http("POST", f"{base}/tools/set_permit_status", {"permit_id": 3, "status": "submitted"})
        assert status == 200 and body["ok"]


def test_the_wording_lint_refuses_a_request_that_names_the_alternative() -> None:
    env = permit_policy()
    with fresh(env) as run:
        ch = next(c for c in plan_chains(env, run, 40, TIERS, spread=True, rules=True) if c.shape == "exception")
    permit, date = ch.must_state
    assert lint_request(env, ch, f"Please extend permit {permit} until {date}.", plain=True) is None
    problem = lint_request(env, ch, f"Please extend permit {permit} until {date}, or set it to submitted.", plain=True)
    assert problem is not None and "'submitted'" in problem and "asks only for the change itself" in problem


@pytest.mark.parametrize("make", [permit_policy, brewery_policy], ids=["permits", "brewery"])
def test_exception_chains_ask_for_the_forbidden_write_and_do_the_alternative(make) -> None:
    env = make()
    rule = next(r for r in env.rules if r.alternative is not None)
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, TIERS, spread=True, rules=True)
    ex = [c for c in chains if c.shape == "exception"]
    assert ex
    with EnvInstance(env, enforce_policy=True) as inst:
        for ch in ex:
            forbids = [r for r in ch.rules if r["verdict"] == "forbids"]
            assert [r["id"] for r in forbids] == [rule.id] and ch.tier == 3
            alt = ch.calls[-1]
            assert forbids[0]["instead"] == {"tool": alt.tool, "arguments": alt.arguments}
            assert alt.tool == rule.alternative.tool and alt.arguments == rule.alternative.call(  # type: ignore[union-attr]
                forbids[0]["arguments"]).arguments
            # the request is the forbidden write's (its goal and values), never the alternative's value
            assert ch.goals[0].kind in ("update", "create") and rule.alternative.value in ch.hidden  # type: ignore[union-attr]
            assert ch.sources[-1][next(iter(rule.alternative.fixed))] == "policy"  # type: ignore[union-attr]
            # the reference replays with the rules enforced; the forbidden write is refused with the message
            inst.reset()
            assert all(inst.call(c.tool, c.arguments)["ok"] for c in ch.calls)
            inst.reset()
            assert inst.call(forbids[0]["tool"], forbids[0]["arguments"])["error"] == rule.message


@pytest.mark.parametrize("make, gated", [(permit_policy, "expires_on"), (brewery_policy, None)],
                         ids=["permits", "brewery"])
def test_exception_tasks_are_proved_and_every_adversary_scores_0(make, gated: str | None) -> None:
    env = make()
    settings = TaskSettings(n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
    ex = [t for t in tasks if t.metadata.get("shape") == "exception"]
    assert ex, [t.metadata.get("shape") for t in tasks]
    rule = next(r for r in env.rules if r.alternative is not None)
    for t in ex:
        assert t.metadata["policy"].count("Instead: ") == 1 and t.metadata["worded_by"] == "template"
        forbidden = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                     if r["verdict"] == "forbids"]
        assert forbidden and forbidden[0].tool == rule.tools[0] and t.reference_solution[-1].tool != forbidden[0].tool
        assert not names_value(t.instruction, rule.alternative.value)  # type: ignore[union-attr]
        # the forbidden write is a gate: on the alternative's row (a renewal), the column it would set keeps its
        # value; elsewhere (a keg filled: a new row of another table) the frame already gates it
        gates = [a for a in t.verifier.assertions if a.name == "gate" and a.description.startswith("a forbidden")]
        assert [gated in a.description for a in gates] == ([True] if gated else [])
        report = {r.name: r for r in prove(env, t).results}
        assert all(r.ok for r in report.values()), prove(env, t).reason()
        assert {"reference", "initial_state", "no_op", "overreach", "blind"} <= set(report)

        def score(calls: list[ir.ToolCall], task: ir.Task = t) -> float:
            with fresh(env) as run:
                play(run, calls, stop_on_error=False, changes=False)
                return reward.score(task.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial).reward

        reads = [c for c in t.reference_solution if env.tool(c.tool).kind == "read"]
        assert score(list(t.reference_solution)) == 1.0
        assert score([]) == 0.0 and score(reads) == 0.0  # the initial state; doing nothing
        assert score(reads + forbidden) == 0.0  # doing what was asked (the forbidden write)
        concrete, extra = overreach_calls(env, t)
        assert forbidden[0] in extra and score(concrete + extra) == 0.0  # doing everything
        assert score(blind_calls(env, t)) == 0.0  # the alternative and the forbidden write, no read
        assert score([*t.reference_solution, *forbidden]) == 0.0 and score([*forbidden, *t.reference_solution]) == 0.0


@pytest.mark.parametrize("make", [permit_policy, brewery_policy], ids=["permits", "brewery"])
def test_every_exception_task_names_its_rule_its_alternative_and_its_evidence(make) -> None:
    # the request is the forbidden write's own wording; what the task is about is in its metadata, as for a decide
    # or a compound task: per governed write, the rule and its verdict; for the forbidden one, the alternative
    env = make()
    rules = {r.id: r for r in env.rules}
    settings = TaskSettings(n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)
    bank = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
    # the sampler draws rule-bound chains in a shuffled order: with a compound chain for every forbidden write that
    # has an allowed partner (two new batches for other beers too), the brewery's one exception chain a round comes
    # within its first 24 draws, not its first 8
    sampled = sample(env, 24, seed=0, want=Want(level=5)).tasks
    ex = [t for t in [*bank, *sampled] if t.metadata.get("shape") == "exception"]
    assert ex and any(t in sampled for t in ex), [t.metadata.get("shape") for t in [*bank, *sampled]]
    again, err = rederive_task(env, ex[0])  # as after a repair: the record keeps what it exercises
    assert again is not None and again.metadata["rules"] == ex[0].metadata["rules"], err
    for t in ex:
        verdicts = t.metadata["rules"]
        named = [v for v in verdicts if v["verdict"] == "forbids" and "instead" in v]
        assert len(named) == 1, verdicts
        v = named[0]
        rule = rules[v["id"]]
        assert rule.alternative is not None and v["tool"] in rule.tools and rule.message in t.metadata["policy"]
        alt = t.reference_solution[-1]  # the reference does the alternative the rule names, on the same row
        assert v["instead"] == {"tool": alt.tool, "arguments": alt.arguments} == \
            rule.alternative.call(v["arguments"]).model_dump(mode="json")
        assert {(w["id"], w["tool"]) for w in verdicts if w is not v} == {(r.id, alt.tool) for r in env.rules
                                                                          if alt.tool in r.tools}
        assert all(w["verdict"] == "allows" for w in verdicts if w is not v)
        # the evidence: reads before the alternative, whose results name the row; the fixed values are the policy's
        evidence = t.reference_solution[:-1]
        assert evidence and all(env.tool(c.tool).kind == "read" for c in evidence)
        src = t.metadata["sources"][-1]
        assert all(src[q].startswith("$") for q in rule.alternative.same)
        assert all(src[q] == "policy" for q in rule.alternative.fixed)
