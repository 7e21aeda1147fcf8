"""The policy stage with the real embedded model on two domains far from the example (a craft brewery, a city permit
office): the model writes the domain's rules in prose, code grounds them in candidates checked on real calls
(MiniLM), and the model words the grounded rules in one small structured request.

What must hold on each domain asked: the model's prose is used (no ``prose`` rejection saying code picked), every
rule kept is grounded (the ``word`` request, never code's pick); each message is one whole plain sentence (no tool
name, no braces) that says what its condition checks, or code's words when it did not; every rule still has real
calls it allows and forbids; a domain whose prose grounds in nothing says why for each prose rule.

The domains in turn until one keeps a rule (the capability under test: prose that grounds and is worded; CI's
real-model time, issue 42): the brewery, then the permit office only when the brewery keeps none. Until 2026-11-29
both ran, the permit office first: in the real-model session of that day (16:06-16:08 UTC) its prose grounded in
nothing (one call, 34 s; as on 2026-11-28 21:00) and the brewery's grounded and was worded (two calls, 62 s). Prose
that grounds in nothing is checked on the real model's own permit prose in tests/stages/test_policy_museum.py, the
note that says why in tests/stages/test_policy_grounding.py and test_policy_numbers.py, and both with the real model
on the museum (tests/stages/test_meaning_calls_real.py, a note for prose about another thing every run)."""

from __future__ import annotations

import pytest

from pipeline.settings import BuildSettings
from pipeline.stages.policy.house_rules import make_policy, whole
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from tests.stages.test_policy import assert_rules_hold


@pytest.mark.real_llm
def test_real_model_writes_rules_in_prose_that_ground_in_checked_candidates(real_llm) -> None:
    settings = BuildSettings(policy=True, max_attempts=3)
    kept: dict[str, int] = {}
    for make in (brewery_env, permit_env):
        env = make()
        res = make_policy(env, real_llm, settings)
        prose = [r for r in res.rejections if r.item == "prose"]
        print(f"\n{env.scenario.name}:", [r.message for r in res.value.rules], [r.evidence for r in prose])
        assert not any("code picked" in r.reason for r in prose), prose
        rules = res.value.rules
        kept[env.scenario.name] = len(rules)
        if not rules:
            # every prose rule grounds in nothing, and each says so with its nearest candidate and why (measured
            # 2026-11-28 21:00, the permit office: "The maximum length of an event permit is 3 days." nearest "at
            # most 3 inspections per permit", "... must not exceed 100" nearest "fee over 1200": a prose number
            # grounds only where the check compares with it); the brewery's prose grounds in the same run
            assert prose and all(r.evidence.get("nearest") and r.evidence.get("why") for r in prose), prose
            continue
        assert 1 <= len(rules) <= settings.policy_rules
        tools = {t.name for t in env.tools}
        for r in rules:
            assert "{" not in r.message and not any(t in r.message for t in tools), r.message
            assert len(r.message.split()) >= 3 and whole(r.message), r.message
        assert_rules_hold(res.value)
        break
    print("rules kept:", kept)
