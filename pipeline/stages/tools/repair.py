"""Repairs the verify loop asks for when the checker blames the environment.

``repair_tool(env, fault, client, settings)``: the tool named by ``fault.target`` is written again by the tools
agent (same name and kind), with the checker's finding in its purpose, and must pass the same static checks and
sample execution as any new tool (when it needs what the schema lacks, the schema is amended and the rows inserted
again, as at build time). Returns the repaired environment, or None when no better tool came back.

The data repair (``repair_data``) is the rows stage's: ``pipeline.stages.rows.repair``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline import ir
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.stages.tools.toolset import ToolPlanItem, Workspace, write_tool

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings


def repair_tool(env: ir.Environment, fault: Any, client: LLMClientProtocol, settings: BuildSettings) -> ir.Environment | None:
    try:
        old = env.tool(fault.target)
    except KeyError:
        return None
    plan = ToolPlanItem(name=old.name, kind=old.kind,
                        purpose=f"{old.description} A reviewer found this fault in the previous version, avoid it: "
                                f"{fault.reason}")
    others = [t for t in env.tools if t.name != old.name]
    amended: Workspace | None = None
    with Workspace(env.scenario, env.tables, env.seed, env.clock, others) as ws:
        out = write_tool(plan, ws, client, settings)
    if out.value is None:
        return None
    tool, amended = out.value
    update: dict[str, Any] = {"tools": [tool if t.name == old.name else t for t in env.tools]}
    if amended is not None:  # the tool needed a schema amendment: the rows were inserted again into it
        update["tables"], update["seed"] = list(amended.tables), list(amended.seed)
        amended.close()
    elif tool == old:
        return None
    return env.model_copy(update=update)


