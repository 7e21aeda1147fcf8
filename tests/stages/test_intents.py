"""Intents stage: parsing, the feedback loop, and the recorded rejection when it cannot be fixed."""

from __future__ import annotations

from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.stages.schema.intents import generate_intents, reply_model
from tests.stages.library_replies import INTENTS, SCENARIO, small_settings

ONLY_READS = {"intents": [
    {"goal": "Look up a member by email", "kind": "read"},
    {"goal": "List the open loans of a member", "kind": "read"},
    {"goal": "Find a book by title", "kind": "read"},
    {"goal": "Show overdue loans", "kind": "read"},
]}


def test_parses_and_normalises_goals() -> None:
    reply = {"intents": [*INTENTS["intents"], {"goal": "  look up a member   by email. ", "kind": "read"}]}
    client = fake_client([reply])
    res = generate_intents(SCENARIO, client, small_settings())
    assert res.ok and res.attempts == 1 and res.rejections == ()
    assert res.value == (
        Intent(goal="Look up a member by email", kind="read"),
        Intent(goal="List the open loans of a member", kind="read"),
        Intent(goal="Lend a book to a member", kind="write"),
        Intent(goal="Return a borrowed book", kind="write"),
    )
    prompt = client.requests[0][0]["content"]
    assert SCENARIO.description in prompt and "4 to 6" in prompt


def test_schema_bounds_the_number_of_goals() -> None:
    schema = reply_model(4, 6).model_json_schema()
    assert schema["properties"]["intents"]["minItems"] == 4
    assert schema["properties"]["intents"]["maxItems"] == 6
    assert schema["$defs"]["IntentItem"]["properties"]["kind"]["enum"] == ["read", "write"]


def test_missing_write_goal_is_fed_back_and_fixed() -> None:
    client = fake_client([ONLY_READS, INTENTS])
    res = generate_intents(SCENARIO, client, small_settings())
    assert res.ok and res.attempts == 2
    retry = client.requests[1]
    assert retry[-1]["role"] == "user" and "no goal of kind 'write'" in retry[-1]["content"]
    assert retry[-2]["role"] == "assistant"


def test_unfixable_reply_becomes_a_rejection_with_the_reason() -> None:
    client = fake_client([ONLY_READS] * 3)  # a repeated reply is asked again hotter, not counted
    res = generate_intents(SCENARIO, client, small_settings(max_attempts=2))
    assert not res.ok and res.value is None
    (rej,) = res.rejections
    assert rej.stage == "intents" and rej.item == SCENARIO.name
    assert "no goal of kind 'write'" in rej.reason
    assert len(client.requests) == 3


def test_llm_error_ends_the_loop_at_once() -> None:
    client = fake_client(["not json"] * 3)  # the client's own validation retries give up
    res = generate_intents(SCENARIO, client, small_settings())
    assert not res.ok
    assert "LLM gave no usable reply" in res.rejections[0].reason
    assert len(client.requests) == 3  # 1 + 2 validation retries inside the client, no stage retry
