"""A ``:last_id`` that means an earlier INSERT's row is pinned to that row (``pipeline.stages.tools.last_ids``): an
outside support-case build of 2026-11-30 inserted a case, then an SLA row for it, then an escalation "for it" with
``:last_id`` (the SLA row's id by then), and returned ``WHERE case_id = :last_id``: another existing case was
escalated and reported as the new one. Made-up tables; no LLM."""

from __future__ import annotations

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import table_infos
from pipeline.stages.tools.last_ids import pin

DDL = [
    "CREATE TABLE tabs (tab_id INTEGER PRIMARY KEY, label TEXT NOT NULL) STRICT",
    "CREATE TABLE marks (mark_id INTEGER PRIMARY KEY, tab_id INTEGER NOT NULL REFERENCES tabs(tab_id), size REAL) STRICT",
    "CREATE TABLE pins (pin_id INTEGER PRIMARY KEY, tab_id INTEGER NOT NULL REFERENCES tabs(tab_id), who TEXT) STRICT",
]
ROWS = {"tabs": [{"tab_id": i, "label": f"T{i}"} for i in range(1, 41)],
        "marks": [{"mark_id": i, "tab_id": 1 + i % 40, "size": 1.0} for i in range(1, 31)],
        "pins": [{"pin_id": i, "tab_id": 1 + i % 40, "who": "x"} for i in range(1, 6)]}
OPEN = ir.Tool(
    name="open_tab", description="Open a tab with its first mark and pin.", kind="write",
    params=[ir.Param(name="label", type="string", description="Its label (tabs.label)")],
    steps=[ir.Step(kind="write", sql="INSERT INTO tabs (label) VALUES (:label)"),
           ir.Step(kind="write", sql="INSERT INTO marks (tab_id, size) VALUES (:last_id, 0)"),
           ir.Step(kind="write", sql="INSERT INTO pins (tab_id, who) VALUES (:last_id, 'desk')")],
    returns=ir.Returns(sql="SELECT tab_id, label FROM tabs WHERE tab_id = :last_id", mode="one"))
CHAINED = ir.Tool(  # each :last_id is the row just made: nothing to pin
    name="mark_new_tab", description="Open a tab and mark it.", kind="write",
    params=[ir.Param(name="label", type="string", description="Its label (tabs.label)")],
    steps=[ir.Step(kind="write", sql="INSERT INTO tabs (label) VALUES (:label)"),
           ir.Step(kind="write", sql="INSERT INTO marks (tab_id, size) VALUES (:last_id, 1)")],
    returns=ir.Returns(sql="SELECT mark_id, tab_id FROM marks WHERE mark_id = :last_id", mode="one"))


def env(tools: list[ir.Tool]) -> ir.Environment:
    return ir.Environment(
        scenario=ir.Scenario(name="Tabs", description="Tabs, marks and pins.", seed="tabs", entities=["tab"],
                             goals=["open tabs"]),
        tables=[ir.Table(name=d.split()[2], ddl=d) for d in DDL],
        seed=[ir.SeedRows(table=t, rows=r) for t, r in ROWS.items()], tools=tools)


def _open(e: ir.Environment) -> tuple[dict, tuple, tuple]:
    with EnvInstance(e) as inst:
        res = inst.call("open_tab", {"label": "New"})
        new = inst.conn.execute("SELECT MAX(tab_id) FROM tabs").fetchone()[0]
        pin_row = inst.conn.execute("SELECT tab_id FROM pins ORDER BY pin_id DESC LIMIT 1").fetchone()
        mark_row = inst.conn.execute("SELECT tab_id FROM marks ORDER BY mark_id DESC LIMIT 1").fetchone()
    return res, (new, pin_row[0]), (new, mark_row[0])


def test_an_earlier_rows_id_is_pinned_for_the_statements_that_name_it() -> None:
    before = env([OPEN, CHAINED])
    res, pinned, marked = _open(before)
    assert res["ok"] and res["result"]["tab_id"] != pinned[0] and pinned[1] != pinned[0]  # the bug, as the engine has it
    with EnvInstance(before) as inst:
        tools, notes = pin(before.tools, table_infos(inst.conn))
    assert [n.item for n in notes] == ["open_tab"]
    fixed = tools[0]
    assert [s.kind for s in fixed.steps] == ["write", "query", "write", "write"]
    assert fixed.steps[1].sql == "SELECT :last_id AS id" and fixed.steps[1].bind == "new_tabs"
    assert ":last_id" in fixed.steps[2].sql  # the latest row is still the tab's there
    assert ":new_tabs_id" in fixed.steps[3].sql and fixed.returns is not None and ":new_tabs_id" in fixed.returns.sql
    assert tools[1] == CHAINED
    res, pinned, marked = _open(before.model_copy(update={"tools": tools}))
    assert res["ok"] and res["result"]["tab_id"] == pinned[0] == pinned[1] == marked[1]
    assert res["result"]["label"] == "New"
