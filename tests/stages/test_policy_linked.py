"""A write that names two rows is forbidden when a row of another table already links the same two
(``pipeline.stages.policy.candidates.Finder._linked``, section ``linked``), on the pharmacy of the committed example
regenerated on 2026-11-30 (r18c; ``tests/fixtures/pharmacy_allergies.json`` is its env.json without rules), its
prose as the model wrote it (the r18c cache), and the real embedder (MiniLM).

Before: no candidate read the allergies; "A prescription cannot be filled if the patient's allergies do not match
the medication." grounded in nothing, the pharmacy had no policy, and a task recorded an azithromycin allergy for a
patient and then prescribed him azithromycin."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import Checked, check, propose
from pipeline.stages.policy.house_rules import Words, fits, ground

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_allergies.json"
ALLERGY = "A prescription cannot be filled if the patient's allergies do not match the medication."
OTHERS = ["The amount of a prescription must not exceed the available stock.",
          "A request for a new prescription must be made within 24 hours of the previous one.",
          "If a patient has taken more than 3 medications in a day, they may not take another one."]
LINKED = "create_prescriptions_allergies_linked"


@pytest.fixture(scope="module")
def pharmacy() -> tuple[ir.Environment, list[Checked]]:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        cands = [c for c in propose(env, inst.conn) if c.words.get("section") == "linked"]
    return env, check(env, cands)[0]


def test_a_prescription_for_a_medication_the_patient_is_allergic_to_is_a_candidate_that_holds(
        pharmacy: tuple[ir.Environment, list[Checked]]) -> None:
    env, checked = pharmacy
    by_key = {c.candidate.key: c for c in checked}
    assert LINKED in by_key
    c = by_key[LINKED]
    assert c.candidate.condition == ('SELECT 1 FROM "allergies" WHERE "allergies"."patient_id" = :patient_id AND '
                                     '"allergies"."medication_id" = :medication_id')
    with EnvInstance(env) as inst:  # a forbidden call is a pair the allergies hold, an allowed one is not
        for call, held in [(a, True) for a in c.forbidden] + [(a, False) for a in c.allowed]:
            row = inst.conn.execute("SELECT 1 FROM allergies WHERE patient_id = ? AND medication_id = ?",
                                    (call["patient_id"], call["medication_id"])).fetchone()
            assert (row is not None) == held
    assert Words()("linked_when", **c.candidate.words) == "when the patient already has allergies for the medication"


def test_the_model_s_allergy_rule_grounds_in_it_and_no_other_rule_does(
        pharmacy: tuple[ir.Environment, list[Checked]]) -> None:
    env, checked = pharmacy
    grounded, _ = ground(env, [ALLERGY, *OTHERS], checked, Words())
    assert [(p, c.candidate.key) for p, c in grounded] == [(ALLERGY, LINKED)]
    keys = [c.candidate.key for c in checked]
    row = fits(env, [ALLERGY], checked, Words())[0]
    # the allergy's reverse, an allergy refused where a prescription exists: the prose is about the prescriptions
    # the candidate's tool does not write (it writes the allergies)
    assert row[keys.index("add_allergy_prescriptions_linked")].gate == "table"



def test_a_linked_rule_says_its_link_in_code_s_words_not_the_model_s(
        pharmacy: tuple[ir.Environment, list[Checked]]) -> None:
    """The real model's message for it in the example regenerated on 2026-11-30 said the link backwards ("... if the
    patient's allergies do not match the medication list."): code's sentence says it as it is checked."""
    from pipeline.llm import fake_client
    from pipeline.settings import BuildSettings
    from pipeline.stages.policy.house_rules import pick

    env, checked = pharmacy
    linked = [c for c in checked if c.candidate.key == LINKED]
    reply = {"rules": [{"id": "r1", "message": ALLERGY.replace("medication.", "medication list.")}]}
    picked, notes = pick(env, linked, fake_client([reply]), BuildSettings(), Words(), [ALLERGY])
    assert notes == [] and len(picked) == 1
    (c, message, source, _), = picked
    assert source == "code" and message.endswith(": not allowed when the patient already has allergies for the "
                                                 "medication.")
