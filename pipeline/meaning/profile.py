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

from pipeline.meaning.relations import as_date

SLACK = 0.3
"""How far a value's share of digits may stray from the examples' range."""
MARGIN = 0.12
"""How much closer to another column's examples than to its own a sample must be (mean cosine) to be that
column's kind of value."""
ITEM_MARGIN, ITEM_SIM = 0.20, 0.50
"""How much closer one continued value must sit (MiniLM cosine to the examples' centroids) to another column's
examples than to its own column's, and how close to that column's at least, to be that column's kind of value and
refused (:func:`closer_elsewhere`). Measured 2026-11-28 (benchmarks/results/seed_pairs.md; margin / similarity to
the other column): values of another column continued into a list "fiction" among book titles +0.47 / 0.91,
"1925" +0.31 / 0.74, "F. Scott Fitzgerald" +0.29 / 0.71, "non-fiction" +0.31 / 0.69, "1953" +0.27 / 0.63, "Jane
Austen" +0.23 / 0.74; German titles: "Hermann Hesse" +0.37 / 0.78, "Roman" +0.55 / 0.84, "1901" +0.52 / 0.68;
German authors: "Erzählung" +0.21 / 0.53; Spanish medicines: "Ana Torres" +0.35 / 0.63. Real values stay under
one of the two: "Siddhartha" among German titles +0.26 / 0.46 (near the authors), "Corolla" among car models
+0.17 / 0.60 (near its make), "Losartán" +0.16 / 0.43, "Faust" +0.14 / 0.51. Missed: "J.D. Salinger" among titles
+0.14 / 0.46, "Novelle" among German titles +0.15 / 0.53, "Der Prozess" among authors +0.22 / 0.44; "timeless"
(+0.02) is refused by its small first letter among capitalised titles (:func:`misfit`). A column whose examples
are mostly digits (a year, a count) is compared only with values that are mostly digits ("3 Series" sat +0.22 /
0.51 nearer a count of seats than to car models)."""


@dataclass(frozen=True)
class Profile:
    """The shape of a text column's example values."""

    texts: tuple[str, ...]
    digits: tuple[float, float]
    words: tuple[int, int]
    length: tuple[int, int]
    marks: frozenset[str]
    """Characters that are neither letters, digits nor spaces and that every example holds."""
    capital: bool = False
    """Every example that starts with a letter starts with a capital one (two such examples at least): "The
    Hobbit", "Fiction". Scripts without case never set it."""
    dates: bool = False
    """Every example (two at least) is a calendar date ("2026-01-01"): a value must be one too, a real day of a real
    month ("2025-12-32" and "2025-09-31" are not)."""


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
    firsts = [t[0] for t in texts if t[0].isalpha()]
    capital = len(firsts) >= 2 and all(c.isupper() for c in firsts)
    dates = len(texts) >= 2 and all(as_date(t) is not None for t in texts)
    return Profile(tuple(texts), (min(shares), max(shares)), (min(words), max(words)), (min(lengths), max(lengths)),
                   frozenset(marks), capital, dates)


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
    if p.dates and as_date(text) is None:
        return "is no calendar date where every example is one"
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
    if p.capital and text[0].islower():
        return "starts with a small letter where every example starts with a capital"
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


