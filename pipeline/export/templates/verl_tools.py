"""envfoundry tools and reward for veRL's multi-turn tool agent loop.

``EnvFoundryTool`` is a ``verl.tools.base_tool.BaseTool``: one entry per environment tool in the
tool config YAML (``config.tool`` names it). A trajectory's database is keyed by veRL's
per-trajectory ``agent_data.request_id`` (every tool of the trajectory shares it) and starts as a
fresh copy of ``initial.db``.

``compute_score`` (``custom_reward_function``) decides the reward from the trajectory text alone:
the tool calls in the response (``<tool_call>{"name", "arguments"}</tool_call>``, veRL's hermes
format) are replayed on a fresh database — tools are deterministic (fixed clock), so this is the
state the agent produced — and the task's verifier is evaluated on it with the final reply as the
answer. 1.0 when it holds, else 0.0 (``extra_info["partial_credit"]``: the share of checks met).
"""

import json
import re
import threading
from pathlib import Path
from typing import Any

try:
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
except ImportError:  # scoring (compute_score) and tests run without veRL installed
    BaseTool = object
    ToolResponse = None

from . import taskrt

BUNDLE_DIR = Path(__file__).resolve().parent / "data"
_BUNDLE = None
_LOCK = threading.Lock()
_DBS: dict[str, Any] = {}
TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
TOOL_RESPONSE = re.compile(r"<tool_response>.*?</tool_response>", re.S)


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


def _response(text):
    return ToolResponse(text=text) if ToolResponse is not None else text


class EnvFoundryTool(BaseTool):
    def __init__(self, config: dict, tool_schema):
        if BaseTool is not object:
            super().__init__(config, tool_schema)
        self.config = config
        self.tool_schema = tool_schema
        self.name = config["tool"]

    def get_openai_tool_schema(self):
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs):
        return instance_id or "", _response("")

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs):
        agent_data = kwargs.get("agent_data")
        key = getattr(agent_data, "request_id", None) or instance_id
        with _LOCK:
            conn = _DBS.get(key)
            if conn is None:
                conn = _DBS[key] = bundle().fresh_db()
            out = bundle().call(conn, self.name, parameters if isinstance(parameters, dict) else {})
        return _response(taskrt.render_result(out)), 0.0, {"ok": out["ok"]}

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs) -> None:
        return None


def release_trajectory(request_id: str) -> None:
    """Drop a trajectory's database (call when the trajectory is over)."""
    with _LOCK:
        conn = _DBS.pop(request_id, None)
    if conn is not None:
        conn.close()


def parse_response(solution_str: str):
    """(tool calls [{"tool", "arguments"}], final reply) from a hermes-format response."""
    calls = []
    for block in TOOL_CALL.findall(solution_str or ""):
        try:
            obj = json.loads(block)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            args = obj.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = None
            calls.append({"tool": obj["name"], "arguments": args if isinstance(args, dict) else {}})
    tail = TOOL_RESPONSE.split(solution_str or "")[-1]
    tail = TOOL_CALL.split(tail)[-1]
    reply = re.sub(r"<\|[^>]*\|>|</?\w+>", " ", tail).strip()
    return calls, reply


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """veRL reward: replay the response's tool calls and evaluate the task's verifier."""
    extra_info = extra_info or {}
    task_id = extra_info.get("task_id") or (json.loads(ground_truth)["task_id"] if ground_truth else None)
    task = bundle().task(task_id)
    calls, reply = parse_response(solution_str)
    conn, _ = bundle().replay(calls)
    try:
        result = bundle().evaluate(task, conn, answer=reply or None)
    finally:
        conn.close()
    return taskrt.reward(result, bool(extra_info.get("partial_credit", False)))
