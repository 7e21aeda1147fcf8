"""The tester: the eval harness (:mod:`verify.agent`) run k times on a task, on its own endpoint.

The tester sees only the request and the tools (and the environment's policy when it has rules),
exactly as ``envfoundry eval`` and a trainer's policy do (native tool calls; whole tool results), so
its pass rate describes the interface the trainer uses. ``[stages.tester]`` may name its own endpoint and model (``base_url``, ``model``,
``api_key``); by default it uses the generator's client. The first attempt decodes greedily, later
ones sample (``temperature``, seed = attempt) so they differ. An endpoint failure is raised, not
recorded as a failed attempt: it says nothing about the task, and the run retries the item.

What the tester is offered (:func:`view_of`): the tools of the task's reference solution (and of the writes its
rules judge) plus the distractors of its level on the sampler's ladder (:func:`verify.difficulty.offered_tools`:
0, 2, 4 or 8, every tool for a task that must refuse part of its request), and pages of
:data:`verify.agent.TESTER_PAGE` rows. Its pass rate is therefore the difficulty of the task as a sampled task of
that level offers it, not with every tool of the environment in view (which is how the export's ``tools`` offer a
build task). One exception: where the ladder offers every tool (level 5), the tester is offered at most
:data:`TESTER_DISTRACTORS_MAX` distractors, drawn by the task's id (the tools the task needs, and those of the writes its
rules judge, are always offered): the seven level-5 tasks of the example were 43% of the tester's prompt tokens with
17-21 tools each. Every attempt and turn of a task starts with the same system prompt, so a prefix cache serves them.
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
from verify.difficulty import LADDER_DISTRACTORS, offered_tools, task_level

STAGE = "tester"

__all__ = ["STAGE", "Attempt", "Step", "TesterSettings", "conversation_difficulty", "run_attempt", "run_attempts",
           "TESTER_DISTRACTORS_MAX", "run_conversations", "tester_client", "turn_model", "view_of"]

TESTER_DISTRACTORS_MAX = 8
"""The most distractors the tester is offered (level 4's on the sampler's ladder): a level-5 task, whose sampled
form offers every tool, is tested with the tools it needs plus this many others (issue 42: tokens per environment)."""


def tester_client(client: LLMClientProtocol, settings: TesterSettings) -> LLMClientProtocol:
    """The client the tester talks to: ``client`` itself, or one for ``[stages.tester]``'s endpoint with the
    generator's other LLM settings (cache, retries, seed) and the same usage ledger."""
    return endpoint_client(client, settings.base_url, settings.model, settings.api_key, "stages.tester")


def view_of(env: Environment, task: Task) -> View:
    """What the tester is offered for ``task``: its tools and their level's distractors (at most
    :data:`TESTER_DISTRACTORS_MAX`), short pages."""
    names = offered_tools(env, task)
    own = {s.get("function", s).get("name") for s in task.tools}
    if LADDER_DISTRACTORS[task_level(env, task)] is None and not (own and own < {t.name for t in env.tools}):
        needed = {c.tool for c in task.reference_solution} | {
            r["tool"] for r in task.metadata.get("rules") or [] if isinstance(r, dict) and r.get("tool")}
        others = [n for n in names if n not in needed]
        if len(others) > TESTER_DISTRACTORS_MAX:
            keep = set(random.Random(f"tester:{task.task_id}").sample(others, TESTER_DISTRACTORS_MAX))
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
