"""The environment's tools as a verifiers (v1) MCP tool server.

Launched per rollout by verifiers (``python -m <package>.toolset``). The rollout's database lives
in the rollout's shared ``state`` (``EnvFoundryState.db``): every call restores it, runs the tool
through the envfoundry engine and, when the tool changed it, writes it back, so each rollout
starts from its own fresh copy of ``initial.db`` (of its task's own state, for a task sampled on a perturbed
state: ``data/states/``) and the reward sees the final state.

The server is task-scoped (``Task.toolsets``): verifiers launches one per rollout and hands it the rollout's
``TaskData`` (``setup_task``) before it registers its tools. A sampled task (``EnvFoundryData.tools``, from the
export's ``pool.jsonl``) offers only its own tools, those it needs and its level's distractors: only they are
registered, and a call to another tool of the environment is refused with an error naming the task's tools
(what the agent's client gets as the call's error result; the rollout goes on). A task of the bank offers every
tool.

Tools are registered with the MCP server's public ``add_tool``. Each parameter is annotated
``Any`` with the IR's own JSON schema attached (``WithJsonSchema``): clients see the exact types,
enums, bounds and required parameters, while the values reach the engine as sent, so it validates
them strictly (no ``"3"`` for an integer) and names the parameter in its errors, as in every
other export.
"""

import inspect
import keyword
from pathlib import Path
from typing import Annotated, Any

import verifiers.v1 as vf
from pydantic import WithJsonSchema

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


def param_schema(p: dict) -> dict:
    """The IR parameter's JSON schema (as ``Tool.input_schema()`` writes it)."""
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
    if p.get("format") == taskrt.engine.DATE_FORMAT:
        s["format"] = taskrt.engine.DATE_FORMAT
    elif p.get("format") == taskrt.engine.DATETIME_FORMAT:
        s["pattern"] = taskrt.engine.DATETIME_PATTERN
    return s


def signature(tool: dict) -> inspect.Signature:
    params = []
    for p in tool.get("params") or []:
        if keyword.iskeyword(p["name"]):
            raise ValueError(f"tool {tool['name']!r}: parameter {p['name']!r} is a Python keyword")
        required = p.get("required", True)
        params.append(
            inspect.Parameter(
                p["name"],
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if required else None,
                annotation=Annotated[Any, WithJsonSchema(param_schema(p))],
            )
        )
    return inspect.Signature(params, return_annotation=str)


class EnvFoundryToolset(vf.Toolset[vf.ToolsetConfig, EnvFoundryState]):
    TOOL_PREFIX = None  # tools keep their own names, the same in every export format
    offered: list[str] | None = None
    """The tools the rollout's task offers, in the environment's order (None: every tool; set by ``setup_task``)."""

    initial_state: str | None = None
    """The state the rollout's task starts from (a database of ``data/states/`` for a task sampled on a perturbed
    state, ``Bundle.state_of``; None: ``initial.db``)."""

    async def setup_task(self, task) -> None:
        """The rollout's task (its ``EnvFoundryData``), before ``register``: a sampled task's own tools and its
        initial state."""
        task_id = getattr(task, "task_id", None)
        self.initial_state = bundle().state_of(task_id) if task_id else None
        names = getattr(task, "tools", None)
        if names is None:
            self.offered = None
            return
        tools, wanted = bundle().tools, set(names)
        unknown = sorted(wanted - set(tools))
        if unknown:
            raise ValueError(f"task {task.task_id!r} offers {unknown!r}, which the environment does not have "
                             f"(its tools: {', '.join(tools)})")
        self.offered = [n for n in tools if n in wanted]

    def _tool_fn(self, tool: dict):
        name = tool["name"]
        optional = {p["name"] for p in tool.get("params") or [] if not p.get("required", True)}

        def call(**arguments):
            b = bundle()
            state = self.state
            conn = taskrt.load_db(state.db) if state.db else b.fresh_db(self.initial_state)
            try:
                before = conn.total_changes
                # An optional parameter left out arrives as None: drop it, as if it was not sent.
                sent = {k: v for k, v in arguments.items() if not (v is None and k in optional)}
                out = b.call(conn, name, sent)
                if conn.total_changes != before:
                    state.db = taskrt.dump_db(conn)
            finally:
                conn.close()
            state.calls += 1
            return taskrt.render_result(out)

        call.__name__ = name
        call.__doc__ = tool["description"]
        call.__signature__ = signature(tool)  # type: ignore[attr-defined]
        return call

    def register(self, mcp) -> None:
        offered = self.offered
        for tool in bundle().tools.values():
            if offered is None or tool["name"] in offered:
                mcp.add_tool(self._with_state(self._tool_fn(tool)), name=tool["name"], description=tool["description"])
        if offered is not None:
            # MCPServer's call handler calls its public ``call_tool`` (verifiers' own toolsets replace it the same
            # way): a tool the task does not offer gets an error naming the task's tools, not "Unknown tool".
            call_registered = mcp.call_tool

            async def call_tool(name, arguments, context=None):
                if name not in offered:
                    raise ValueError(f"tool {name!r} is not offered in this task (its tools: {', '.join(offered)})")
                return await call_registered(name, arguments, context)

            mcp.call_tool = call_tool


if __name__ == "__main__":
    EnvFoundryToolset.run()
