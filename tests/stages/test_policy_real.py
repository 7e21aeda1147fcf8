"""The policy stage's pick with the real embedded model, on the permit office: one small structured request (an
enum of candidate ids and a short message each) that the 1.5B model must manage without code's fallback.

What must hold: the model's own reply is used (``worded_by == "llm"`` for every rule, no ``pick`` rejection), it
keeps 3 to ``policy_rules`` rules, each message is a plain sentence (no tool name, no braces), and every rule still
has real calls it allows and forbids (the candidates were checked by code before the model saw them)."""

from __future__ import annotations

import pytest

from pipeline.settings import BuildSettings
from pipeline.stages.policy.house_rules import make_policy
from tests.fixtures.permits import permit_env
from tests.stages.test_policy import assert_rules_hold


@pytest.mark.real_llm
def test_real_model_picks_and_words_the_rules(real_llm) -> None:
    settings = BuildSettings(policy=True, max_attempts=3)
    env = permit_env()
    res = make_policy(env, real_llm, settings)
    assert [r for r in res.rejections if r.item == "pick"] == []
    rules = res.value.rules
    assert 3 <= len(rules) <= settings.policy_rules
    assert {r.worded_by for r in rules} == {"llm"}
    tools = {t.name for t in env.tools}
    for r in rules:
        assert "{" not in r.message and not any(t in r.message for t in tools), r.message
        assert len(r.message.split()) >= 3, r.message
    assert_rules_hold(res.value)
