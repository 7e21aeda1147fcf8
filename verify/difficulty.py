"""Difficulty from tester pass rates: Wilson intervals, tags, the hard pool, the keep policy, the histogram.

Each task records ``difficulty = {attempts: k, passes: n}`` and, in ``metadata``, ``pass_rate`` (n/k),
``pass_rate_ci`` (the 95% Wilson score interval: with k=4 and 2 passes it is [0.15, 0.85], so a
point estimate alone says little), ``difficulty_tag`` and ``hard_pool``.

The hard pool: a task proved solvable (its reference solution replays to a passing state) that no
attempt solved is kept and flagged ``metadata.hard_pool = true`` rather than reworded toward an
easier one (rewording failed tasks drifts a bank toward easy tasks). A trainer can hold the pool back
for later curriculum stages or drop it.

RL needs spread within a group of rollouts, so ``[stages.difficulty]`` may keep only tasks whose pass
rate lies in a band (``mode="band"``, default 0.1-0.9; the hard pool is kept flagged unless
``keep_hard_pool = false``); the default keeps every task and tags it (``mode="tag"``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from pipeline.ir import Difficulty, Environment, Rejection, Task
from pipeline.settings import DifficultyPolicy as DifficultyPolicy

BINS = ((0.0, 0.0, "0"), (0.0, 0.25, "(0,0.25]"), (0.25, 0.5, "(0.25,0.5]"), (0.5, 0.75, "(0.5,0.75]"),
        (0.75, 1.0, "(0.75,1]"))
Z95 = 1.959963984540054


def wilson(passes: int, attempts: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``passes`` successes in ``attempts`` trials (None without trials)."""
    if attempts <= 0:
        return None
    if not 0 <= passes <= attempts:
        raise ValueError(f"passes {passes} not within 0..{attempts}")
    p = passes / attempts
    z2 = z * z
    denom = 1 + z2 / attempts
    centre = (p + z2 / (2 * attempts)) / denom
    half = z * math.sqrt(p * (1 - p) / attempts + z2 / (4 * attempts * attempts)) / denom
    return max(0.0, round(centre - half, 4)), min(1.0, round(centre + half, 4))


def pass_rate(task: Task) -> float | None:
    d = task.difficulty
    return None if d.attempts == 0 else d.passes / d.attempts


def tag(rate: float | None) -> str:
    """``untested``; ``hard_pool`` (no attempt solved it); ``hard`` (<= 1/3); ``medium`` (<= 2/3); ``easy``."""
    if rate is None:
        return "untested"
    if rate == 0:
        return "hard_pool"
    if rate <= 1 / 3:
        return "hard"
    if rate <= 2 / 3:
        return "medium"
    return "easy"


def in_hard_pool(task: Task) -> bool:
    """Proved solvable (every task that reaches the policy is) and no attempt solved it."""
    return task.difficulty.attempts > 0 and task.difficulty.passes == 0


def annotate(task: Task, attempts: Sequence[Any] | None = None) -> Task:
    """``task`` with its difficulty (from ``attempts``' ``passed`` flags when given) and the metadata a
    trainer's curriculum reads: ``pass_rate``, ``pass_rate_ci``, ``difficulty_tag``, ``hard_pool``."""
    if attempts is not None:
        task = task.model_copy(update={"difficulty": Difficulty(attempts=len(attempts),
                                                                passes=sum(bool(a.passed) for a in attempts))})
    d = task.difficulty
    rate = pass_rate(task)
    ci = wilson(d.passes, d.attempts)
    meta = task.metadata.with_values({"difficulty_tag": tag(rate), "pass_rate": None if rate is None else round(rate, 4),
                                      "pass_rate_ci": list(ci) if ci else None, "hard_pool": in_hard_pool(task)})
    return task.model_copy(update={"metadata": meta})


