"""The data repair the verify loop asks for when the checker blames the environment's rows.

``repair_data(env, fault, client, settings)``: the rows of the table named by ``fault.target`` are written again
by the seed-data agent, with the checker's finding in the scenario it sees, through the same SQLite checks as at
build time. Only a table no other table references is rewritten (new rows in a parent would orphan its
children). Returns the repaired environment, or None (unknown or referenced table, too few valid rows).
The verify loop then derives the task's verifier again on the new data, and every task accepted earlier is
derived again at the end (or dropped with the reason). (The tool repair is ``pipeline.stages.tools.repair``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.stages.rows.populate import generate_seed_for

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings


def _blamed_table(env: ir.Environment, target: str) -> ir.Table | None:
    """The table a data fault names: ``books``, ``books.quantity``, ``table books``; else None."""
    words = [w.strip("`'\".,:;()") for w in target.replace(".", " ").split()]
    for t in env.tables:
        if t.name in words:
            return t
    return None


def repair_data(env: ir.Environment, fault: Any, client: LLMClientProtocol, settings: BuildSettings) -> ir.Environment | None:
    table = _blamed_table(env, str(fault.target))
    if table is None:
        return None
    conn = scratch_db(env.tables)  # the schema alone: its foreign keys say who references the table
    try:
        referenced = any(fk[2] == table.name for t in env.tables if t.name != table.name
                         for fk in conn.execute(f'PRAGMA foreign_key_list("{t.name}")').fetchall())
    finally:
        conn.close()
    if referenced:
        return None
    old = next((s for s in env.seed if s.table == table.name), None)
    n_rows = max(len(old.rows) if old else 0, settings.rows_min)
    scenario = env.scenario.model_copy(update={
        "description": f"{env.scenario.description} A reviewer found this problem with the {table.name} data; "
                       f"the new rows must not have it: {fault.reason}"})
    rows = generate_seed_for(scenario, env, table, client,
                             settings.model_copy(update={"rows_per_table": n_rows, "clock": env.clock}))
    if rows is None or (old is not None and rows == old):
        return None
    seed = [rows if s.table == table.name else s for s in env.seed]
    if old is None:
        seed.append(rows)
    return env.model_copy(update={"seed": seed})
