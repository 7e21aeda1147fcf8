"""One-to-one assignment by MiniLM similarity (``pipeline.embed``), shared by :mod:`pipeline.meaning.goals` (a goal
per write tool, an intent per goal) and :mod:`pipeline.meaning.kinds` (a kind of record per table): the texts'
cosine similarities, rounded so that the same texts give the same pairs, then pairs taken greedily, highest first
(ties by order), each row and each column at most once, pairs below a threshold left out. No word list: only
vectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Encode = Callable[[list[str]], Any]
"""Texts -> an (n, dim) array of unit vectors (``pipeline.embed.Embedder.encode``)."""


def default_encode(texts: list[str]) -> Any:
    from pipeline.embed import get_embedder

    return get_embedder().encode(texts)


def similarities(encode: Encode, texts: Sequence[str], others: Sequence[str]) -> list[list[float]]:
    """The cosine similarity of each of ``texts`` (rows) with each of ``others`` (columns), rounded to 4 places;
    zeros when either is empty (nothing is encoded)."""
    if not texts or not others:
        return [[0.0] * len(others) for _ in texts]
    a, b = encode(list(texts)), encode(list(others))
    return [[round(float(x), 4) for x in row] for row in (a @ b.T)]


def one_to_one(scores: list[list[float]], threshold: float) -> dict[int, int]:
    """Row -> column, one row per column, greedily by score (ties by order), pairs below ``threshold`` left out."""
    pairs = sorted(((x, -i, -j) for i, row in enumerate(scores) for j, x in enumerate(row) if x >= threshold),
                   reverse=True)
    assigned: dict[int, int] = {}
    for _, mi, mj in pairs:
        i, j = -mi, -mj
        if i not in assigned and j not in assigned.values():
            assigned[i] = j
    return assigned
