"""A planned task creates a row in the state a new row has and moves a row only forward through its states (issue
40). Seen in the example (2026-11-28): "Please add a new returned loan ... with loan date January 15, 2026" (a loan
returned the day it is issued), "add a new closed order", "mark the renewal ... as pending" (a returned renewal sent
back), "mark the order ... as open" (a 3-month-old closed order reopened).

Inferred from evidence, never from the states' words: here the states are made-up words ('zul', 'mar', 'kip'), and
the model's example rows dated at the clock hold 'zul', so 'zul' is a new row's state; the list's order (or the
rows' age, when it is clear) gives what comes after."""

from __future__ import annotations

import random

from pipeline import ir
from pipeline.dbmodel import lifecycle as st
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner.values import fit_dates, new_value

CLIENTS_DDL = "CREATE TABLE clients (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT"


def tabs_ddl(state: str = "state TEXT NOT NULL CHECK (state IN ('zul', 'mar', 'kip'))") -> str:
    return ("CREATE TABLE tabs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, client_id INTEGER NOT NULL "
            f"REFERENCES clients(id), opened_on TEXT NOT NULL, {state}) STRICT")


NAMES = ["Oskar Lind", "Mira Vos", "Tomas Berg", "Ines Roa", "Pavel Dunn", "Lena Ruiz"]
CLIENTS = [{"id": i + 1, "name": n} for i, n in enumerate(NAMES)]
STATES = ["zul", "mar", "kip"]


def tab_rows(examples: list[tuple[str, str]], made: list[tuple[str, str]]) -> list[dict[str, object]]:
    rows = examples + made
    return [{"id": i + 1, "label": f"T-{i + 1:03d}", "client_id": 1 + i % len(NAMES), "opened_on": d, "state": s}
            for i, (d, s) in enumerate(rows)]


EXAMPLES = [("2026-01-15", "zul"), ("2026-01-14", "zul"), ("2026-01-15", "mar"), ("2025-11-02", "kip")]
"""The model's: three tabs opened today or yesterday, two of them 'zul'; one old tab, 'kip'."""
_rng = random.Random(4)
MADE = [(f"2025-{_rng.randint(3, 12):02d}-{_rng.randint(1, 28):02d}", STATES[i % 3]) for i in range(24)]
"""Code's: dated over the past year, states drawn independently of the dates (as the rows stage draws an enum)."""

STATE = ir.Param(name="state", type="string", description="The tab's state (tabs.state)", enum=STATES)
TOOLS = [
    ir.Tool(name="find_client", description="Find a client by name.", kind="read",
            params=[ir.Param(name="name", type="string", description="The client's name (clients.name)")],
            returns=ir.Returns(sql="SELECT id, name FROM clients WHERE name = :name", mode="one")),
    ir.Tool(name="find_tab", description="Find a tab by its label.", kind="read",
            params=[ir.Param(name="label", type="string", description="The tab's label (tabs.label)")],
            returns=ir.Returns(sql="SELECT id, label, client_id, opened_on, state FROM tabs WHERE label = :label",
                               mode="one")),
    ir.Tool(name="open_tab", description="Record a new tab.", kind="write",
            params=[ir.Param(name="label", type="string", description="Its label (tabs.label)"),
                    ir.Param(name="client_id", type="integer", description="Client id (clients.id)", minimum=1),
                    ir.Param(name="opened_on", type="string", description="When it was opened (tabs.opened_on)"),
                    STATE],
            steps=[ir.Step(kind="write", sql="INSERT INTO tabs (label, client_id, opened_on, state) "
                                             "VALUES (:label, :client_id, :opened_on, :state)")],
            returns=ir.Returns(sql="SELECT * FROM tabs WHERE id = :last_id", mode="one")),
    ir.Tool(name="set_tab_state", description="Set the state of one tab.", kind="write",
            params=[ir.Param(name="tab_id", type="integer", description="Tab id (tabs.id)", minimum=1), STATE],
            steps=[ir.Step(kind="write", sql="UPDATE tabs SET state = :state WHERE id = :tab_id")],
            returns=ir.Returns(sql="SELECT * FROM tabs WHERE id = :tab_id", mode="one")),
]


def tabs_env(examples: list[tuple[str, str]] = EXAMPLES, made: list[tuple[str, str]] = MADE,
             ddl: str | None = None, tools: list[ir.Tool] = TOOLS) -> ir.Environment:
    plan = ir.RowPlan(locale="en_US", seed=3, examples=len(examples), generators=[])
    return ir.Environment(
        scenario=ir.Scenario(name="Tabs", description="Clients run tabs.", seed="tabs", entities=["client", "tab"],
                             goals=["open tabs", "move tabs on"]),
        tables=[ir.Table(name="clients", ddl=CLIENTS_DDL), ir.Table(name="tabs", ddl=ddl or tabs_ddl())],
        seed=[ir.SeedRows(table="clients", rows=CLIENTS),
              ir.SeedRows(table="tabs", rows=tab_rows(examples, made), plan=plan)],
        tools=tools)


