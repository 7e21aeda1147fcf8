"""A column's example values as its specification: a shape profile, and a MiniLM comparison.

:func:`profile` reads the examples' character classes (Unicode letters, digits, other), their lengths and word
counts (whitespace-separated tokens) and the punctuation every example holds ('@' in every e-mail address, '-' in
every phone number written "123-456-7890"). :func:`misfit` says why one value does not look like them;
:func:`contradiction` when most sample values (two thirds) do not. :func:`semantic_misfit` compares sample values with the
column's own examples and with other columns' examples by MiniLM vectors: values closer to another column's
examples than to their own ("Bryan Robbins" beside a medication's "Aspirin" and a patient's "John Doe") are
another column's kind of value. No word list and no column name is read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SLACK = 0.3
"""How far a value's share of digits may stray from the examples' range."""
MARGIN = 0.12
"""How much closer to another column's examples than to its own a sample must be (mean cosine) to be that
column's kind of value."""


@dataclass(frozen=True)
class Profile:
    """The shape of a text column's example values."""

    texts: tuple[str, ...]
    digits: tuple[float, float]
    words: tuple[int, int]
    length: tuple[int, int]
    marks: frozenset[str]
    """Characters that are neither letters, digits nor spaces and that every example holds."""


def _digit_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isdigit() for c in chars) / len(chars) if chars else 0.0


def _marks(text: str) -> set[str]:
    return {c for c in text if not (c.isalnum() or c.isspace())}


def texts_of(values: Sequence[Any]) -> list[str]:
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


def profile(values: Sequence[Any]) -> Profile | None:
    """The profile of the text values among ``values`` (None when there are none)."""
    texts = texts_of(values)
    if not texts:
        return None
    shares = [_digit_share(t) for t in texts]
    words = [len(t.split()) for t in texts]
    lengths = [len(t) for t in texts]
    marks = set.intersection(*(_marks(t) for t in texts)) if len(texts) >= 2 else set()
    return Profile(tuple(texts), (min(shares), max(shares)), (min(words), max(words)), (min(lengths), max(lengths)),
                   frozenset(marks))


def word_range(p: Profile) -> tuple[int, int]:
    """The word counts a value may have: the examples' range, widened by half its width and by one word when the
    examples have two or more (one-word examples take one-word values)."""
    lo, hi = p.words
    slack = (hi - lo) // 2 + (1 if hi >= 2 else 0)
    return max(1, lo - slack), hi + slack


def misfit(p: Profile, value: Any) -> str | None:
    """Why ``value`` does not look like the examples of ``p`` (or None)."""
    text = str(value).strip()
    if not text:
        return "is empty"
    d = _digit_share(text)
    if d > p.digits[1] + SLACK:
        return "is mostly digits where the examples are not"
    if d < p.digits[0] - SLACK:
        return "has few digits where the examples are mostly digits"
    lo, hi = word_range(p)
    n = len(text.split())
    if p.digits[0] < 0.5 and not lo <= n <= hi:  # words count where the examples are words, not digit groups
        return f"has {n} words where the examples have {p.words[0]}-{p.words[1]}"
    if len(text) > 3 * p.length[1] + 8 or 3 * len(text) + 2 < p.length[0]:
        return f"is {len(text)} characters long where the examples are {p.length[0]}-{p.length[1]}"
    missing = sorted(p.marks - _marks(text))
    if missing:
        return f"lacks {' '.join(repr(m) for m in missing)}, which every example holds"
    return None


def contradiction(p: Profile, samples: Sequence[Any]) -> str | None:
    """A sentence when more than two thirds of ``samples`` do not look like the examples, else None (a generator
    whose values vary in shape, as a locale's city names of one or two words, is not refused for some of them)."""
    texts = [s for s in samples if s is not None]
    if not texts:
        return None
    bad = [(s, why) for s in texts for why in [misfit(p, s)] if why]
    if 3 * len(bad) <= 2 * len(texts):
        return None
    value, why = bad[0]
    shown = ", ".join(repr(t) for t in p.texts[:3])
    return f"{len(bad)} of {len(texts)} sample values do not look like the examples ({shown}): {value!r} {why}"


Encode = Callable[[list[str]], Any]
"""Texts -> an (n, dim) array of unit vectors (``pipeline.embed.Embedder.encode``)."""


class Vectors:
    """Unit vectors of texts, each text encoded once per process."""

    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self.cache: dict[str, Any] = {}

    def __call__(self, texts: Sequence[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            for t, v in zip(todo, self.encode(todo), strict=True):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def centroid(self, texts: Sequence[str]) -> Any:
        import numpy as np

        c = self(list(texts)).mean(axis=0)
        return c / (np.linalg.norm(c) or 1.0)


def semantic_misfit(vectors: Vectors, own: Sequence[str], others: Mapping[str, Sequence[str]],
                    samples: Sequence[str]) -> tuple[str, float, float] | None:
    """(other column, mean similarity to the column's own examples, to that column's) when ``samples`` sit closer
    to another column's examples than to their own by more than ``MARGIN``; None otherwise."""
    samples = [s for s in samples if s]
    own = [t for t in own if t]
    if not samples or not own:
        return None
    vs = vectors(samples)
    own_sim = float((vs @ vectors.centroid(own)).mean())
    best: tuple[str, float] | None = None
    for name, texts in others.items():
        texts = [t for t in texts if t]
        if not texts or set(texts) == set(own):
            continue
        sim = float((vs @ vectors.centroid(texts)).mean())
        if best is None or sim > best[1]:
            best = (name, sim)
    if best is not None and best[1] > own_sim + MARGIN:
        return best[0], round(own_sim, 3), round(best[1], 3)
    return None
