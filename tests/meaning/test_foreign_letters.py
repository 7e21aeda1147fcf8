"""Letters of a writing system nothing else uses (issue 40): the 1.5B model slips into Chinese mid-value. An outside
support-case build of 2026-11-30 asked "... with note Customer reported that他们的" (the value cut there) and the
wording lint let it through, since the same note was stated whole in the request's first half. A continued list
value and a request are refused for such letters; read from Unicode's names of the letters, in any language."""

from __future__ import annotations

from pipeline.meaning.vocab import clean, foreign_letters, scripts
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.bank import lint_request
from pipeline.stages.tasks.planner import plan_chains
from tests.stages.test_person_words import lending_env

SUPPORT = ["Customer reported that the product stopped working after an update.",
           "Support team sent a step-by-step guide to reset the password."]


def test_scripts_are_read_from_the_letters() -> None:
    assert scripts("Customer reported that他们的 3.") == {"LATIN", "CJK"}
    assert scripts("Überweisung für Café") == {"LATIN"}  # accented letters are Latin
    assert scripts("東京で買ったカメラとひらがな") == {"CJK"}  # Japanese mixes its scripts as a matter of course
    assert scripts("Аптека 24") == {"CYRILLIC"} and scripts("2026-01-15 12:00") == frozenset()


def test_a_value_with_letters_no_example_uses_is_foreign() -> None:
    assert foreign_letters("Customer reported that他们的", SUPPORT) == "他们的"
    assert foreign_letters("Customer reported a late delivery.", SUPPORT) is None
    assert foreign_letters("Клиент сообщил", ["Клиент ждёт ответа"]) is None
    assert foreign_letters("Клиент сообщил about it", ["Клиент ждёт ответа"]) == "aboutit"
    assert foreign_letters("anything", []) is None  # nothing known: nothing to compare with


def test_a_continued_list_drops_a_value_that_slips_into_another_script() -> None:
    got = clean(["Customer asked for a refund of a duplicate charge.", "Customer reported that他们的订单",
                 "Support team escalated the case to billing."], SUPPORT)
    assert got == ["Customer asked for a refund of a duplicate charge.", "Support team escalated the case to billing."]


def test_the_wording_lint_refuses_a_request_with_letters_of_another_script() -> None:
    env = lending_env()
    with fresh(env) as run:
        chains = plan_chains(env, run, 20, {1: 0.3, 2: 0.4, 3: 0.3})
    chain = next(c for c in chains if c.must_state)
    said = "Please help with " + ", ".join(str(v) for v in chain.must_state) + "."
    assert "writing system" not in (lint_request(env, chain, said) or "")
    why = lint_request(env, chain, said[:-1] + " 他们的.")
    assert why is not None and "'他们的'" in why and "writing system" in why