def closer_elsewhere(vectors: Vectors, own: Sequence[str], others: Mapping[str, Sequence[str]],
                     items: Sequence[str]) -> dict[str, tuple[str, float, float]]:
    """The ``items`` that sit close to another column's examples (:data:`ITEM_SIM`) and closer than to their own
    column's (``own``) by more than :data:`ITEM_MARGIN`, each with (that column, its similarity to ``own``'s centroid, to that column's): a
    continued value of another column's kind ("J.D. Salinger" or "fiction" among book titles). Item by item,
    by meaning alone: no word of any language is read."""
    own = [t for t in own if t]
    items = [i for i in dict.fromkeys(items) if i]
    groups = {name: [t for t in texts if t] for name, texts in others.items()}
    groups = {name: texts for name, texts in groups.items() if texts and set(texts) != set(own)}
    if not own or not items or not groups:
        return {}
    numeric = {name for name, texts in groups.items() if 2 * sum(_digit_share(t) >= 0.5 for t in texts) > len(texts)}
    vs = vectors(items)
    own_sims = vs @ vectors.centroid(own)
    other = {name: vs @ vectors.centroid(texts) for name, texts in groups.items()}
    out: dict[str, tuple[str, float, float]] = {}
    for k, item in enumerate(items):
        near = [n for n in other if n not in numeric or _digit_share(item) >= 0.5]
        if not near:
            continue
        name = max(near, key=lambda n: float(other[n][k]))
        best, mine = float(other[name][k]), float(own_sims[k])
        if best >= ITEM_SIM and best > mine + ITEM_MARGIN:
            out[item] = (name, round(mine, 3), round(best, 3))
    return out


STRAY = 0.2
"""How far below its examples' own mutual similarity a continued value may sit before it is no value of their
kind (:func:`strays`): its MiniLM cosine to the examples' centroid under ``STRAY`` times their mean leave-one-out
cosine (each example to the centroid of the others). Measured 2026-11-30 with real MiniLM (tests/stages/test_rowgen_wander.py; value's
cosine / examples' mean, as a ratio): the pharmacy's medications (Aspirin, Ibuprofen, Paracetamol, Lisinopril;
mean 0.53): "John Smith" 0.12, "daily" 0.33, "Allergies to nuts" 0.36, the invented "Celebix" 0.43, "Sleep aids"
0.55, real drugs 0.59 (Zinc) to 1.30; the library's titles (mean 0.48): real titles 0.64 (Siddhartha) to 1.23,
films 0.95-1.07, "J.D. Salinger" 0.67; the record shop's albums (mean 0.31): real albums 0.75-1.84, films
("The Matrix", "Titanic", "The Godfather") 1.09-1.46, the Lord of the Rings 0.94-1.04; its artists (mean 0.55):
"AC/DC" 0.34, "Leo Tolstoy" 0.44, "The Matrix" 0.52, "J.R.R. Tolkien" 0.69, real bands 0.73-1.20; German titles
(mean 0.44): "Buddenbrooks" 0.25, "1901" 0.36; Spanish medicines (mean 0.50): "Losartán" 0.53, "Ana Torres" 0.57.
MiniLM places a film among albums as near as an album, so only a value far from every example is refused here;
a value of another column's kind is :func:`closer_elsewhere`'s, a value of another shape :func:`misfit`'s."""


def strays(vectors: Vectors, own: Sequence[str], items: Sequence[str], ratio: float = STRAY
           ) -> dict[str, tuple[float, float]]:
    """The ``items`` whose MiniLM cosine to the centroid of ``own`` (the column's examples, two or more
    different) is under ``ratio`` times the examples' mean leave-one-out cosine (:data:`STRAY`), each with (its
    cosine, that mean): a value far from every example ("John Smith" among medicines). By meaning alone: no word
    of any language is read."""
    import numpy as np

    own = list(dict.fromkeys(t for t in own if t))
    items = [i for i in dict.fromkeys(items) if i and i not in own]
    if len(own) < 2 or not items:
        return {}
    vs = vectors(own)
    total = vs.sum(axis=0)
    mutual = []
    for v in vs:
        rest = total - v
        mutual.append(float(v @ rest) / (float(np.linalg.norm(rest)) or 1.0))
    mean = sum(mutual) / len(mutual)
    if mean <= 0:
        return {}
    sims = vectors(items) @ vectors.centroid(own)
    return {item: (round(float(s), 3), round(mean, 3)) for item, s in zip(items, sims, strict=True)
            if float(s) < ratio * mean}


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
