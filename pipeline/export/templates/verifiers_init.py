"""An envfoundry environment as a verifiers (v1) environment package.

``load_environment(**kwargs)`` returns the verifiers ``Env``; the package also exports its
``Taskset`` (so ``vf-eval <package>`` finds it) and a tool-calling chat harness as the default.
Each task's prompt is its instruction; the tools are the environment's tools (an MCP server per
rollout, see ``toolset.py``; a sampled task's own tools only); the reward ``task_verified`` is the
envfoundry verifier scored by ``reward.py`` (envfoundry's one reward implementation, vendored) on the
rollout's final database and last reply: 1.0 when it holds, else 0.0 (``partial_credit=True``: the share
of goals met).
``Task.validate`` replays the reference solution, so ``vf-validate <package>`` checks every task's
ground truth (gold) as well as that doing nothing scores below 1 (noop).

Sampled tasks by level (an export made with ``envfoundry export --sample-per-level N``): ``load_environment(level=L)``
builds the dataset from level L's pool (``data/pool.jsonl``) instead of the bank, ``n=K`` takes its first K tasks in
the sampler's order (deterministic; ``n`` alone takes the bank's first K). A level without sampled tasks, or ``n``
beyond what it holds, is an error naming the levels and how many tasks each holds. A sampled task offers only its own
tools (``EnvFoundryData.tools``: those it needs and its level's distractors): its rollout's tool server lists only
them and refuses a call to any other with an error naming them (``toolset.py``).

Conversations: ``load_environment(conversation=True, user_base_url=..., user_model=...)`` (or
``--env.taskset.conversation true --env.taskset.user-base-url URL --env.taskset.user-model NAME``) plays each task
in its conversational form. ``EnvFoundryEnv`` (the package's ``Env``, verifiers' single-agent env otherwise) opens
the agent's interaction on the user's opening line; the agent's harness runs its tool calls as usual, and each
reply it ends without a tool call is the environment's turn: the simulated user (``usersim.py``, on the
OpenAI-compatible endpoint named by ``user_base_url`` / ``user_model``, else ``ENVFOUNDRY_USER_BASE_URL`` /
``ENVFOUNDRY_USER_MODEL``) answers it, until the user ends the conversation (``###STOP###``) or its replies run out
(``user_max_turns``). The reward is unchanged: the final database, and the agent's last message to the user as the
answer. The user's mistakes caught by code (``usercheck.py``) are metrics of their own, ``user_errors`` (and
``user_turns``), apart from the agent's; ``trace.info["envfoundry_user"]`` holds them in full.
"""

import asyncio
import json
import logging
import os
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.harnesses.null.harness import NullHarness

from . import reward, taskrt, usersim  # type: ignore[attr-defined]  # vendored beside this file
from .toolset import BUNDLE_DIR, EnvFoundryState, EnvFoundryToolset, bundle

logger = logging.getLogger(__name__)
META = json.loads((BUNDLE_DIR / "export.json").read_text(encoding="utf-8"))


class EnvFoundryData(vf.TaskData):
    task_id: str
    env_id: str
    kind: str = "multi_step"
    verifier: dict[str, Any]
    """Hidden from the agent: SQL assertions, mutable tables and the expected answer."""
    split: str | None = None
    """train or val (envfoundry's held-out split)."""
    tier: int | None = None
    """Difficulty tier (1 to 3: how many calls and decisions the task takes)."""
    pass_rate: float | None = None
    """Share of envfoundry's test rollouts that passed."""
    level: int | None = None
    """A sampled task's difficulty level (1 to 5); None for the bank's tasks."""
    refusals: list[dict[str, Any]] = []
    """Hidden from the agent: for a task whose request the policy refuses in part, each refused write's ``rule`` id,
    ``tool``, ``arguments`` and the rule's ``message`` (the reference ends by saying them)."""
    tools: list[str] | None = None
    """The tools a sampled task offers (those it needs and its level's distractors, in the environment's order):
    its rollout's tool server has only these. None for the bank's tasks, which offer every tool."""
    difficulty: dict[str, Any] = {}
    conversation: dict[str, Any] | None = None
    """Hidden from the agent: the task's conversational form (the simulated user's script), in conversation mode."""


class EnvFoundryTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()
    """Placement of the per-rollout tool server."""
    partial_credit: bool = False
    """Reward the share of verifier checks met instead of all-or-nothing."""


