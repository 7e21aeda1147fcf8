"""The tools stage's workspace: an amended schema keeps what the seed stage recorded about its rows."""

from __future__ import annotations

from pipeline import ir
from pipeline.stages.tools import amend_schema as amend
from pipeline.stages.tools.toolset import Workspace
from tests.stages import test_tools_domains as brewery

BATCHES = [{"batch_id": i, "beer": b, "brewed_on": f"2026-01-0{i}", "status": "packaged", "litres": 300.0}
           for i, b in enumerate(["Dry Stout", "Pale Ale", "Saison"], 1)]
KEGS = [{"keg_id": k, "serial": f"K-00{k}", "batch_id": 1 + k % 3, "status": "full"} for k in range(1, 5)]
PLAN = ir.RowPlan(seed=7, examples=1, generators=[
    ir.ColumnGenerator(column="beer", kind="text_pool", pool=["Dry Stout", "Pale Ale", "Saison", "Porter"]),
    ir.ColumnGenerator(column="litres", kind="amount", min=100, max=900)])


def test_an_amended_schema_keeps_the_row_generators_plan() -> None:
    seed = [ir.SeedRows(table="batches", rows=BATCHES, plan=PLAN), ir.SeedRows(table="kegs", rows=KEGS)]
    with Workspace(brewery.SCENARIO, brewery.TABLES, seed, "2026-01-15T09:00:00") as ws:
        new = ws.amended([amend.Amendment("kegs", "status", "allow_value", "retired"),
                          amend.Amendment("batches", "final_gravity", "add_column", "REAL")])
        assert not isinstance(new, str), new
        with new:
            assert [(s.table, s.plan) for s in new.seed] == [("batches", PLAN), ("kegs", None)]
            assert [r["beer"] for r in new.seed[0].rows] == [r["beer"] for r in BATCHES]
            assert "retired" in new.tables[1].ddl and "final_gravity" in new.tables[0].ddl


def test_the_workspace_refuses_arithmetic_on_a_column_its_seeded_rows_hold_dates_in() -> None:
    # brewed_on is plain TEXT in the DDL: only the seeded rows say it holds dates
    seed = [ir.SeedRows(table="batches", rows=BATCHES, plan=PLAN), ir.SeedRows(table="kegs", rows=KEGS)]
    tool = ir.Tool(name="postpone_batch", description="Move a batch's brew date a week later.", kind="write",
                   params=[ir.Param(name="batch_id", type="integer", description="The batch (batches.batch_id)")],
                   steps=[ir.Step(kind="write", sql="UPDATE batches SET brewed_on = brewed_on + 7 "
                                                    "WHERE batch_id = :batch_id")])
    with Workspace(brewery.SCENARIO, brewery.TABLES, seed, "2026-01-15T09:00:00") as ws:
        problem = ws.problems(tool, 2)
        assert problem is not None and problem.startswith("- tool 'postpone_batch' step 1 (write): brewed_on + 7 ")
        fixed = tool.model_copy(update={"steps": [ir.Step(kind="write", sql="UPDATE batches SET brewed_on = "
                                                          "date(brewed_on, '+7 days') WHERE batch_id = :batch_id")]})
        assert "date/time value" not in (ws.problems(fixed, 2) or "")
