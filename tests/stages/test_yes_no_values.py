"""A yes/no held as 0/1 (an INTEGER column the rows stage drew as a boolean) changes to the other one in a planned
write, not to "4": an outside apartment-rental build of 2026-11-30 asked "For the listing 26035 Rios Mountain,
please change the availability to 4" of a column every row held 1 in (its generator: boolean). Read from the plan and
the rows, no name. Made-up words; no LLM."""

from __future__ import annotations

from pipeline import ir
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.planner import make_planner
from pipeline.stages.tasks.planner.values import new_value, yes_no
from tests.stages.test_task_states import tabs_env

DDL = ("CREATE TABLE tabs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, client_id INTEGER NOT NULL "
       "REFERENCES clients(id), opened_on TEXT NOT NULL, state TEXT NOT NULL, open INTEGER DEFAULT 1, "
       "seats INTEGER) STRICT")
FLAG = ir.Param(name="open", type="integer", description="Whether it is open (tabs.open)")
SEATS = ir.Param(name="seats", type="integer", description="Seats (tabs.seats)")


def env_with(flags: list[int], seats: list[int], boolean_plan: bool) -> ir.Environment:
    env = tabs_env(ddl=DDL)
    tabs = next(s for s in env.seed if s.table == "tabs")
    rows = [{**r, "open": flags[i % len(flags)], "seats": seats[i % len(seats)]} for i, r in enumerate(tabs.rows)]
    gens = [ir.ColumnGenerator(column="open", kind="boolean", weights=[0.0, 1.0])] if boolean_plan else []
    plan = tabs.plan.model_copy(update={"generators": gens}) if tabs.plan is not None else None
    seed = [s if s.table != "tabs" else s.model_copy(update={"rows": rows, "plan": plan}) for s in env.seed]
    return env.model_copy(update={"seed": seed})


def test_a_boolean_drawn_column_every_row_holds_1_in_changes_to_0() -> None:
    env = env_with([1], [1, 2, 5], boolean_plan=True)
    with fresh(env) as run:
        p = make_planner(env, run)
        assert yes_no(p, "tabs", "open")
        assert new_value(p, "tabs", "open", 1, FLAG, False) == 0
        assert new_value(p, "tabs", "open", 0, FLAG, False) == 1


def test_without_a_plan_the_rows_decide_and_a_count_still_counts_on() -> None:
    env = env_with([0, 1, 1], [0, 1, 1, 0], boolean_plan=False)
    with fresh(env) as run:
        p = make_planner(env, run)
        assert yes_no(p, "tabs", "open")
        assert new_value(p, "tabs", "open", 1, FLAG, False) == 0
    env = env_with([1], [1, 2, 5], boolean_plan=False)
    with fresh(env) as run:
        p = make_planner(env, run)
        assert not yes_no(p, "tabs", "seats")  # 1, 2 and 5 seats: a count
        assert new_value(p, "tabs", "seats", 1, SEATS, False) == 4
        assert not yes_no(p, "tabs", "open")  # every row 1 and no plan: nothing says yes/no
        assert new_value(p, "tabs", "open", 1, FLAG, False) == 4
