"""What a verification writes about itself: the ``verify`` section of ``report.json`` and the tester
trajectories, built from the per-task outcomes (deterministic: same outcomes, same JSON)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pipeline.graph.task import TaskOutcome
from pipeline.ir import Environment, Rejection, Task
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import prompt_hashes
from pipeline.settings import VerifySettings
from verify.difficulty import histogram


def outcome_entry(o: TaskOutcome) -> dict[str, Any]:
    """One task's line in the report: status, proofs, every attempt with the checker's verdicts, the fix history."""
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
        **({"tester_tools": o.attempts[0].offered} if o.attempts and o.attempts[0].offered else {}),
        "attempts": [
            {"attempt": a.attempt, "passed": a.passed, "stop": a.stop, "calls": len(a.steps),
             "final_answer": a.final_answer, "failures": a.failures[:3],
             "blame": r.blame, "fault": r.fault.model_dump() if r.fault else None, "checker_notes": r.notes,
             "verdicts": [v.model_dump() for v in r.verdicts]}
            for a, r in zip(o.attempts, o.reviews, strict=False)
        ],
        "history": o.history,
        **({"conversations": [
            {"attempt": a.attempt, "passed": a.passed, "stop": a.stop, "calls": len(a.steps), "turns": a.turns,
             "user_turns": a.user_turns, "user_errors": a.user_errors, "final_answer": a.final_answer,
             "failures": a.failures[:3]} for a in o.talks]} if o.talks else {}),
    }


def trajectories(outcomes: list[TaskOutcome]) -> list[dict[str, Any]]:
    """Every tester attempt with the checker's review of it (``trajectories.jsonl``; no wall-clock seconds, so a
    resumed run writes the same bytes)."""
    return [
        {"task_id": o.task.task_id, **a.model_dump(mode="json", exclude={"seconds"}), "review": r.model_dump(mode="json")}
        for o in outcomes for a, r in zip(o.attempts, o.reviews, strict=False)
    ] + [{"task_id": o.task.task_id, **a.model_dump(mode="json", exclude={"seconds"}), "review": None}
         for o in outcomes for a in o.talks]


def _talks_summary(outcomes: list[TaskOutcome]) -> dict[str, Any]:
    talks = [a for o in outcomes for a in o.talks]
    if not talks:
        return {}
    return {"conversations": len(talks), "conversation_pass_rate": round(sum(a.passed for a in talks) / len(talks), 4),
            "user_error_rate": round(sum(bool(a.user_errors) for a in talks) / len(talks), 4)}


def build_report(env: Environment, client: LLMClientProtocol, s: VerifySettings, planned: int, outcomes: list[TaskOutcome],
                 kept: list[Task], rejections: list[Rejection], *, env_changed: bool) -> dict[str, Any]:
    """The ``verify`` section of ``report.json``."""
    verdicts: dict[str, Counter[str]] = {"rule": Counter(), "llm": Counter()}
    for v in (v for o in outcomes for r in o.reviews for v in r.verdicts):
        verdicts[v.source][v.verdict] += 1
    blames = Counter(r.blame for o in outcomes for r in o.reviews)
    hashes = prompt_hashes()
    return {
        "env_id": env.env_id,
        "model": getattr(client, "model", None),
        "prompts": {k: hashes[k] for k in ("tasks", "tester", "checker", *(("user",) if s.tester.conversations else ()))
                    if k in hashes},
        "settings": s.model_dump(mode="json"),
        "summary": {
            "planned": planned,
            "tested": len(outcomes),
            "accepted": sum(o.status == "accepted" for o in outcomes),
            "kept": len(kept),
            "rejected": len(rejections),
            "kinds": dict(sorted(Counter(t.kind for t in kept).items())),
            "hard_pool": sum(t.metadata.hard_pool is True for t in kept),
            "pass_rate_histogram": histogram(kept),
            "checker_verdicts": {src: dict(sorted(c.items())) for src, c in verdicts.items()},
            "blame": dict(sorted(blames.items())),
            "env_changed": env_changed,
            **_talks_summary(outcomes),
        },
        "tasks": [outcome_entry(o) for o in outcomes],
        "rejections": [r.model_dump(mode="json") for r in rejections],
    }
