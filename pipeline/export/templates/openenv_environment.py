"""An envfoundry environment as an OpenEnv ``Environment``: tool calls are the actions.

``reset(task_id=...)`` (or ``seed=`` to pick a task by index) starts an episode on a fresh
in-memory copy of ``data/initial.db`` and returns a ``TaskObservation`` (instruction, tools, split,
tier, pass rate). ``step`` takes OpenEnv's MCP actions: ``ListToolsAction`` lists the tools
(``ListToolsObservation``), ``CallToolAction(tool_name, arguments)`` runs one and returns a
``ToolObservation`` whose ``result`` is the text the agent reads (JSON, or ``Error: ...``). A call
that could not run as sent also fills ``error`` (``ToolError``): an unknown tool
(``tool_not_found``), arguments that fail the tool's schema (``invalid_args``, naming the
parameter), a database failure (``execution_error``); a call the application refused by one of
its rules (a guard, no such record) is the tool's own answer: ``ok`` false, ``error`` null, the
message in ``result``. Every step's ``reward`` is a number: 0.0 until the submit tool (with
``answer`` for questions) ends the episode, whose reward is the envfoundry verifier (``reward.py``,
the one reward implementation) on the final database, 1.0 when it holds, else 0.0
(``ENVFOUNDRY_PARTIAL_CREDIT=1``: the share of goals met). Each WebSocket session has its own
environment instance, hence its own database (``taskrt.Session``: one connection kept across the
session's episodes, each episode a transaction that ``reset`` rolls back).

Sessions do not own threads: the server awaits ``reset_async`` and ``step_async``, which run the
work (SQLite, the reward) on one small pool shared by every session (``ENVFOUNDRY_WORKERS``
threads, default the number of cores and at least 2), so a thousand open sessions do not mean a
thousand threads queueing on the GIL. A tool call is stopped after ``ENVFOUNDRY_CALL_TIMEOUT``
seconds (default 10), so a slow call holds one worker for at most that long while the others serve
the other sessions.
"""

import asyncio
import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)
from openenv.core.env_server.types import EnvironmentMetadata

from . import taskrt

try:  # installed: <package>.models; served from the environment directory: models
    from ..models import EnvFoundryState, TaskObservation, ToolObservation
except ImportError:
    from models import EnvFoundryState, TaskObservation, ToolObservation  # type: ignore[no-redef]

BUNDLE_DIR = Path(__file__).resolve().parent.parent / "data"
META = json.loads((BUNDLE_DIR / "export.json").read_text(encoding="utf-8"))
SUBMIT = META["submit_tool"]
WORKERS = int(os.environ.get("ENVFOUNDRY_WORKERS", "0")) or max(2, os.cpu_count() or 1)
CALL_TIMEOUT_S = float(os.environ.get("ENVFOUNDRY_CALL_TIMEOUT", "0")) or taskrt.engine.DEFAULT_TIMEOUT_S
POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="envfoundry")
_BUNDLE = None


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


_SPECS: list[Tool] = []


def tool_specs() -> list[Tool]:
    if not _SPECS:
        _SPECS.extend(
            Tool(name=t["name"], description=t["description"], input_schema=META["schemas"][t["name"]])
            for t in bundle().tools.values()
        )
        _SPECS.append(Tool(name=SUBMIT, description=META["submit_description"], input_schema=META["submit_schema"]))
    return list(_SPECS)


# Engine failures that mean the call could not run as sent (or at all): a ToolError. Refusals by the
# application's own rules (guard, not_found) are the tool's answer and stay in ``result``.
ERROR_TYPES = {"validation": ToolErrorType.INVALID_ARGS, "sql": ToolErrorType.EXECUTION_ERROR,
               "busy": ToolErrorType.EXECUTION_ERROR}


def _error(name: str, kind: ToolErrorType, message: str, **fields: Any) -> ToolObservation:
    fields.setdefault("reward", 0.0)
    return ToolObservation(tool_name=name, ok=False, error=ToolError(error_type=kind, message=message), **fields)


class EnvFoundryEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    # Creating and closing an environment is cheap: one thread shared by every session does it,
    # instead of a thread per session. Its work runs on ``POOL`` (``reset_async``, ``step_async``).
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    def __init__(self) -> None:
        super().__init__()
        self._session: taskrt.Session | None = None
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
        info = b.task_info(task_id)
        if self._session is None:
            self._session = taskrt.Session(b)
        else:
            self._session.reset()
        self._task = task
        self._state = EnvFoundryState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task_id, env_id=task["env_id"]
        )
        return TaskObservation(
            task_id=task_id,
            env_id=task["env_id"],
            instruction=task["instruction"],
            system_prompt=META["system_prompt"],
            tools=tool_specs(),
            submit_tool=SUBMIT,
            split=info.get("split"),
            tier=info.get("tier"),
            pass_rate=info.get("pass_rate"),
            metadata={"kind": task.get("kind"), "difficulty": info},
        )

    def step(self, action, timeout_s: float | None = None, **kwargs: Any):
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=tool_specs(), reward=0.0)
        if not isinstance(action, CallToolAction):
            return _error("", ToolErrorType.INVALID_ARGS, "actions are CallToolAction or ListToolsAction")
        name = action.tool_name
        if self._task is None or self._session is None:
            return _error(name, ToolErrorType.EXECUTION_ERROR, "no episode: call reset(task_id=...) first")
        if self._state.done:
            return _error(
                name,
                ToolErrorType.EXECUTION_ERROR,
                "the episode has ended (submit was called)",
                done=True,
                reward=self._state.reward,
            )
        self._state.step_count += 1
        arguments = action.arguments or {}
        if name == SUBMIT:
            answer = arguments.get("answer")
            score = bundle().score(
                self._task, self._session.conn, answer=answer if isinstance(answer, str) else None, partial=self.partial
            )
            self._state.done, self._state.reward, self._state.passed = True, score.reward, score.passed
            return ToolObservation(
                tool_name=name,
                result="submitted",
                done=True,
                reward=score.reward,
                passed=score.passed,
                failures=list(score.failures),
                metadata={"score": score.to_json()},
            )
        self._state.tool_calls += 1
        out = self._session.call(name, arguments, timeout=CALL_TIMEOUT_S)
        if not out["ok"]:
            kind = ToolErrorType.TOOL_NOT_FOUND if name not in bundle().tools else ERROR_TYPES.get(out.get("kind"))
            if kind is not None:
                return _error(name, kind, out["error"], result=taskrt.render_result(out),
                              metadata={"kind": out.get("kind"), "parameter": out.get("parameter")})
        return ToolObservation(
            tool_name=name,
            result=taskrt.render_result(out),
            ok=bool(out["ok"]),
            reward=0.0,
            metadata={"kind": out.get("kind")} if not out["ok"] else {},
        )

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> TaskObservation:
        return await asyncio.get_running_loop().run_in_executor(
            POOL, lambda: self.reset(seed=seed, episode_id=episode_id, task_id=task_id, **kwargs))

    async def step_async(self, action, timeout_s: float | None = None, **kwargs: Any):
        return await asyncio.get_running_loop().run_in_executor(
            POOL, lambda: self.step(action, timeout_s=timeout_s, **kwargs))

    @property
    def state(self) -> EnvFoundryState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=META["name"], description=META["description"], version="0.1.0")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
