"""The bank tests/verify/test_tester_rules_real.py gives the real model, made here with fake clients (issue 40): the
brewery with its code-picked rules, ``generate_tasks`` as that test calls it. Its rule-bound tasks keep a pair of
single-write decide tasks, one whose write the rules allow (what the real-model test tries first) and one whose
write they forbid (a refusal: the reference reads the evidence and writes nothing), beside compounds, so that
neither an agent that writes whatever it is asked without reading nor one that does nothing earns 20% of them."""

from __future__ import annotations

from pipeline import ir
from pipeline import settings as cfg
from pipeline.llm import fake_client
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh, play
from pipeline.stages.policy.house_rules import make_policy
from pipeline.stages.tasks.bank import generate_tasks
from tests.fixtures.brewery import brewery_env
from verify.derive import refusal_reason
from verify.proofs import wrong_answer

SINGLE = ("allowed", "refused")


def brewery_rule_bank() -> tuple[ir.Environment, list[ir.Task]]:
    """The brewery with its code-picked rules and its bank of 10 (fake wording that fails: code words the tasks)."""
    env = make_policy(brewery_env(), fake_client([{"rules": []}] * 9), cfg.BuildSettings(policy=True)).value
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400),
                           settings=cfg.TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1)).value or []
    return env, tasks


def single_write_decides(env: ir.Environment, tasks: list[ir.Task]) -> list[ir.Task]:
    """The bank's single-write decide tasks, the allowed one(s) first, each kind shortest first: allowed, a governed
    write every rule allows done by the reference; refused, a governed write a rule forbids asked for and not done."""
    def kind(t: ir.Task) -> str | None:
        rules = t.metadata.get("rules") or []
        writes = [c for c in t.reference_solution if env.tool(c.tool).kind == "write"]
        if not rules or t.metadata.get("shape") in ("compound_rule", "exception"):
            return None
        if len(writes) == 1 and all(r["verdict"] == "allows" for r in rules):
            return "allowed"
        if not writes and any(r["verdict"] == "forbids" for r in rules):
            return "refused"
        return None

    found = [(SINGLE.index(k), len(t.reference_solution), t.task_id, t) for t in tasks if (k := kind(t))]
    return [t for *_, t in sorted(found, key=lambda x: x[:3])]


def test_the_brewery_bank_keeps_a_decide_pair_and_no_baseline_earns_a_fifth() -> None:
    env, tasks = brewery_rule_bank()
    bound = [t for t in tasks if t.metadata.get("rules")]
    decides = single_write_decides(env, tasks)
    kinds = [t.metadata["shape"] for t in decides]
    assert len(decides) == 2 and kinds[1] == "refuse_rule" and kinds[0] != "refuse_rule", kinds
    allowed, refused = decides

    def score(t: ir.Task, calls: list[ir.ToolCall], answer: str | None = None) -> float:
        with fresh(env) as run:
            play(run, calls)
            assert run.error is None, run.error
            return reward.score(t.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial,
                                answer=answer).reward

    def asked(t: ir.Task) -> list[ir.ToolCall]:
        return [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                if r["verdict"] == "forbids"]

    # the pair: the allowed write is the gold, and doing nothing fails it; the refused one changes a row the
    # verifier pins, so the blind writer fails it, and its gold keeps the state and says why (the value its rule
    # checks, as the reference read it): doing nothing, or reading and not saying why, fails it too
    with fresh(env) as run:
        play(run, list(refused.reference_solution))
        reason = refusal_reason(env, [r.response for r in run.records], asked(refused))
    assert reason is not None and refused.verifier.answer is not None
    assert refused.verifier.answer["value"] == reason and reason not in refused.verifier.answer.get("others", [])
    assert wrong_answer(refused.verifier.answer) != reason  # the proofs' perturbed answer names another value
    assert score(allowed, list(allowed.reference_solution)) == 1.0 and score(allowed, []) == 0.0
    assert score(refused, list(refused.reference_solution), f"I cannot: it is {reason}.") == 1.0
    assert score(refused, list(refused.reference_solution), "I cannot do that.") == 0.0
    assert score(refused, []) == 0.0
    assert score(refused, asked(refused), f"Done; it was {reason}.") == 0.0 and refused.verifier.mutable_tables == []
    assert asked(allowed) == [] and len(asked(refused)) == 1
    # the blind writer (the reference's writes and the forbidden write asked for, no read) and do-nothing
    blind, idle = [], []
    for t in bound:
        done = list(t.reference_solution[:-1]) if t.metadata["shape"] == "exception" else list(t.reference_solution)
        writes = [c for c in done if env.tool(c.tool).kind == "write"]
        blind.append(score(t, writes + asked(t)[:1]))
        idle.append(score(t, []))
    shapes = [t.metadata["shape"] for t in bound]
    assert sum(blind) < 0.2 * len(bound) and sum(idle) < 0.2 * len(bound), (shapes, blind, idle)
    assert sum(blind) >= 1 and sum(idle) == 0  # the blind writer passes the allowed decide; doing nothing, none
    assert shapes.count("compound_rule") + shapes.count("exception") >= 4, shapes
