"""Repairs the verify loop asks for when the checker blames the environment.

``repair_tool(env, fault, client, settings)``: the tool named by ``fault.target`` is written again by the tools
agent (same name and kind), with the checker's finding in its purpose, and must pass the same static checks and
sample execution as any new tool. Returns the repaired environment, or None when no better tool came back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.schema import scratch_db, table_columns
from pipeline.stages.tools import Sampler, ToolPlanItem, _write_tool

if TYPE_CHECKING:
    from pipeline.build import BuildSettings


def repair_tool(env: ir.Environment, fault: Any, client: Any, settings: BuildSettings) -> ir.Environment | None:
    try:
        old = env.tool(fault.target)
    except KeyError:
        return None
    plan = ToolPlanItem(name=old.name, kind=old.kind,
                        purpose=f"{old.description} A reviewer found this fault in the previous version, avoid it: "
                                f"{fault.reason}")
    base = env.model_copy(update={"tools": []})
    with EnvInstance(base) as seeded:
        sampler = Sampler(seeded.conn, tuple(env.tables), env.clock)
        enums = {c.name: c.enum for t in env.tables for c in table_columns(seeded.conn, t) if c.enum}
        schema_conn = scratch_db(env.tables)
        try:
            out = _write_tool(plan, env.scenario, base, schema_conn, sampler, enums, client, settings)
        finally:
            schema_conn.close()
    if out.value is None or out.value == old:
        return None
    return env.model_copy(update={"tools": [out.value if t.name == old.name else t for t in env.tools]})
