"""Each deterministic proof, on tasks that pass it and on tasks built to fail it."""

from __future__ import annotations

import pytest

from pipeline.ir import Assertion, Environment, Task, ToolCall, Verifier
from pipeline.runtime.replay import fresh
from tests.fixtures.library import library_env, library_tasks
from tests.verify.envs import shop_env
from verify.derive import derive_verifier
from verify.proofs import broad_calls, prove, wrong_answer


def _task(env: Environment, calls: list[ToolCall], verifier: Verifier, kind: str = "update") -> Task:
    return Task(task_id=Task.make_id(env.env_id, "x", calls, verifier), env_id=env.env_id, instruction="x",
                tools=[t.openai_schema() for t in env.tools], reference_solution=calls, verifier=verifier, kind=kind)


def _derived(env: Environment, calls: list[ToolCall], answer_field: str | None = None) -> Task:
    d = derive_verifier(env, calls, answer_field=answer_field)
    assert d.verifier is not None, d.error
    return _task(env, list(d.calls), d.verifier)


def _result(report, name):
    return next(r for r in report.results if r.name == name)


CASES = [
    ([ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 2, "days": 7})], None),
    ([ToolCall(tool="return_book", arguments={"book_id": 4})], None),
    ([ToolCall(tool="delete_member", arguments={"member_id": 2})], None),
    ([ToolCall(tool="update_member_email", arguments={"member_id": 3, "email": "c.diaz@example.org"}),
      ToolCall(tool="add_book", arguments={"title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965,
                                           "replacement_cost": 10.5})], None),
    ([ToolCall(tool="find_member_by_name", arguments={"name": "Dan"})], "email"),
    ([ToolCall(tool="get_book", arguments={"book_id": 4})], "on_loan"),
]


@pytest.mark.parametrize("calls,answer_field", CASES)
def test_derived_tasks_pass_every_proof(calls, answer_field) -> None:
    env = library_env()
    report = prove(env, _derived(env, calls, answer_field))
    assert report.ok, report.reason()
    names = {r.name for r in report.results}
    assert {"reference", "initial_state", "no_op", "destructive", "destructive_after_reference"} <= names
    assert ("wrong_answer" in names) == (answer_field is not None)
    destructive = _result(report, "destructive")
    assert destructive.evidence["succeeded"] > 0 and destructive.evidence["extra_changes"] > 0  # not vacuous


def test_hand_written_fixture_tasks_pass() -> None:
    env = library_env()
    for t in library_tasks(env):
        assert prove(env, t).ok


def test_reference_that_fails_is_caught() -> None:
    env = library_env()
    t = _derived(env, CASES[0][0])
    bad = t.model_copy(update={"reference_solution": [ToolCall(tool="borrow_book", arguments={"member_id": 1, "book_id": 3})]})
    r = _result(prove(env, bad), "reference")
    assert not r.ok and "already on loan" in r.detail


def test_verifier_that_holds_on_the_initial_state_is_caught() -> None:
    env = library_env()
    calls = CASES[0][0]
    v = Verifier(assertions=[Assertion(sql="SELECT COUNT(*) FROM members", expect=4)], mutable_tables=["loans"])
    report = prove(env, _task(env, calls, v))
    assert not report.ok
    r = _result(report, "initial_state")
    assert not r.ok and "already holds on the initial state" in r.detail
    assert _result(report, "reference").ok  # the reference itself is fine: only the verifier is useless


def test_no_op_catches_an_answer_any_evasion_satisfies() -> None:
    env = library_env()
    calls = [ToolCall(tool="get_book", arguments={"book_id": 2})]
    v = Verifier(assertions=[Assertion(sql="SELECT COUNT(*) FROM books", expect=6)], answer="complete")
    report = prove(env, _task(env, calls, v, "lookup"))
    assert not _result(report, "no_op").ok  # "I could not complete the task." contains "complete"
    assert not _result(report, "reference").ok  # and the answer is not in what the reference read


def test_destructive_catches_a_verifier_without_a_frame() -> None:
    env = library_env()
    calls = CASES[0][0]
    weak = Verifier(
        assertions=[Assertion(sql="SELECT COUNT(*) FROM loans WHERE member_id = 4 AND book_id = 2", expect=1)],
        mutable_tables=["books", "loans", "members"],
    )
    report = prove(env, _task(env, calls, weak))
    assert _result(report, "reference").ok and _result(report, "initial_state").ok
    after = _result(report, "destructive_after_reference")
    assert not after.ok and "still passes" in after.detail
    assert not report.ok


def test_destructive_is_vacuous_without_write_tools() -> None:
    env = library_env()
    env = env.model_copy(update={"tools": [t for t in env.tools if t.kind == "read"]})
    t = _derived(env, [ToolCall(tool="get_book", arguments={"book_id": 1})], "title")
    report = prove(env, t)
    assert report.ok
    assert "vacuous" in _result(report, "destructive").detail


def test_broad_calls_draw_arguments_from_real_rows() -> None:
    env = shop_env()
    with fresh(env) as run:
        calls = broad_calls(env, run, [])
    add_items = [c for c in calls if c.tool == "add_item"]
    assert {c.arguments["order_id"] for c in add_items} == {1, 2}
    assert all(c.tool in {"create_order", "add_item"} for c in calls)


def test_wrong_answer_perturbs_each_item() -> None:
    assert wrong_answer("yes") == "no"
    assert wrong_answer({"type": "text", "value": "Emma", "others": ["Dune"]}) == "Dune"
    assert wrong_answer({"type": "date", "value": "2026-01-05"}) == "1999-12-31"
    assert wrong_answer("3") == "4"
