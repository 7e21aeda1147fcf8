"""A frozen state (``pipeline.stages.policy.candidates.Finder.frozen``): on a tool that updates a row, a listed column
no tool changes makes a state candidate per value the seeded rows hold, used only where the LLM's prose names the
value. On the pharmacy of the committed example (generated/quickstart/envs/community_pharmacy_prescription_manageme_
4bf247ef17, 2026-11-30; ``tests/fixtures/pharmacy_orders.json`` is its env.json), whose only update of an order sets
its quantity and whose orders are 'open' or 'closed' (no tool changes that), with the real embedder (MiniLM).

Before: no candidate read an order's status (the state of a row was proposed only on a column some tool's UPDATE
sets), and none of the model's prose grounded: the pharmacy had no policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.settings import BuildSettings
from pipeline.stages.policy.candidates import Checked, check, propose
from pipeline.stages.policy.house_rules import make_policy

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_orders.json"
CLOSED = "update_orders_quantity_orders_status_closed"
SETTINGS = BuildSettings(policy=True, max_attempts=3)
PROSE = {"rules": [  # the model's prose as the example's report.json lists it (none grounds), and one that names 'closed'
    "A prescription cannot be filled if the patient's allergies do not match the medication.",
    "The amount of a prescription must not exceed the available stock.",
    "An order whose status is 'closed' may no longer be changed."]}


def pharmacy() -> ir.Environment:
    return ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def checked() -> list[Checked]:
    env = pharmacy()
    with EnvInstance(env) as inst:
        cands = propose(env, inst.conn)
    frozen = [c for c in cands if c.words.get("frozen")]
    # not 'open': the state every new order is made in (a rule there would freeze every order where it starts)
    assert {c.key for c in frozen} == {CLOSED}
    assert all(c.tool == "update_orders_quantity" and c.kind == "state" for c in frozen)
    # no frozen state on a write that adds a row (a category of its parent) nor on a column a tool changes
    assert not any(c.words.get("frozen") and c.tool.startswith(("create", "add")) for c in cands)
    return check(env, frozen)[0]


def test_a_status_no_tool_changes_freezes_the_row_that_holds_it(checked: list[Checked]) -> None:
    """Each value holds on real calls: the quantity of an order in the other state changes, of one in it is refused."""
    env = pharmacy()
    [closed] = [c for c in checked if c.candidate.key == CLOSED]
    with EnvInstance(env) as inst:
        state = {r[0]: r[1] for r in inst.conn.execute('SELECT order_id, status FROM "orders"')}
    assert closed.allowed and closed.forbidden
    assert {state[a["order_id"]] for a in closed.forbidden} == {"closed"}
    assert {state[a["order_id"]] for a in closed.allowed} == {"open"}


def test_prose_that_names_the_state_grounds_in_it_and_the_seed_is_kept() -> None:
    """The prose rule that names 'closed' grounds in the frozen state; the model's other prose grounds in nothing;
    the seeded rows are left as they are (a state forbids no row that exists)."""
    word = {"rules": [{"id": "r1", "message": "The quantity of an order whose status is 'closed' may no longer be "
                                              "changed."}]}
    client = fake_client([PROSE, word])
    env = pharmacy()
    res = make_policy(env, client, SETTINGS)
    [rule] = res.value.rules
    assert (rule.tools, rule.kind, rule.worded_by) == (["update_orders_quantity"], "state", "llm")
    assert rule.condition.endswith("\"status\" = 'closed'") and "'closed'" in rule.message
    assert rule.allowed and rule.forbidden
    assert res.value.seed == env.seed
    dropped = {r.evidence["prose"] for r in res.rejections if r.item == "prose"}
    assert dropped == set(PROSE["rules"][:2])


def test_code_never_picks_a_frozen_state() -> None:
    """Without usable prose, code's pick leaves the frozen states out: nothing in the structure tells an order's
    status from a book's genre."""
    client = fake_client([{"rules": []}] * SETTINGS.max_attempts)
    res = make_policy(pharmacy(), client, SETTINGS)
    assert any("code picked" in r.reason for r in res.rejections if r.item == "prose")
    assert res.value.rules and not any("status" in r.condition for r in res.value.rules)


def test_candidates_past_the_check_cap_are_said_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The regenerated library of 2026-11-30 lost its only rule without a word: its frozen 'returned' loan was
    candidate 41 of 50 once the tools stage kept three more tools, past ``CHECK_MAX``, so it was never checked and
    no rejection named it. Those left out are now listed in a rejection."""
    from pipeline.stages.policy import candidates, house_rules
    env = pharmacy()
    with EnvInstance(env) as inst:
        every, beyond = candidates.proposals(env, inst.conn)
    # only links (a prescription's order: ``linked``) are past the cap: they take the checks the others leave
    assert every and beyond and all(c.words.get("section") == "linked" for c in beyond)
    every += beyond
    monkeypatch.setattr(candidates, "CHECK_MAX", 3)
    monkeypatch.setattr(house_rules, "CHECK_MAX", 3)
    with EnvInstance(env) as inst:
        first, left = candidates.proposals(env, inst.conn)
    assert len(first) == 3 and [c.key for c in first + left] == [c.key for c in every]
    res = make_policy(env, fake_client([PROSE] * 20), SETTINGS)
    [said] = [r for r in res.rejections if r.item == "unchecked"]
    assert said.evidence["candidates"] == [c.key or c.words.get("section", "") for c in left]
    assert "were not checked" in said.reason
