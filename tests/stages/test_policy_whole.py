"""A rule's message says what its condition forbids, whole (``pipeline.stages.policy.house_rules``: ``said_whole``,
``unsaid``), on the library of ``tests/fixtures/book_lending_guard.json`` (real SQLite, a scripted LLM, the real
embedder).

Seen 2026-11-29 (generated/quickstart/envs/book_lending_system_d8566288b7): the one rule forbids update_loan_status
on a loan whose status is 'returned', any change; its message was the model's "A member cannot return a book that
has already been returned.", and its tasks ask the agent to refuse "mark the loan ... as pending" on a returned loan:
the policy said only that returning again is forbidden."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.settings import BuildSettings
from pipeline.stages.policy.candidates import Checked, check, propose
from pipeline.stages.policy.house_rules import (
    RULE_MESSAGE_MAX,
    Words,
    make_policy,
    message,
    said_whole,
    unsaid,
)
from verify.policy import policy_markdown

FIXTURE = Path(__file__).parent.parent / "fixtures" / "book_lending_guard.json"
SETTINGS = BuildSettings(policy=True, max_attempts=3)
RETURNED = "A member cannot return a book that has already been returned."
PROSE = {"rules": [RETURNED,  # grounds in the loans' guard; the other two in nothing (test_policy_guard)
                   "A book cannot be returned if it is overdue for more than 30 days.",
                   "A member cannot renew a book that is currently checked out."]}
GUARD = "update_loans_status_loans_status_returned"
PARENT = "update_renewals_status_loans_status_returned"
WHOLE = "Once the loan's status is 'returned', its status may no longer be changed."


@pytest.fixture(scope="module")
def library() -> tuple[ir.Environment, dict[str, Checked]]:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        checked, _ = check(env, propose(env, inst.conn))
    return env, {c.candidate.key: c for c in checked}


def test_a_state_guards_message_is_followed_by_its_whole_condition(
        library: tuple[ir.Environment, dict[str, Checked]]) -> None:
    """The model's message is kept, and code's sentence says that the row may not be changed at all: the rule
    forbids moving a returned loan back to 'pending' (a call it was checked on), which "cannot return ... already
    returned" does not say. Before: the rule's message was the model's sentence alone."""
    env, _ = library

    def word(messages: list[dict[str, Any]]) -> dict[str, Any]:
        assert "r2:" not in messages[0]["content"]  # one rule grounds
        return {"rules": [{"id": "r1", "message": RETURNED}]}

    res = make_policy(env, fake_client([PROSE, word]), SETTINGS)
    [rule] = res.value.rules
    assert rule.id == GUARD and rule.worded_by == "llm"
    assert rule.message == f"{RETURNED} {WHOLE}"
    assert {c.arguments["status"] for c in rule.forbidden} == {"pending"}  # what the first sentence does not say
    assert f"1. {RETURNED} {WHOLE} (applies to: `update_loans_status`)" in policy_markdown(res.value)
    with EnvInstance(res.value, enforce_policy=True) as inst:  # the enforced refusal says it too
        out = inst.call("update_loans_status", dict(rule.forbidden[0].arguments))
        assert out["error"] == rule.message


def test_only_a_guard_gets_the_sentence_once_and_within_a_rules_length(
        library: tuple[ir.Environment, dict[str, Checked]]) -> None:
    env, by_key = library
    words = Words()
    guard = by_key[GUARD]
    assert said_whole(f"{RETURNED} {WHOLE}", guard, env, words) == f"{RETURNED} {WHOLE}"  # already said: once
    long = "A member cannot return a book that has already been returned, " + "x" * (RULE_MESSAGE_MAX - 100) + "."
    assert said_whole(long, guard, env, words) is None  # no room: code's wording alone
    # a state the tool reads but does not set (the renewal's loan): its message names whose state, nothing added
    parent = by_key[PARENT]
    text = "A renewal of a loan that is returned cannot be changed."
    assert said_whole(text, parent, env, words) == text


def test_a_parent_states_message_names_whose_state_it_is(
        library: tuple[ir.Environment, dict[str, Checked]]) -> None:
    """'returned' is a value of the renewal's own status too: "A returned renewal cannot be changed." says the
    renewal's state, while the condition reads its loan's. Before: unsaid passed any message naming the value."""
    env, by_key = library
    parent = by_key[PARENT]
    assert parent.candidate.words["section"] == "parent_state"
    assert unsaid("A returned renewal cannot be changed.", parent) == "loan"
    assert unsaid("A renewal of a loan that is returned cannot be changed.", parent) is None

    def word(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"rules": [{"id": "r1", "message": "A returned renewal cannot be changed."}]}

    prose = {"rules": ["A renewal cannot be changed once its loan is returned.", *PROSE["rules"][1:]]}
    client = fake_client([prose, *[word] * 6])
    # without the tool that adds a renewal: "no renewal added to a returned loan" (checked since the loans' first
    # state left the budget, tests/stages/test_policy_initial_state.py) is a rival this prose may mean as well
    env = env.model_copy(update={"tools": [t for t in env.tools if t.name != "add_renewal_to_loan"]})
    res = make_policy(env, client, SETTINGS)
    [rule] = res.value.rules
    assert rule.id == PARENT  # grounded; its message fed back, then code's wording, which names the loan
    assert "must say what the rule checks (loan)" in client.requests[2][-1]["content"]
    assert (rule.worded_by, rule.message) == (
        "code", "Set the status of one renewal: not allowed while the renewal's loan has status returned.")


def test_a_dates_message_names_that_date_not_another_of_its_row(
        library: tuple[ir.Environment, dict[str, Checked]]) -> None:
    """A loan has a loan date and a due date: "date" says neither. "... after its loan date" for "the loan's due
    date is before today" says another condition; before, any word of the column's name passed."""
    _, by_key = library
    due = by_key["add_renewal_to_loan_loans_due_date_row_past"]
    assert unsaid("A loan cannot be renewed after its loan date.", due) == "due date"
    assert unsaid("A loan cannot be renewed once it is past its due date.", due) is None
    words = Words()
    for c in by_key.values():  # code's own wording says each condition whole
        assert unsaid(message(c, words), c) is None, (c.candidate.key, message(c, words))
