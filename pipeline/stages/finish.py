"""The end of an environment's verification: the accepted tasks as they stand on the final environment, then
the difficulty policy.

A repair made for a later task (a tool or the data regenerated) changes the environment after earlier tasks
were accepted: each such task is derived again on the final environment (``rederive_task``: same request and
calls, verifier derived and proved again) or dropped with the reason. Then ``[stages.difficulty]`` tags every
task and, in band mode, drops those outside the band (``verify.difficulty.apply_policy``).

Entry point: :func:`finish_tasks` (accepted tasks -> kept tasks + rejections); :func:`rederived` is the one
task's step, also taken before a task is verified on a repaired environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.ir import Environment, Rejection, Task
from pipeline.settings import DifficultyPolicy
from pipeline.stages.base import StageResult
from pipeline.stages.tasks import rederive_task
from verify.difficulty import apply_policy

STAGE = "verify"


def rederived(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> Task | Rejection:
    """``task`` as it holds on ``env`` (itself when made for ``env``), or why it does not hold any more."""
    if task.env_id == env.env_id:
        return task
    task2, err = rederive_task(env, task, initial_db=initial_db)
    if task2 is None:
        return Rejection(stage=STAGE, item=task.task_id, reason=f"does not hold on the repaired environment: {err}")
    return task2


def finish_tasks(env: Environment, accepted: Sequence[Task], policy: DifficultyPolicy, *,
                 initial_db: str | Path | None = None) -> StageResult[tuple[Task, ...]]:
    """The tasks kept for ``env`` out of the ``accepted`` ones, in their order (possibly none), and the
    rejections: first those that no longer hold on ``env``, then those the difficulty policy drops."""
    final: list[Task] = []
    rejections: list[Rejection] = []
    for t in accepted:
        r = rederived(env, t, initial_db=initial_db)
        if isinstance(r, Rejection):
            rejections.append(r)
        else:
            final.append(r)
    kept, dropped = apply_policy(final, policy)
    return StageResult(tuple(kept), (*rejections, *dropped))