def rewording_allowed(fault_kind: str, fault_source: str, proofs_ok: bool) -> bool:
    """Whether the verify loop may send a task to the task fixer (rewording).

    Only while its proofs fail (the verifier or the wording is actually wrong). A task whose proofs
    hold is solvable as worded: an LLM checker's claim that the wording is at fault, or a tester that
    never solved it, is no reason to make it easier; it goes to the hard pool instead."""
    del fault_kind, fault_source  # the proofs decide, whoever claimed the fault
    return not proofs_ok


def apply_policy(tasks: list[Task], policy: DifficultyPolicy) -> tuple[list[Task], list[Rejection]]:
    """Annotate every task (:func:`annotate`); in band mode drop those outside the band (the hard pool is
    kept, flagged, unless ``keep_hard_pool`` is off)."""
    kept: list[Task] = []
    dropped: list[Rejection] = []
    for t in tasks:
        t = annotate(t)
        rate = pass_rate(t)
        in_band = rate is not None and policy.min_pass_rate <= rate <= policy.max_pass_rate
        if policy.mode == "band" and not in_band and not (policy.keep_hard_pool and in_hard_pool(t)):
            dropped.append(Rejection(
                stage="difficulty", item=t.task_id,
                reason=f"pass rate {rate} outside [{policy.min_pass_rate}, {policy.max_pass_rate}]",
                evidence={"attempts": t.difficulty.attempts, "passes": t.difficulty.passes,
                          "pass_rate_ci": t.metadata.pass_rate_ci},
            ))
            continue
        kept.append(t)
    return kept, dropped


def histogram(tasks: list[Task]) -> dict[str, int]:
    """Count of tasks per pass-rate bin (``"0"`` is exactly zero: the hard pool; ``untested`` has no attempts)."""
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


# ---------------------------------------------------------------- the tools a tester is offered

LADDER_DISTRACTORS: dict[int, int | None] = {1: 0, 2: 2, 3: 4, 4: 8, 5: None}
"""Tools offered beyond those a task needs, by its level (``pipeline.sampler``'s ladder; None: every tool)."""


def task_level(env: Environment, task: Task) -> int:
    """A task's level on the sampler's ladder (1 one call, 2 a short chain, 3 deep or computed, 4 two writes or
    implicit, 5 a refusal), read from its reference solution and metadata (``shape``, ``rules``) as
    ``pipeline.sampler.Axes`` reads a chain; a rule governing a write is one level up."""
    names = {t.name: t.kind for t in env.tools}
    calls = len(task.reference_solution)
    writes = sum(1 for c in task.reference_solution if names.get(c.tool) == "write")
    rules = [r for r in task.metadata.get("rules") or [] if isinstance(r, dict)]
    shape = task.metadata.get("shape")
    if any(r.get("verdict") == "forbids" for r in rules):
        return 5
    structure = 4 if writes >= 2 or shape == "decide_write" else 3 if calls >= 4 or shape == "aggregate" \
        else 2 if calls >= 2 else 1
    return min(5, structure + bool(rules))


def offered_tools(env: Environment, task: Task) -> list[str]:
    """The tools the ladder offers ``task`` (the tester keeps at most two of their distractors, eight at level 5:
    :func:`verify.tester.view_of`), in the environment's order: a task that already offers a
    subset (a sampled task's ``tools``) keeps it; else the tools of its reference (and of the writes its rules
    judge) plus the distractors of its level, drawn by the task's id, as the sampler draws them."""
    order = [t.name for t in env.tools]
    own = [s.get("function", s).get("name") for s in task.tools]
    if own and set(own) < set(order):
        return [n for n in order if n in own]
    needed = {c.tool for c in task.reference_solution} | {
        r["tool"] for r in task.metadata.get("rules") or [] if isinstance(r, dict) and r.get("tool")}
    k = LADDER_DISTRACTORS[task_level(env, task)]
    others = [n for n in order if n not in needed]
    extra = others if k is None or k >= len(others) else random.Random(f"tester:{task.task_id}").sample(others, k)
    return [n for n in order if n in needed or n in extra]
