"""The bounded ask -> validate -> feed-back loop shared by the synthesis stages, and prompt sections.

A stage asks the LLM for a structured reply, checks it for real (SQLite, the runtime), and when the
check fails sends the exact error back in the same conversation and asks again, at most
``max_attempts`` times in all. The outcome is data: the value, or the last error (which the stage
turns into a :class:`pipeline.ir.Rejection`). Given the same replies, the loop is deterministic.

Prompt sections (``render_section``) live in :mod:`pipeline.prompts`; they are re-exported here. Also shared by the
stages: :func:`copied_words` (words an LLM text copied from its prompt), :func:`ask_min` and :func:`budget` (how many
items to ask for, and the reply budget for them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.llm.sampling import sampled
from pipeline.prompts import render_section as render_section
from pipeline.prompts import sections as sections
from pipeline.runtime import reward

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")


TEMPERATURE_STEP = 0.3
MAX_TEMPERATURE = 1.3


@dataclass(frozen=True)
class Outcome(Generic[V]):
    """What a feedback loop ended with: ``value`` (None if it gave up), the last ``error``, how many
    LLM replies it took, and the conversation as sent last (for evidence)."""

    value: V | None
    error: str | None
    attempts: int
    messages: tuple[dict[str, Any], ...]


def ask_with_feedback(
    client: LLMClientProtocol,
    model: type[M],
    messages: list[dict[str, Any]],
    check: Callable[[M], tuple[V | None, str | None]],
    *,
    stage: str,
    max_attempts: int,
    max_tokens: int,
    feedback: Callable[[str], str],
    retry_temperature: float | None = None,
) -> Outcome[V]:
    """Ask for ``model``; ``check(reply)`` returns ``(value, None)`` or ``(None, error)``. On an error the
    reply and ``feedback(error)`` are appended to the conversation and the LLM is asked again.

    An :class:`LLMError` (no schema-valid reply even after the client's own retries, or a transport
    failure) ends the loop at once: asking the same messages again at temperature 0 would repeat it.
    So does a reply identical to the previous one, which the 1.5B model tends to keep repeating.

    With ``retry_temperature`` the first request is greedy and the retries are seeded samples at that
    temperature (as :class:`pipeline.llm.sampling.Escalating` does), each with its own seed. A sampled reply
    identical to an earlier one is not a new attempt: the request is sent again hotter (``TEMPERATURE_STEP``
    up to ``MAX_TEMPERATURE``) with a note that the reply was the same (``prompts/feedback.md``), at most
    ``max_attempts - 1`` times.

    ``check`` may also return ``(value, error)`` with both set: the value is acceptable but could be better
    (the error says how). The loop asks again, and when no better reply comes (a repeated reply, an LLM
    error, attempts spent) it ends with the latest acceptable value instead of giving up.
    """
    msgs = list(messages)
    error: str | None = None
    previous: str | None = None
    acceptable: tuple[V, int, tuple[dict[str, Any], ...]] | None = None
    seen: set[str] = set()
    temperature = retry_temperature or 0.0
    repeats_left = max_attempts - 1  # sampled replies identical to an earlier one, not counted as attempts
    requests = 0
    base_seed = getattr(getattr(client, "settings", None), "seed", 0) or 0

    def give_up(err: str | None, attempt: int) -> Outcome[V]:
        if acceptable is not None:
            return Outcome(acceptable[0], None, acceptable[1], acceptable[2])
        return Outcome(None, err, attempt, tuple(msgs))

    attempt = 0
    while attempt < max_attempts:
        # the first request is greedy; retries are seeded samples (see pipeline.llm.sampling.Escalating)
        asker = client if requests == 0 or not temperature else sampled(client, temperature, base_seed + requests)
        requests += 1
        try:
            reply, raw = asker.structured_reply(model, msgs, stage=stage, max_tokens=max_tokens)
        except LLMUnavailable:
            raise  # the endpoint failed, not this item: the caller marks it failed, to be retried
        except LLMError as e:
            return give_up(f"LLM gave no usable reply: {e}", attempt + 1)
        if retry_temperature and raw.content in seen and error is not None and repeats_left > 0:
            # the same reply again is not a new attempt: ask hotter, and say that it was the same
            repeats_left -= 1
            temperature = min(MAX_TEMPERATURE, temperature + TEMPERATURE_STEP)
            msgs = msgs[:-1] + [{"role": "user", "content": feedback(error) + "\n" + render_section(
                "feedback", "repeated")}]
            continue
        attempt += 1
        value, error = check(reply)
        if error is None:
            return Outcome(value, None, attempt, tuple(msgs))
        if value is not None:
            acceptable = (value, attempt, tuple(msgs))
        if raw.content == previous and not retry_temperature:  # greedy: a repeated reply tends to repeat again
            return give_up(f"{error}\n(the model repeated its previous reply)", attempt)
        previous = raw.content
        seen.add(raw.content)
        msgs = msgs + [
            {"role": "assistant", "content": raw.content},
            {"role": "user", "content": feedback(error)},
        ]
    return give_up(error, max_attempts)


def user(content: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


# ---------------------------------------------------------------- checks of what the LLM wrote, and what to ask for


COPIED_WORDS = 8
"""Consecutive words a text written by the LLM (a rule's message, a request) may not share with a tool's
description: that many in a row were copied from the prompt, not said the way a user or a clerk would. (Six
refused plain phrasing: "a new order to the database", "set the status of a case to ..."; the copies seen on
new domains ran ten words and more.)"""
_WORD = re.compile(r"\w+")


def copied_words(text: str, source: str, n: int = COPIED_WORDS) -> str | None:
    """The longest run of ``n`` or more consecutive words ``text`` shares with ``source`` (case, punctuation and
    spacing ignored), as ``text`` writes it in normalized form; None when they share no such run."""
    a = _WORD.findall(reward.normalize_text(text))
    b = _WORD.findall(reward.normalize_text(source))
    best, end = 0, 0
    prev = [0] * (len(b) + 1)
    for i, word in enumerate(a, 1):
        row = [0] * (len(b) + 1)
        for j, other in enumerate(b, 1):
            if word == other:
                row[j] = prev[j - 1] + 1
                if row[j] > best:
                    best, end = row[j], i
        prev = row
    return " ".join(a[end - best:end]) if best >= n else None


def ask_min(minimum: int, maximum: int) -> int:
    """Ask for one more item than is needed (within the maximum), so that one may fail. The 1.5B
    model writes the fewest items the schema allows, so this minimum is what it writes."""
    return min(minimum + 1, maximum)


def budget(base: int, per_item: int, items: int) -> int:
    """An output budget that grows with the number of items asked for (never below the configured one)."""
    return max(base, per_item * items)
