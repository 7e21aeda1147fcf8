"""The tester: the eval harness (:mod:`verify.agent`) run k times on a task, on its own endpoint.

The tester sees only the request and the tools (and the environment's policy when it has rules),
exactly as ``envfoundry eval`` and a trainer's policy do (native tool calls; whole tool results), so
its pass rate describes the interface the trainer uses. ``[stages.tester]`` may name its own endpoint and model (``base_url``, ``model``,
``api_key``); by default it uses the generator's client. The first attempt decodes greedily, later
ones sample (``temperature``, seed = attempt) so they differ. An endpoint failure is raised, not
recorded as a failed attempt: it says nothing about the task, and the run retries the item.

What the tester is offered (:func:`view_of`): the tools of the task's reference solution (and of the writes its
rules judge) plus at most :data:`TESTER_DISTRACTORS_MAX` (2) of the distractors of its level on the sampler's ladder
(:func:`verify.difficulty.offered_tools`: 0, 2, 4 or 8), drawn by the task's id, and pages of
:data:`verify.agent.TESTER_PAGE` rows; a level-5 task (one that must refuse part of its request, whose ladder offers
every tool) gets at most :data:`TESTER_DISTRACTORS_LEVEL5` (8). The tools a task needs are always offered, so a task
stays as solvable as its proofs say; the pass rate of a task of levels 2-4 is its difficulty among two tools it does
not need, not among the 4 or 8 of its sampled form (issue 42: distractors were a third of the example's tester prompt
tokens). Every attempt and turn of a task starts with the same system prompt (instructions, policy, tools), then its
request, so a prefix cache serves them.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from pipeline.ir import Environment, Task
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import TesterSettings as TesterSettings
from verify.agent import TESTER_PAGE, Attempt, Step, View, turn_model
from verify.agent import run_attempt as _run_attempt
from verify.clients import endpoint_client
from verify.conversation import UserSettings, script_of, user_client
from verify.difficulty import offered_tools, task_level

STAGE = "tester"

__all__ = ["STAGE", "Attempt", "Step", "TesterSettings", "conversation_difficulty", "run_attempt", "run_attempts",
           "TESTER_DISTRACTORS_LEVEL5", "TESTER_DISTRACTORS_MAX", "run_conversations", "tester_client", "turn_model", "view_of"]

TESTER_DISTRACTORS_MAX = 2
"""The most distractors the tester is offered beside the tools a task of levels 1-4 needs (the ladder's level-2 count):
every task beyond one call keeps a wrong tool to pick at each step, and the tool list stays short in every prompt of
its attempts (issue 42: 8 distractors for level-4 tasks, 4 for level 3, were 14,134 of the example's 92,528 tester
prompt tokens)."""

TESTER_DISTRACTORS_LEVEL5 = 8
"""The most distractors a level-5 task is offered (one that must refuse part of its request, or a level-4 structure
under a rule; its sampled form offers every tool): level 4's count, as before. Cut to 2, the real model solved none of
the six attempts of ``tests/verify/test_tester_rules_real.py`` (the brewery's rule-bound decide task answered without a
call three times; 2026-11-30), which it solves with these."""


def tester_client(client: LLMClientProtocol, settings: TesterSettings) -> LLMClientProtocol:
    """The client the tester talks to: ``client`` itself, or one for ``[stages.tester]``'s endpoint with the
    generator's other LLM settings (cache, retries, seed) and the same usage ledger."""
    return endpoint_client(client, settings.base_url, settings.model, settings.api_key, "stages.tester")


def view_of(env: Environment, task: Task) -> View:
    """What the tester is offered for ``task``: the tools it needs and at most :data:`TESTER_DISTRACTORS_MAX` of its
    level's distractors (:data:`TESTER_DISTRACTORS_LEVEL5` at level 5; drawn by the task's id), in the environment's
    order; short pages."""
    names = offered_tools(env, task)
    needed = {c.tool for c in task.reference_solution} | {
        r["tool"] for r in task.metadata.get("rules") or [] if isinstance(r, dict) and r.get("tool")}
    others = [n for n in names if n not in needed]
    most = TESTER_DISTRACTORS_LEVEL5 if task_level(env, task) == 5 else TESTER_DISTRACTORS_MAX
    if len(others) > most:
        keep = set(random.Random(f"tester:{task.task_id}").sample(others, most))
        names = [n for n in names if n in needed or n in keep]
    return View(names=names, page=TESTER_PAGE)


def run_attempt(
    client: LLMClientProtocol,
    env: Environment,
    task: Task,
    *,
    attempt: int = 1,
    initial_db: str | Path | None = None,
    settings: TesterSettings | None = None,
) -> Attempt:
    """One tester attempt at ``task`` on a fresh instance, judged by the verifier afterwards."""
    settings = settings or TesterSettings()
    return _run_attempt(tester_client(client, settings), env, task, attempt=attempt, initial_db=initial_db,
                        settings=settings, stage=STAGE, raise_endpoint_errors=True, view=view_of(env, task))


def run_attempts(
    client: LLMClientProtocol, env: Environment, task: Task, *, initial_db: str | Path | None = None,
    settings: TesterSettings | None = None,
) -> list[Attempt]:
    settings = settings or TesterSettings()

    def one(i: int) -> Attempt:
        return run_attempt(client, env, task, attempt=i, initial_db=initial_db, settings=settings)

    numbers = range(1, settings.attempts + 1)
    if getattr(tester_client(client, settings), "prefetches", False):  # a remote endpoint: attempts at once
        return list(client.map(one, numbers))  # each on its own instance and seed; results in attempt order
    return [one(i) for i in numbers]


def run_conversations(
    client: LLMClientProtocol, env: Environment, task: Task, *, initial_db: str | Path | None = None,
    settings: TesterSettings | None = None, user: UserSettings | None = None,
) -> list[Attempt]:
    """``settings.conversations`` attempts at ``task``'s conversational form (``verify.conversation``) against the
    simulated user of ``user``, each with ``max_turns`` plus two turns per fact the user holds."""
    settings = settings or TesterSettings()
    user = user or UserSettings()
    facts = len(script_of(env, task).facts)
    talk = settings.model_copy(update={"max_turns": min(50, settings.max_turns + 2 * facts)})
    agent, sim = tester_client(client, settings), user_client(client, user)
    view = view_of(env, task)
    return [_run_attempt(agent, env, task, attempt=i, initial_db=initial_db, settings=talk, stage=STAGE,
                         raise_endpoint_errors=True, user=sim, user_settings=user, view=view)
            for i in range(1, settings.conversations + 1)]


def conversation_difficulty(talks: list[Attempt]) -> dict[str, Any]:
    """``metadata.conversation_difficulty``: attempts, passes, pass rate, attempts with a user error, user turns."""
    n = len(talks)
    return {"attempts": n, "passes": sum(a.passed for a in talks),
            "pass_rate": round(sum(a.passed for a in talks) / n, 4) if n else None,
            "user_error_attempts": sum(bool(a.user_errors) for a in talks),
            "user_turns": sum(a.user_turns for a in talks)}
