"""An envfoundry environment as an OpenEnv ``Environment``: tool calls are the actions.

``reset(task_id=...)`` (or ``seed=`` to pick a task by index) starts an episode on a fresh
in-memory copy of ``data/initial.db`` (of the task's own state, ``data/states/<sha256>.db``, for a pool task
sampled on a perturbed state: ``export --perturb``) and returns a ``TaskObservation`` (instruction, tools, split,
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

Sampled tasks by level (an export made with ``envfoundry export --sample-per-level N``: ``data/pool.jsonl``):
``reset(seed=..., level=L)`` plays a task of level L's pool, the one at index ``seed`` modulo the pool's size in the
sampler's order (same seed and level, same task; without a seed, the server's next one of that level, round-robin);
a level without sampled tasks is an error naming it and the levels that have some. Its observation lists the tools
the task offers (those it needs plus the level's distractors, ``metadata.distractors``) and its ``level``.
``reset(adaptive=True)`` (or every episode without ``task_id``/``level``, with ``ENVFOUNDRY_ADAPTIVE=1``) plays at
the server's adaptive level (``curriculum.py``): each adaptive episode's reward goes into a sliding window of its
level, and the level moves up when the window's mean reaches ``ENVFOUNDRY_ADAPTIVE_UP`` (0.7) and down when it falls
under ``ENVFOUNDRY_ADAPTIVE_DOWN`` (0.2), over ``ENVFOUNDRY_ADAPTIVE_WINDOW`` (8) episodes. ``state`` (and
``GET /state``) reports it as ``adaptive``: the current level, the levels, each window and its mean, the thresholds
and the moves.

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
import threading
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

from . import curriculum as _curriculum
from . import taskrt, usersim

try:  # installed: <package>.models; served from the environment directory: models
    from ..models import EnvFoundryState, TaskObservation, ToolObservation, share_tools
except ImportError:
    from models import EnvFoundryState, TaskObservation, ToolObservation, share_tools  # type: ignore[no-redef]

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
ADAPTIVE = os.environ.get("ENVFOUNDRY_ADAPTIVE", "0") == "1"
_BUNDLE = None
_CURRICULUM: "_curriculum.Curriculum | None" = None
_LOCK = threading.Lock()
_DRAWS: dict[int, int] = {}


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


def curriculum() -> "_curriculum.Curriculum":
    """The server's adaptive level (made on first use from the pools' levels and ``ENVFOUNDRY_ADAPTIVE_*``)."""
    global _CURRICULUM
    with _LOCK:
        if _CURRICULUM is None:
            _CURRICULUM = _curriculum.Curriculum.from_env(bundle().levels())
        return _CURRICULUM


def next_index(level: int) -> int:
    """The server's round-robin draw in ``level``'s pool (an episode asked by level without a seed)."""
    with _LOCK:
        index = _DRAWS.get(level, 0)
        _DRAWS[level] = index + 1
        return index


def pick(seed: int | None, level: Any, adaptive: bool) -> tuple[str, int]:
    """(task_id, level) of an episode asked by ``level`` or at the adaptive level."""
    if adaptive:
        if level is not None:
            raise ValueError("reset: give level or adaptive=True, not both (the adaptive level picks the level)")
        level = curriculum().level
    if isinstance(level, bool) or not isinstance(level, int):
        raise ValueError(f"reset: level must be an integer (1 to 5), not {level!r}")
    task_id = bundle().pool_task(level, seed if seed is not None else next_index(level))
    return task_id, level


_SPECS: list[Tool] = []


def tool_specs(conversation: bool = False, offered: set[str] | None = None) -> list[Tool]:
    """The tools an episode lists: the environment's (those of ``offered`` only, for a sampled task), the submit
    tool, and in conversation mode the message tool."""
    if offered is not None:
        listed = [t for t in tool_specs(conversation) if t.name in offered or t.name in (SUBMIT, MESSAGE)]
        return listed
    with _LOCK:  # made once, and their dumps shared by every session's observation (models.share_tools)
        if not _SPECS:
            specs = [
                Tool(name=t["name"], description=t["description"], input_schema=META["schemas"][t["name"]])
                for t in bundle().tools.values()
            ]
            specs.append(Tool(name=SUBMIT, description=META["submit_description"], input_schema=META["submit_schema"]))
            specs.append(Tool(name=MESSAGE, description=META["message_description"],
                              input_schema=META["message_schema"]))
            share_tools(specs)
            _SPECS.extend(specs)
    return list(_SPECS) if conversation else _SPECS[:-1]


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
        self._offered: set[str] | None = None
        self._adaptive_level: int | None = None
        self.partial = os.environ.get("ENVFOUNDRY_PARTIAL_CREDIT", "0") == "1"

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        conversation: bool | None = None,
        level: int | None = None,
        adaptive: bool | None = None,
        **kwargs: Any,
    ) -> TaskObservation:
        b = bundle()
        adapt = (ADAPTIVE and task_id is None and level is None) if adaptive is None else bool(adaptive)
        if task_id is not None and (level is not None or adapt):
            raise ValueError("reset: give task_id, or level / adaptive=True, not both")
        episode_level = None
        if level is not None or adapt:
            task_id, episode_level = pick(seed, level, adapt)
        elif task_id is None:
            ids = list(b.tasks)
            task_id = ids[(seed or 0) % len(ids)]
        task = b.task(task_id)
        info = b.task_info(task_id)
        state = b.state_of(task_id)  # a task sampled on a perturbed state plays on it (data/states/)
        if self._session is None:
            self._session = taskrt.Session(b, state)
        else:
            self._session.reset(state, switch=True)
        self._task = task
        self._adaptive_level = episode_level if adapt else None
        sampled = task_id in b.pool_tasks
        self._offered = {t["function"]["name"] for t in task.get("tools") or []} if sampled else None
        talk = CONVERSATION if conversation is None else bool(conversation)
        # The user's endpoint is read now, so a missing configuration fails the reset, not a later step.
        self._user = usersim.SimulatedUser(task["conversation"], list(b.tools)) if talk else None
        self._state = EnvFoundryState(
            episode_id=episode_id or uuid.uuid4().hex, step_count=0, task_id=task_id, env_id=task["env_id"],
            conversation=talk, user_errors=[e.to_json() for e in self._user.errors] if self._user else [],
            level=info.get("level"),
        )
        return TaskObservation(
            task_id=task_id,
            env_id=task["env_id"],
            instruction=self._user.opening if self._user else task["instruction"],
            system_prompt=META["conversation_system_prompt"] if talk else META["system_prompt"],
            tools=tool_specs(talk, self._offered),
            submit_tool=SUBMIT,
            conversation=talk,
            message_tool=MESSAGE if talk else None,
            split=info.get("split"),
            tier=info.get("tier"),
            pass_rate=info.get("pass_rate"),
            level=info.get("level"),
            adaptive=adapt,
            metadata={"kind": task.get("kind"), "difficulty": info},
        )

    def step(self, action, timeout_s: float | None = None, **kwargs: Any):
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=tool_specs(self._user is not None, self._offered), reward=0.0)
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
        if self._offered is not None and name not in self._offered:  # a sampled task offers only its own tools
            return _error(name, ToolErrorType.TOOL_NOT_FOUND,
                          f"tool {name!r} is not offered in this task (its tools: {', '.join(sorted(self._offered))})")
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
        score = bundle().score(self._task, self._session.conn, answer=answer, partial=self.partial,
                               session=self._session)
        self._state.done, self._state.reward, self._state.passed = True, score.reward, score.passed
        if self._adaptive_level is not None:  # the episode's reward goes into its level's window
            move = curriculum().record(self._adaptive_level, score.reward)
            if move is not None:
                metadata = {**metadata, "level_move": move}
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
        if _CURRICULUM is not None:
            self._state.adaptive = _CURRICULUM.report()
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=META["name"], description=META["description"], version="0.1.0")

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        self._user = None