def score(data: EnvFoundryData, state: EnvFoundryState, answer: str | None, partial: bool = False):
    """The rollout's ``reward.Score``: its final database (the shared state) and last reply."""
    b = bundle()
    initial = b.state_of(data.task_id)  # the task's own initial state (None: initial.db)
    conn = taskrt.load_db(state.db) if state.db else b.fresh_db(initial)
    try:
        return reward.score(data.verifier, conn, initial=b.initial_snapshot(initial), answer=answer, partial=partial)
    finally:
        conn.close()


class EnvFoundryTask(vf.Task[EnvFoundryData, EnvFoundryState, EnvFoundryTaskConfig]):
    @property
    def key(self) -> str:
        return self.data.task_id

    @classmethod
    def toolsets(cls, config: EnvFoundryTaskConfig) -> list[vf.Toolset]:
        return [EnvFoundryToolset(config.tools)]

    async def validate(self, runtime) -> bool:
        """The ground-truth check ``vf-validate`` runs: the reference solution, replayed on a fresh
        database with the reference reply, passes the verifier."""
        result = bundle().check_reference(self.data.task_id)
        if not result.passed:
            logger.warning("task %s: the reference solution fails: %s", self.data.task_id, result.summary())
        return result.passed

    @vf.reward(weight=1.0)
    async def task_verified(self, trace: vf.Trace) -> float:
        result = score(self.data, trace.state, trace.last_reply, self.config.partial_credit)
        trace.info["verifier_failures"] = list(result.failures)
        return result.reward

    @vf.metric
    async def goals_met(self, trace: vf.Trace) -> float:
        """Share of the verifier's goals that hold (0 when a gate is violated)."""
        result = score(self.data, trace.state, trace.last_reply)
        return sum(result.goals) / len(result.goals) if result.gates_ok and result.goals else 0.0


class EnvFoundryConfig(vf.TasksetConfig):
    task: EnvFoundryTaskConfig = EnvFoundryTaskConfig()
    task_ids: list[str] | None = None
    """Only these tasks (default: every task of the bank)."""
    split: str | None = None
    """Only the tasks of this split (``train`` or ``val``; default: both)."""
    level: int | None = None
    """The tasks of this level's sampled pool instead of the bank's (an export with ``--sample-per-level``)."""
    n: int | None = None
    """Only the first ``n`` tasks (of the level's pool, or of the bank), in their exported order."""
    conversation: bool = False
    """Play each task in its conversational form: the agent gets the user's opening line and talks with the
    simulated user (see the module's docstring)."""
    user_base_url: str | None = None
    """The simulated user's OpenAI-compatible endpoint (default ``$ENVFOUNDRY_USER_BASE_URL``)."""
    user_model: str | None = None
    """The model the user's endpoint serves (default ``$ENVFOUNDRY_USER_MODEL``)."""
    user_api_key_var: str = "ENVFOUNDRY_USER_API_KEY"
    """The environment variable holding the user endpoint's key (unset: no key)."""
    user_temperature: float | None = None
    """The user's sampling temperature (default ``$ENVFOUNDRY_USER_TEMPERATURE``, else 0)."""
    user_max_turns: int | None = None
    """The user's replies per conversation (default ``$ENVFOUNDRY_USER_MAX_TURNS``, else 10)."""


def selected(config: EnvFoundryConfig) -> list[str]:
    """The task ids of the dataset: the bank's, or ``level``'s pool; filtered by ``task_ids`` and ``split``; the
    first ``n``."""
    b = bundle()
    level, n = config.level, config.n
    if n is not None and n < 1:
        raise ValueError(f"n must be 1 or more, not {n}")
    if level is not None:
        b.pool_task(level, 0)  # a level without sampled tasks: an error naming the levels that have some
        ids = list(b.pool[level])
        where = f"level {level}'s pool"
    else:
        ids, where = list(b.tasks), "the bank"
    wanted = set(config.task_ids) if config.task_ids is not None else None
    ids = [i for i in ids if (wanted is None or i in wanted)
           and (config.split is None or b.task_info(i).get("split") == config.split)]
    if n is not None and n > len(ids):
        sizes = ", ".join(f"level {k}: {len(v)}" for k, v in b.pool.items()) or "no sampled tasks"
        raise ValueError(f"n={n} tasks asked of {where}, which holds {len(ids)} (sampled tasks: {sizes})")
    return ids[:n] if n is not None else ids


