"""Prose that says the condition of two candidates in the same words grounds in the one whose tool or table it names
more (``pipeline.stages.policy.house_rules.rivals``, a gate of ``fits``), on the library of the committed example
regenerated on 2026-11-30 (r18c; ``tests/fixtures/book_lending_rivals.json`` is its env.json without rules), its
prose as the model wrote it, and the real embedder (MiniLM).

Before: the model's schema gives renewals the loans' states ('pending', 'returned'); "A member cannot return a book
that has already been returned." fit both guards on 'returned' and grounded in the renewals' (joint 0.432, the
loans' 0.427): the policy said "Once the renewal's status is 'returned', its status may no longer be changed." on
change_renewal_status, and a loan could be returned twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import Candidate, Checked, propose
from pipeline.stages.policy.house_rules import Fit, Words, fits, ground, rivals

FIXTURE = Path(__file__).parent.parent / "fixtures" / "book_lending_rivals.json"
RETURNED = "A member cannot return a book that has already been returned."
LOANS = "change_loan_status_loans_status_returned"
RENEWALS = "change_renewal_status_renewals_status_returned"


@pytest.fixture(scope="module")
def states() -> tuple[ir.Environment, list[Checked]]:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        cands = propose(env, inst.conn)
    # the state candidates (both guards hold on real calls in the build; no call is made here)
    return env, [Checked(c, (), ()) for c in cands if c.words.get("section") == "state"]


def test_the_returned_rule_grounds_in_the_loans_guard_not_the_renewals(
        states: tuple[ir.Environment, list[Checked]]) -> None:
    env, checked = states
    keys = [c.candidate.key for c in checked]
    assert LOANS in keys and RENEWALS in keys
    grounded, _ = ground(env, [RETURNED], checked, Words())
    assert [(p, c.candidate.key) for p, c in grounded] == [(RETURNED, LOANS)]  # before: RENEWALS
    row = fits(env, [RETURNED], checked, Words())[0]
    loans, renewals = row[keys.index(LOANS)], row[keys.index(RENEWALS)]
    assert renewals.joint > loans.joint  # the joint similarity alone picks the renewals (0.432 > 0.427)
    assert loans.subject > renewals.subject  # "change loan status" 0.219, "change renewal status" 0.185
    assert loans.refused == "" and renewals.gate == "subject" and LOANS in renewals.refused


def _state(key: str, tool: str, value: str, table: str = "") -> Checked:
    return Checked(Candidate(key, "state", tool, f"SELECT 1 FROM {table or key} WHERE status = 'x'", "id", (),
                             {"section": "state", "value": value}), (), ())


def _fit(subject: float, table: float = 0.2, refused: str = "") -> Fit:
    return Fit(0.5, 0.4, 0.4, table, 0.3, "t", refused=refused, gate="x" if refused else "", subject=subject)


def test_rivals_are_candidates_said_in_the_same_words() -> None:
    """Only a candidate said in the same words (the same template and value) is a rival; a refused one is none; the
    tool's name decides, then the table."""
    a, b, c = _state("a", "set_a", "closed"), _state("b", "set_b", "closed"), _state("c", "set_c", "open")
    out = rivals([_fit(0.2), _fit(0.3), _fit(0.9)], [a, b, c])
    assert [f.gate for f in out] == ["subject", "", ""]  # 'open' is another condition: no rival of either
    assert "set b (0.3" in out[0].refused
    assert [f.gate for f in rivals([_fit(0.2), _fit(0.3, refused="far")], [a, b])] == ["", "x"]
    assert [f.gate for f in rivals([_fit(0.3, 0.1), _fit(0.3, 0.2)], [a, b])] == ["subject", ""]
    assert [f.gate for f in rivals([_fit(0.3), _fit(0.3)], [a, b])] == ["", ""]  # a tie keeps both
    # the same state of the same table on two tools: the action tells them apart (the joint similarity), not the
    # tool's name ("A permit that is only submitted cannot be inspected." is nearer "set permit status" than
    # "book inspection")
    same = [_state("a", "book_inspection", "submitted", "permits"), _state("b", "set_status", "submitted", "permits")]
    assert [f.gate for f in rivals([_fit(0.28), _fit(0.53)], same)] == ["", ""]
