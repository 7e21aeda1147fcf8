"""The scenario's goals against the write tools (``pipeline.meaning.goals``, real MiniLM): a goal no planned write tool
serves is named to the tool planner once, a served goal is not, and a goal still unserved is noted in the report."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.meaning.goals import COVER, match_goals
from pipeline.stages.rows.populate import generate_seed
from pipeline.stages.tools.toolset import (
    ToolPlanItem,
    generate_tools,
    goal_notes,
    plan_goal_tools,
    table_words,
)
from tests.stages.library_replies import (
    BOOK_ROWS,
    FIND_MEMBER,
    LEND_BOOK,
    LIST_LOANS,
    LOAN_ROWS,
    MEMBER_ROWS,
    RETURN_BOOK,
    SCENARIO,
    TOOL_PLAN,
    small_settings,
)
from tests.stages.test_tools import INTENTS, LLM_TOOLS, TABLES

# the library of the example regenerated with meaning-next's code (book_lending_system_01992f8b23)
LIBRARY_GOALS = ["borrow a book", "return a book", "renew a loan", "pay overdue fine", "place a hold on a book"]
LIBRARY_WRITES = [("add_book", "Add a new book to the library."),
                  ("create_loans", "Record a new loan; returns it as recorded.")]
SERVING = [("borrow_book", "Lend a book to a member; records a loan."),
           ("return_book", "Mark a loan as returned."),
           ("renew_loan", "Extend a loan's due date and record a renewal."),
           ("pay_fine", "Mark an overdue fine as paid."),
           ("place_hold", "Put a hold on a book for a member.")]
PLAN = [ToolPlanItem(**t) for t in TOOL_PLAN["tools"]]
PAY_FINE_PLAN = {"tools": [{"name": "pay_fine", "kind": "write", "purpose": "Record that a member paid the overdue "
                            "fine of a loan", "tables": ["loans"], "goals": [4]}]}
ASKED = "No write tool in the plan serves these goals"


def test_goals_are_served_by_tools_that_do_them_not_by_tools_that_share_a_noun() -> None:
    tables = [("books", ["book_id", "title"]), ("loans", ["loan_id", "book_id", "due_date"])]
    got = match_goals(LIBRARY_GOALS, LIBRARY_WRITES, tables)
    assert [m.tool for m in got] == [None] * 5  # add_book shares "book" with three goals and serves none
    assert max(m.score for m in got) < COVER
    served = match_goals(LIBRARY_GOALS, SERVING, tables)
    assert [m.tool for m in served] == [n for n, _ in SERVING]
    # one goal per tool: a single tool serves at most one of two goals it is near
    one = match_goals(["Lend a book to a member", "Lend a book to a member today"],
                      [("borrow_book", "Lend a book to a member; records a loan.")], tables)
    assert [m.tool for m in one].count("borrow_book") == 1
    # deterministic: the same texts give the same matches, scores and all
    assert match_goals(LIBRARY_GOALS, LIBRARY_WRITES, tables) == got


def test_an_unserved_goal_is_named_to_the_planner_once_and_a_served_one_is_not() -> None:
    scenario = SCENARIO.model_copy(update={"goals": ["Return a borrowed book", "Pay an overdue fine"]})
    client = fake_client([PAY_FINE_PLAN])
    plan, attempts = plan_goal_tools(scenario, INTENTS, TABLES, PLAN, client, small_settings())
    assert attempts == 1 and len(client.requests) == 1
    asked = client.requests[0][-1]["content"]
    section = asked[asked.index(ASKED):]
    assert "- Pay an overdue fine" in section and "Return a borrowed book" not in section
    assert [it.name for it in plan] == [t["name"] for t in TOOL_PLAN["tools"]] + ["pay_fine"]
    # every goal served (return_book, and lend_book at 0.644): nothing is asked
    served = SCENARIO.model_copy(update={"goals": ["Return a borrowed book", "Lend a book to a member"]})
    client = fake_client([])
    assert plan_goal_tools(served, INTENTS, TABLES, PLAN, client, small_settings()) == (PLAN, 0)
    assert client.requests == []
    # nor without goals, nor with the check off
    assert plan_goal_tools(SCENARIO, INTENTS, TABLES, PLAN, client, small_settings()) == (PLAN, 0)
    assert plan_goal_tools(scenario, INTENTS, TABLES, PLAN, client, small_settings(goal_coverage=False)) == (PLAN, 0)
    assert client.requests == []


def test_a_goal_reply_without_a_new_write_tool_is_fed_back() -> None:
    scenario = SCENARIO.model_copy(update={"goals": ["Pay an overdue fine"]})
    repeated = {"tools": [dict(TOOL_PLAN["tools"][2])]}  # lend_book, planned already
    client = fake_client([repeated, PAY_FINE_PLAN])
    plan, attempts = plan_goal_tools(scenario, INTENTS, TABLES, PLAN, client, small_settings())
    assert attempts == 2 and plan[-1].name == "pay_fine"
    assert "the reply has no new write tool" in client.requests[1][-1]["content"]


@pytest.fixture(scope="module")
def seed() -> tuple[ir.SeedRows, ...]:
    res = generate_seed(SCENARIO, TABLES, fake_client([MEMBER_ROWS, BOOK_ROWS, LOAN_ROWS]),
                        small_settings(row_generators=False))
    assert res.ok
    return res.value


def test_a_goal_still_unserved_after_the_tools_are_written_is_noted(seed) -> None:
    scenario = SCENARIO.model_copy(update={"goals": ["Lend a book to a member", "Pay an overdue fine"]})
    no_table = {"description": "Pay the fine of a loan.", "params": [{"name": "loan_id", "type": "integer",
                                                                       "description": "The loan"}],
                "guards": [], "writes": ["UPDATE fines SET paid = 1 WHERE loan_id = :loan_id"], "returns": None}
    settings = small_settings(**LLM_TOOLS)
    client = fake_client([TOOL_PLAN, PAY_FINE_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK,
                          *[no_table] * 8])  # however many retries it gets
    res = generate_tools(scenario, INTENTS, TABLES, seed, client, settings)
    assert res.ok
    assert sum(ASKED in r[-1]["content"] for r in client.requests) == 1
    notes = [r for r in res.rejections if r.item in scenario.goals]
    assert [n.item for n in notes] == ["Pay an overdue fine"]
    assert "no write tool serves the scenario's goal 'Pay an overdue fine' and no table resembles it" in notes[0].reason
    assert notes[0].evidence["nearest_table"] == "loans" and notes[0].evidence["table_similarity"] < 0.5
    assert goal_notes(res.value) == notes  # the same environment, the same notes
    assert [n for n, _ in table_words(TABLES)] == ["members", "books", "loans"]


def test_goals_the_intents_leave_out_are_named_back_once() -> None:
    from pipeline.stages.schema.intents import generate_intents
    from tests.stages.library_replies import INTENTS as INTENTS_REPLY

    # the intents the embedded model wrote for the example's library: 1 of its 5 goals kept
    lost = {"intents": [{"goal": g, "kind": k} for g, k in [
        ("find a book", "read"), ("list all books", "read"), ("add a new book", "write"),
        ("change the status of a book", "write"), ("cancel a loan", "write"), ("place a hold on a book", "write")]]}
    kept = {"intents": [*lost["intents"][:4], *[{"goal": g, "kind": "write"} for g in LIBRARY_GOALS[:4]]][:7]}
    scenario = SCENARIO.model_copy(update={"goals": LIBRARY_GOALS})
    settings = small_settings(intents_max=8)
    client = fake_client([lost, kept])
    res = generate_intents(scenario, client, settings)
    assert res.ok and len(client.requests) == 2
    asked = client.requests[1][-1]["content"]
    assert all(f"- {g}" in asked for g in LIBRARY_GOALS[:4]) and "place a hold on a book" not in asked
    assert [i.goal for i in res.value] == [i["goal"] for i in kept["intents"]]
    # named once: a reply that still leaves them out is taken as it is
    client = fake_client([lost, {"intents": lost["intents"][:5]}, kept])
    res = generate_intents(scenario, client, settings)
    assert res.ok and len(client.requests) == 2 and len(res.value) == 5
    # goals said again in the model's words ask nothing more
    said = SCENARIO.model_copy(update={"goals": ["lend a book", "return a book"]})
    client = fake_client([INTENTS_REPLY])
    assert generate_intents(said, client, small_settings()).ok and len(client.requests) == 1