def offered_tools(task_id: str) -> list[str] | None:
    """A sampled task's tools by name (its record's ``tools``); None for a task of the bank (every tool)."""
    b = bundle()
    if task_id not in b.pool_tasks:
        return None
    return [t["function"]["name"] for t in b.task(task_id).get("tools") or []]


class EnvFoundryTaskset(vf.Taskset[EnvFoundryTask, EnvFoundryConfig]):
    def load(self):
        for task_id in selected(self.config):
            rec = bundle().task(task_id)
            info = bundle().task_info(task_id)
            talk = self.config.conversation
            data = EnvFoundryData(
                id=task_id,
                name=task_id,
                prompt=rec["conversation"]["opening"] if talk else rec["instruction"],
                system_prompt=META["conversation_system_prompt"] if talk else META["system_prompt"],
                conversation=rec["conversation"] if talk else None,
                task_id=task_id,
                env_id=rec["env_id"],
                kind=rec.get("kind", "multi_step"),
                verifier=rec["verifier"],
                split=info.get("split"),
                tier=info.get("tier"),
                pass_rate=info.get("pass_rate"),
                level=info.get("level"),
                tools=offered_tools(task_id),
                refusals=info.get("refusals") or [],
                difficulty={k: v for k, v in info.items()
                            if k not in ("split", "reference_reply", "level", "sampled", "refusals", "final_reply",
                                         "state")},
            )
            yield EnvFoundryTask(data, self.config.task)


class EnvFoundryHarness(NullHarness):
    """The default program: a plain tool-calling chat loop over the environment's tools."""


def user_endpoint(config: EnvFoundryConfig) -> usersim.UserEndpoint:
    """The simulated user's endpoint: the taskset's ``user_*`` settings over ``ENVFOUNDRY_USER_*``."""
    return usersim.UserEndpoint.from_env(
        base_url=config.user_base_url, model=config.user_model, api_key=os.environ.get(config.user_api_key_var),
        temperature=config.user_temperature,
    )


class EnvFoundryEnv(vf.SingleAgentEnv):
    """verifiers' single-agent env (one ``agent`` seat); in conversation mode the environment's response to a
    reply without tool calls is the simulated user's answer."""

    async def run(self, task: vf.Task, agents) -> None:
        config = self.taskset.config
        if not config.conversation:
            return await super().run(task, agents)
        user = usersim.SimulatedUser(task.data.conversation, list(bundle().tools), user_endpoint(config),
                                     config.user_max_turns)
        async with agents.agent.interaction(task) as chat:
            segment = await chat.turn()  # the opening line is the task's prompt
            while not segment.terminated:
                turn = await asyncio.to_thread(user.respond, segment.last_reply)
                if turn.ends:
                    break
                segment = await chat.turn(turn.text)
            chat.trace.info["envfoundry_user"] = {**user.record(), "endpoint": user.endpoint.describe()}

    async def finalize(self, task: vf.Task, episode) -> None:
        for trace in episode.traces:
            record = trace.info.get("envfoundry_user")
            if record is not None:
                trace.record_metric("user_turns", record["user_turns"])
                trace.record_metric("user_errors", len(record["user_errors"]))


TASKSET_KEYS = ("task_ids", "split", "level", "n", "system_prompt", "conversation", "user_base_url", "user_model",
                "user_api_key_var", "user_temperature", "user_max_turns")
TASK_KEYS = ("partial_credit", "tools", "judges", "rewards", "metrics", "stops")


def load_environment(**kwargs: Any) -> vf.Env:
    """The verifiers environment. Taskset keys (``task_ids``, ``split``, ``level``, ``n``; ``conversation`` with ``user_base_url``,
    ``user_model``, ...), task keys (``partial_credit``, ``tools``) and any ``EnvConfig`` field (``agent``,
    ``timeout``, ...) are accepted."""
    taskset: dict[str, Any] = {"id": __name__}
    task: dict[str, Any] = {}
    for key in TASKSET_KEYS:
        if key in kwargs:
            taskset[key] = kwargs.pop(key)
    for key in TASK_KEYS:
        if key in kwargs:
            task[key] = kwargs.pop(key)
    if task:
        taskset["task"] = task
    config = vf.resolve_env_config({**kwargs, "taskset": taskset})
    return vf.load_environment(config)


__all__ = ["EnvFoundryTaskset", "EnvFoundryHarness", "EnvFoundryEnv", "load_environment"]
