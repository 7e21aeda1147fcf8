"""Rule-bound tasks under ``envfoundry eval`` against scripted OpenAI-compatible policies on loopback (issue 28).

Three policies play every rule-bound task (``metadata.rules``) of a task set: the reference (it follows the policy:
it passes), doing nothing, and doing everything (``verify.proofs.overreach_calls``: the reference, the writes the
rules forbid and every write tool on the values the request names). On a compound task (an allowed and a forbidden
write asked for at once) a third adversary does everything asked without reading (``blind_calls``). Doing nothing
and doing everything score 0 on every compound task and earn < 20 % of the reward over the rule-bound tasks; the
model is given the policy after its system prompt.

Task sets: banks planned by code on the brewery and the permit office with their code-picked rules. Until
2026-11-30 the committed example catalog (``[stages.build] policy``, ``[stages.tasks] rule_tasks``) was one too; its
regeneration of that day has no policy in either environment (the library's one rule was lost: see the CHANGELOG),
so it has no rule-bound task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.eval import EvalItem, EvalSettings, run_eval, task_hash
from pipeline.llm import fake_client
from pipeline.settings import BuildSettings, TaskSettings
from pipeline.stages.policy.house_rules import make_policy
from pipeline.stages.tasks.bank import generate_tasks
from tests.eval.scripted_server import Calls, Replay, noop, serve
from tests.eval.test_eval import client_for
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from verify.policy import policy_text
from verify.proofs import blind_calls, overreach_calls

SETTINGS = EvalSettings(max_turns=40, attempts=1, concurrency=2)


def ruled_items(tmp: Path) -> list[EvalItem]:
    out = []
    for make in (brewery_env, permit_env):
        env = make_policy(make(), fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value
        settings = TaskSettings(n_tasks=12, rule_tasks=True, max_attempts=1, template_fallback=True)
        tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
        out += [EvalItem(env, tmp / "no-env-dir", t, task_hash(t, policy_text(env))) for t in tasks]
    return out


def rule_bound(name: str, tmp: Path) -> list[EvalItem]:
    items = ruled_items(tmp)
    bound = [it for it in items if it.task.metadata.get("rules")]
    assert bound, f"{name}: no rule-bound task"
    return bound


@pytest.mark.parametrize("name", ["fixtures"])
def test_doing_nothing_or_everything_earns_little_on_rule_bound_tasks(tmp_path: Path, name: str) -> None:
    items = rule_bound(name, tmp_path)
    compound = {it.task.task_id for it in items if it.task.metadata.get("shape") == "compound_rule"}
    assert compound, "no compound allowed + forbidden task"

    def play(policy, out: str) -> dict[str, float]:
        with serve(policy) as server:
            run = run_eval(client_for(server.base_url), items, tmp_path / out, SETTINGS)
        # the policy reached the model after the system prompt, as policy.md says it
        system = server.requests[0]["messages"][0]["content"]
        assert policy_text(items[0].env) in system
        return {r["task_id"]: r["reward"] for r in run.rows}

    ref = play(Replay([it.task for it in items]), "reference")
    assert set(ref.values()) == {1.0}, ref
    nothing = play(noop, "nothing")
    overreach = {it.task.instruction: sum(overreach_calls(it.env, it.task, initial_db=it.initial_db), [])
                 for it in items}
    everything = play(Calls(overreach), "everything")
    blind = {it.task.instruction: blind_calls(it.env, it.task, initial_db=it.initial_db) for it in items}
    asked = play(Calls(blind), "blind")
    for rewards in (nothing, everything, asked):
        assert all(rewards[t] == 0.0 for t in compound), {t: rewards[t] for t in compound}
    for label, rewards in (("do nothing", nothing), ("do everything", everything)):
        share = sum(rewards.values()) / len(rewards)
        assert share < 0.2, f"{label} earns {share:.0%} of the reward over {len(rewards)} rule-bound tasks"
