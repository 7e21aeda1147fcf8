"""The tools stage on a domain far from lending: a brewery's batches and kegs (scripted fake LLM, real SQLite).

Repairs code can see: a tool that writes a value the schema's CHECK list lacks, or a column the table lacks,
amends the schema (and the seeded rows are inserted again) instead of retrying the tool; a write that stores
something other than its arguments is a defect fed back; an environment whose working tools still serve every
planned goal is kept below ``tools_min``; many tools are planned table by table.
"""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.stages.rows.populate import generate_seed
from pipeline.stages.tools.toolset import PLAN_CHUNK, generate_tools
from tests.stages.library_replies import small_settings

SCENARIO = ir.Scenario(name="Craft brewery", description="A small brewery tracks its batches and the kegs filled "
                                                        "from them.")
BATCHES_DDL = ("CREATE TABLE batches (batch_id INTEGER PRIMARY KEY, beer TEXT NOT NULL, brewed_on TEXT NOT NULL, "
               "status TEXT NOT NULL CHECK (status IN ('fermenting', 'packaged')), litres REAL NOT NULL "
               "CHECK (litres > 0)) STRICT")
KEGS_DDL = ("CREATE TABLE kegs (keg_id INTEGER PRIMARY KEY, serial TEXT NOT NULL UNIQUE, batch_id INTEGER "
            "REFERENCES batches(batch_id), status TEXT NOT NULL CHECK (status IN ('empty', 'full'))) STRICT")
TABLES = (ir.Table(name="batches", ddl=BATCHES_DDL, natural_key=["beer", "brewed_on"]),
          ir.Table(name="kegs", ddl=KEGS_DDL, natural_key=["serial"]))
BATCH_ROWS = {"rows": [["Dry Stout", "2026-01-05", "packaged", 400.0], ["Pale Ale", "2026-01-09", "fermenting", 300.0],
                       ["Dry Stout", "2026-01-12", "fermenting", 380.0], ["Saison", "2025-12-20", "packaged", 250.0]]}
KEG_ROWS = {"rows": [["K-001", 1, "full"], ["K-002", 1, "full"], ["K-003", None, "empty"], ["K-004", 4, "full"]]}
INTENTS = (Intent(goal="Find a batch by beer and brew date", kind="read"),
           Intent(goal="Fill a keg from a batch", kind="write"),
           Intent(goal="Retire a damaged keg", kind="write"))

FIND_BATCH = {
    "description": "Find a batch by beer and brew date; gives its id and details.",
    "params": [{"name": "beer", "type": "string", "description": "The beer"},
               {"name": "brewed_on", "type": "string", "description": "The brew date"}],
    "guards": [],
    "returns": {"sql": "SELECT batch_id, beer, brewed_on, status, litres FROM batches WHERE beer = :beer AND "
                       "brewed_on = :brewed_on", "mode": "one"},
}
FILL_KEG = {
    "description": "Fill an empty keg from a packaged batch.",
    "params": [{"name": "keg_id", "type": "integer", "description": "The keg"},
               {"name": "batch_id", "type": "integer", "description": "The batch"}],
    "guards": [{"sql": "SELECT 1 FROM kegs WHERE keg_id = :keg_id AND status = 'empty'", "must": "exist",
                "error": "Keg {keg_id} is not empty"}],
    "writes": ["UPDATE kegs SET status = 'full', batch_id = :batch_id WHERE keg_id = :keg_id"],
    "returns": {"sql": "SELECT keg_id, serial, batch_id, status FROM kegs WHERE keg_id = :keg_id", "mode": "one"},
}
RETIRE_KEG = {  # 'retired' is not in the CHECK list of kegs.status: the schema lacks it, the tool is right
    "description": "Retire a damaged keg.",
    "params": [{"name": "keg_id", "type": "integer", "description": "The keg"}],
    "guards": [{"sql": "SELECT 1 FROM kegs WHERE keg_id = :keg_id", "must": "exist",
                "error": "Keg {keg_id} does not exist"}],
    "writes": ["UPDATE kegs SET status = 'retired' WHERE keg_id = :keg_id"],
    "returns": {"sql": "SELECT keg_id, status FROM kegs WHERE keg_id = :keg_id", "mode": "one"},
}
RECORD_GRAVITY = {  # batches has no final_gravity column: it is added, typed like the argument
    "description": "Record the final gravity measured for a batch.",
    "params": [{"name": "batch_id", "type": "integer", "description": "The batch"},
               {"name": "final_gravity", "type": "number", "description": "The measured gravity"}],
    "guards": [],
    "writes": ["UPDATE batches SET final_gravity = :final_gravity WHERE batch_id = :batch_id"],
    "returns": {"sql": "SELECT batch_id, final_gravity FROM batches WHERE batch_id = :batch_id", "mode": "one"},
}
ADD_BATCH_PLUS_ONE = {  # the quickstart's add_book defect: the stored amount is not the argument
    "description": "Start a new batch.",
    "params": [{"name": "beer", "type": "string", "description": "The beer"},
               {"name": "litres", "type": "number", "description": "Volume"}],
    "guards": [],
    "writes": ["INSERT INTO batches (beer, brewed_on, status, litres) VALUES (:beer, :today, 'fermenting', :litres)",
               "UPDATE batches SET litres = litres + 1 WHERE batch_id = :last_id"],
    "returns": {"sql": "SELECT batch_id, beer, litres FROM batches WHERE batch_id = :last_id", "mode": "one"},
}
ADD_BATCH = dict(ADD_BATCH_PLUS_ONE, writes=ADD_BATCH_PLUS_ONE["writes"][:1])


