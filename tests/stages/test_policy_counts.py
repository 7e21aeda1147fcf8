"""A cap or a threshold grounds only prose that speaks of what it counts and groups by, no rule rations a whole
category, and a rule's message says its check whole (``pipeline.stages.policy.house_rules``: ``counted``,
``rationed``, ``unsaid``), on the pharmacy of the committed example (real SQLite, a scripted LLM, the real embedder).

Seen 2026-11-28 (generated/quickstart/envs/community_pharmacy_prescription_manageme_082d3448a7): the model's "A
request for a new order must be made within 24 hours of the previous one." grounded in a pharmacy-wide cap of 24
orders per medication (its "24" is hours), the build deleted 23 seeded orders to fit it, and the cap forbade every
further order of fluoxetine for everyone. ``tests/fixtures/pharmacy.json`` is that environment's env.json without its
rule and with the 23 deleted orders put back (order ids 109 to 188, all of medication 8, the only medication past 24;
their other values are copied from medication 8's remaining orders: only the counts matter here)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.settings import BuildSettings
from pipeline.stages.policy.candidates import check, propose, usual_calls
from pipeline.stages.policy.house_rules import (
    Stated,
    Words,
    counted,
    fits,
    make_policy,
    message,
    rationed,
    unsaid,
)
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env

SETTINGS = BuildSettings(policy=True, max_attempts=3)
FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy.json"
HOURS = "A request for a new order must be made within 24 hours of the previous one."
PHARMACY_PROSE = {"rules": [  # the model's prose, as the example's report.json lists it
    HOURS,
    "A prescription cannot be filled if the patient's allergies do not match the medication.",
    "The amount of a prescription must not exceed the available stock.",
    "If a patient has already taken all their medications, they may not receive any more."]}
PAD = ["Staff must wear their badges.", "Visitors sign in at the front desk."]
NO_WORDS = [{"rules": []}] * 3  # the wording request fails: code words the rules


def pharmacy() -> ir.Environment:
    return ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))


def checked_of(env: ir.Environment) -> list[Any]:
    with EnvInstance(env) as inst:
        return check(env, propose(env, inst.conn))[0]


def per_medication(checked: list[Any]) -> Any:
    return next(c for c in checked if c.candidate.words.get("section") == "limit"
                and c.candidate.words.get("column") == "medication_id" and c.candidate.tool == "create_orders")


def cap(items: str, thing: str, others: str = "", value: str = "24") -> Any:
    return SimpleNamespace(candidate=SimpleNamespace(words={"section": "limit", "items": items, "thing": thing,
                                                            "others": others, "value": value, "label": ""},
                                                     values=()))


def test_a_caps_number_counts_its_items_per_the_row_it_groups_by() -> None:
    meds = cap("orders", "medication", "patients")
    got, why = counted(HOURS, meds)
    assert got == [] and why == "the rule states 24, none of it a count of orders (the cap counts orders per medication)"
    assert counted("At most 24 orders per medication.", meds)[0] == [Stated(24, True)]
    assert counted("A medication may be ordered at most 24 times.", meds)[0] == [Stated(24, True)]
    got, why = counted("At most 24 orders.", meds)
    assert got == [] and why.startswith("the rule does not say per what it counts: the cap counts orders per medication")
    assert counted("A patient may not order more than 5 medications.", meds)[0] == []  # it counts medications
    # what the counted rows belong to besides the row grouped by: "5 books" counts a member's loans, not a book's
    assert counted("A member cannot borrow more than 5 books.", cap("loans", "member", "books"))[0] == [Stated(5, True)]
    assert counted("A member cannot borrow more than 5 books.", cap("loans", "book", "members"))[0] == []
    # the schema's own words in any script, and a clause is the number's: "3 Tage" is no count of the inspections
    assert counted("Höchstens 3 inspections pro permit.", cap("inspections", "permit"))[0] == [Stated(3, True)]
    assert counted("Ein permit, inspections: innerhalb von 3 Tagen.", cap("inspections", "permit"))[0] == []


def test_the_pharmacys_24_hours_ground_in_no_cap_of_24_orders_per_medication() -> None:
    """The regression: the model's prose grounds in nothing, no seeded order is deleted, and the Rejection says why
    the nearest cap is not what the prose says."""
    env = pharmacy()
    checked = checked_of(env)
    meds = per_medication(checked)
    assert meds.candidate.number == 47  # the seeded cap: fluoxetine's 47 orders
    fit = fits(env, [HOURS], [meds], Words())[0][0]
    assert fit.gate == "counts" and fit.refused.startswith("the rule states 24, none of it a count of orders")
    client = fake_client([PHARMACY_PROSE])
    res = make_policy(env, client, SETTINGS)
    assert res.value.rules == [] and res.value.seed == env.seed and len(client.requests) == 1
    assert not any("seeded rows broke" in r.reason for r in res.rejections)
    assert any(r.item == "prose" and r.evidence["prose"] == HOURS for r in res.rejections)
    assert any(r.item == "policy" and "no rule in prose grounds" in r.reason for r in res.rejections)


def test_a_cap_below_what_the_seed_holds_is_refused_not_fitted() -> None:
    """Said as a cap ("At most 24 orders per medication."), the prose's number would delete 23 of the 188 seeded
    orders (all of one drug's: 47 cut to 24): refused, the seed left as it is. At the seed's own number it grounds."""
    env = pharmacy()
    meds = per_medication(checked_of(env))
    with EnvInstance(env) as inst:
        assert rationed(inst.conn, meds.candidate.at(24)).startswith(
            "the seeded rows already hold up to 47 orders per medication (23 of the 188 orders rows past 24)")
        assert usual_calls(inst.conn, meds.candidate.at(24)) == (1, 24)  # fluoxetine alone, of 24 medications
        assert rationed(inst.conn, meds.candidate) == ""
    prose = "At most 24 orders per medication."
    res = make_policy(env, fake_client([{"rules": [prose, *PAD]}, *NO_WORDS]), SETTINGS)
    assert res.value.rules == [] and res.value.seed == env.seed
    why = next(r.evidence["why"] for r in res.rejections if r.item == "prose" and r.evidence["prose"] == prose)
    assert "at 24, the seeded rows already hold up to 47 orders per medication" in why, why
    res = make_policy(env, fake_client([{"rules": ["At most 47 orders per medication.", *PAD]}, *NO_WORDS]),
                      SETTINGS)
    assert [r.id for r in res.value.rules] == ["create_orders_orders_max_47"] and res.value.seed == env.seed


def test_a_rule_that_forbids_most_of_the_usual_calls_is_refused() -> None:
    """A threshold on a row's number that most seeded rows are above, and one on the request's own value, forbid
    most calls drawn from the seeded rows: a ration, not a business rule. The permit office's fee above 900 (3 of
    7 fees) is no ration."""
    env = permit_env()
    checked = checked_of(env)
    fee = next(c for c in checked if c.candidate.words.get("section") == "value_over")
    with EnvInstance(env) as inst:
        assert usual_calls(inst.conn, fee.candidate.at(900)) == (3, 7) and rationed(inst.conn, fee.candidate.at(900)) == ""
        assert rationed(inst.conn, fee.candidate.at(80)) == ("it forbids 6 of the 7 calls drawn from the seeded rows "
                                                             "(86 % > 50 %)")
    env = brewery_env()
    rows = [c for c in checked_of(env) if c.candidate.words.get("section") == "row_over"]
    assert rows, "the brewery has a threshold on a row's number"
    c = rows[0].candidate
    with EnvInstance(env) as inst:
        forbidden, of = usual_calls(inst.conn, c.at(0))
        assert forbidden == of > 0 and rationed(inst.conn, c.at(0)).startswith(f"it forbids {of} of the {of} calls")


def test_a_message_says_a_caps_count_and_its_grouping_and_codes_messages_do() -> None:
    """The example's rule kept the model's prose as its message: it names 24 and an order, and no cap of 24 orders
    per medication. Code's wording of every candidate of three domains says its check whole."""
    env = pharmacy()
    checked = checked_of(env)
    meds = per_medication(checked).candidate.at(24)
    held = SimpleNamespace(candidate=meds, allowed=(), forbidden=())
    assert unsaid(HOURS, held) == "24 orders per medication"
    assert unsaid("At most 24 orders of one medication.", held) is None
    words = Words()
    for env in (pharmacy(), permit_env(), brewery_env()):
        for c in checked_of(env):
            assert unsaid(message(c, words), c) is None, (c.candidate.key, message(c, words))


def test_codes_cap_is_what_the_fullest_seeded_row_holds_past_the_rows_it_samples(monkeypatch: Any) -> None:
    """Code's cap counts every seeded row it groups by, not only the first ``PROBE_ROWS`` it samples: before, a
    table with more rows than that capped below its fullest row (here, sampling 5 medications, below fluoxetine's
    47 orders), a cap the seeded rows break."""
    from pipeline.stages.policy import candidates

    env = pharmacy()
    monkeypatch.setattr(candidates, "PROBE_ROWS", 5)
    with EnvInstance(env) as inst:
        found = [c for c in propose(env, inst.conn) if c.words.get("section") == "limit"
                 and c.words.get("column") == "medication_id" and c.tool == "create_orders"]
        assert found and all(c.number == 47 for c in found if not c.words.get("where"))
        assert all(rationed(inst.conn, c) == "" or not c.number for c in found)
