"""The real embedded model words and verifies planned tasks for the library (1 task, k=1). The shop of orders and
items ran too until 2026-11-26; it was dropped to keep CI's real-model time within its budget (other real-model
tests cover other domains: the brewery and the permit office, a ski resort and an asset register, the example's
pharmacy). One task since 2026-11-29 (issue 42, CI's real-model time): the second task repeated the first one's
calls (its wording with feedback, a tester conversation, its review), ~2.7 of this test's 5.8 min in the -n 2 run of
that morning.

What must hold whatever the small model writes: every kept task was proven (reference replay passes,
initial / no-op / destructive trajectories fail) and holds again when proven independently; every
tester attempt has a checker verdict per call; the report accounts for every planned task. That the
model yields at least one task is the capability under test.
"""

from __future__ import annotations

import time

import pytest

from pipeline.graph import verify_env
from pipeline.settings import VerifySettings
from pipeline.stages.tasks.bank import TaskSettings
from tests.fixtures.library import library_env
from verify import tester
from verify.proofs import prove

SETTINGS = VerifySettings(
    tasks=TaskSettings(max_attempts=2, rows_per_table=4, max_tokens=200),
    tester=tester.TesterSettings(attempts=1, max_turns=4, max_tokens=160),
    fix_rounds=0,
)


@pytest.mark.real_llm
@pytest.mark.parametrize("make_env", [library_env], ids=["library"])
def test_real_model_generates_and_verifies_tasks(real_llm, make_env) -> None:
    env = make_env()
    t0 = time.perf_counter()
    res = verify_env(env, real_llm, n_tasks=1, settings=SETTINGS, progress=print)
    print(f"\nreal verify: {time.perf_counter() - t0:.1f}s; usage {real_llm.usage.by_stage()}")
    for t in res.tasks:
        print(f"  kept [{t.kind}] {t.instruction!r} -> {[c.model_dump() for c in t.reference_solution]} "
              f"answer={t.verifier.answer!r} passes={t.difficulty.passes}/{t.difficulty.attempts}")
    for r in res.rejections:
        print(f"  rejected [{r.stage}] {r.item}: {r.reason[:200]}")
    summary = res.report["summary"]
    assert summary["planned"] >= 1  # the tasks kept plus those the task stage rejected; wording stops at 1 kept
    assert summary["kept"] + len([r for r in res.rejections if r.stage == "tasks"]) + \
        len([o for o in res.outcomes if o.status == "rejected"]) == summary["planned"]
    assert res.tasks, "the model produced no task that survives its proofs"
    for t in res.tasks:
        assert prove(env, t).ok
        assert t.difficulty.attempts == 1
        assert t.instruction and not t.instruction.lower().startswith("find library members whose name")
        assert t.metadata["tier"] >= 1 and t.metadata["steps"] == len(t.reference_solution)
    for o in res.outcomes:
        assert len(o.reviews) == len(o.attempts) == 1
        assert len(o.reviews[0].verdicts) == len(o.attempts[0].steps)
    assert sum(summary["pass_rate_histogram"].values()) == summary["kept"]
