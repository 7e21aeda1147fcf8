"""Deciding whether a final state (and answer) satisfies a task's verifier: a pure function.

A verifier holds when

1. every assertion's query returns its ``expect`` value (single cell for 1x1 results, else the list
   of row lists; a query error is a failure);
2. every table outside ``mutable_tables`` equals the initial state (when the initial snapshot is
   given: the full-state constraint that makes collateral writes fail);
3. the agent's answer matches ``answer`` (questions only; see :func:`answer_matches`).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from pipeline.ir import Verifier
from verify.state import Snapshot, TableInfo, diff, query_value, snapshot, summarize, table_infos

ANSWER_SEP = "; "
YES = {"yes", "true", "y"}
NO = {"no", "false", "n"}
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Evaluation:
    passed: bool
    failures: tuple[str, ...]
    assertions: tuple[bool, ...]
    """Per assertion: did it hold (the external checkers' view: assertions only)."""

    def summary(self) -> str:
        return "passed" if self.passed else "; ".join(self.failures)


def evaluate(
    verifier: Verifier,
    conn: sqlite3.Connection,
    *,
    initial: Snapshot | None = None,
    answer: str | None = None,
    infos: dict[str, TableInfo] | None = None,
) -> Evaluation:
    failures: list[str] = []
    held: list[bool] = []
    for i, a in enumerate(verifier.assertions, 1):
        try:
            got = query_value(conn, a.sql)
        except sqlite3.Error as e:
            held.append(False)
            failures.append(f"assertion {i} ({a.description or a.sql}) errored: {e}")
            continue
        ok = got == a.expect
        held.append(ok)
        if not ok:
            failures.append(f"assertion {i} ({a.description or a.sql}): expected {a.expect!r}, got {_short(got)}")
    if initial is not None:
        infos = infos or table_infos(conn)
        now = snapshot(conn, infos)
        frozen = sorted(set(initial) - set(verifier.mutable_tables))
        changes = diff({t: initial[t] for t in frozen}, {t: now.get(t, {}) for t in frozen})
        if changes:
            tables = sorted({c.table for c in changes})
            failures.append(f"tables outside mutable_tables changed ({', '.join(tables)}): {summarize(changes, 4)}")
    if verifier.answer is not None and not answer_matches(verifier.answer, answer):
        failures.append(f"answer {answer!r} does not match the expected answer {verifier.answer!r}")
    return Evaluation(not failures, tuple(failures), tuple(held))


def _short(value: object, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _norm(text: str) -> str:
    text = text.casefold().replace("\u2019", "'")
    text = re.sub(r"[\"'`\u201c\u201d]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def answer_items(expected: str) -> list[str]:
    return [x for x in (s.strip() for s in expected.split(ANSWER_SEP)) if x]


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def answer_matches(expected: str, given: str | None) -> bool:
    """Whether ``given`` states every item of ``expected`` (items separated by ``"; "``).

    Numbers match numerically anywhere in the text (``12.5`` = ``12.50``); yes/no items match their
    synonyms as words; other items match as case-insensitive substrings (quotes ignored).
    """
    if given is None:
        return False
    g = _norm(given)
    if not g:
        return False
    numbers = [float(n) for n in _NUM.findall(g.replace(",", ""))]
    words = set(_WORD.findall(g))
    for item in answer_items(expected):
        e = _norm(item)
        num = _number(e)
        if num is not None and _NUM.fullmatch(e.replace(",", "")):
            if not any(abs(n - num) < 1e-6 for n in numbers):
                return False
        elif e in YES or e in NO:
            want, other = (YES, NO) if e in YES else (NO, YES)
            if not (words & want) or (words & other):
                return False
        elif e not in g:
            return False
    return True
