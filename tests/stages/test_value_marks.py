"""A value that closes with its own mark ends code's sentence without a second one: an outside support-case build
of 2026-11-30 asked "... with note Customer reported ... in troubleshooting it.. Please add ..." (a note ending in
a full stop, then the sentence's). Punctuation only; any language."""

from __future__ import annotations

from pipeline.stages.tasks.code_wording import request_from_plan
from pipeline.stages.tasks.planner.chains import Chain, Goal


def _request(values: tuple[tuple[str, str], ...]) -> str | None:
    goal = Goal(kind="create", table="notes", values=values)
    return request_from_plan(Chain("create", [], [], must_state=[v for _, v in values], goals=[goal]))


def test_a_value_closing_with_its_own_mark_takes_no_second_one() -> None:
    text = _request((("note", "The part broke."), ("kind", "repair")))
    assert text is not None and ".." not in text and "The part broke." in text
    text = _request((("kind", "repair"), ("note", "Is it fixed?")))
    assert text is not None and text.endswith("Is it fixed?") and "?." not in text


def test_an_ellipsis_and_a_plain_value_keep_their_marks() -> None:
    text = _request((("kind", "repair"), ("note", "Waiting for parts...")))
    assert text is not None and "Waiting for parts..." in text
    text = _request((("kind", "repair"),))
    assert text is not None and text.endswith("repair.")
