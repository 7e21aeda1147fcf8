"""The tester agent with a scripted fake LLM (the real client, real tools, real SQLite)."""

from __future__ import annotations

import json

import pytest

from pipeline.llm import LLMUnavailable, fake_client
from tests.fixtures.library import library_env, library_tasks
from verify import tester
from verify.tester import run_attempt, turn_model


def call(tool: str, thought: str = "next", **arguments) -> dict:
    return {"thought": thought, "action": {"tool": tool, "arguments": arguments}}


def finish(answer: str = "Done.") -> dict:
    return {"thought": "finished", "action": {"final_answer": answer}}


def _text(requests) -> str:
    return "\n".join(m["content"] for msgs in requests for m in msgs)


def test_tester_solves_a_task_through_the_tools() -> None:
    env = library_env()
    task = library_tasks(env)[0]  # Dan Wu borrows 'A Brief History of Time' for 7 days
    client = fake_client([
        call("find_member_by_name", name="Dan Wu"),
        call("search_books", query="Brief History"),
        call("borrow_book", member_id=4, book_id=2, days=7),
        finish("The loan is recorded."),
    ])
    a = run_attempt(client, env, task)
    assert a.passed and a.stop == "answer" and a.final_answer == "The loan is recorded."
    assert [s.tool for s in a.steps] == ["find_member_by_name", "search_books", "borrow_book"]
    assert a.steps[0].response["result"][0]["name"] == "Dan Wu"
    assert a.steps[2].changes[0]["op"] == "insert" and a.steps[2].changes[0]["table"] == "loans"
    # the model saw each result, and never the verifier
    assert "Dan Wu" in client.requests[1][-1]["content"]
    seen = _text(client.requests)
    assert "borrow_book(" in seen and task.instruction in seen
    for assertion in task.verifier.assertions:
        assert assertion.sql not in seen


def test_a_wrong_attempt_fails_and_keeps_its_trajectory() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([call("borrow_book", member_id=4, book_id=2), finish()])  # forgot days=7
    a = run_attempt(client, env, task)
    assert not a.passed and any("due_date" in f for f in a.failures)
    assert a.steps[0].response["ok"]


def test_turn_limit_loop_and_llm_errors_stop_an_attempt() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([call("find_member_by_name", name="Dan")] * 2)
    a = run_attempt(client, env, task, settings=tester.TesterSettings(max_turns=2))
    assert a.stop == "max_turns" and not a.passed and len(a.steps) == 2
    assert "last step" in client.requests[1][-1]["content"]
    a = run_attempt(fake_client([call("find_member_by_name", name="Dan")] * 3), env, task)
    assert a.stop == "loop" and len(a.steps) == 3
    a = run_attempt(fake_client(["not json"] * 3), env, task)
    assert a.stop == "llm_error" and a.error and not a.passed
    with pytest.raises(LLMUnavailable):  # an endpoint failure is not the task's fault: it propagates
        run_attempt(fake_client([]), env, task)


def test_invalid_actions_are_fed_back_by_the_client() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([{"thought": "x", "action": {"tool": "fly_to_moon", "arguments": {}}},
                          call("borrow_book", member_id=4, book_id=2, days=7), finish()])
    a = run_attempt(client, env, task)
    assert a.passed and "invalid" in client.requests[1][-1]["content"]


def test_later_attempts_sample_with_their_own_seed() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([finish("no idea")])
    a = run_attempt(client, env, task, attempt=3, settings=tester.TesterSettings(temperature=0.9))
    assert a.attempt == 3 and not a.passed
    body = client.bodies[0]
    assert body["temperature"] == 0.9 and body["seed"] == client.settings.seed + 2
    assert client.usage.by_stage()["tester"]["calls"] == 1  # accounted on the shared ledger


def test_action_schema_is_typed_per_tool() -> None:
    schema = json.dumps(turn_model(library_env()).model_json_schema())
    assert "borrow_book" in schema and "final_answer" in schema and "maxLength" in schema


def test_a_parameter_named_title_survives_the_client_schema() -> None:
    from pipeline.llm.client import inline_refs

    schema = inline_refs(turn_model(library_env()).model_json_schema())
    add_book = next(s for s in schema["properties"]["action"]["anyOf"]
                    if s["properties"]["tool"].get("enum") == ["add_book"] or s["properties"]["tool"].get("const") == "add_book")
    args = add_book["properties"]["arguments"]
    assert set(args["required"]) <= set(args["properties"])  # nothing required is missing from the grammar
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([call("add_book", title="Dune", author="Frank Herbert", genre="fiction", year=1965,
                               replacement_cost=9.5), finish()])
    a = run_attempt(client, env, task)
    assert a.steps[0].arguments["title"] == "Dune" and a.steps[0].response["ok"]
