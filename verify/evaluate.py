"""Deciding whether a final state (and answer) satisfies a task's verifier: the pydantic-side adapter of
:mod:`pipeline.runtime.reward`, the one implementation (exports vendor that module; nothing here re-implements it).

A verifier holds when every gate holds (gate assertions, and no table outside ``mutable_tables`` changed
when the initial snapshot is given) and every goal holds (goal assertions, and the typed answer for
questions). See :mod:`pipeline.runtime.reward` for the rules and the answer check.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from pipeline.ir import Verifier
from pipeline.runtime import reward
from pipeline.runtime.state import Snapshot, TableInfo

ANSWER_SEP = "; "
"""Items of an older plain-text expected answer (one per returned row)."""


@dataclass(frozen=True)
class Evaluation:
    passed: bool
    failures: tuple[str, ...]
    reward: float
    """The reward a trainer gives (binary: 1.0 when passed)."""
    partial: float
    """The share of goals met when every gate holds (optional partial credit), else 0."""

    def summary(self) -> str:
        return "passed" if self.passed else "; ".join(self.failures)


def verifier_dict(verifier: Verifier | dict[str, Any]) -> dict[str, Any]:
    return verifier if isinstance(verifier, dict) else verifier.model_dump(mode="json")


def evaluate(
    verifier: Verifier | dict[str, Any],
    conn: sqlite3.Connection,
    *,
    initial: Snapshot | None = None,
    answer: str | None = None,
    infos: dict[str, TableInfo] | None = None,
    written: set[str] | None = None,
) -> Evaluation:
    """``written``: the tables a statement on ``conn`` may have written (a :class:`pipeline.runtime.reward.WriteLog`'s, e.g.
    :attr:`pipeline.runtime.replay.Run.written`); only those of the frozen tables are read. The result is the same."""
    v = verifier_dict(verifier)
    s = reward.score(v, conn, initial=initial, answer=answer, partial=True, written=written)
    return Evaluation(s.passed, s.failures, 1.0 if s.passed else 0.0, s.reward)


def answer_matches(expected: Any, given: str | None) -> bool:
    """Whether ``given`` gives exactly the expected typed answer (:func:`pipeline.runtime.reward.check_answer`)."""
    if isinstance(expected, str) and ANSWER_SEP in expected:
        expected = {"type": "list", "value": answer_items(expected)}
    return reward.check_answer(expected, given)[0]


def answer_items(expected: str) -> list[str]:
    return [x for x in (s.strip() for s in expected.split(ANSWER_SEP)) if x]


def render_answer(expected: Any) -> str:
    """The reply a correct agent gives (the reference's answer in the proofs and exports)."""
    spec = reward.expected_answer(expected)
    value = spec.get("value")
    if spec["type"] == "list":
        return ", ".join(str(x) for x in value or [])
    if spec["type"] == "boolean":
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
