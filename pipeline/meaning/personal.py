"""Columns that record a personal characteristic of someone, found by meaning (MiniLM, ``pipeline.embed``): the
backstop to the schema model's own classification (``pipeline.stages.schema.personal``).

A column is read as its name's words (``_`` and camelCase joins as spaces) and, when its ``CHECK (... IN (...))``
lists values, the same words followed by those values; each text is compared with the :data:`CONCEPTS` (short
definitions of the characteristics an environment never stores or rules on) and with the :data:`TERMS` (the same
characteristics named in one or two words). A column's score is the mean of its best similarity with a definition
and its best similarity with a term, over the two texts the higher; at :data:`THRESHOLD` or above it records a
personal characteristic. The definitions are English text, the model-side definition of a concept as a prompt is;
the match is by meaning, never by comparing strings, and code holds no list of column names. Age and date of birth
are not characteristics here: pharmacies and clinics need them.

Measured (2026-11-28, all-MiniLM-L6-v2; ``benchmarks/bench_personal_columns.py``, ``benchmarks/results/
personal_columns.md``): the characteristics among the real columns of the example's schema replies 0.832-0.939, the
other 54 real columns at most 0.402 (``status``); written English columns: the characteristics caught 0.606-0.925
(missed: ``handicap`` 0.535, ``civil_status`` 0.435, ``caste`` 0.312), the ordinary columns of people (name, email,
phone, address, date of birth 0.334, age 0.337, allergies, membership tier, status, country 0.465...) at most 0.521
(``spouse_name``), an animal's ``sex ('male', 'female')`` 0.758 (MiniLM does not tell whose sex it is: the schema
stage asks the model which tables hold people, ``pipeline.stages.schema.personal.whose``).
German, Spanish and French names are not read: MiniLM-L6 is an English model, and their characteristics score like
their ordinary columns (``geschlecht`` 0.177, ``estado_civil`` 0.30, ``grossesse`` 0.178; ordinary up to 0.402);
so this backstop catches English names (and ``religion``, spelt alike) and misses, never drops, the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Encode = Callable[[list[str]], Any]
"""Texts -> an (n, dim) array of unit vectors (``pipeline.embed.Embedder.encode``)."""

CONCEPTS: tuple[str, ...] = (
    "a person's gender or sex (male or female)",
    "a person's race or ethnicity",
    "a person's religion or faith",
    "a person's nationality or citizenship",
    "a person's marital status (single, married, divorced)",
    "a person's disability",
    "whether a person is pregnant",
    "a person's sexual orientation",
    "a person's political opinion or party",
)
"""The characteristics, defined in a few words each (the model-side definition, like a prompt's text)."""

TERMS: tuple[str, ...] = (
    "gender", "sex", "race", "ethnicity", "religion", "nationality", "citizenship", "marital status", "disability",
    "pregnancy", "sexual orientation", "political party",
)
"""The same characteristics named as a column would name them: a bare name ("sex") sits closer to a bare term
than to a definition, a name with other words ("is_disabled", "pregnancy_status") closer to a definition."""

THRESHOLD = 0.56
"""Score at or above which a column records a personal characteristic. On the benchmark's English columns: the
characteristics caught score 0.606 and up, the highest ordinary column of a person 0.52 (``spouse_name``), the next
0.49 (``country_of_residence``) and 0.46 (``country``); see ``benchmarks/results/personal_columns.md``."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def words(identifier: str) -> str:
    """A column's name as words: ``_``, ``-`` and camelCase joins as spaces, lower case."""
    return " ".join(_CAMEL.sub(" ", identifier).replace("_", " ").replace("-", " ").split()).lower()


def texts(column: str, values: Sequence[object] = ()) -> list[str]:
    """The texts a column is read as: its name's words, and with listed values the words followed by them."""
    name = words(column)
    shown = [str(v) for v in values if str(v).strip()]
    return [name, f"{name}: {', '.join(shown)}"] if shown else [name]


@dataclass(frozen=True)
class Finding:
    """A column's best match: ``score`` (see the module doc), ``concept`` the definition nearest to it,
    ``text`` the text of the column that scored."""

    table: str
    column: str
    score: float
    concept: str
    text: str

    @property
    def personal(self) -> bool:
        return self.score >= THRESHOLD


def default_encode(batch: list[str]) -> Any:
    from pipeline.embed import get_embedder

    return get_embedder().encode(batch)


def score_columns(columns: Sequence[tuple[str, str, Sequence[object]]], encode: Encode = default_encode
                  ) -> list[Finding]:
    """Each ``(table, column, listed values)`` with its score and nearest characteristic, in the given order
    (scores rounded to 4 places, so the same names give the same findings)."""
    if not columns:
        return []
    per = [texts(c, vals) for _, c, vals in columns]
    flat = [t for ts in per for t in ts]
    vecs = encode(flat)
    concepts, terms = encode(list(CONCEPTS)), encode(list(TERMS))
    by_concept, by_term = vecs @ concepts.T, vecs @ terms.T
    out: list[Finding] = []
    i = 0
    for (table, column, _), ts in zip(columns, per, strict=True):
        best: tuple[float, str, str] | None = None
        for t in ts:
            s = round((float(by_concept[i].max()) + float(by_term[i].max())) / 2, 4)
            if best is None or s > best[0]:
                best = (s, CONCEPTS[int(by_concept[i].argmax())], t)
            i += 1
        assert best is not None
        out.append(Finding(table, column, *best))
    return out


def personal_columns(columns: Sequence[tuple[str, str, Sequence[object]]], encode: Encode = default_encode
                     ) -> list[Finding]:
    """The findings of :func:`score_columns` at or above :data:`THRESHOLD`."""
    return [f for f in score_columns(columns, encode) if f.personal]
