"""Sibling tables: two tables holding references to the same parents (orders and prescriptions, each naming a
patient and a medication), whose example rows share parent tuples beyond chance. The rows code makes for the one
that follows take their parent tuple from the other's rows (every order for a pair that has a prescription). Where
the examples share none beyond habit and chance, the later table's rows name no tuple the earlier one's rows hold
(``pipeline.stages.rows.maker.sibling_apart``: no prescription for a pair an allergy names); drawn independently,
they share some by chance, which no example showed.

Read from values only, never from names. The test (:func:`shared`), on the distinct parent tuples of each table's
example rows:

- evidence: the tuples both tables' examples name, less those the model's habit explains. The embedded model
  writes parent keys along a diagonal of the listings it is shown (patient 1 with medication 2, patient 2 with
  medication 3, ...): a shared tuple whose rank offsets in the listings (:func:`offsets`) both tables use in two
  or more of their examples is that habit, not a relation (:func:`habits`). A later table's prompt shows, beside
  its parents, some tuples of an earlier sibling's rows (:func:`shown`: none on the sibling's examples' diagonal,
  so that copying them is not taken for the habit); the sibling's tuples tested are its examples and those shown.
- chance: each table's tuples drawn uniformly from the tuples its prompt could name (the product of the listed
  parent keys, :data:`pipeline.dbmodel.examples.MAX_REF_VALUES` at most each); the count of shared tuples is then
  about Poisson with mean ``|A| * |B| / space``. A relation needs at least :data:`MIN_SHARED` shared tuples and a
  Poisson tail at most :data:`ALPHA`.
- direction: the table whose distinct tuples are more wholly among the other's follows it (its share of shared
  tuples, at least one half); on a tie, the table made later follows the one made before (its rows exist).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

MIN_SHARED = 2
"""Shared tuples needed: one can always be the first parents both prompts list."""
ALPHA = 0.01
"""The largest chance of as many shared tuples that still counts as a relation."""
MOST = 0.5
"""The share of the following table's distinct example tuples that must be among the other's."""
SHOWN = 8
"""Tuples of an earlier sibling's rows a later table's prompt shows at most (tokens: issue 42)."""

Tuple = tuple[Any, ...]


@dataclass(frozen=True)
class Sharing:
    """What two tables' example tuples over the same parents show: ``shared`` tuples (of ``mine`` and ``theirs``
    distinct ones) not explained by habit, the Poisson mean ``expected`` by chance, and ``follows``: whether the
    first table's rows follow the second's (else the second follows the first)."""

    shared: int
    mine: int
    theirs: int
    expected: float
    follows: bool

    @property
    def chance(self) -> float:
        """P(X >= shared) for X ~ Poisson(expected)."""
        lam = self.expected
        return max(0.0, 1.0 - sum(math.exp(-lam) * lam ** i / math.factorial(i) for i in range(self.shared)))


def offsets(t: Tuple, listings: Sequence[Sequence[Any]]) -> tuple[int, ...] | None:
    """The rank of each key of ``t`` in its parent's listing, less the first key's rank (None when a key is not
    listed): (patient 3, medication 4) in listings 1.. and 1.. is (1,)."""
    ranks = []
    for key, listed in zip(t, listings, strict=True):
        if key not in listed:
            return None
        ranks.append(list(listed).index(key))
    return tuple(r - ranks[0] for r in ranks[1:])


def habits(tuples: Sequence[Tuple], listings: Sequence[Sequence[Any]]) -> set[tuple[int, ...]]:
    """The rank offsets that two or more of ``tuples`` share (a table written along a diagonal of its listings)."""
    seen = Counter(o for t in tuples for o in [offsets(t, listings)] if o is not None)
    return {o for o, n in seen.items() if n >= 2}


def shown(rows: Sequence[Tuple], examples: Sequence[Tuple], listings: Sequence[Sequence[Any]],
          most: int = SHOWN) -> list[Tuple]:
    """The tuples of a sibling's ``rows`` (in row order; its ``examples`` first) that a later table's prompt shows:
    distinct, every key listed (the model can write it), none on a diagonal the sibling's examples are written
    along (:func:`habits`: a later table copying those could not be told from one written along the same
    diagonal), at most ``most``."""
    habit = habits([t for t in dict.fromkeys(examples) if None not in t], listings)
    out: list[Tuple] = []
    for t in dict.fromkeys(rows):
        if len(out) >= most:
            break
        o = None if None in t else offsets(t, listings)
        if o is not None and o not in habit:
            out.append(t)
    return out


def shared(mine: Sequence[Tuple], theirs: Sequence[Tuple], listings: Sequence[Sequence[Any]]) -> Sharing | None:
    """The sharing of two tables' example tuples over the same parents (``listings``: each parent's keys in the
    order the prompts listed them), or None when it is no more than habit or chance (see the module's test).
    ``mine`` is the table made later: it follows ``theirs`` on a tie."""
    a = [t for t in dict.fromkeys(mine) if None not in t]
    b = [t for t in dict.fromkeys(theirs) if None not in t]
    if not a or not b:
        return None
    common = habits(a, listings) & habits(b, listings)
    both = [t for t in a if t in set(b) and offsets(t, listings) not in common]
    space = math.prod(max(1, len(x)) for x in listings)
    out = Sharing(shared=len(both), mine=len(a), theirs=len(b), expected=len(a) * len(b) / space,
                  follows=len(a) <= len(b))
    if out.shared < MIN_SHARED or out.chance > ALPHA:
        return None
    if out.shared / min(len(a), len(b)) < MOST:
        return None
    return out


def common_parents(mine: Sequence[tuple[str, tuple[str, str]]], theirs: Sequence[tuple[str, tuple[str, str]]]
                   ) -> list[tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]]:
    """The column tuples of two tables (reference column, (parent, key)) that name the same parents, each parent
    named once in each table: every subset of two or more, largest first, as (my columns, their columns,
    parents)."""
    once_a = Counter(ref for _, ref in mine)
    once_b = Counter(ref for _, ref in theirs)
    a = {ref: c for c, ref in mine if once_a[ref] == 1}
    b = {ref: c for c, ref in theirs if once_b[ref] == 1}
    both = [ref for ref in a if ref in b]
    out = []
    for k in range(len(both), 1, -1):
        for refs in combinations(both, k):
            out.append((tuple(a[r] for r in refs), tuple(b[r] for r in refs), tuple(refs)))
    return out
