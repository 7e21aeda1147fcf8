"""Tools stage: reply -> ir.Tool, sample arguments from seeded rows, static and runtime checks fed back."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, static_checks
from pipeline.stages.rows.populate import generate_seed
from pipeline.stages.tools.toolset import (
    Sampler,
    ToolPlanItem,
    WriteToolReply,
    exercise,
    generate_tools,
    plan_model,
    plan_tools,
    to_tool,
    uncovered_tables,
)
from tests.stages.library_replies import (
    BOOK_ROWS,
    BOOKS_DDL,
    FIND_MEMBER,
    LEND_BOOK,
    LIST_LOANS,
    LOAN_ROWS,
    LOANS_DDL,
    MEMBER_ROWS,
    MEMBERS_DDL,
    RETURN_BOOK,
    SCENARIO,
    TOOL_PLAN,
    small_settings,
)
from tests.stages.library_replies import INTENTS as LIBRARY_INTENTS

TABLES = (ir.Table(name="members", ddl=MEMBERS_DDL, natural_key=["email"]),
          ir.Table(name="books", ddl=BOOKS_DDL, natural_key=["title"]),
          ir.Table(name="loans", ddl=LOANS_DDL, natural_key=["member_id", "loan_date"]))
INTENTS = tuple(Intent(**i) for i in LIBRARY_INTENTS["intents"])
LEND = ToolPlanItem(name="lend_book", kind="write", purpose="Create an open loan")


@pytest.fixture(scope="module")
def seed() -> tuple[ir.SeedRows, ...]:
    # the LLM's rows only: the tests below read them by value (code-made rows have their own tests in test_rowgen)
    settings = small_settings(row_generators=False)
    res = generate_seed(SCENARIO, TABLES, fake_client([MEMBER_ROWS, BOOK_ROWS, LOAN_ROWS]), settings)
    assert res.ok
    return res.value


def base_env(seed: tuple[ir.SeedRows, ...]) -> ir.Environment:
    return ir.Environment(scenario=SCENARIO, tables=list(TABLES), seed=list(seed))


# The LLM's tools as it wrote them: code's renames, paging and added tools have their own tests
# (test_naming, test_coverage, test_paged_tasks)
LLM_TOOLS = {"gap_tools_max": 0, "fix_param_names": False, "paged_listers": False, "covering_writes": False}


def run(seed: tuple[ir.SeedRows, ...], replies: list, **settings):
    """The tools stage on the library fixture; the code-written gap tools only when asked for (their own test)."""
    client = fake_client(replies)
    return generate_tools(SCENARIO, INTENTS, TABLES, seed, client, small_settings(**{**LLM_TOOLS, **settings})), client


def test_reply_maps_onto_the_ir_with_schema_enums_and_unused_params_dropped() -> None:
    reply = WriteToolReply.model_validate({
        "description": "Set a member's status.",
        "params": [{"name": "member_id", "type": "integer", "description": "m"},
                   {"name": "status", "type": "string", "description": "new status"},
                   {"name": "note", "type": "string", "description": "never used"}],
        "guards": [], "writes": ["UPDATE members SET status = :status WHERE member_id = :member_id"],
        "returns": None})
    plan = ToolPlanItem(name="set_status", kind="write", purpose="Change a member's status")
    tool = to_tool(plan, reply, scratch_db(TABLES))
    assert [p.name for p in tool.params] == ["member_id", "status"]
    assert tool.params[1].enum == ["active", "suspended"] and tool.params[0].enum is None
    assert [s.kind for s in tool.steps] == ["write"] and tool.returns is None


def test_sample_arguments_come_from_the_seeded_rows(seed) -> None:
    env = base_env(seed)
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, TABLES, env.clock)
        lend = to_tool(LEND, WriteToolReply.model_validate(LEND_BOOK))
        sets = sampler.arguments(lend, 3)
        assert sets == [{"member_id": 1, "book_id": 1}, {"member_id": 2, "book_id": 2},
                        {"member_id": 3, "book_id": 3},
                        {"member_id": 1, "book_id": 2}]  # a write tool also gets arguments from different rows
        create = to_tool(ToolPlanItem(name="add_member", kind="write", purpose="Register a member"),
                         WriteToolReply.model_validate({
                             "description": "Register a member.",
                             "params": [{"name": "name", "type": "string", "description": "n"},
                                        {"name": "email", "type": "string", "description": "e"}],
                             "guards": [], "returns": None,
                             "writes": ["INSERT INTO members (name, email, status) VALUES (:name, :email, 'active')"]}))
        first = sampler.arguments(create, 2)[0]
        assert first == {"name": "Alice Park", "email": "alice2@example.org"}  # UNIQUE column: an unused value


def test_clean_tools(seed) -> None:
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK])
    assert res.ok and res.rejections == ()
    assert [t.name for t in res.value.tools] == ["find_member", "list_member_loans", "lend_book", "return_book"]
    lend = res.value.tools[2]
    assert [s.kind for s in lend.steps] == ["guard", "guard", "write", "write"]
    tool_prompt = client.requests[3][0]["content"]
    assert "Write the write tool lend_book: Create an open loan if a copy is available" in tool_prompt
    assert LOANS_DDL in tool_prompt
    env = res.value
    with EnvInstance(env) as inst:
        assert inst.call("lend_book", {"member_id": 1, "book_id": 1})["ok"]
        refused = inst.call("lend_book", {"member_id": 1, "book_id": 2})
        assert refused == {"ok": False, "error": "No copy of book 2 is available", "parameter": None,
                           "kind": "guard"}


def test_statement_that_fails_explain_is_fed_back_verbatim_and_fixed(seed) -> None:
    broken = dict(FIND_MEMBER, returns={"sql": "SELECT nme FROM members WHERE email = :email", "mode": "one"})
    res, client = run(seed, [TOOL_PLAN, broken, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK])
    assert res.ok and res.rejections == ()
    tool = ir.Tool(name="find_member", description="x", kind="read",
                   params=[ir.Param(name="email", type="string")],
                   returns=ir.Returns(sql=broken["returns"]["sql"], mode="one"))
    (problem,) = static_checks.check_tool(scratch_db(TABLES), tool.model_dump(mode="json"))
    assert "no such column: nme" in problem
    retry = client.requests[2]
    assert retry[-2]["role"] == "assistant" and problem in retry[-1]["content"]
    assert "The tables have only these columns: members(member_id, name, email, status); books(" \
        in retry[-1]["content"]


def test_runtime_failure_on_sample_arguments_is_fed_back(seed) -> None:
    broken = dict(LEND_BOOK, writes=["INSERT INTO loans (member_id, book_id, status) "
                                     "VALUES (:member_id, :book_id, 'open')", *LEND_BOOK["writes"][1:]])
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, broken, LEND_BOOK, RETURN_BOOK])
    assert res.ok
    feedback = client.requests[4][-1]["content"]
    assert "NOT NULL constraint failed: loans.loan_date" in feedback
    assert "called with {'member_id': 1, 'book_id': 1}" in feedback


def test_a_write_that_changes_nothing_is_fed_back(seed) -> None:
    noop = dict(RETURN_BOOK, writes=["UPDATE loans SET status = 'returned' WHERE loan_id = :loan_id "
                                     "AND status = 'returned' AND 0"])
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, noop, RETURN_BOOK])
    assert res.ok
    assert "succeeded but changed nothing" in client.requests[5][-1]["content"]


def test_guard_refusals_do_not_fail_a_tool(seed) -> None:
    strict = dict(LEND_BOOK, guards=[{"sql": "SELECT 1 FROM books WHERE copies_available > 100", "must": "exist",
                                      "error": "No book is that popular"}])
    lend = to_tool(LEND, WriteToolReply.model_validate(strict))
    env = base_env(seed).model_copy(update={"tools": [lend]})
    calls, error = exercise(env, lend, [{"member_id": 1, "book_id": 1}])
    assert error is None and calls[0][1]["kind"] == "guard"


def test_unfixable_tool_is_dropped_and_too_few_tools_reject_the_stage(seed) -> None:
    broken = dict(RETURN_BOOK, writes=["UPDATE loanz SET status = 'returned' WHERE loan_id = :loan_id"])
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, broken, broken], max_attempts=3,
                      tools_min=4, tools_max=4, retry_temperature=0)
    assert not res.ok
    dropped, stage = res.rejections
    assert dropped.stage == "tools" and dropped.item == "return_book"
    assert "no such table: loanz" in dropped.reason
    assert dropped.reason.endswith("(the model repeated its previous reply)")  # greedy: 2 of 3 attempts used
    assert len(client.requests) == 6
    assert stage.reason == "only 3 working tools, at least 4 needed (or tools serving every planned goal)"
    # sampled retries (the default): a reply identical to an earlier one is not an attempt; it is asked again
    # hotter, with a note that it was the same (at most max_attempts - 1 times), then attempts count again
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK] + [broken] * 5,
                      max_attempts=3, tools_min=4, tools_max=4)
    assert not res.ok and len(client.requests) == 9
    assert [b["temperature"] for b in client.bodies[4:]] == [0.0, 0.7, 1.0, 1.3, 1.3]
    assert "was the same as an earlier one" in client.requests[6][-1]["content"]
    assert client.requests[6][:-1] == client.requests[5][:-1]  # the same conversation, a different last note
    assert stage.evidence == {"working": ["find_member", "list_member_loans", "lend_book"]}


def test_plan_without_a_write_tool_is_fed_back(seed) -> None:
    reads = {"tools": [dict(t, kind="read") for t in TOOL_PLAN["tools"]]}
    res, client = run(seed, [reads, TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK])
    assert res.ok
    assert "no write tool" in client.requests[1][-1]["content"]


def test_a_returns_query_that_finds_nothing_is_fed_back(seed) -> None:
    last_id = dict(RETURN_BOOK, returns={"sql": "SELECT * FROM loans WHERE loan_id = :last_id", "mode": "one"})
    never = dict(FIND_MEMBER, returns={"sql": "SELECT * FROM members WHERE email = :email AND status = 'gone'",
                                       "mode": "one"})
    res, client = run(seed, [TOOL_PLAN, never, FIND_MEMBER, LIST_LOANS, LEND_BOOK, last_id, RETURN_BOOK])
    assert res.ok and res.rejections == ()
    assert "(values of existing rows) it found nothing: no matching record found" in client.requests[2][-1]["content"]
    assert "its writes ran but its returns query found no row" in client.requests[6][-1]["content"]


def test_a_select_among_the_writes_becomes_the_result() -> None:
    reply = WriteToolReply.model_validate(dict(RETURN_BOOK, writes=[
        *RETURN_BOOK["writes"], "SELECT loan_id, status FROM loans WHERE loan_id = :loan_id"]))
    tool = to_tool(ToolPlanItem(name="return_book", kind="write", purpose="Return a book"), reply)
    assert [s.kind for s in tool.steps] == ["guard", "write", "write"]
    assert tool.returns == ir.Returns(sql="SELECT loan_id, status FROM loans WHERE loan_id = :loan_id", mode="one")


def test_plan_that_leaves_a_table_out_is_asked_to_cover_it_but_not_forced(seed) -> None:
    no_loans = {"tools": [
        {"name": "find_member", "kind": "read", "purpose": "Find a member by email", "tables": ["members"],
         "goals": [1]},
        {"name": "list_books", "kind": "read", "purpose": "List every book", "tables": ["books"], "goals": []},
        {"name": "add_member", "kind": "write", "purpose": "Register a member", "tables": ["members"], "goals": [2]},
        {"name": "restock_book", "kind": "write", "purpose": "Add copies of a book", "tables": ["books"],
         "goals": []},
    ]}
    items = [ToolPlanItem(**t) for t in no_loans["tools"]]
    assert uncovered_tables(items, TABLES) == ["loans"]  # from the tables each tool says it uses, not its words
    res, client = run(seed, [no_loans, TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK])
    assert res.ok
    assert "no tool uses the table(s) loans; replace a tool to cover them" in client.requests[1][-1]["content"]
    # the grammar keeps tables and goals to what exists
    item = plan_model(3, 4, [t.name for t in TABLES], len(INTENTS)).model_json_schema()["$defs"]["PlannedTool"]
    item = item["properties"]
    assert item["tables"]["items"]["enum"] == ["members", "books", "loans"]
    assert item["goals"]["items"]["enum"] == [1, 2, 3, 4]
    assert "3. Lend a book to a member (write)" in client.requests[0][0]["content"]
    assert "members by email; books by title; loans by member_id + loan_date" in client.requests[0][0]["content"]
    # with one attempt there is no retry, and the plan is taken as it is
    client = fake_client([no_loans])
    plan, error, _ = plan_tools(SCENARIO, INTENTS, TABLES, client, small_settings(max_attempts=1))
    assert plan is not None and [t.name for t in plan] == [t["name"] for t in no_loans["tools"]]
    # the model repeats the uncovering plan (what the embedded 1.5B model did on the quickstart): it is kept
    client = fake_client([no_loans, no_loans])
    plan, error, _ = plan_tools(SCENARIO, INTENTS, TABLES, client, small_settings(max_attempts=3, retry_temperature=0))
    assert error is None and [t.name for t in plan] == [t["name"] for t in no_loans["tools"]]
    assert len(client.requests) == 2


def test_slips_the_small_model_repeats_are_repaired_when_mapping_the_reply() -> None:
    """Seen on the quickstart: an INSERT reading :copies_available that is no parameter, and a guard message
    naming {member_id} in a tool that only takes book_id. Both came back unchanged after three rounds of
    feedback; mapping the reply repairs them (a typed parameter from the column; the name in words)."""
    add = ToolPlanItem(name="add_book", kind="write", purpose="Add a book")
    reply = WriteToolReply.model_validate({
        "description": "Add a book.",
        "params": [{"name": "title", "type": "string", "description": "Title"},
                   {"name": "author", "type": "string", "description": "Author"}],
        "guards": [{"sql": "SELECT 1 FROM books WHERE title = :title", "must": "not_exist",
                    "error": "{title} is already in the catalogue of member {member_id}"}],
        "writes": ["INSERT INTO books (title, author, copies_available) VALUES (:title, :author, :copies_available)"],
        "returns": {"sql": "SELECT * FROM books WHERE book_id = :last_id", "mode": "one"},
    })
    tool = to_tool(add, reply, scratch_db(TABLES))
    assert [(p.name, p.type) for p in tool.params] == [("title", "string"), ("author", "string"),
                                                       ("copies_available", "integer")]
    assert tool.params[2].description == "copies available (books.copies_available)"
    assert tool.steps[0].error == "{title} is already in the catalogue of member member id"
    assert static_checks.check_tool(scratch_db(TABLES), tool.model_dump(mode="json")) == []
    # without the schema nothing is invented: the checker reports the placeholder
    bare = to_tool(add, reply)
    assert any("unknown placeholder :copies_available" in p
               for p in static_checks.check_tool(scratch_db(TABLES), bare.model_dump(mode="json")))


def test_an_assign_tool_whose_aligned_samples_change_nothing_still_passes(seed) -> None:
    """Seen on a bike shop: assign_mechanic(order 1, mechanic 1) when the seed already assigns mechanic 1 to
    order 1, and likewise for every aligned sample; the mixed-rows set shows that the tool works."""
    env = base_env(seed)
    assign = to_tool(ToolPlanItem(name="move_loan", kind="write", purpose="Give a loan to another member"),
                     WriteToolReply.model_validate({
                         "description": "Move a loan to another member.",
                         "params": [{"name": "loan_id", "type": "integer", "description": "l"},
                                    {"name": "member_id", "type": "integer", "description": "m"}],
                         "guards": [], "returns": None,
                         "writes": ["UPDATE loans SET member_id = :member_id WHERE loan_id = :loan_id"]}))
    env = env.model_copy(update={"tools": [assign]})
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, TABLES, env.clock)
        sets = sampler.arguments(assign, 3)
        aligned = [a for a in sets if inst.conn.execute("SELECT COUNT(*) FROM loans WHERE loan_id = ? AND "
                                                        "member_id = ?", (a["loan_id"], a["member_id"])).fetchone()[0]]
    _, error = exercise(env, assign, sets)
    assert error is None
    assert len(sets) > len(aligned)



def _update(name: str, sql: str, *params: tuple[str, str]) -> ir.Tool:
    return to_tool(ToolPlanItem(name=name, kind="write", purpose=name), WriteToolReply.model_validate({
        "description": name, "params": [{"name": n, "type": t, "description": n} for n, t in params],
        "guards": [], "returns": None, "writes": [sql]}))


def test_a_value_an_update_sets_is_never_the_one_its_row_already_holds(seed) -> None:
    """The committed library's change_book_status (2026-11-30): each sample call drew books.status from the row it
    updated, so a working tool changed nothing. Every value an UPDATE sets now differs from what the row holds: a
    free column takes another row's value, a CHECK column another allowed value, a reference another parent."""
    env = base_env(seed)
    tools = [(_update("set_author", "UPDATE books SET author = :author WHERE book_id = :book_id",
                      ("book_id", "integer"), ("author", "string")), "books", "author", "book_id"),
             (_update("set_status", "UPDATE members SET status = :status WHERE member_id = :member_id",
                      ("member_id", "integer"), ("status", "string")), "members", "status", "member_id"),
             (_update("move_loan", "UPDATE loans SET member_id = :member_id WHERE loan_id = :loan_id",
                      ("loan_id", "integer"), ("member_id", "integer")), "loans", "member_id", "loan_id"),
             (_update("new_author", "UPDATE books SET author = :author WHERE book_id = :book_id AND author <> :author",
                      ("book_id", "integer"), ("author", "string")), "books", "author", "book_id")]
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, TABLES, env.clock)
        for tool, table, col, key in tools:
            sets = sampler.arguments(tool, 3)
            held = [inst.conn.execute(f"SELECT {col} FROM {table} WHERE {key} = ?", (a[key],)).fetchone()[0]
                    for a in sets]
            assert len(sets) >= 3 and all(a[col] != h for a, h in zip(sets, held, strict=True)), (tool.name, sets)
            assert exercise(env.model_copy(update={"tools": [tool]}), tool, sets)[1] is None
    # not fooled the other way: a write whose rows are missed, or that only matches rows already so, changes nothing
    for sql in ("UPDATE books SET author = :author WHERE book_id = :book_id + 100",
                "UPDATE books SET author = :author WHERE book_id = :book_id AND author = :author"):
        miss = _update("set_author", sql, ("book_id", "integer"), ("author", "string"))
        with EnvInstance(env) as inst:
            sampler = Sampler(inst.conn, TABLES, env.clock)
            sets = sampler.arguments(miss, 3)
            held = [sampler.held(miss, a) for a in sets]
        _, error = exercise(env.model_copy(update={"tools": [miss]}), miss, sets, held=held)
        assert error is not None and "changed nothing in the database; its writes must match" in error, sql


