"""An envfoundry environment as an OpenEnv ``Environment``: tool calls are the actions.

``reset(task_id=...)`` (or ``seed=`` to pick a task by index) starts an episode on a fresh copy
of ``initial.db`` and returns the task's instruction and tools. ``step`` takes OpenEnv's MCP
actions: ``ListToolsAction`` lists the tools, ``CallToolAction(tool_name, arguments)`` runs one
(the result is the text the agent reads: JSON, or ``Error: ...``). Calling the ``submit`` tool
(with ``answer`` for questions) ends the episode: its reward is the envfoundry verifier on the
final database — 1.0 when it holds, else 0.0 (``ENVFOUNDRY_PARTIAL_CREDIT=1``: the share of
checks met). Each WebSocket session has its own environment instance, hence its own database.
"""

import json
import os
import uuid
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import EnvironmentMetadata, Observation, State
from pydantic import Field

try:
    from .. import taskrt
except ImportError:  # served from the environment directory (``uvicorn server.app:app``)
    import taskrt  # type: ignore[no-redef]

BUNDLE_DIR = Path(__file__).resolve().parent.parent / "data"
META = json.loads((BUNDLE_DIR / "export.json").read_text(encoding="utf-8"))
SUBMIT = META["submit_tool"]
_BUNDLE = None


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


class TaskObservation(Observation):
    """What ``reset`` returns: the task to carry out and the tools to do it with."""

    task_id: str = Field(default="", description="The task of this episode")
    instruction: str = Field(default="", description="The user's request")
    system_prompt: str = Field(default="", description="Suggested system prompt")
    tools: list[Tool] = Field(default_factory=list, description="Tools callable with CallToolAction")


class EnvFoundryState(State):
    task_id: str | None = None
    done: bool = False
    reward: float | None = None


def tool_specs() -> list[Tool]:
    specs = [
        Tool(name=t["name"], description=t["description"], input_schema=META["schemas"][t["name"]])
        for t in bundle().tools.values()
    ]
    specs.append(
        Tool(name=SUBMIT, description=META["submit_description"], input_schema=META["submit_schema"])
    )
    return specs


class EnvFoundryEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._conn = None
        self._task: dict[str, Any] | None = None
        self._state = EnvFoundryState()
        self.partial = os.environ.get("ENVFOUNDRY_PARTIAL_CREDIT", "0") == "1"

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> TaskObservation:
        b = bundle()
        ids = list(b.tasks)
        if task_id is None:
            task_id = ids[(seed or 0) % len(ids)]
        task = b.task(task_id)
        self.close()
        self._conn = b.fresh_db()
        self._task = task
        self._state = EnvFoundryState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task_id
        )
        return TaskObservation(
            task_id=task_id,
            instruction=task["instruction"],
            system_prompt=META["system_prompt"],
            tools=tool_specs(),
            metadata={"env_id": task["env_id"], "kind": task.get("kind")},
        )

    def step(self, action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=tool_specs())
        if not isinstance(action, CallToolAction):
            return CallToolObservation(
                tool_name="",
                error=ToolError(
                    error_type=ToolErrorType.INVALID_ARGS,
                    message="actions are CallToolAction or ListToolsAction",
                ),
            )
        name = action.tool_name
        if self._task is None or self._conn is None:
            return CallToolObservation(
                tool_name=name,
                error=ToolError(
                    error_type=ToolErrorType.EXECUTION_ERROR,
                    message="no episode: call reset(task_id=...) first",
                ),
            )
        if self._state.done:
            return CallToolObservation(
                tool_name=name,
                done=True,
                reward=self._state.reward,
                error=ToolError(
                    error_type=ToolErrorType.EXECUTION_ERROR,
                    message="the episode has ended (submit was called)",
                ),
            )
        self._state.step_count += 1
        if name == SUBMIT:
            answer = (action.arguments or {}).get("answer")
            result = bundle().evaluate(
                self._task, self._conn, answer=answer if isinstance(answer, str) else None
            )
            reward = taskrt.reward(result, self.partial)
            self._state.done, self._state.reward = True, reward
            return CallToolObservation(
                tool_name=name,
                result="submitted",
                done=True,
                reward=reward,
                metadata={"passed": result["passed"], "checks": result["checks"]},
            )
        out = bundle().call(self._conn, name, action.arguments or {})
        error = None
        if not out["ok"] and out.get("kind") == "not_found" and name not in bundle().tools:
            error = ToolError(error_type=ToolErrorType.TOOL_NOT_FOUND, message=out["error"])
        return CallToolObservation(
            tool_name=name,
            result=taskrt.render_result(out),
            error=error,
            metadata={"ok": out["ok"], "kind": out.get("kind")},
        )

    @property
    def state(self) -> EnvFoundryState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=META["name"], description=META["description"], version="0.1.0")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
