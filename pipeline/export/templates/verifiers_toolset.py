"""The environment's tools as a verifiers (v1) MCP tool server.

Launched per rollout by verifiers (``python -m <package>.toolset``). The rollout's database lives
in the rollout's shared ``state`` (``EnvFoundryState.db``): every call restores it, runs the tool
through the envfoundry engine and, when the tool changed it, writes it back — so each rollout
starts from its own fresh copy of ``initial.db`` and the reward sees the final state.
"""

import inspect
import keyword
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from . import taskrt

BUNDLE_DIR = Path(__file__).resolve().parent / "data"
_BUNDLE = None


def bundle():
    global _BUNDLE
    if _BUNDLE is None:
        _BUNDLE = taskrt.Bundle(BUNDLE_DIR)
    return _BUNDLE


class EnvFoundryState(vf.State):
    db: str | None = None
    """The rollout's database (``taskrt.dump_db``); None until a tool first changes it."""
    calls: int = 0
    """Tool calls made in this rollout."""


def _signature(tool: dict) -> inspect.Signature:
    params = []
    for p in tool.get("params") or []:
        if keyword.iskeyword(p["name"]):
            raise ValueError(f"tool {tool['name']!r}: parameter {p['name']!r} is a Python keyword")
        # Every argument reaches the engine as given (it validates types strictly and names the
        # parameter in its errors); the advertised schema is replaced by the exact IR schema.
        params.append(
            inspect.Parameter(p["name"], inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
        )
    return inspect.Signature(params, return_annotation=str)


def input_schema(tool: dict) -> dict:
    props = {}
    for p in tool.get("params") or []:
        s = {"type": p["type"]}
        if p.get("description"):
            s["description"] = p["description"]
        if p.get("enum") is not None:
            s["enum"] = list(p["enum"])
        if p.get("minimum") is not None:
            s["minimum"] = p["minimum"]
        if p.get("maximum") is not None:
            s["maximum"] = p["maximum"]
        if p.get("max_length") is not None:
            s["maxLength"] = p["max_length"]
        props[p["name"]] = s
    required = [p["name"] for p in tool.get("params") or [] if p.get("required", True)]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


class EnvFoundryToolset(vf.Toolset[vf.ToolsetConfig, EnvFoundryState]):
    TOOL_PREFIX = None  # tools keep their own names, the same in every export format

    def _tool_fn(self, tool: dict):
        name = tool["name"]

        def call(**arguments):
            b = bundle()
            state = self.state
            conn = taskrt.load_db(state.db) if state.db else b.fresh_db()
            try:
                before = conn.total_changes
                out = b.call(conn, name, {k: v for k, v in arguments.items() if v is not None})
                if conn.total_changes != before:
                    state.db = taskrt.dump_db(conn)
            finally:
                conn.close()
            state.calls += 1
            return taskrt.render_result(out)

        call.__name__ = name
        call.__doc__ = tool["description"]
        call.__signature__ = _signature(tool)
        return call

    def register(self, mcp) -> None:
        for tool in bundle().tools.values():
            fn = self._tool_fn(tool)
            mcp.add_tool(self._with_state(fn), name=tool["name"], description=tool["description"])
            # Advertise the IR's own JSON schema (types, enums, bounds, required, no extras).
            registered = mcp._tool_manager.get_tool(tool["name"])
            registered.parameters = input_schema(tool)


if __name__ == "__main__":
    EnvFoundryToolset.run()