def plan(*tools: tuple[str, str, list[str], list[int]]) -> dict:
    return {"tools": [{"name": n, "kind": k, "purpose": n.replace("_", " "), "tables": t, "goals": g}
                      for n, k, t, g in tools]}


@pytest.fixture(scope="module")
def seed() -> tuple[ir.SeedRows, ...]:
    # the LLM's rows only: the tests below read them by value (code-made rows have their own tests in test_rowgen)
    settings = small_settings(row_generators=False)
    res = generate_seed(SCENARIO, TABLES, fake_client([BATCH_ROWS, KEG_ROWS]), settings)
    assert res.ok
    return res.value


# The LLM's tools as it wrote them: code's renames, paging and added tools have their own tests
# (test_naming, test_coverage, test_paged_tasks)
LLM_TOOLS = {"gap_tools_max": 0, "fix_param_names": False, "paged_listers": False, "covering_writes": False}


def run(seed, replies, **settings):
    client = fake_client(replies)
    return generate_tools(SCENARIO, INTENTS, TABLES, seed, client,
                          small_settings(**{"tools_min": 2, **LLM_TOOLS, **settings})), client


def test_a_value_the_check_list_lacks_amends_the_schema_instead_of_retrying_the_tool(seed) -> None:
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("retire_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, FILL_KEG, RETIRE_KEG])
    assert res.ok, [r.reason for r in res.rejections]
    assert len(client.requests) == 4  # no retry of retire_keg
    env = res.value
    kegs = next(t for t in env.tables if t.name == "kegs")
    assert "CHECK (status IN ('empty', 'full', 'retired'))" in kegs.ddl and kegs.natural_key == ["serial"]
    assert [r.reason for r in res.rejections] == [
        "schema amended for tool retire_keg: kegs.status may also be 'retired' (added to its CHECK list)"]
    assert {s.table: len(s.rows) for s in env.seed} == {"batches": 4, "kegs": 4}  # the rows went in again
    with EnvInstance(env) as inst:
        assert inst.call("fill_keg", {"keg_id": 3, "batch_id": 1})["ok"]
        assert inst.call("retire_keg", {"keg_id": 3}) == {"ok": True, "result": {"keg_id": 3, "status": "retired"}}


def test_a_column_the_table_lacks_is_added_typed_like_the_argument(seed) -> None:
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("record_gravity", "write", ["batches"], [3]))
    res, client = run(seed, [p, FIND_BATCH, FILL_KEG, RECORD_GRAVITY])
    assert res.ok and len(client.requests) == 4
    batches = next(t for t in res.value.tables if t.name == "batches")
    assert batches.ddl.endswith("final_gravity REAL) STRICT")
    assert all(r["final_gravity"] is None for r in next(s for s in res.value.seed if s.table == "batches").rows)
    assert res.value.tool("find_batch").returns.sql.startswith("SELECT batch_id")  # tools before it still work
    with EnvInstance(res.value) as inst:
        assert inst.call("record_gravity", {"batch_id": 2, "final_gravity": 1.012})["result"]["final_gravity"] == 1.012


