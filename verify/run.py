"""Verifying one environment end to end: generate tasks (or take given ones), run the per-task
subgraph (proofs, tester, checker, fix loop), apply the difficulty policy, build the report.

``verify_env`` is what ``envfoundry verify ENV_DIR`` and the catalog graph call; it writes nothing
(see ``verify.emit``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.ir import Environment, Rejection, Task
from pipeline.prompts import prompt_hashes
from pipeline.settings import VerifySettings as VerifySettings
from pipeline.stages.tasks import generate_tasks, rederive_task, revise_task
from verify.difficulty import apply_policy, histogram
from verify.graph import EnvFixer, TaskOutcome, VerifyDeps, build_verify_graph, verify_task


@dataclass
class EnvVerification:
    env: Environment
    tasks: list[Task]
    rejections: list[Rejection]
    outcomes: list[TaskOutcome]
    report: dict[str, Any]
    env_changed: bool = False
    trajectories: list[dict[str, Any]] = field(default_factory=list)


def _same_data(a: Environment, b: Environment) -> bool:
    return a.tables == b.tables and a.seed == b.seed


def verify_env(
    env: Environment,
    client: Any,
    *,
    initial_db: str | Path | None = None,
    tasks: list[Task] | None = None,
    n_tasks: int | None = None,
    settings: VerifySettings | None = None,
    fix_tool: EnvFixer | None = None,
    fix_data: EnvFixer | None = None,
    progress: Callable[[str], None] | None = None,
) -> EnvVerification:
    """Generate (when ``tasks`` is None) and verify the tasks of ``env``."""
    s = settings or VerifySettings()
    say = progress or (lambda _msg: None)
    base_env, db = env, (str(initial_db) if initial_db is not None else None)
    rejections: list[Rejection] = []
    planned = 0
    if tasks is None:
        say(f"generating tasks for {env.env_id}")
        res = generate_tasks(env, client, n=n_tasks, initial_db=db, settings=s.tasks)
        tasks = list(res.value or [])
        rejections += res.rejections
        planned = len(tasks) + len(res.rejections)
    else:
        planned = len(tasks)

    def db_for(e: Environment) -> str | None:
        return db if _same_data(e, base_env) else None

    deps = VerifyDeps(
        client=client, tester=s.tester, checker=s.checker, fix_rounds=s.fix_rounds,
        fix_task=lambda e, t, problem: revise_task(e, t, problem, client, initial_db=db_for(e), settings=s.tasks),
        fix_tool=fix_tool, fix_data=fix_data,
        rederive=lambda e, t: rederive_task(e, t, initial_db=db_for(e)),
    )
    graph = build_verify_graph(deps)
    current = env
    outcomes: list[TaskOutcome] = []
    for i, task in enumerate(tasks, 1):
        if task.env_id != current.env_id:
            task2, err = rederive_task(current, task, initial_db=db_for(current))
            if task2 is None:
                rejections.append(Rejection(stage="verify", item=task.task_id, reason=f"does not hold on the repaired environment: {err}"))
                continue
            task = task2
        say(f"task {i}/{len(tasks)}: {task.kind}: {task.instruction[:70]}")
        out = verify_task(current, task, deps, initial_db=db_for(current), graph=graph)
        outcomes.append(out)
        if out.env_changed:
            current = out.env
        if out.status == "rejected":
            rejections.append(Rejection(stage="verify", item=out.task.task_id, reason=out.reason,
                                        evidence={"instruction": out.task.instruction}))
    accepted = [o.task for o in outcomes if o.status == "accepted"]
    final: list[Task] = []
    for t in accepted:  # the environment may have been repaired after a task was accepted
        if t.env_id != current.env_id:
            t2, err = rederive_task(current, t, initial_db=db_for(current))
            if t2 is None:
                rejections.append(Rejection(stage="verify", item=t.task_id, reason=f"does not hold on the repaired environment: {err}"))
                continue
            t = t2
        final.append(t)
    kept, dropped = apply_policy(final, s.difficulty)
    rejections += dropped
    report = build_report(current, client, s, planned, outcomes, kept, rejections, env_changed=current is not env)
    trajectories = [
        {"task_id": o.task.task_id, **a.model_dump(mode="json", exclude={"seconds"}), "review": r.model_dump(mode="json")}
        for o in outcomes for a, r in zip(o.attempts, o.reviews, strict=False)
    ]
    return EnvVerification(current, kept, rejections, outcomes, report, current is not env, trajectories)


def _outcome_entry(o: TaskOutcome) -> dict[str, Any]:
    return {
        "task_id": o.task.task_id,
        "kind": o.task.kind,
        "instruction": o.task.instruction,
        "reference_solution": [c.model_dump(mode="json") for c in o.task.reference_solution],
        "status": o.status,
        "reason": o.reason,
        "proofs": [{"name": p.name, "ok": p.ok, "detail": p.detail[:300], **({"evidence": p.evidence} if "destructive" in p.name else {})}
                   for p in (o.proofs.results if o.proofs else [])],
        "difficulty": o.task.difficulty.model_dump(),
        "attempts": [
            {"attempt": a.attempt, "passed": a.passed, "stop": a.stop, "calls": len(a.steps),
             "final_answer": a.final_answer, "failures": a.failures[:3],
             "blame": r.blame, "fault": r.fault.model_dump() if r.fault else None, "checker_notes": r.notes,
             "verdicts": [v.model_dump() for v in r.verdicts]}
            for a, r in zip(o.attempts, o.reviews, strict=False)
        ],
        "history": o.history,
    }


def build_report(env: Environment, client: Any, s: VerifySettings, planned: int, outcomes: list[TaskOutcome],
                 kept: list[Task], rejections: list[Rejection], *, env_changed: bool) -> dict[str, Any]:
    verdicts: dict[str, Counter[str]] = {"rule": Counter(), "llm": Counter()}
    for v in (v for o in outcomes for r in o.reviews for v in r.verdicts):
        verdicts[v.source][v.verdict] += 1
    blames = Counter(r.blame for o in outcomes for r in o.reviews)
    hashes = prompt_hashes()
    return {
        "env_id": env.env_id,
        "model": getattr(client, "model", None),
        "prompts": {k: hashes[k] for k in ("tasks", "tester", "checker") if k in hashes},
        "settings": s.model_dump(mode="json"),
        "summary": {
            "planned": planned,
            "tested": len(outcomes),
            "accepted": sum(o.status == "accepted" for o in outcomes),
            "kept": len(kept),
            "rejected": len(rejections),
            "kinds": dict(sorted(Counter(t.kind for t in kept).items())),
            "pass_rate_histogram": histogram(kept),
            "checker_verdicts": {src: dict(sorted(c.items())) for src, c in verdicts.items()},
            "blame": dict(sorted(blames.items())),
            "env_changed": env_changed,
        },
        "tasks": [_outcome_entry(o) for o in outcomes],
        "rejections": [r.model_dump(mode="json") for r in rejections],
    }