def test_an_update_whose_value_can_be_no_other_than_its_rows_hold_is_told_so(seed) -> None:
    """When the parameter's only values are the one its rows hold, a call cannot change them: the feedback says so,
    instead of blaming the rows the tool names. A tool that misses its rows is still told it changed nothing."""
    env = base_env(seed)
    only = _update("activate", "UPDATE members SET status = :status WHERE member_id = :member_id",
                   ("member_id", "integer"), ("status", "string"))
    only = only.model_copy(update={"params": [only.params[0], only.params[1].model_copy(update={"enum": ["active"]})]})
    sets = [{"member_id": 1, "status": "active"}, {"member_id": 2, "status": "active"}]  # both already active
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, TABLES, env.clock)
        assert sets[0] in sampler.arguments(only, 3)  # kept: no other value
        held = [sampler.held(only, a) for a in sets]
        assert [(h.param, h.table, h.column, h.value, h.domain) for hs in held for h in hs] == \
            [("status", "members", "status", "active", ("active",))] * 2
        assert sampler.held(only, {"member_id": 3, "status": "active"}) == []  # member 3 is suspended: it changes
    _, error = exercise(env.model_copy(update={"tools": [only]}), only, sets, held=held)
    assert error is not None and "already hold members.status = 'active' and status can take no other value " \
        "(it takes 'active')" in error
    miss = only.model_copy(update={"steps": [only.steps[0].model_copy(update={
        "sql": "UPDATE members SET status = :status WHERE member_id = :member_id + 100"})]})
    with EnvInstance(env) as inst:
        held = [Sampler(inst.conn, TABLES, env.clock).held(miss, a) for a in sets]
    assert held == [[], []]
    _, error = exercise(env.model_copy(update={"tools": [miss]}), miss, sets, held=held)
    assert error is not None and "changed nothing in the database; its writes must match" in error


