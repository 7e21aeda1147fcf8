"""envfoundry tools and reward for veRL's multi-turn tool agent loop (``agent_name: tool_agent``).

``EnvFoundryTool`` is a ``verl.tools.base_tool.BaseTool``: one entry per environment tool in
``tool_config.yaml`` (``config.env_id`` and ``config.tool`` name it). One dataset may hold tasks of
several environments: each row's ``extra_info.tool_selection`` lists the tools veRL shows and
dispatches for that row, and ``tools_kwargs`` carries its ``task_id`` and ``env_id``.

State belongs to the trajectory. veRL 0.9 calls ``create`` / ``execute`` / ``release`` around
every tool call and passes the trajectory's ``agent_data`` to ``execute``; the trajectory's
database (a compressed copy that starts as ``initial.db``) is kept in
``agent_data.extra_fields["extras"]["envfoundry"]``: ``extra_fields`` is the per-trajectory store
veRL documents for tool session data, and ``extras`` is one of its keys veRL keeps in every batch
(a key only some trajectories had would break veRL's batch concatenation). So nothing is keyed
by ``request_id`` (with ``full_determinism`` it repeats across steps), no database outlives its
trajectory, and the module keeps no open database between calls. A caller that passes no
``agent_data`` (older rollouts, one ``create`` per trajectory) gets state keyed by the
``create()`` handle, freed by ``release``.

``compute_score`` (``reward.custom_reward_function``) decides the reward from the trajectory's own
database: veRL hands the agent loop's ``extra_fields`` to the reward as ``extra_info``, so the
reward reads the database the tools left and scores it with ``reward.py`` (envfoundry's one reward
implementation, vendored), whatever the tool-call format (hermes, qwen3_coder, ...). The answer
is the last assistant message veRL parsed (else the text after the last tool response). 1.0 when
the verifier holds, else 0.0 (``extra_info.partial_credit``: the share of goals met).
"""

import json
import re
import threading
import uuid
from pathlib import Path
from typing import Any

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
except ImportError:  # scoring (compute_score) runs without veRL's tool classes too
    BaseTool = object
    ToolResponse = None

from . import taskrt

DATA_DIR = Path(__file__).resolve().parent / "data"
EXTRAS = "extras"
TRAJECTORY_KEY = "envfoundry"
_LOCK = threading.Lock()
_BUNDLES: dict[str, Any] = {}
_HANDLES: dict[str, dict] = {}
"""create() handle -> {"task_id", "env_id"}: live only between create and release."""
_ORPHANS: dict[str, dict] = {}
"""Trajectory records of callers without agent_data, keyed by create() handle (freed by release)."""
_OPEN = [0]
"""Databases open right now (each execute opens and closes one)."""

_TOOL_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.S)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)
_SPECIAL = re.compile(r"<\|[^|>]*\|>")
_ROLE = re.compile(r"^\s*(?:assistant|user|tool)\s*\n", re.S)


def bundle(env_id: str):
    with _LOCK:
        b = _BUNDLES.get(env_id)
        if b is None:
            path = DATA_DIR / env_id
            if not path.is_dir():
                known = sorted(p.name for p in DATA_DIR.iterdir() if p.is_dir())
                raise taskrt.BundleError(f"unknown env_id {env_id!r} (this package has {known})")
            b = _BUNDLES[env_id] = taskrt.Bundle(path)
        return b


def open_databases() -> int:
    return _OPEN[0]


def live_handles() -> int:
    """create() handles not yet released, plus trajectory records held for callers without agent_data."""
    with _LOCK:
        return len(_HANDLES) + len(_ORPHANS)


def _trajectory_store(agent_data):
    """The trajectory's own dict for envfoundry state, or None when the caller gave no agent_data."""
    fields = getattr(agent_data, "extra_fields", None)
    if not isinstance(fields, dict):
        return None
    extras = fields.get(EXTRAS)
    if extras is None:
        extras = fields[EXTRAS] = {}
    return extras if isinstance(extras, dict) else fields


def trajectory_record(agent_data, meta):
    """The trajectory's envfoundry record (made on first use from ``meta``: ``task_id``, ``env_id``), kept in its
    ``agent_data.extra_fields``; None when the caller gave no ``agent_data``."""
    with _LOCK:
        store = _trajectory_store(agent_data)
        if store is None:
            return None
        record = store.get(TRAJECTORY_KEY)
        if record is None:
            record = store[TRAJECTORY_KEY] = {**meta, "db": None, "calls": 0}
            record["messages"] = getattr(agent_data, "messages", None)
        return record