def test_the_examples_at_the_clock_give_a_new_rows_state_and_the_list_what_follows() -> None:
    env = tabs_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        assert st.states(p, "tabs", "state") == ("zul", "mar", "kip")
        assert st.lifecycle(p, "tabs", "state") == ("zul", "mar", "kip")  # the old example's 'kip' is no evidence
        assert st.later(p, "tabs", "state", "zul") == ["mar", "kip"]
        assert st.later(p, "tabs", "state", "kip") == []
        # a change moves on to the next state, never back; from the last state there is none
        assert new_value(p, "tabs", "state", "zul", STATE, False) == "mar"
        assert new_value(p, "tabs", "state", "mar", STATE, False) == "kip"
        assert new_value(p, "tabs", "state", "kip", STATE, False) is None
        # a new row copied from a 'kip' row starts as 'zul'; a change of an existing row keeps its value
        got = fit_dates(p, "tabs", None, {"state": "kip", "opened_on": "2025-04-02"}, {})
        assert got is not None and got["state"] == "zul"
        row = {"id": 5, "label": "T-005", "client_id": 5, "opened_on": "2025-05-01", "state": "mar"}
        assert fit_dates(p, "tabs", row, {"state": "kip"}, {}) == {"state": "kip"}
        assert st.lifecycle(p, "clients", "name") is None  # six names held once each: no states


def test_planned_tasks_create_in_the_initial_state_and_only_move_forward() -> None:
    """Before: a new tab copied a random row's state ('kip', 'mar') and a change took the first other value of the
    list, sending 'mar' and 'kip' tabs back to 'zul'."""
    env = tabs_env()
    order = {s: i for i, s in enumerate(STATES)}
    created, moved = [], []
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, {1: 0.4, 2: 0.3, 3: 0.3}, spread=True)
    for ch in chains:
        with fresh(env) as r2:
            play(r2, ch.calls)
            for c in r2.changes():
                if c.table != "tabs":
                    continue
                if c.op == "insert":
                    created.append(c.after["state"])
                elif c.op == "update":
                    moved.append((c.before["state"], c.after["state"]))
    assert created and moved, (created, moved)
    assert set(created) == {"zul"}, created
    assert all(order[b] > order[a] for a, b in moved), moved


def test_default_tie_and_age_evidence() -> None:
    # the column's DEFAULT decides over the examples
    env = tabs_env(ddl=tabs_ddl("state TEXT NOT NULL DEFAULT 'mar' CHECK (state IN ('zul', 'mar', 'kip'))"))
    with fresh(env) as run:
        p = make_planner(env, run)
        assert st.default_of(p, "tabs", "state") == "mar"
        assert st.lifecycle(p, "tabs", "state") == ("mar", "zul", "kip")
    # a tie among the examples at the clock: the list's order
    env = tabs_env(examples=[("2026-01-15", "mar"), ("2026-01-15", "kip"), ("2026-01-13", "kip"),
                             ("2026-01-15", "mar")])
    with fresh(env) as run:
        assert st.initial_state(make_planner(env, run), "tabs", "state") == "mar"
    # no example at the clock, and rows whose states are drawn at random: no evidence, the old behaviour
    old = [(d, s) for d, s in EXAMPLES if d < "2026"] + [("2025-06-01", "mar")]
    env = tabs_env(examples=old)
    with fresh(env) as run:
        p = make_planner(env, run)
        assert st.lifecycle(p, "tabs", "state") is None
        assert new_value(p, "tabs", "state", "kip", STATE, False) == "zul"  # any other value, as before
        assert fit_dates(p, "tabs", None, {"state": "kip"}, {}) == {"state": "kip"}
    # rows whose age tells the states apart (the young 'zul', older 'mar', oldest 'kip'): that order
    aged = [(f"2025-12-{1 + i:02d}", "zul") for i in range(8)] + [(f"2025-08-{1 + i:02d}", "mar") for i in range(8)] \
        + [(f"2025-04-{1 + i:02d}", "kip") for i in range(8)]
    env = tabs_env(examples=old, made=list(reversed(aged)))
    with fresh(env) as run:
        assert st.lifecycle(make_planner(env, run), "tabs", "state") == ("zul", "mar", "kip")
    env = tabs_env(examples=old, made=[(d, {"zul": "kip", "kip": "zul"}.get(s, s)) for d, s in aged])
    with fresh(env) as run:
        assert st.lifecycle(make_planner(env, run), "tabs", "state") == ("kip", "mar", "zul")


def test_a_text_column_without_a_list_is_read_from_its_few_values() -> None:
    env = tabs_env(ddl=tabs_ddl("state TEXT NOT NULL"), tools=[
        t.model_copy(update={"params": [q.model_copy(update={"enum": None}) if q.name == "state" else q
                                        for q in t.params]}) for t in TOOLS])
    with fresh(env) as run:
        p = make_planner(env, run)
        assert st.states(p, "tabs", "state") == ("zul", "mar", "kip")  # the examples' order
        assert st.lifecycle(p, "tabs", "state") == ("zul", "mar", "kip")
        plain = STATE.model_copy(update={"enum": None})
        assert new_value(p, "tabs", "state", "mar", plain, False) == "kip"
        assert st.states(p, "tabs", "label") is None  # every value once: no states