def test_an_undeclared_prefixed_placeholder_becomes_a_parameter_typed_like_its_column() -> None:
    reply = WriteToolReply.model_validate({
        "description": "Restock a book.", "params": [{"name": "book_id", "type": "integer", "description": "b"}],
        "guards": [], "returns": None,
        "writes": ["UPDATE books SET copies_available = :new_copies_available WHERE book_id = :book_id"]})
    tool = to_tool(ToolPlanItem(name="restock", kind="write", purpose="Restock"), reply, scratch_db(TABLES))
    assert [(p.name, p.type) for p in tool.params] == [("book_id", "integer"), ("new_copies_available", "integer")]
    assert tool.params[1].description == "new copies available (books.copies_available)"


def test_a_write_tool_that_does_what_an_earlier_one_does_is_dropped_with_a_note(seed) -> None:
    # seen in the example's pharmacy (2026-11-28): add_medicine and add_medication, the same INSERT INTO
    # medications with the same parameters, both served; an agent cannot tell which to call
    plan = {"tools": [*TOOL_PLAN["tools"][:3],
                      {"name": "lend_copy", "kind": "write", "purpose": "Lend a copy of a book to a member",
                       "tables": ["loans", "books"], "goals": [3]},
                      TOOL_PLAN["tools"][3]]}
    res, _ = run(seed, [plan, FIND_MEMBER, LIST_LOANS, LEND_BOOK, dict(LEND_BOOK, description="Lend a copy."),
                        RETURN_BOOK], tools_min=5, tools_max=5)
    assert res.ok, res.rejections
    assert [t.name for t in res.value.tools] == ["find_member", "list_member_loans", "lend_book", "return_book"]
    dropped, kept = res.rejections
    assert dropped.item == "lend_copy" and dropped.reason.startswith("duplicate of tool 'lend_book'")
    assert dropped.evidence == {"kept": "lend_book", "targets": ["insert loans", "update books"],
                                "params": ["book_id", "member_id"]}
    # the goals of the tool dropped are served by the tool kept: 4 working tools of 5 still serve the plan
    assert kept.reason.startswith("kept with 4 working tools")


