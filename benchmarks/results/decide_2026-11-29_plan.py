"""Baselines over a code-worded bank's rule-bound tasks, no model (issue 40, tenth session): the example library
(ENV_DIR with env.json and initial.db) or the brewery fixture with its code-picked rules (``brewery``, the bank
tests/verify/test_tester_rules_real.py makes). Prints the planned rule-bound shapes, the bank's rule-bound tasks
with the calls of each and the blind writer's and do-nothing's scores."""
import sys
from collections import Counter
from pathlib import Path

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh, play
from pipeline.settings import TaskSettings
from pipeline.stages.tasks.bank import generate_tasks
from pipeline.stages.tasks.planner import plan_chains

arg = sys.argv[1]
if arg == "brewery":
    from pipeline import settings as cfg
    from pipeline.stages.policy.house_rules import make_policy
    from tests.fixtures.brewery import brewery_env
    env = make_policy(brewery_env(), fake_client([{"rules": []}] * 9), cfg.BuildSettings(policy=True)).value
    db, template = None, False  # as the real-model test: fake wording that fails, no code fallback given
    settings = TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1)
else:
    E = Path(arg)
    env = ir.Environment.model_validate_json((E / "env.json").read_text())
    db = E / "initial.db"
    settings = TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1, template_fallback=True)
with fresh(env, db) as run:
    chains = plan_chains(env, run, 10, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True, rules=True, initial_db=db)
ruled = [c for c in chains if c.rules]
print("chains", len(chains), "rule-bound", len(ruled), dict(Counter(c.shape for c in ruled)))
tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 900), settings=settings, initial_db=db).value or []
bound = [t for t in tasks if t.metadata.get("rules")]


def score(t, calls):
    with fresh(env, db) as run:
        play(run, calls)
        assert run.error is None, run.error
        return reward.score(t.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial).reward


blind, idle = [], []
for t in bound:
    asked = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
             if r["verdict"] == "forbids"]
    done = list(t.reference_solution[:-1]) if t.metadata["shape"] == "exception" else list(t.reference_solution)
    blind.append(score(t, done + asked[:1]))
    idle.append(score(t, []))
    verdicts = [(r["verdict"], r["tool"]) for r in t.metadata["rules"]]
    print(f"  {t.metadata['shape']:14} {[c.tool for c in t.reference_solution]} {verdicts} "
          f"blind {blind[-1]} idle {idle[-1]} | {t.instruction[:150]!r}")
print("bank", len(tasks), "rule-bound", len(bound), dict(Counter(t.metadata["shape"] for t in bound)))
print(f"blind {sum(blind)}/{len(bound)}  do-nothing {sum(idle)}/{len(bound)}")
