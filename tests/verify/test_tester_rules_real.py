"""The tester, with the real embedded model, on rule-bound tasks (issue 28): the brewery with its code-picked rules, a
bank planned by code (``[stages.tasks] rule_tasks``, the bank of ``test_tester_rules_bank``), the tester given the
policy after its system prompt (``verify.policy``). It tries the bank's single-write decide tasks, the one whose write
the rules allow first (the capability under test: acting on a request the policy governs), then the one whose write
they forbid, three attempts each (one greedy, two sampled), stopping at the first solved.

History: 2026-11-26, two attempts at the two shortest rule-bound tasks of the brewery and the permit office: 1 of 8
passed (a keg filled for a batch the rules allow), 7 min. 2026-11-29 (ninth session): every rule-bound task was a
two-write compound and the model solved 0 of 6 attempts (it repeated the first create), so the test was xfail; the
bank now keeps a pair of single-write decide tasks among its compounds (issue 40, tenth session).

What must hold: every attempt is judged (reward in [0, 1], one step per call made), the model saw the policy, and the
model solves at least one of them.
"""

from __future__ import annotations

import pytest

from pipeline import settings as cfg
from tests.verify.test_tester_rules_bank import brewery_rule_bank, single_write_decides
from verify import tester
from verify.policy import policy_text

SETTINGS = cfg.TesterSettings(attempts=3, max_turns=5, max_tokens=200, protocol="json_action")


@pytest.mark.real_llm
def test_real_model_solves_a_rule_bound_task(real_llm) -> None:
    env, tasks = brewery_rule_bank()
    decides = single_write_decides(env, tasks)
    assert decides, f"{env.scenario.name}: no single-write decide task among {[t.metadata['shape'] for t in tasks]}"
    passed = []
    for task in decides:  # attempt by attempt (greedy, then seeded samples), until one is solved
        for k in range(1, SETTINGS.attempts + 1):
            a = tester.run_attempt(real_llm, env, task, attempt=k, settings=SETTINGS)
            print(f"{env.scenario.name} ({task.metadata['shape']}): {task.instruction!r} attempt {a.attempt}: "
                  f"reward {a.reward} calls {[s.tool for s in a.steps]}")
            assert 0.0 <= a.reward <= 1.0 and a.tool_calls == len(a.steps)
            if a.passed:
                passed.append(task.task_id)
                break
        if passed:
            break
    assert passed, "the embedded model solved no single-write decide task"
    assert policy_text(env) and "rule" in policy_text(env).lower()
