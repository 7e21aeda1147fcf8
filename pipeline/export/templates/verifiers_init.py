"""An envfoundry environment as a verifiers (v1) environment package.

``load_environment(**kwargs)`` returns the verifiers ``Env``; the package also exports its
``Taskset`` (so ``vf-eval <package>`` finds it) and a tool-calling chat harness as the default.
Each task's prompt is its instruction; the tools are the environment's tools (an MCP server per
rollout, see ``toolset.py``); the reward ``task_verified`` is the envfoundry verifier on the
rollout's final database: 1.0 when it holds, else 0.0 (``partial_credit=True``: the share of its
checks that hold).
"""

import json
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.harnesses.null.harness import NullHarness

from . import taskrt
from .toolset import BUNDLE_DIR, EnvFoundryState, EnvFoundryToolset, bundle

META = json.loads((BUNDLE_DIR / "export.json").read_text(encoding="utf-8"))


class EnvFoundryData(vf.TaskData):
    task_id: str
    env_id: str
    kind: str = "multi_step"
    verifier: dict[str, Any]
    """Hidden from the agent: SQL assertions, mutable tables and the expected answer."""
    difficulty: dict[str, int] = {}


class EnvFoundryTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()
    """Placement of the per-rollout tool server."""
    partial_credit: bool = False
    """Reward the share of verifier checks met instead of all-or-nothing."""


def evaluate(data: EnvFoundryData, state: EnvFoundryState, answer: str | None) -> dict:
    b = bundle()
    conn = taskrt.load_db(state.db) if state.db else b.fresh_db()
    try:
        return taskrt.evaluate(data.verifier, conn, initial=b.initial_snapshot(), answer=answer)
    finally:
        conn.close()


class EnvFoundryTask(vf.Task[EnvFoundryData, EnvFoundryState, EnvFoundryTaskConfig]):
    @property
    def key(self) -> str:
        return self.data.task_id

    @classmethod
    def toolsets(cls, config: EnvFoundryTaskConfig) -> list[vf.Toolset]:
        return [EnvFoundryToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def task_verified(self, trace: vf.Trace) -> float:
        result = evaluate(self.data, trace.state, trace.last_reply)
        trace.info["verifier_failures"] = result["failures"]
        return taskrt.reward(result, self.config.partial_credit)

    @vf.metric
    async def checks_met(self, trace: vf.Trace) -> float:
        result = evaluate(self.data, trace.state, trace.last_reply)
        return taskrt.reward({"passed": False, "checks": result["checks"]}, partial=True)


class EnvFoundryConfig(vf.TasksetConfig):
    task: EnvFoundryTaskConfig = EnvFoundryTaskConfig()
    task_ids: list[str] | None = None
    """Only these tasks (default: every task of the bank)."""


class EnvFoundryTaskset(vf.Taskset[EnvFoundryTask, EnvFoundryConfig]):
    def load(self):
        wanted = set(self.config.task_ids) if self.config.task_ids is not None else None
        for task_id, rec in bundle().tasks.items():
            if wanted is not None and task_id not in wanted:
                continue
            data = EnvFoundryData(
                id=task_id,
                name=task_id,
                prompt=rec["instruction"],
                system_prompt=META["system_prompt"],
                task_id=task_id,
                env_id=rec["env_id"],
                kind=rec.get("kind", "multi_step"),
                verifier=rec["verifier"],
                difficulty=rec.get("difficulty") or {},
            )
            yield EnvFoundryTask(data, self.config.task)


class EnvFoundryHarness(NullHarness):
    """The default program: a plain tool-calling chat loop over the environment's tools."""


TASKSET_KEYS = ("task_ids", "system_prompt")
TASK_KEYS = ("partial_credit", "tools", "judges", "rewards", "metrics", "stops")


def load_environment(**kwargs: Any) -> vf.Env:
    """The verifiers environment. Taskset keys (``task_ids``), task keys (``partial_credit``,
    ``tools``) and any ``EnvConfig`` field (``agent``, ``timeout``, ...) are accepted."""
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


__all__ = ["EnvFoundryTaskset", "EnvFoundryHarness", "load_environment"]
