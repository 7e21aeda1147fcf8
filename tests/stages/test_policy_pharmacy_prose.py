"""Prose that says another thing than the candidate it would ground in (issue 40): on the pharmacy of the committed
example (``tests/fixtures/pharmacy_orders.json``), the model's prose replayed on 2026-11-30 grounded in a threshold on
a new medication's dosage (the prose's number said of a patient's age, 18 among the seeded dosages), in one on a
medication's new dosage (30 said of days to an expiration date) and in a new medication's expiration date (the prose
about a prescription: nearer add_prescription than add_medicine). With the real embedder (MiniLM)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import Checked, check, propose
from pipeline.stages.policy.house_rules import Words, fits, ground, said_of_other

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_orders.json"
AGE = "A prescription cannot be filled if the patient's age is less than 18."
SOON = ("If a medication's expiration date is within 30 days of the current date, the prescription must be "
        "replaced.")
PASSED = "If a patient's medication expiration date has passed, the prescription will be rejected."
WRONG = {AGE: "add_medicine_dosage_over_", SOON: "update_medication_details_new_dosage_over_",
         PASSED: "add_medicine_expiration_date_past"}


@pytest.fixture(scope="module")
def env_checked() -> tuple[ir.Environment, list[Checked]]:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        cands = propose(env, inst.conn)
    return env, check(env, cands)[0]


def test_prose_about_another_thing_grounds_in_none_of_the_candidates_it_did(
        env_checked: tuple[ir.Environment, list[Checked]]) -> None:
    env, checked = env_checked
    prose = list(WRONG)
    grounded, _ = ground(env, prose, checked, Words())
    for text, c in grounded:
        assert not c.candidate.key.startswith(WRONG[text]), (text, c.candidate.key)
    table = fits(env, prose, checked, Words())
    for i, text in enumerate(prose):
        for j, c in enumerate(checked):
            if c.candidate.key.startswith(WRONG[text].rstrip("_")):
                assert table[i][j].refused, (text, c.candidate.key)


def test_a_threshold_by_its_seeded_value_is_refused_when_the_number_is_said_of_another_column() -> None:
    def over(label: str, column: str, values: tuple[float, ...]) -> Any:
        return SimpleNamespace(candidate=SimpleNamespace(
            words={"section": "value_over", "label": label, "column": column}, values=values))

    dosage = over("dosage", "dosage", (5, 10, 20, 50, 100))
    columns = ["age", "dosage", "expiration_date", "name", "quantity"]
    assert said_of_other(AGE, dosage, columns) == "age"
    assert said_of_other(SOON, dosage, columns) == "expiration_date"
    assert said_of_other("A dosage above 50 needs a pharmacist.", dosage, columns) == ""  # its own column
    assert said_of_other("A new medicine stronger than 50 needs a pharmacist.", dosage, columns) == ""  # no other
    # the brewery's "stronger than 6.2 percent" for the abv still counts by its value: no other column near it
    abv = over("abv", "abv", (4.6, 6.2, 6.8))
    brewery = ["abv", "batch_code", "brewed_on", "keg_code", "location", "name", "size_liters", "status", "style",
               "volume_liters"]
    assert said_of_other("The head brewer must approve a new beer stronger than 6.2 percent.", abv, brewery) == ""