def test_a_misspelt_column_is_fed_back_not_added(seed) -> None:
    typo = dict(RETIRE_KEG, writes=["UPDATE kegs SET statuss = 'empty' WHERE keg_id = :keg_id"])
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("retire_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, FILL_KEG, typo, RETIRE_KEG])
    assert res.ok and len(client.requests) == 5
    assert "no such column: statuss" in client.requests[4][-1]["content"]
    assert not any("statuss" in t.ddl for t in res.value.tables)


def test_a_write_that_stores_something_else_than_its_arguments_is_a_defect_fed_back(seed) -> None:
    p = plan(("find_batch", "read", ["batches"], [1]), ("start_batch", "write", ["batches"], [2]),
             ("fill_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, ADD_BATCH_PLUS_ONE, ADD_BATCH, FILL_KEG])
    assert res.ok and len(client.requests) == 5
    feedback = client.requests[3][-1]["content"]
    assert "it stored batches.litres = 401.0, but its argument litres was 400.0" in feedback
    assert res.value.tool("start_batch").steps == [ir.Step(kind="write", sql=ADD_BATCH["writes"][0])]


def test_working_tools_that_serve_every_planned_goal_keep_the_environment(seed) -> None:
    broken = dict(FILL_KEG, writes=["UPDATE kegz SET status = 'full' WHERE keg_id = :keg_id"])
    p = plan(("find_batch", "read", ["batches"], [1]), ("find_batch_again", "read", ["batches"], [1]),
             ("fill_keg", "write", ["kegs"], [2, 3]), ("fill_keg_too", "write", ["kegs"], [2]))
    res, _ = run(seed, [p, FIND_BATCH, FIND_BATCH, FILL_KEG, broken, broken, broken], tools_min=4, tools_max=4,
                 max_attempts=2, retry_temperature=0)
    assert res.ok and [t.name for t in res.value.tools] == ["find_batch", "find_batch_again", "fill_keg"]
    assert res.rejections[-1].reason.startswith("kept with 3 working tools (fewer than 4)")
    # when the lost tool was the only one serving a goal, the environment is not kept
    p = plan(("find_batch", "read", ["batches"], [1]), ("find_batch_again", "read", ["batches"], [1]),
             ("fill_keg", "write", ["kegs"], [2]), ("retire", "write", ["kegs"], [3]))
    res, _ = run(seed, [p, FIND_BATCH, FIND_BATCH, FILL_KEG, broken, broken, broken], tools_min=4, tools_max=4,
                 max_attempts=2, retry_temperature=0)
    assert not res.ok
    assert res.rejections[-1].reason == ("only 3 working tools, at least 4 needed (or tools serving every "
                                         "planned goal)")


def test_many_tools_are_planned_table_by_table(seed) -> None:
    first = plan(("find_batch", "read", ["batches"], [1]), ("record_gravity", "write", ["batches"], [3]))
    second = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]))
    res, client = run(seed, [first, second, FIND_BATCH, RECORD_GRAVITY, FILL_KEG], tools_min=2,
                      tools_max=PLAN_CHUNK + 2)
    assert res.ok and [t.name for t in res.value.tools] == ["find_batch", "record_gravity", "fill_keg"]
    one, two = client.requests[0][0]["content"], client.requests[1][0]["content"]
    assert "only tools centred on the table batches" in one and "already planned (do not repeat them): (none)" in one
    assert "only tools centred on the table kegs" in two and "(do not repeat them): find_batch, record_gravity" in two
    assert client.bodies[0]["max_tokens"] >= 70 * 7  # the budget grows with the tools asked for