def test_writes_differ_by_their_statements_tables_or_parameters() -> None:
    from pipeline.stages.tools.duplicates import duplicate_of

    def write(name: str, sql: str, *params: str) -> ir.Tool:
        return ir.Tool(name=name, description="d", kind="write", params=[ir.Param(name=p, type="string") for p in params],
                       steps=[ir.Step(kind="write", sql=sql)])

    add = write("add_member", "INSERT INTO members (name, email) VALUES (:name, :email)", "name", "email")
    same = write("register", "INSERT INTO members (email, name) VALUES (:email, :name)", "email", "name")
    assert duplicate_of(same, [add]) is add
    assert duplicate_of(add, [add]) is None  # a tool is no duplicate of itself
    assert duplicate_of(write("x", "INSERT INTO members (name) VALUES (:name)", "name"), [add]) is None
    assert duplicate_of(write("x", "INSERT INTO books (name, email) VALUES (:name, :email)", "name", "email"),
                        [add]) is None
    assert duplicate_of(write("x", "UPDATE members SET name = :name WHERE email = :email", "name", "email"),
                        [add]) is None
    finder = ir.Tool(name="find", description="d", kind="read", params=[ir.Param(name="email", type="string")],
                     returns=ir.Returns(sql="SELECT * FROM members WHERE email = :email", mode="one"))
    assert duplicate_of(finder, [finder.model_copy(update={"name": "find2"})]) is None  # reads are not judged here


