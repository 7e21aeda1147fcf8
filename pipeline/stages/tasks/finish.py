"""The end of an environment's verification: the accepted tasks as they stand on the final environment, then
the difficulty policy.

A repair made for a later task (a tool or the data regenerated) changes the environment after earlier tasks
were accepted: each such task is derived again on the final environment (``rederive_task``: same request and
calls, verifier derived and proved again) or dropped with the reason. Then ``[stages.difficulty]`` tags every
task and, in band mode, drops those outside the band (``verify.difficulty.apply_policy``).

Entry point: :func:`finish_tasks` (accepted tasks -> kept tasks + rejections); :func:`rederived` is the one
task's step, also taken before a task is verified on a repaired environment. A rule-bound task that exercises a
rule the repaired environment's policy dropped is not emitted (:func:`lost_rules`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.ir import Environment, Rejection, Task
from pipeline.settings import DifficultyPolicy
from pipeline.stages.base import StageResult
from pipeline.stages.tasks.bank import rederive_task
from verify.difficulty import apply_policy

STAGE = "verify"


def rederived(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> Task | Rejection:
    """``task`` as it holds on ``env`` (itself when made for ``env``), or why it does not hold any more: a rule-bound
    task whose rules (``metadata.rules``) name one ``env`` no longer has, or an alternative its rule no longer
    offers, is not emitted (the rule was dropped after a repair: :func:`pipeline.stages.policy.house_rules.recheck_policy`)."""
    gone = lost_rules(env, task)
    if gone:
        return Rejection(stage=STAGE, item=task.task_id, reason=f"exercises {gone}, no longer in the policy")
    if task.env_id == env.env_id:
        return task
    task2, err = rederive_task(env, task, initial_db=initial_db)
    if task2 is None:
        return Rejection(stage=STAGE, item=task.task_id, reason=f"does not hold on the repaired environment: {err}")
    return task2


def lost_rules(env: Environment, task: Task) -> str:
    """What of the policy ``task`` exercises that ``env`` no longer has (empty: nothing): a rule, or the
    alternative a rule offered for its forbidden write (``instead``)."""
    rules = {r.id: r for r in env.rules}
    gone: list[str] = []
    for v in task.metadata.get("rules") or []:
        rule = rules.get(v.get("id"))
        if rule is None:
            gone.append(f"rule {v.get('id')}")
        elif v.get("instead") is not None and (rule.alternative is None or rule.alternative.call(
                dict(v.get("arguments") or {})).model_dump(mode="json") != v["instead"]):
            gone.append(f"the alternative of rule {rule.id}")
    return ", ".join(dict.fromkeys(gone))


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