def _take_record(extra_info):
    """The trajectory record veRL merged into ``extra_info`` (from the agent loop's extra_fields).

    Taken, not read: ``extra_info`` is replaced by a copy without it, so a dict veRL shares between
    rollouts of one prompt cannot carry this trajectory's database into the next rollout's score."""
    extras = extra_info.get(EXTRAS)
    if isinstance(extras, dict) and TRAJECTORY_KEY in extras:
        extra_info[EXTRAS] = {k: v for k, v in extras.items() if k != TRAJECTORY_KEY}
        return extras[TRAJECTORY_KEY]
    return extra_info.pop(TRAJECTORY_KEY, None)


def _response(text):
    return ToolResponse(text=text) if ToolResponse is not None else text


class EnvFoundryTool(BaseTool):
    def __init__(self, config: dict, tool_schema):
        if BaseTool is not object:
            super().__init__(config, tool_schema)
        else:
            self.config, self.tool_schema = config, tool_schema
            self.name = tool_schema["function"]["name"]
        self.env_id = config["env_id"]
        self.tool = config["tool"]

    async def create(self, instance_id: str | None = None, **kwargs):
        create_kwargs = kwargs.get("create_kwargs") or {}
        handle = instance_id or uuid.uuid4().hex
        with _LOCK:
            _HANDLES[handle] = {
                "task_id": create_kwargs.get("task_id"),
                "env_id": create_kwargs.get("env_id") or self.env_id,
            }
        return handle, _response("")

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs):
        agent_data = kwargs.get("agent_data")
        with _LOCK:
            meta = dict(_HANDLES.get(instance_id) or {"task_id": None, "env_id": self.env_id})
        record = trajectory_record(agent_data, meta)
        if record is None:
            with _LOCK:
                record = _ORPHANS.setdefault(instance_id, {**meta, "db": None, "calls": 0})
        b = bundle(record["env_id"] or self.env_id)
        conn = taskrt.load_db(record["db"]) if record["db"] else b.fresh_db(
            b.state_of(record["task_id"]) if record.get("task_id") else None)
        _OPEN[0] += 1
        try:
            before = conn.total_changes
            # Anything but a JSON object (a string, a list, a number) is refused by the engine with a
            # message naming what was sent; no arguments at all (null) is an empty object.
            out = b.call(conn, self.tool, parameters)
            if conn.total_changes != before:
                record["db"] = taskrt.dump_db(conn)
        finally:
            conn.close()
            _OPEN[0] -= 1
        record["calls"] += 1
        return _response(taskrt.render_result(out)), 0.0, {"ok": bool(out["ok"])}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs) -> None:
        with _LOCK:
            _HANDLES.pop(instance_id, None)
            _ORPHANS.pop(instance_id, None)


def final_reply(record, solution_str):
    """The agent's answer: the last assistant message veRL parsed, else the response text after
    the last tool response (tool calls, reasoning and role headers removed)."""
    messages = (record or {}).get("messages")
    if isinstance(messages, list) and messages:
        last = messages[-1]
        if isinstance(last, dict) and last.get("role") == "assistant":
            content = last.get("content")
            if isinstance(content, list):
                content = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
            return clean_reply(content or "") or None
    tail = (solution_str or "").split("</tool_response>")[-1]
    return clean_reply(tail) or None


def clean_reply(text):
    """An assistant message as the user reads it: tool calls, reasoning, special tokens and role headers out."""
    text = _TOOL_CALL.sub(" ", _THINK.sub(" ", text))
    text = _SPECIAL.sub("\n", text)
    return _ROLE.sub("", text.strip() + "\n").strip()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """veRL reward: the task's verifier on the trajectory's own final database and last reply.

    Returns ``{"score", "acc", "goals_met", "user_turns", "user_errors"}`` (``score`` is the reward; ``acc`` 1.0
    when the verifier passed; ``goals_met`` the share of goals that hold, 0 when a gate failed; in a conversation
    (``conversation.py``) the simulated user's replies and its mistakes caught by code, else 0)."""
    extra_info = extra_info if isinstance(extra_info, dict) else {}
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) and ground_truth else {}
    task_id = extra_info.get("task_id") or truth.get("task_id")
    env_id = extra_info.get("env_id") or truth.get("env_id")
    b = bundle(env_id)
    task = b.task(task_id)
    record = _take_record(extra_info)
    if not isinstance(record, dict) or record.get("task_id") not in (None, task_id):
        record = None
    conn = taskrt.load_db(record["db"]) if record and record.get("db") else b.fresh_db(b.state_of(task_id))
    try:
        score = b.score(
            task, conn, answer=final_reply(record, solution_str), partial=bool(extra_info.get("partial_credit"))
        )
    finally:
        conn.close()
    goals = score.goals
    user = (record or {}).get("user") or {}
    return {
        "score": score.reward,
        "acc": 1.0 if score.passed else 0.0,
        "goals_met": (sum(goals) / len(goals)) if goals and score.gates_ok else 0.0,
        "user_turns": float(user.get("user_turns", 0)),
        "user_errors": float(len(user.get("user_errors") or ())),
    }
