"""No state rule turns on the state a new row is made in (issue 40: "rules no domain has"). A state guard forbids a
write on a row in one state; on the state every new row starts in it forbids the write on every new row. Seen
2026-11-30 on an outside support-case build: "Once a case is open, its status may no longer be changed", so no
case could ever be worked on, and every task the rule bound taught an agent to refuse the desk's daily work.

The initial state is read from evidence, never from the states' words (:func:`pipeline.dbmodel.lifecycle.initial_state`):
here made-up words ('zul', 'mar', 'kip') whose example rows dated at the clock hold 'zul'; with the rows alone saying
nothing (every example old), the candidates are what they were. Only a tool that changes the row itself loses the
candidate: another write that names the row may wait for it to move on ("a batch still fermenting cannot fill kegs").
"""

from __future__ import annotations

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import Finder, propose
from tests.stages.test_task_states import MADE, TOOLS, tabs_env

NAMING = ir.Tool(
    name="rename_tab_client", description="Rename the client of a tab.", kind="write",
    params=[ir.Param(name="tab_id", type="integer", description="Tab id (tabs.id)", minimum=1),
            ir.Param(name="name", type="string", description="The client's new name (clients.name)")],
    steps=[ir.Step(kind="guard", sql="SELECT 1 FROM tabs WHERE id = :tab_id", must="exist", error="No such tab."),
           ir.Step(kind="write", sql="UPDATE clients SET name = :name WHERE id = "
                                     "(SELECT client_id FROM tabs WHERE id = :tab_id)")],
    returns=ir.Returns(sql="SELECT * FROM clients WHERE id = (SELECT client_id FROM tabs WHERE id = :tab_id)",
                       mode="one"))

OLD_EXAMPLES = [("2025-06-01", "zul"), ("2025-06-02", "zul"), ("2025-06-03", "mar"), ("2025-06-04", "kip")]


def state_values(env: ir.Environment, tool: str = "set_tab_state") -> set[str]:
    with EnvInstance(env) as inst:
        return {c.words["value"] for c in propose(env, inst.conn) if c.words.get("section") == "state"
                and c.tool == tool}


def test_no_state_guard_on_the_state_new_rows_are_made_in() -> None:
    env = tabs_env()
    with EnvInstance(env) as inst:
        assert Finder(env, inst.conn).initial("tabs", "state") == "zul"
    assert state_values(env) == {"mar", "kip"}


def test_a_write_that_only_names_the_row_may_wait_for_its_first_state_to_pass() -> None:
    env = tabs_env(tools=[*TOOLS, NAMING])
    assert state_values(env, "rename_tab_client") == {"zul", "mar", "kip"}
    assert state_values(env) == {"mar", "kip"}


def test_a_default_names_the_initial_state() -> None:
    env = tabs_env(examples=OLD_EXAMPLES, ddl=(
        "CREATE TABLE tabs (id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, client_id INTEGER NOT NULL "
        "REFERENCES clients(id), opened_on TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'mar' "
        "CHECK (state IN ('zul', 'mar', 'kip'))) STRICT"))
    assert state_values(env) == {"zul", "kip"}


def test_without_evidence_every_held_state_stays_a_candidate() -> None:
    env = tabs_env(examples=OLD_EXAMPLES, made=MADE)
    with EnvInstance(env) as inst:
        assert Finder(env, inst.conn).initial("tabs", "state") is None
    assert state_values(env) == {"zul", "mar", "kip"}
