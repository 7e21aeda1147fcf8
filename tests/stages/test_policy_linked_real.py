"""A linked rule with the real embedded model (the candidate kind ``linked``, the ``linked``/``linked_when`` sections
of prompts/policy.md shown to the model in the ``word`` request): the pharmacy of the example regenerated on
2026-11-30 without its rules (``tests/fixtures/pharmacy_allergies.json``). The model writes the pharmacy's rules in
prose; its allergy rule grounds in the link (a prescription for a medication the patient's allergies list); the rule
is kept, worded in code's sentence (the model said it backwards), and holds on real calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import ir
from pipeline.settings import BuildSettings
from pipeline.stages.policy.house_rules import make_policy
from tests.stages.test_policy import assert_rules_hold

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_allergies.json"


@pytest.mark.real_llm
def test_real_model_s_allergy_rule_grounds_in_the_link_and_is_kept_in_code_s_words(real_llm) -> None:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    res = make_policy(env, real_llm, BuildSettings(policy=True, max_attempts=3))
    rules = res.value.rules
    print("\nrules:", [(r.id, r.message) for r in rules], [r.reason[:160] for r in res.rejections])
    linked = [r for r in rules if r.id.endswith("_allergies_linked")]
    assert linked, [r.reason for r in res.rejections]
    assert linked[0].message.endswith(": not allowed when the patient already has allergies for the medication.")
    assert_rules_hold(res.value)
