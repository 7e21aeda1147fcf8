"""Which of a scenario's kinds of record (``Scenario.entities``) a schema keeps, by MiniLM similarity, in any language.

An entity ("Bikes", "time-slot reservation") is matched with the tables' names as words ("bikes", "reservations"),
one entity per table, greedily by similarity (:func:`pipeline.meaning.assign.one_to_one`, as for goals), pairs below
:data:`COVER` left out; a table named exactly as the entity (its words joined by ``_``, any case) covers it whatever the score. The
table's columns are not part of its text: they blur it (see below).

Measured (2026-11-30, all-MiniLM-L6-v2, the outside builds of sessions 14-17 and the example r17b; entity with its
table's name / with its name and columns):

- right pairs by name: bikes 1.0, tutors 1.0, memberships 1.0, renewal 0.954, medications 0.934, garage 0.921,
  reservation 0.903, loan 0.898, member 0.884, customer 0.884, order 0.881, book 0.861, patient 0.850, overdue fine
  0.837, game 0.827, session bookings/bookings 0.808, instructor rosters/instructors 0.758, garment orders/orders
  0.701, class schedule/classes 0.645, time-slot reservation/reservations 0.635, hospital request/blood_request 0.603;
- entities no table keeps, best table by name: Docks 0.229, permit 0.277, space 0.370, Chair 0.376, Treatment Plan
  0.470, Cleaning 0.317, Allergy 0.326, pickup slots 0.492, Size 0.380, Payment 0.429, hold 0.346; Rides 0.633 with
  bikes and 0.404 with visits, 0.239 with orders: bikes is the Bikes' own table (1.0), so one entity per table leaves
  Rides uncovered, as it must be (a bike is not a ride; orders and visits mean nothing in bike sharing);
- other wrong pairs by name that one entity per table settles: Medication/prescriptions 0.663 (medications 0.934),
  memberships/members 0.735 (memberships 1.0); left: blood unit/blood_bank 0.634 and donor/blood_donation 0.754
  (which then leaves donation, 0.695, uncovered: one more table is asked for);
- with the columns the texts blur: right pairs from 0.408 (Order/orders), wrong ones up to 0.598 (donor/blood_bank),
  0.539 (Cleaning/patients) and 0.510 (Allergy/patients, which has an allergies column): no threshold separates them.

:data:`COVER` 0.6 keeps every right pair (0.603 and up) and leaves out every entity no table keeps once each table
serves one entity; "pricing per item and delivery" with deliveries (0.589) counts as not kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.meaning.assign import Encode, default_encode, one_to_one, similarities
from pipeline.meaning.goals import words

COVER = 0.6
"""Similarity an entity needs with a table's name (as words) to be kept by it; see the module's measurements."""


@dataclass(frozen=True)
class KindMatch:
    entity: str
    table: str | None
    """The table that keeps the entity (one entity per table), or None."""
    nearest: str | None
    """The table whose name is nearest to the entity, None without tables."""
    score: float


def identifier(text: str) -> str:
    """A text as an identifier: its words lower case, joined by ``_`` (any script; runs of other characters split)."""
    return "_".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def match_kinds(entities: Sequence[str], tables: Sequence[str], encode: Encode = default_encode,
                cover: float = COVER) -> list[KindMatch]:
    """Each entity with the table that keeps it (exact name first, then by similarity, one entity per table)."""
    entities = list(dict.fromkeys(e for e in entities if e.strip()))
    tables = list(tables)
    scores = similarities(encode, entities, [words(t) for t in tables])
    exact: dict[int, int] = {}
    for i, e in enumerate(entities):
        j = next((j for j, t in enumerate(tables) if t.lower() == identifier(e) and j not in exact.values()), None)
        if j is not None:
            exact[i] = j
    rest = [[-1.0 if (i in exact or j in exact.values()) else x for j, x in enumerate(row)]
            for i, row in enumerate(scores)]
    assigned = {**one_to_one(rest, cover), **exact}
    out = []
    for i, e in enumerate(entities):
        near = max(range(len(tables)), key=lambda j: (scores[i][j], -j)) if tables else None
        out.append(KindMatch(entity=e, table=tables[assigned[i]] if i in assigned else None,
                             nearest=tables[near] if near is not None else None,
                             score=scores[i][near] if near is not None else 0.0))
    return out


def missing_kinds(entities: Sequence[str], tables: Sequence[str], encode: Encode = default_encode,
                  cover: float = COVER) -> list[str]:
    """The entities no table keeps (:func:`match_kinds`), in the given order."""
    return [m.entity for m in match_kinds(entities, tables, encode, cover) if m.table is None]
