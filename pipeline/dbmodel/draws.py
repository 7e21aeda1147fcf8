"""Values of a column's generator drawn outside the rows stage: the Faker calls of the row maker
(``pipeline.stages.rows.maker``, which draws its people, companies, places and phones here) and code patterns, so
a later stage (the task planner's new values for a create or an update) draws a column's new value the way its rows
were drawn, deterministically in a seed."""

from __future__ import annotations

import random
from typing import Any

from pipeline import ir

FAKER_KINDS = ("person_name", "first_name", "last_name", "company", "street_address", "city", "postcode", "country",
               "phone")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def one_line(text: Any) -> str:
    """Faker's text on one line (a British address has a line break) with single spaces."""
    return " ".join(str(text).replace("\n", ", ").split())


def faker_value(fake: Any, kind: str, pattern: str | None = None) -> str:
    """One value of a Faker generator ``kind`` (:data:`FAKER_KINDS`); a street address with ``pattern`` is the
    whole address, its lines joined by it (as the examples write it: "123 Main St, Anytown, USA")."""
    if kind == "person_name":
        return f"{fake.first_name()} {fake.last_name()}"
    if kind == "street_address" and pattern:
        return pattern.join(" ".join(line.split()) for line in fake.address().splitlines() if line.strip())
    if kind == "phone":
        return one_line(fake.phone_number())
    return one_line(getattr(fake, kind)())


def code_value(rng: random.Random, pattern: str) -> str:
    """A code in ``pattern``: each '#' a digit, each '?' a capital letter."""
    return "".join(str(rng.randrange(10)) if ch == "#" else rng.choice(_LETTERS) if ch == "?" else ch
                   for ch in pattern)


def drawn(g: ir.ColumnGenerator, locale: str, seed: int, n: int) -> list[str]:
    """``n`` values of ``g`` (a Faker kind, an e-mail address, a code pattern or a value made of a person's name) in
    ``locale``, the same for the same seed; empty for any other kind (its values are not made by a generator of
    this kind)."""
    if g.kind == "code" and g.pattern:
        rng = random.Random(seed)
        return [code_value(rng, g.pattern) for _ in range(n)]
    if g.kind == "derived" and g.pattern:
        return _derived(g, locale, seed, n)
    if g.kind not in (*FAKER_KINDS, "email"):
        return []
    from faker import Faker  # heavy: only when a value is drawn

    fake = Faker(locale)
    fake.seed_instance(seed)
    if g.kind == "email":
        return [f"{fake.user_name()}@{fake.free_email_domain()}" for _ in range(n)]
    return [faker_value(fake, g.kind, g.pattern) for _ in range(n)]


def _derived(g: ir.ColumnGenerator, locale: str, seed: int, n: int) -> list[str]:
    """``n`` values of a ``derived`` generator (a value made of another column's, ``pipeline.meaning.relations``)
    made of people's names of ``locale``: a caller that wants one new value has no row to make it of."""
    import re

    from faker import Faker

    from pipeline.meaning import relations

    fake = Faker(locale)
    fake.seed_instance(seed)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        made = relations.derive(g.pattern or "", faker_value(fake, "person_name"))
        tail = re.sub(r"\d+", lambda m: "".join(str(rng.randrange(10)) for _ in m.group()), rng.choice(g.pool or [""]))
        if relations.reserved_domain(tail):
            tail = f"{tail.rsplit('@', 1)[0]}@{fake.free_email_domain()}"
        if made:
            out.append(made + tail)
    return out
