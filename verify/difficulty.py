"""Difficulty from tester pass rates: tags, the keep policy and the histogram reports show.

RL needs spread within a group of rollouts, so a bank may keep only tasks whose pass rate lies in
a band (``mode="band"``); the default keeps every task and tags it (``mode="tag"``).
"""

from __future__ import annotations

from pipeline.ir import Rejection, Task
from pipeline.settings import DifficultyPolicy as DifficultyPolicy

BINS = ((0.0, 0.0, "0"), (0.0, 0.25, "(0,0.25]"), (0.25, 0.5, "(0.25,0.5]"), (0.5, 0.75, "(0.5,0.75]"),
        (0.75, 1.0, "(0.75,1]"))


def pass_rate(task: Task) -> float | None:
    d = task.difficulty
    return None if d.attempts == 0 else d.passes / d.attempts


def tag(rate: float | None) -> str:
    if rate is None:
        return "untested"
    if rate == 0:
        return "unsolved"
    if rate <= 1 / 3:
        return "hard"
    if rate <= 2 / 3:
        return "medium"
    return "easy"


def apply_policy(tasks: list[Task], policy: DifficultyPolicy) -> tuple[list[Task], list[Rejection]]:
    """Tag every task (``metadata.difficulty_tag``, ``metadata.pass_rate``); in band mode drop the rest."""
    kept: list[Task] = []
    dropped: list[Rejection] = []
    for t in tasks:
        rate = pass_rate(t)
        t = t.model_copy(update={"metadata": {**t.metadata, "difficulty_tag": tag(rate), "pass_rate": rate}})
        if policy.mode == "band" and (rate is None or not policy.min_pass_rate <= rate <= policy.max_pass_rate):
            dropped.append(Rejection(
                stage="difficulty", item=t.task_id,
                reason=f"pass rate {rate} outside [{policy.min_pass_rate}, {policy.max_pass_rate}]",
                evidence={"attempts": t.difficulty.attempts, "passes": t.difficulty.passes},
            ))
            continue
        kept.append(t)
    return kept, dropped


def histogram(tasks: list[Task]) -> dict[str, int]:
    """Count of tasks per pass-rate bin (``"0"`` is exactly zero; ``untested`` has no attempts)."""
    out = {label: 0 for _, _, label in BINS}
    out["untested"] = 0
    for t in tasks:
        rate = pass_rate(t)
        if rate is None:
            out["untested"] += 1
            continue
        for lo, hi, label in BINS:
            if (rate == 0 and hi == 0) or (lo < rate <= hi):
                out[label] += 1
                break
    return out