def test_an_or_that_escapes_its_row_filter_is_fed_back(seed) -> None:
    escaping = "SELECT 1 FROM books WHERE book_id = :book_id AND copies_available > 0 OR copies_available > 1"
    broken = dict(LEND_BOOK, guards=[LEND_BOOK["guards"][0], dict(LEND_BOOK["guards"][1], sql=escaping)])
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, broken, LEND_BOOK, RETURN_BOOK])
    assert res.ok
    assert any(s.sql == LEND_BOOK["guards"][1]["sql"] for t in res.value.tools if t.name == "lend_book" for s in t.steps)
    feedback = client.requests[4][-1]["content"]
    assert "tool 'lend_book' step 2 (guard)" in feedback and '"copies_available > 1"' in feedback


def _status_tool(guard_sql: str, error: str) -> dict:
    return {"description": "Set the status of a loan.",
            "params": [{"name": "loan_id", "type": "integer", "description": "The loan"},
                       {"name": "new_status", "type": "string", "description": "The new status"}],
            "guards": [{"sql": guard_sql, "must": "not_exist", "error": error}],
            "writes": ["UPDATE loans SET status = :new_status WHERE loan_id = :loan_id"], "returns": None}


def test_a_listed_value_a_guard_puts_out_of_reach_is_fed_back(seed) -> None:
    """The regenerated library's update_loan_status (2026-11-30): a guard on a fixed status ('already pending')
    refused every call on a pending loan, so no call could return one; reopening a returned loan worked, and the
    tool was kept. Each listed value must now be settable on a row that holds another; the fixed guard is fed
    back naming the tool, the column and the value, and the guard on :new_status is kept."""
    inverted = _status_tool("SELECT 1 FROM loans WHERE loan_id = :loan_id AND status = 'open'",
                            "Loan {loan_id} is already open")
    fixed = _status_tool("SELECT 1 FROM loans WHERE loan_id = :loan_id AND status = :new_status",
                         "Loan {loan_id} is already {new_status}")
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, inverted, fixed])
    assert res.ok
    feedback = client.requests[5][-1]["content"]
    assert "no working call of return_book sets loans.status to 'returned' on a row that holds another value: " \
        "every such call failed with 'Loan 1 is already open'" in feedback, feedback
    assert len(client.requests) == 6  # the fixed guard is kept
    tool = next(t for t in res.value.tools if t.name == "return_book")
    assert ":new_status" in tool.steps[0].sql


def test_a_tool_whose_listed_values_are_all_reachable_passes_unchanged(seed) -> None:
    """Both values of loans.status are set on loans that hold the other: no feedback, no extra request."""
    fixed = _status_tool("SELECT 1 FROM loans WHERE loan_id = :loan_id AND status = :new_status",
                         "Loan {loan_id} is already {new_status}")
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, fixed])
    assert res.ok and len(client.requests) == 5
    env = base_env(seed)
    tool = next(t for t in res.value.tools if t.name == "return_book")
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, TABLES, env.clock)
        reaches = sampler.reach(tool, [{"loan_id": i} for i in (1, 2, 3, 4)])
        # drawn sets that name no returned loan: the seeded row that holds another value is looked up
        few = sampler.reach(tool, [{"loan_id": 1, "new_status": "returned"}])
    assert [(r.use.column, r.value, [a["loan_id"] for a in r.sets]) for r in reaches] == \
        [("status", "open", [2]), ("status", "returned", [1, 3])]
    assert [(r.value, [a["loan_id"] for a in r.sets]) for r in few] == [("open", [2]), ("returned", [1])]
