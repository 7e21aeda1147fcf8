"""A state guard is checked with calls that move its row out of the state, and a candidate no seeded row meets says
so (``pipeline.stages.policy.candidates``: :func:`argument_sets`, :func:`check`).

The library of the committed example (generated/quickstart/envs/book_lending_system_614b173e8f, 2026-11-30;
``tests/fixtures/book_lending_returned.json`` is its env.json): 4 of its 20 loans are returned, and the Sampler's
first argument set of update_loans_status sets status 'returned'. Every call on a returned loan then set 'returned'
again, changed nothing, and was no call that works: "a returned loan may no longer be changed" was dropped ("no real
call ... is one it forbids (6 argument sets ..., 4 allowed, 0 forbidden)"), and the model's "A member cannot return
a book that has already been returned." grounded in the renewals' guard on the same value (a renewal "returned":
the reader audit of that day called it nonsense). The pharmacy of the committed example
(``tests/fixtures/pharmacy_orders.json``): no seeded medication has expired, so "no order for an expired
medication" forbids no call; the rejection now says it is the seed that holds no such row, not the rule that fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.settings import BuildSettings
from pipeline.stages.policy.candidates import Candidate, check, proposals
from pipeline.stages.policy.house_rules import make_policy

FIXTURES = Path(__file__).parent.parent / "fixtures"
GUARD = "update_loans_status_loans_status_returned"
# the library's prose as the model wrote it (report.json of the committed example, 2026-11-30)
PROSE = ["A member who already has 5 books on loan may not borrow another.",
         "A book cannot be returned if it is overdue for more than 30 days.",
         "A renewal request must be made within 7 days of the original due date.",
         "A member cannot renew a book that is currently checked out.",
         "A member cannot return a book that has already been returned."]
NO_WORDS: list[dict[str, Any]] = [{"rules": []}] * 3  # the wording request fails: code words the rules


def _env(name: str) -> ir.Environment:
    env = ir.Environment.model_validate_json((FIXTURES / name).read_text(encoding="utf-8"))
    return env.model_copy(update={"rules": []})


def _candidates(env: ir.Environment, *keys: str) -> list[Candidate]:
    with EnvInstance(env) as inst:
        found, left = proposals(env, inst.conn)
    by_key = {c.key: c for c in found + left}
    return [by_key[k] for k in keys]


def test_a_state_guard_holds_on_a_call_that_moves_a_returned_loan_back() -> None:
    env = _env("book_lending_returned.json")
    kept, dropped = check(env, _candidates(env, GUARD))
    assert [c.candidate.key for c in kept] == [GUARD], [d.reason for d in dropped]
    with EnvInstance(env) as inst:
        for args in kept[0].forbidden:  # a returned loan, moved to another status: a call that changes the row
            assert args["status"] != "returned"
            assert inst.conn.execute("SELECT status FROM loans WHERE loan_id = ?",
                                     (args["loan_id"],)).fetchone()[0] == "returned"
        for args in kept[0].allowed:
            assert inst.conn.execute("SELECT status FROM loans WHERE loan_id = ?",
                                     (args["loan_id"],)).fetchone()[0] != "returned"


def test_the_library_prose_of_a_returned_book_grounds_in_the_loans_guard() -> None:
    env = _env("book_lending_returned.json")
    res = make_policy(env, fake_client([{"rules": PROSE}, *NO_WORDS]), BuildSettings(policy=True, max_attempts=3))
    assert res.value is not None
    tools = {r.tools[0]: r for r in res.value.rules}
    assert "update_loans_status" in tools, [(r.tools, r.message) for r in res.value.rules]
    assert "update_renewals_status" not in tools  # before: the renewals' 'returned', the one rule of the library
    rule = tools["update_loans_status"]
    assert "'returned'" in rule.condition and rule.forbidden and rule.allowed


@pytest.mark.parametrize("key", ["create_orders_medications_expiration_date_row_past",
                                 "add_prescription_medications_expiration_date_row_past"])
def test_a_precondition_no_seeded_row_meets_says_the_seed_holds_none(key: str) -> None:
    env = _env("pharmacy_orders.json")
    kept, dropped = check(env, _candidates(env, key))
    assert kept == [] and len(dropped) == 1
    assert dropped[0].reason.startswith(f"rule dropped: no real call of {key.split('_medications')[0]} that works "
                                        "is one it forbids (")
    assert "none of them meets its condition on the seeded rows" in dropped[0].reason
    # its opposite, which every seeded medication meets (all still in date), forbids every call: no such note
    _, opposite = check(env, _candidates(env, key.replace("_row_past", "_row_future")))
    assert "that works is one it allows" in opposite[0].reason and "meets its condition" not in opposite[0].reason
