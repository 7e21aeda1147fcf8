"""The policy after a repair (scripted fake LLM, real SQLite): every rule is checked again on the repaired tools and
rows with the build's check on real calls; a rule the new rows leave nothing to forbid is dropped with a rejection
naming it and why, the rule-bound tasks that exercise it are not emitted, and ``policy.md`` lists the rules kept."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipeline import ir
from pipeline.catalog.env_dir import POLICY, load_env_dir, write_env_dir
from pipeline.graph.verification import verify_env
from pipeline.llm import fake_client
from pipeline.settings import BuildSettings, DifficultyPolicy, TaskSettings, VerifySettings
from pipeline.stages.policy.house_rules import make_policy, recheck_policy
from pipeline.stages.rows.repair import repair_data
from pipeline.stages.tasks.bank import generate_tasks
from pipeline.stages.tasks.finish import finish_tasks, lost_rules
from tests.fixtures.brewery import brewery_env
from tests.stages.test_policy import SETTINGS, assert_rules_hold, picking, prose_saying
from tests.verify.test_call_review import all_pass
from tests.verify.test_tester import finish
from verify import tester

FERMENTING = "\"Record a keg filled from a batch\" is forbidden when the batch's status is 'fermenting'"
RETIRE = "\"Take a damaged keg out of service for good\" is forbidden when the keg's batch has status 'conditioning'"
STRONG = "\"Add a beer to the brewery's range\" is forbidden when the abv given is above"
# the kegs as the seed-data agent writes them again: none filled from the batch still conditioning any more
KEGS = {"rows": [[1, "K-1001", 50, "cold room"], [1, "K-1002", 30, "taproom"], [4, "K-1003", 50, "loading dock"],
                 [4, "K-1004", 30, "cold room"], [1, "K-1005", 30, "cold room"]]}
FAULT = SimpleNamespace(kind="data", target="kegs", reason="the kegs of the conditioning batch were emptied back")
REPAIR = BuildSettings(rows_per_call=12, max_attempts=1)


def brewery_rules() -> ir.Environment:
    reply = picking({FERMENTING: "A batch still fermenting cannot fill kegs.",
                     RETIRE: "A keg of a batch still conditioning is never taken out of service.",
                     STRONG: "The head brewer must approve any new beer with an abv above 6.2 percent."})
    return make_policy(brewery_env(), fake_client([prose_saying(brewery_env(), [FERMENTING, RETIRE, STRONG]), reply]),
                       SETTINGS).value


def retire_rule(env: ir.Environment) -> ir.Rule:
    return next(r for r in env.rules if r.tools == ["retire_keg"])


def test_an_unchanged_environment_keeps_every_rule_to_the_byte() -> None:
    env = brewery_rules()
    res = recheck_policy(env)
    assert res.value == env and res.rejections == ()
    plain = brewery_env()
    assert recheck_policy(plain).value is plain


def test_a_repair_whose_rows_leave_a_rule_nothing_to_forbid_drops_it_with_the_reason() -> None:
    env = brewery_rules()
    rule = retire_rule(env)
    repaired = repair_data(env, FAULT, fake_client([KEGS]), REPAIR)
    assert repaired is not None and repaired.rules == env.rules  # the repair alone keeps the rules as they were
    res = recheck_policy(repaired)
    assert [r.id for r in res.value.rules] == [r.id for r in env.rules if r.id != rule.id]
    [why] = res.rejections
    assert (why.stage, why.item) == ("policy", rule.id)
    assert why.reason.startswith(f"rule {rule.id} dropped after a repair: no real call of retire_keg that works is "
                                 "one it forbids"), why.reason
    assert why.evidence["condition"] == rule.condition and why.evidence["message"] == rule.message
    assert_rules_hold(res.value)  # the rules kept still allow and forbid real calls of the new rows
    # a rule-bound task of the dropped rule is not emitted; the others are, with the policy of the rules kept
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=TaskSettings(
        n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)).value or []
    exercising = [t for t in tasks if rule.id in {r["id"] for r in t.metadata.get("rules", [])}]
    assert exercising and all(lost_rules(res.value, t) == f"rule {rule.id}" for t in exercising)
    done = finish_tasks(res.value, tasks, DifficultyPolicy())
    kept = done.value or ()
    assert kept
    assert not any(rule.id in {r["id"] for r in t.metadata.get("rules", [])} for t in kept)
    assert all(rule.message not in t.metadata["policy"] for t in kept)
    dropped = [r for r in done.rejections if "no longer in the policy" in r.reason]
    assert {r.item for r in dropped} == {t.task_id for t in exercising}
    assert all(r.reason == f"exercises rule {rule.id}, no longer in the policy" for r in dropped)


def test_verify_drops_the_rule_and_its_tasks_after_a_data_repair_and_policy_md_follows(tmp_path: Path) -> None:
    env = brewery_rules()
    rule = retire_rule(env)
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=TaskSettings(
        n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)).value or []
    ids = [{r["id"] for r in t.metadata.get("rules", [])} for t in tasks]
    # a task no rule binds and no keg is in (a count of batches; since the bank takes at most two compounds a rule,
    # a lookup of a beer), a compound of the keg rule, another task the keg rule does not bind (the bank holds few
    # rule-bound tasks: decide tasks, which a blind writer passes, are held back)
    plain = next(t for t, i in zip(tasks, ids, strict=True) if not i and t.metadata["shape"] in ("aggregate", "lookup")
                 and not any("keg" in u for u in t.metadata["tools_used"]))
    doomed = next(t for t, i in zip(tasks, ids, strict=True) if rule.id in i)
    other = next(t for t, i in zip(tasks, ids, strict=True) if t is not plain and rule.id not in i)
    d = write_env_dir(env, tmp_path / "env", [plain, doomed, other])
    assert rule.message in (d / POLICY).read_text(encoding="utf-8")

    repairs = fake_client([KEGS])  # the seed-data agent writing the kegs again
    client = fake_client([
        finish("I could not."),  # the count: the tester gives up, the checker blames the kegs' rows
        all_pass(0, "environment", "data", "kegs", FAULT.reason),
        finish("Still no."), all_pass(0),  # on the repaired rows: proved again, tested again
        # the compound of the dropped rule is not verified at all: no request for it
        finish("No."), all_pass(0),  # the keg filled under the rule kept
    ])
    out = verify_env(env, client, tasks=[plain, doomed, other], env_dir=d,
                     settings=VerifySettings(tester=tester.TesterSettings(attempts=1)),
                     fix_data=lambda e, fault: repair_data(e, fault, repairs, REPAIR))
    assert client.remaining == [] and repairs.remaining == []
    assert out.env_changed and [r.id for r in out.env.rules] == [r.id for r in env.rules if r.id != rule.id]
    assert_rules_hold(out.env)
    policy = [r for r in out.rejections if r.stage == "policy"]
    assert [(r.item, r.reason.split(":")[0]) for r in policy] == [(rule.id, f"rule {rule.id} dropped after a repair")]
    skipped = [r for r in out.rejections if r.item == doomed.task_id]
    assert [r.reason for r in skipped] == [f"exercises rule {rule.id}, no longer in the policy"]
    assert [t.instruction for t in out.tasks] == [plain.instruction, other.instruction]
    assert all(t.env_id == out.env.env_id and rule.message not in t.metadata["policy"] for t in out.tasks)
    # the directory as written: env.json and policy.md hold the rules kept, the tasks their policy
    written, written_tasks, _ = load_env_dir(d)
    assert written == out.env and len(written_tasks) == 2
    text = (d / POLICY).read_text(encoding="utf-8")
    assert rule.message not in text and all(r.message in text for r in out.env.rules)


def test_a_rule_whose_alternative_a_repaired_tool_no_longer_does_is_dropped_and_so_are_its_exceptions() -> None:
    from tests.stages.test_exception_paths import permit_policy

    env = permit_policy()
    rule = next(r for r in env.rules if r.alternative is not None)  # an expired permit goes back to submitted
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=TaskSettings(
        n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)).value or []
    exceptions = [t for t in tasks if t.metadata["shape"] == "exception"]
    assert exceptions and all(lost_rules(env, t) == "" for t in tasks)
    # the status tool, written again by the tools agent, refuses an expired permit: the alternative fails exactly
    # where the rule forbids the renewal
    old = env.tool(rule.alternative.tool)  # type: ignore[union-attr]
    guard = ir.Step(kind="guard", sql="SELECT 1 FROM permits WHERE permit_id = :permit_id AND expires_on < '2026-01-15'",
                    must="not_exist", error="permit {permit_id} has expired")
    repaired = env.model_copy(update={"tools": [t.model_copy(update={"steps": [guard, *t.steps]}) if t is old else t
                                                for t in env.tools]})
    res = recheck_policy(repaired)
    assert [r.id for r in res.value.rules] == [r.id for r in env.rules if r.id != rule.id]
    [why] = res.rejections
    assert why.item == rule.id and "its alternative (set_permit_status with {'status': 'submitted'}) no longer " \
                                   "works" in why.reason, why.reason
    assert all(lost_rules(res.value, t) == f"rule {rule.id}" for t in exceptions)
    # the rule kept without its alternative (a hand edit): its exceptions are not emitted, its other tasks are
    bare = env.model_copy(update={"rules": [r.model_copy(update={"alternative": None}) if r.id == rule.id else r
                                            for r in env.rules]})
    assert all(lost_rules(bare, t) == f"the alternative of rule {rule.id}" for t in exceptions)
    assert all(lost_rules(bare, t) == "" for t in tasks if t.metadata["shape"] != "exception")
