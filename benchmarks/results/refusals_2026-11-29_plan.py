"""Plan the committed library env's chains with rules (no model): which rule-bound chains exist, and what a
code-only bank (template wording, fake client) takes, with blind/idle scores."""
import sys
from collections import Counter
from pathlib import Path

from pipeline import ir
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import plan_chains

E = Path(sys.argv[1])
env = ir.Environment.model_validate_json((E / "env.json").read_text())
db = E / "initial.db"
with fresh(env, db) as run:
    chains = plan_chains(env, run, 10, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True, rules=True, initial_db=db)
ruled = [c for c in chains if c.rules]
print("chains", len(chains), "rule-bound", len(ruled))
print(Counter(c.shape for c in ruled))
for c in ruled:
    if c.shape in ("compound_rule", "exception"):
        print(c.shape, [(r["verdict"], r["arguments"]) for r in c.rules], c.facts)
if "--bank" in sys.argv[2:]:
    from pipeline.llm import fake_client
    from pipeline.settings import TaskSettings
    from pipeline.stages.tasks.bank import generate_tasks
    settings = TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1, template_fallback=True)
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 600), settings=settings, initial_db=db).value or []
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
    print("bank", len(tasks), "rule-bound", len(bound), [t.metadata["shape"] for t in bound])
    print("blind", blind, "share", sum(blind) / max(1, len(bound)))
    print("idle", idle, "share", sum(idle) / max(1, len(bound)))
