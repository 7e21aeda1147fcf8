"""The policy stage's budget of checks (``pipeline.stages.policy.candidates``: ``proposals``, ``_firsts``,
``Finder.own_states``) on the library of the committed example (generated/quickstart/envs/
book_lending_system_6ba8c7e9bf, 2026-11-30; ``tests/fixtures/book_lending_cut.json`` is its env.json).

Before: its seven write tools made 50 candidates; :data:`CHECK_MAX` (40) are checked, the write tools in turn, and
each tool's candidates ranked the first of each (template, column, parameter) before any second, so the second
value of a loan's status, 'returned', on the tool that sets it (update_loan_status) came after every date and
threshold of every tool: 42nd, unchecked. It is the candidate the model's prose rule "A member cannot return a book
that has already been returned." grounds in (tests/stages/test_policy_guard.py), so the library lost its only rule.
Now every value of a state its own tool sets ranks as a first, except the state a new loan is made in ('pending':
no rule freezes a row where it starts, tests/stages/test_policy_initial_state.py), so 47 candidates are made."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import ir
from pipeline.dbmodel.arguments import Sampler
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import CHECK_MAX, Candidate, Finder, proposals
from pipeline.stages.tools.exercise import exercise, unreached

FIXTURE = Path(__file__).parent.parent / "fixtures" / "book_lending_cut.json"
GUARD = "update_loan_status_loans_status_returned"


@pytest.fixture(scope="module")
def library() -> tuple[ir.Environment, list[Candidate], list[Candidate]]:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        out, left = proposals(env, inst.conn)
    return env, out, left


def own_states(env: ir.Environment, tool: str) -> set[str]:
    with EnvInstance(env) as inst:
        return Finder(env, inst.conn).own_states(env.tool(tool))


def test_every_value_of_a_state_its_tool_sets_is_checked(
        library: tuple[ir.Environment, list[Candidate], list[Candidate]]) -> None:
    env, out, left = library
    assert len(out) + len(left) == 47 and len(out) == CHECK_MAX  # still bounded: seven left unchecked
    checked = [c.key for c in out]
    assert GUARD in checked, [c.key for c in left]  # before: 42nd of 50, left unchecked
    # among its tool's candidates it comes first, before the tool's dates
    mine = [k for k in checked if k.startswith("update_loan_status_")]
    assert mine[:2] == [GUARD, "update_loan_status_loans_loan_date_row_past"]
    assert own_states(env, "update_loan_status") == {GUARD}


def test_a_state_another_tool_sets_keeps_its_rank(
        library: tuple[ir.Environment, list[Candidate], list[Candidate]]) -> None:
    """The renewals' and the fines' tools read a loan's status but do not set it: their 'returned' is no guard of
    theirs (not ranked as a first), so the budget still reaches each tool's dates."""
    env, out, left = library
    assert own_states(env, "update_renewals_status") == set()
    assert own_states(env, "create_overdue_fines") == set()
    late = {c.key for c in left}
    assert "create_overdue_fines_loans_status_returned" in late
    assert "create_overdue_fines_loans_loan_date_row_past" in {c.key for c in out}


def test_the_librarys_return_tool_that_cannot_return_is_fed_back(
        library: tuple[ir.Environment, list[Candidate], list[Candidate]]) -> None:
    """The second cause (the tools stage's ``unreached``, ``Sampler.reach``): the same library's update_loan_status
    refuses every pending loan ("Loan {loan_id} is already pending", a fixed value where :new_status was meant), so
    the guard candidate now checked allows no call; the tools stage now feeds that back instead of keeping it."""
    env = library[0]
    tool = env.tool("update_loan_status")
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, env.tables, env.clock)
        sets = sampler.arguments(tool, 3)
        calls, error = exercise(env, tool, sets)
        reaches = sampler.reach(tool, [*sets, *sampler.arguments(tool, 9)])
    assert error is None  # each drawn call alone passes: the tool was kept
    assert sorted(r.value for r in reaches) == ["pending", "returned"]
    why = unreached(env, tool, reaches, calls)
    assert why is not None and why.startswith(
        "no working call of update_loan_status sets loans.status to 'returned' on a row that holds another value: "
        "every such call failed with 'Loan "), why
    assert "is already pending" in why