def test_table_by_table_reads_only_are_asked_once_for_the_write_goals(seed) -> None:
    """Every table's call planned read tools only (a clinical trial's participants and visits, 2026-11-29): the
    scenario's write goals are named in one more call before the plan is given up; its write tools join the plan."""
    first = plan(("find_batch", "read", ["batches"], [1]))
    second = plan(("find_batch", "read", ["batches"], [1]), ("find_keg", "read", ["kegs"], [1]))
    writes = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]))
    res, client = run(seed, [first, second, writes, FIND_BATCH, FIND_BATCH, FILL_KEG], tools_min=2,
                      tools_max=PLAN_CHUNK + 2)
    asked = client.requests[2][0]["content"]
    assert "- Fill a keg from a batch\n- Retire a damaged keg" in asked and "find_batch, find_keg" in asked
    assert res.ok, [r.reason for r in res.rejections]
    assert [t.name for t in res.value.tools if t.kind == "write"] == ["fill_keg"]
    # a model that still plans no write: the plan is given up, saying why
    res, _ = run(seed, [first, second, second, second, second], tools_min=2, tools_max=PLAN_CHUNK + 2,
                 max_attempts=2, retry_temperature=0)
    assert not res.ok and res.rejections[-1].reason.startswith("no usable tool plan: no write tool")


