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

Conversation mode (``reset(task_id=..., conversation=True)``, or every episode with ``ENVFOUNDRY_CONVERSATION=1``):
the task is played in its conversational form (the record's ``conversation``). ``reset`` returns the user's
opening line as ``instruction`` (with the conversational ``system_prompt``) and lists one more tool, the message
tool (``message_tool``, ``send_message`` unless an environment tool has that name): a step
``CallToolAction(tool_name="send_message", arguments={"message": "..."})`` sends the message to the simulated user
and returns the user's reply as ``result``. The user runs on the OpenAI-compatible endpoint the configuration
names (``ENVFOUNDRY_USER_BASE_URL``, ``ENVFOUNDRY_USER_MODEL``, ``ENVFOUNDRY_USER_API_KEY``, see ``usersim.py``),
gives a fact only when asked and ends the conversation with ``###STOP###``: that step is ``done`` and carries the
reward, the verifier on the final database with the agent's last message to the user as the answer (the submit
tool still ends an episode at once). ``ENVFOUNDRY_USER_MAX_TURNS`` caps the user's replies (default 10). Each
reply's ``metadata.user_errors`` lists the user's own mistakes caught by code (``usercheck.py``: ``leak``,
``invented``, ``tool_or_id``, ``early_stop``, ``empty``), counted apart from the agent's in ``state.user_errors``.
The user's replies wait on its endpoint in their own threads (``ENVFOUNDRY_USER_WORKERS``, default 32), not on the
tool pool.

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

from . import taskrt, usersim

try:  # installed: <package>.models; served from the environment directory: models
    from ..models import EnvFoundryState, TaskObservation, ToolObservation
except ImportError:
    from models import EnvFoundryState, TaskObservation, ToolObservation  # type: ignore[no-redef]

BUNDLE_DIR = Path(__file__).resolve().parent.parent / "data"
META = json.loads((BUNDLE_DIR / "export.json").read_text(encoding="utf-8"))
SUBMIT = META["submit_tool"]
MESSAGE = META["message_tool"]
WORKERS = int(os.environ.get("ENVFOUNDRY_WORKERS", "0")) or max(2, os.cpu_count() or 1)
CALL_TIMEOUT_S = float(os.environ.get("ENVFOUNDRY_CALL_TIMEOUT", "0")) or taskrt.engine.DEFAULT_TIMEOUT_S
POOL = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="envfoundry")
USER_POOL = ThreadPoolExecutor(max_workers=int(os.environ.get("ENVFOUNDRY_USER_WORKERS", "0")) or 32,
                               thread_name_prefix="envfoundry-user")
CONVERSATION = os.environ.get("ENVFOUNDRY_CONVERSATION", "0") == "1"
_BUNDLE = None


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


_SPECS: list[Tool] = []


def tool_specs(conversation: bool = False) -> list[Tool]:
    """The tools an episode lists: the environment's, the submit tool, and in conversation mode the message tool."""
    if not _SPECS:
        _SPECS.extend(
            Tool(name=t["name"], description=t["description"], input_schema=META["schemas"][t["name"]])
            for t in bundle().tools.values()
        )
        _SPECS.append(Tool(name=SUBMIT, description=META["submit_description"], input_schema=META["submit_schema"]))
    if conversation:
        return [*_SPECS, Tool(name=MESSAGE, description=META["message_description"], input_schema=META["message_schema"])]
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
        self._user: usersim.SimulatedUser | None = None
        self.partial = os.environ.get("ENVFOUNDRY_PARTIAL_CREDIT", "0") == "1"

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        conversation: bool | None = None,
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
        talk = CONVERSATION if conversation is None else bool(conversation)
        # The user's endpoint is read now, so a missing configuration fails the reset, not a later step.
        self._user = usersim.SimulatedUser(task["conversation"], list(b.tools)) if talk else None
        self._state = EnvFoundryState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task_id, env_id=task["env_id"],
            conversation=talk, user_errors=[e.to_json() for e in self._user.errors] if self._user else [],
        )
        return TaskObservation(
            task_id=task_id,
            env_id=task["env_id"],
            instruction=self._user.opening if self._user else task["instruction"],
            system_prompt=META["conversation_system_prompt"] if talk else META["system_prompt"],
            tools=tool_specs(talk),
            submit_tool=SUBMIT,
            conversation=talk,
            message_tool=MESSAGE if talk else None,
            split=info.get("split"),
            tier=info.get("tier"),
            pass_rate=info.get("pass_rate"),
            metadata={"kind": task.get("kind"), "difficulty": info},
        )

    def step(self, action, timeout_s: float | None = None, **kwargs: Any):
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=tool_specs(self._user is not None), reward=0.0)
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
            if not isinstance(answer, str) and self._user is not None and self._user.agent:
                answer = self._user.agent[-1]  # the agent's last message to the user
            return self._end(name, "submitted", answer if isinstance(answer, str) else None)
        if name == MESSAGE and self._user is not None:
            return self._message(name, arguments)
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

    def _end(self, name: str, result: str, answer: str | None, **metadata: Any) -> ToolObservation:
        """End the episode: the verifier on the final database (and ``answer``) is the reward."""
        assert self._session is not None
        score = bundle().score(self._task, self._session.conn, answer=answer, partial=self.partial)
        self._state.done, self._state.reward, self._state.passed = True, score.reward, score.passed
        return ToolObservation(
            tool_name=name,
            result=result,
            done=True,
            reward=score.reward,
            passed=score.passed,
            failures=list(score.failures),
            metadata={"score": score.to_json(), **metadata},
        )

    def _message(self, name: str, arguments: dict[str, Any]) -> ToolObservation:
        """The agent's message to the simulated user; the user's reply (the episode ends when the user stops)."""
        text = arguments.get("message")
        if not isinstance(text, str) or not text.strip() or set(arguments) - {"message"}:
            return _error(name, ToolErrorType.INVALID_ARGS, f"{name} takes one argument, message: a non-empty string")
        user = self._user
        assert user is not None
        try:
            turn = user.respond(text)
        except usersim.UserEndpointError as exc:  # not heard: the agent may send it again
            return _error(name, ToolErrorType.EXECUTION_ERROR, f"simulated user: {exc}")
        self._state.user_turns = user.replies
        self._state.user_errors = [e.to_json() for e in user.errors]
        said = {"user_errors": [e.to_json() for e in turn.errors], "stop": turn.stop, "capped": turn.capped}
        if turn.ends:
            return self._end(name, turn.text, text, **said)
        return ToolObservation(tool_name=name, result=turn.text, ok=True, reward=0.0, metadata=said)

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
        talks = isinstance(action, CallToolAction) and action.tool_name == MESSAGE and self._user is not None
        return await asyncio.get_running_loop().run_in_executor(
            USER_POOL if talks else POOL, lambda: self.step(action, timeout_s=timeout_s, **kwargs))

    @property
    def state(self) -> EnvFoundryState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=META["name"], description=META["description"], version="0.1.0")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        self._user = None