def test_a_read_tool_naming_a_missing_column_is_fed_back_not_amended(seed) -> None:
    wrong = dict(FIND_BATCH, returns={"sql": "SELECT batch_id, beer, abv FROM batches WHERE beer = :beer AND "
                                             "brewed_on = :brewed_on", "mode": "one"})
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("retire_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, wrong, FIND_BATCH, FILL_KEG, RETIRE_KEG])
    assert res.ok and "no such column: abv" in client.requests[2][-1]["content"]
    assert not any("abv" in t.ddl for t in res.value.tables)


def test_a_write_whose_guard_refuses_every_call_on_existing_rows_is_fed_back(seed) -> None:
    """The quickstart pharmacy's ``add_order`` defect: a guard no seeded row can pass (here: a keg status the
    schema does not even have) makes a write no task can use; the LLM hears which guard refused and rewrites it."""
    never = dict(FILL_KEG, guards=[{"sql": "SELECT 1 FROM kegs WHERE keg_id = :keg_id AND status = 'cleaned'",
                                    "must": "exist", "error": "Keg {keg_id} is not clean"}])
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("retire_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, never, FILL_KEG, RETIRE_KEG])
    assert res.ok and len(client.requests) == 5, [r.reason for r in res.rejections]
    feedback = client.requests[3][-1]["content"]
    assert "a guard refused every call: Keg" in feedback and "is not clean" in feedback
    assert res.value.tool("fill_keg").steps[0].sql == FILL_KEG["guards"][0]["sql"]


def test_a_column_dropped_as_personal_is_fed_back_not_added_again(seed) -> None:
    """A column the schema stage dropped as a personal characteristic (``Table.withheld``) is never added back for a
    tool that writes it: the tool is wrong, SQLite's error goes back to the LLM."""
    tables = (TABLES[0].model_copy(update={"withheld": ["brewer_nationality"]}), TABLES[1])
    nationality = dict(RECORD_GRAVITY, params=[{"name": "batch_id", "type": "integer", "description": "The batch"},
                                               {"name": "brewer_nationality", "type": "string",
                                                "description": "The brewer's nationality"}],
                       writes=["UPDATE batches SET brewer_nationality = :brewer_nationality WHERE batch_id = :batch_id"],
                       returns={"sql": "SELECT batch_id, brewer_nationality FROM batches WHERE batch_id = :batch_id",
                                "mode": "one"})
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("record_gravity", "write", ["batches"], [3]))
    client = fake_client([p, FIND_BATCH, FILL_KEG, nationality, RECORD_GRAVITY])
    res = generate_tools(SCENARIO, INTENTS, tables, seed, client, small_settings(**{"tools_min": 2, **LLM_TOOLS}))
    assert res.ok and len(client.requests) == 5
    assert "no such column: brewer_nationality" in client.requests[4][-1]["content"]
    batches = next(t for t in res.value.tables if t.name == "batches")
    assert "brewer_nationality" not in batches.ddl and batches.withheld == ["brewer_nationality"]
    assert batches.ddl.endswith("final_gravity REAL) STRICT")  # other columns are still added for a tool
    # without the mark, the same reply adds the column (the refusal above is the mark's doing)
    client = fake_client([p, FIND_BATCH, FILL_KEG, nationality])
    res = generate_tools(SCENARIO, INTENTS, TABLES, seed, client, small_settings(**{"tools_min": 2, **LLM_TOOLS}))
    assert res.ok and "brewer_nationality TEXT" in next(t for t in res.value.tables if t.name == "batches").ddl


def test_an_amendment_that_leaves_another_fault_feeds_back_that_fault(seed) -> None:
    """An outside pet shelter's ``apply_for_adoption`` (2026-11-30): a write naming a column the table lacks and
    also leaving a NOT NULL column out of its INSERT. The column is added on trial, the trial still fails: the LLM
    hears the trial's fault (and which amendment it was checked with), not the column the amendment would add."""
    start = dict(ADD_BATCH, params=[*ADD_BATCH["params"], {"name": "keg_id", "type": "integer", "description": "Keg"}],
                 writes=["INSERT INTO batches (beer, status, litres) VALUES (:beer, 'fermenting', :litres)",
                         "UPDATE kegs SET filled_on = :today WHERE keg_id = :keg_id"])
    fixed = dict(start, writes=["INSERT INTO batches (beer, brewed_on, status, litres) VALUES (:beer, :today, "
                                "'fermenting', :litres)", start["writes"][1]])
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("start_batch", "write", ["batches", "kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, FILL_KEG, start, fixed])
    assert res.ok and len(client.requests) == 5, [r.reason for r in res.rejections]
    feedback = client.requests[4][-1]["content"]
    assert "NOT NULL constraint failed: batches.brewed_on" in feedback and "no such column" not in feedback
    assert "checked with the schema amended: column kegs.filled_on TEXT added" in feedback
    assert "schema amended for tool start_batch: column kegs.filled_on TEXT added" in [r.reason for r in
                                                                                        res.rejections]
    assert "filled_on TEXT" in next(t for t in res.value.tables if t.name == "kegs").ddl
    assert res.value.tool("start_batch").steps[0].sql == fixed["writes"][0]


def test_a_column_added_for_an_update_is_set_to_a_value_its_row_does_not_hold(seed) -> None:
    """The committed library's ``change_book_status`` (2026-11-30): ``books.status`` added on trial takes the values
    the tool's description quotes, and every sample call drew the value its own row already held, so the working
    tool was told it changed nothing. Here every keg gets the one value quoted; a value an UPDATE sets is drawn
    unlike what its row holds (counted from it: the column has no CHECK list), and the tool is accepted at once."""
    grade = {"description": "Grade a keg's condition.",
             "params": [{"name": "keg_id", "type": "integer", "description": "The keg"},
                        {"name": "condition", "type": "string", "description": "The condition, e.g. 'sound'"}],
             "guards": [], "writes": ["UPDATE kegs SET condition = :condition WHERE keg_id = :keg_id"],
             "returns": {"sql": "SELECT keg_id, condition FROM kegs WHERE keg_id = :keg_id", "mode": "one"}}
    p = plan(("find_batch", "read", ["batches"], [1]), ("fill_keg", "write", ["kegs"], [2]),
             ("grade_keg", "write", ["kegs"], [3]))
    res, client = run(seed, [p, FIND_BATCH, FILL_KEG, grade, grade])
    assert res.ok and len(client.requests) == 4, client.requests[-1][-1]["content"]
    assert "condition TEXT" in next(t for t in res.value.tables if t.name == "kegs").ddl and res.value.tool("grade_keg")
