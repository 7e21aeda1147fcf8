"""Values of a column's generator drawn outside the rows stage: the Faker calls of the row maker
(``pipeline.stages.rows.maker``, which draws its people, companies, places and phones here) and code patterns, so
a later stage (the task planner's new values for a create or an update) draws a column's new value the way its rows
were drawn, deterministically in a seed; and the values the row maker makes of another column of the same row (an
e-mail address of the person's name, :func:`made_of_row`), so a task's new row makes them of its own name too."""

from __future__ import annotations

import calendar
import functools
import math
import random
import re
import unicodedata
from collections.abc import Mapping, Sequence, Set
from typing import Any

from pipeline import ir
from pipeline.meaning import relations

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
        return phone_in(fake, pattern) if pattern else one_line(fake.phone_number())
    return one_line(getattr(fake, kind)())


# ------------------------------------------------------------------ phone numbers in the examples' shape

PHONE_DIGITS = 7
"""The fewest digits of a phone number's shape (:func:`phone_mask`)."""
PHONE_SAMPLES = 80
"""The locale's phone numbers whose shapes a column's examples are compared with (:func:`phone_shapes`)."""
PHONE_DRAWS = 40
"""Phone numbers drawn for one value before the first with enough digits is taken (:func:`phone_in`)."""
_LETTER = re.compile(r"[^\W\d_]")


def _national(number: str) -> list[str]:
    """The digit runs of a phone number before its first letter (an extension: "x9150")."""
    return re.findall(r"\d+", _LETTER.split(number, maxsplit=1)[0])


def _ends(shape: tuple[int, ...], groups: tuple[int, ...]) -> bool:
    """Whether the digit groups ``groups`` end ``shape`` (a country code before them allowed), or both are one run
    of digits as long as the other's digits together."""
    if len(groups) == 1:
        return sum(shape) == groups[0] or (len(shape) >= 1 and shape[-1] == groups[0])
    return len(shape) >= len(groups) and shape[len(shape) - len(groups):] == groups


@functools.lru_cache(maxsize=32)
def phone_shapes(locale: str) -> frozenset[tuple[int, ...]]:
    """The digit groups of the phone numbers of ``locale`` (:data:`PHONE_SAMPLES` of Faker's, before any
    extension): (3, 3, 4) for "206.269.0743x9150", (1, 3, 3, 4) for "+1-780-563-6083"."""
    from faker import Faker  # heavy: only when asked

    fake = Faker(locale)
    fake.seed_instance(0)
    return frozenset(tuple(len(g) for g in _national(fake.phone_number())) for _ in range(PHONE_SAMPLES))


def phone_mask(texts: Sequence[str], locale: str) -> str | None:
    """The examples' shape, each digit a '#' ("###-###-####"), when every example has it, it holds no letter and
    :data:`PHONE_DIGITS` digits or more, and its digit groups end a phone number of ``locale``
    (:func:`phone_shapes`): a phone column, whose values take the locale's numbers poured into this shape
    (:func:`phone_in`), not digits drawn one by one ("027-803-5128": an area code no number plan has). None
    otherwise (an ISBN, a code with letters). Structure only: nothing is read from the column's name."""
    masks = {re.sub(r"\d", "#", str(t).strip()) for t in texts if str(t).strip()}
    if len(texts) < 2 or len(masks) != 1:
        return None
    mask = next(iter(masks))
    groups = tuple(len(g) for g in re.findall(r"#+", mask))
    if sum(groups) < PHONE_DIGITS or _LETTER.search(mask):
        return None
    return mask if any(_ends(shape, groups) for shape in phone_shapes(locale)) else None


def phone_in(fake: Any, mask: str) -> str:
    """A phone number of ``fake``'s locale in ``mask`` (:func:`phone_mask`): the last digits of one of its numbers
    (before any extension, after any country code the mask has no room for) each poured into a '#' of the mask,
    its separators kept; the first number whose groups the mask's end is taken when one of :data:`PHONE_DRAWS`
    is, else the first with enough digits, else Faker's number as it is."""
    groups = tuple(len(g) for g in re.findall(r"#+", mask))
    n = sum(groups)
    spare: str | None = None
    for _ in range(PHONE_DRAWS):
        runs = _national(fake.phone_number())
        digits = "".join(runs)
        if len(digits) < n:
            continue
        if _ends(tuple(len(r) for r in runs), groups):
            spare = digits[-n:]
            break
        spare = spare or digits[-n:]
    if spare is None:
        return one_line(fake.phone_number())
    poured = iter(spare)
    return "".join(next(poured) if ch == "#" else ch for ch in mask)



NAME_POOL_SHARE = 0.75
"""The share of a column's example values (two at least) that must be among the locale's given names, or among its
surnames, for the column to be that part of a person's name (:func:`name_part`)."""


@functools.lru_cache(maxsize=32)
def name_pools(locale: str) -> tuple[frozenset[str], frozenset[str]]:
    """The given names and the surnames the person generator of ``locale`` draws from (Faker's own lists, case
    folded): the names a first- or last-name column's values are drawn from."""
    from faker import Faker  # heavy: only when asked

    fake = Faker(locale)
    prov = next((p for p in fake.providers if hasattr(p, "first_names") and hasattr(p, "last_names")), None)
    if prov is None:
        return frozenset(), frozenset()
    return (frozenset(str(n).casefold() for n in prov.first_names),
            frozenset(str(n).casefold() for n in prov.last_names))


def name_part(texts: Sequence[str], locale: str) -> str | None:
    """``"first_name"`` or ``"last_name"`` when :data:`NAME_POOL_SHARE` of ``texts`` (two at least) are among the
    given names, or the surnames, of ``locale``'s person generator (:func:`name_pools`; the part more of them are
    among when both are), else None: a person's name split over two columns, which that generator fills, known by
    the generator's own lists in any locale (no name is written here)."""
    vals = [str(t).strip().casefold() for t in texts if str(t).strip()]
    if len(vals) < 2:
        return None
    first, last = name_pools(locale)
    shares = {"first_name": sum(v in first for v in vals) / len(vals),
              "last_name": sum(v in last for v in vals) / len(vals)}
    best = max(shares, key=lambda k: shares[k])  # the first on a tie
    if shares[best] < NAME_POOL_SHARE or shares["first_name"] == shares["last_name"]:
        return None
    return best

_SLOTS = r"[\d#]"
_CLOCK = re.compile(
    rf"(?<!{_SLOTS})({_SLOTS}{{1,2}}):({_SLOTS}{{2}})(?::({_SLOTS}{{2}}))?(?![\d#:])(?=( ?(?!Z(?![^\W\d_]))[^\W\d_])?)")
"""A time of day in a pattern, ISO 8601's shape ("1#:##", "##:##:##", an hour of one digit too); a letter right
after it (group 4, "##:## PM" in any script; not ISO's zone letter "Z") marks a 12-hour clock."""
_DAY = re.compile(rf"(?<!{_SLOTS})({_SLOTS}{{4}})-({_SLOTS}{{2}})-({_SLOTS}{{2}})(?!{_SLOTS})")
"""A calendar date in a pattern, ISO 8601's shape ("20##-##-##")."""


def _filled(rng: random.Random, pattern: str) -> str:
    return "".join(str(rng.randrange(10)) if ch == "#" else rng.choice(_LETTERS) if ch == "?" else ch
                   for ch in pattern)


def _fits(text: str, slots: str) -> bool:
    return len(text) == len(slots) and all(s in ("#", t) for s, t in zip(slots, text, strict=True))


@functools.cache
def _numbers(slots: str, low: int, high: int) -> tuple[str, ...]:
    """The numbers ``low``..``high`` written in ``slots`` (its width, zero-padded; its fixed digits kept)."""
    return tuple(t for t in (f"{v:0{len(slots)}d}" for v in range(low, high + 1)) if _fits(t, slots))


def _clock_fields(m: re.Match[str]) -> list[tuple[str, ...]]:
    """The values each field of the clock pattern ``m`` may take: an hour 0..23 (1..12 on a 12-hour clock; any
    number its digits allow when none is an hour: minutes and seconds, "4#:##"), minutes and seconds 0..59; an empty
    list: none fits."""
    first = (_numbers(m[1], 1, 12) if m[4] else _numbers(m[1], 0, 23)) or _numbers(m[1], 0, 10 ** len(m[1]) - 1)
    return [first, _numbers(m[2], 0, 59)] + ([_numbers(m[3], 0, 59)] if m[3] else [])


def _days(m: re.Match[str], year: str) -> list[tuple[str, str]]:
    """The months and days of ``year`` the date pattern ``m`` allows (no month 13, no February 30)."""
    return [(mo, d) for mo in _numbers(m[2], 1, 12) for d in _numbers(m[3], 1, calendar.monthrange(int(year),
                                                                                               int(mo))[1])]


def _valid(rng: random.Random, m: re.Match[str]) -> str | None:
    """A valid date or time of day in the pattern part ``m`` (:data:`_DAY`, :data:`_CLOCK`), each field among the
    values the part's fixed digits allow ("1#:##" is 10:00..19:59); None when it allows none."""
    if m.re is _CLOCK:
        fields = _clock_fields(m)
        return ":".join(rng.choice(f) for f in fields) if all(fields) else None
    years = _numbers(m[1], 1, 9999)
    first = rng.randrange(len(years)) if years else 0
    for year in (*years[first:], *years[:first]):
        days = _days(m, year)
        if days:
            mo, d = rng.choice(days)
            return f"{year}-{mo}-{d}"
    return None


def _parts(pattern: str) -> list[re.Match[str]]:
    """The dates and times of day in ``pattern`` with a digit to draw, in order, none overlapping."""
    found = sorted([*_DAY.finditer(pattern), *_CLOCK.finditer(pattern)], key=lambda m: m.start())
    out: list[re.Match[str]] = []
    for m in found:
        if "#" in m[0] and (not out or m.start() >= out[-1].end()):
            out.append(m)
    return out


def code_value(rng: random.Random, pattern: str) -> str:
    """A code in ``pattern``: each '#' a digit, each '?' a capital letter; a part of ISO 8601's shape for a date
    or a time of day ("1#:##", "20##-##-##") a valid one, not each digit alone ("17:73", month 13)."""
    out, at = [], 0
    for m in _parts(pattern):
        made = _valid(rng, m)
        if made is not None:
            out.append(_filled(rng, pattern[at:m.start()]) + made)
            at = m.end()
    return "".join(out) + _filled(rng, pattern[at:])


def code_capacity(pattern: str) -> int:
    """How many different codes :func:`code_value` makes of ``pattern``."""
    n, rest, at = 1, "", 0
    for m in _parts(pattern):
        if m.re is _CLOCK:
            count = math.prod(len(f) for f in _clock_fields(m))
        else:
            years = _numbers(m[1], 1, 9999)  # the days a year allows differ only by its February
            leap = sum(calendar.isleap(int(y)) for y in years)
            count = leap * len(_days(m, "2000")) + (len(years) - leap) * len(_days(m, "2001"))
        if count:
            n, rest, at = n * count, rest + pattern[at:m.start()], m.end()
    rest += pattern[at:]
    return n * 10 ** rest.count("#") * 26 ** rest.count("?")


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
    from faker import Faker

    fake = Faker(locale)
    fake.seed_instance(seed)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        made = relations.derive(g.pattern or "", faker_value(fake, "person_name"))
        tail = derived_tail(g.pool or [], rng, fake)
        if made:
            out.append(made + tail)
    return out


# ------------------------------------------------------------------ values made of another column's in the row


def derived_tail(pool: Sequence[str], rng: random.Random, fake: Any) -> str:
    """What follows a derived value's made part: one of the examples' endings (``pool``) with its digits drawn
    again; an e-mail domain reserved for examples ("@example.com") drawn from the locale's."""
    tail = re.sub(r"\d+", lambda m: "".join(str(rng.randrange(10)) for _ in m.group()), rng.choice(pool or [""]))
    if relations.reserved_domain(tail):
        tail = f"{tail.rsplit('@', 1)[0]}@{fake.free_email_domain()}"
    return tail


def derived_value(g: ir.ColumnGenerator, row: Mapping[str, Any], rng: random.Random, fake: Any) -> str | None:
    """A ``derived`` value of ``row``: its ``g.after`` made by the recipe the examples show (``g.pattern``,
    :func:`pipeline.meaning.relations.derive`), followed by :func:`derived_tail`; None without a source value or a
    word of the recipe in it (nothing drawn then)."""
    source = row.get(g.after or "")
    if source is not None and g.also:  # more of its words from the other columns it is made of (a last name)
        source = " ".join(str(v) for v in [source, *(row.get(c) for c in g.also)] if v is not None)
    made = relations.derive(g.pattern or "", str(source)) if source is not None else None
    if made is None:
        return None
    return made + derived_tail(g.pool or [], rng, fake)


def slug(text: str) -> str:
    """A person's name as an e-mail address's local part: ASCII, lower case, its words joined by '.'."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", ".", ascii_text.lower()).strip(".") or "mail"


def person_columns(gens: Sequence[ir.ColumnGenerator]) -> tuple[list[str], list[str], list[str]]:
    """The columns an ``email`` generator's address is made of: the person's name columns, and a first and a last
    name column (at most one each), used when no name column holds a value."""
    return ([g.column for g in gens if g.kind == "person_name"], [g.column for g in gens if g.kind == "first_name"][:1],
            [g.column for g in gens if g.kind == "last_name"][:1])


def person_of(row: Mapping[str, Any], gens: Sequence[ir.ColumnGenerator]) -> str | None:
    """The person ``row`` names (:func:`person_columns`): its first name column with a value, else its first and last
    name joined; None when it holds neither."""
    names, first, last = person_columns(gens)
    name = next((str(row[c]) for c in names if row.get(c)), None)
    if name is None and first and last and row.get(first[0]) and row.get(last[0]):
        name = f"{row[first[0]]} {row[last[0]]}"
    return name


def email_of(name: str, rng: random.Random, fake: Any) -> str:
    """An e-mail address made of a person's ``name`` (:func:`slug`), two digits after it now and then, at one of the
    locale's free providers."""
    tail = str(rng.randrange(10, 100)) if rng.random() < 0.3 else ""
    return f"{slug(name)}{tail}@{fake.free_email_domain()}"


def sources_of(g: ir.ColumnGenerator, gens: Sequence[ir.ColumnGenerator]) -> list[str]:
    """The columns of the same row ``g``'s value is made of, as the rows stage makes it: a ``derived`` value's source,
    an ``email``'s person (:func:`person_columns`); empty for a value made of none."""
    if g.kind == "derived" and g.after and g.pattern:
        return [g.after, *(g.also or [])]
    if g.kind == "email":
        names, first, last = person_columns(gens)
        return [*names, *first, *last]
    return []


def made_of_row(g: ir.ColumnGenerator, gens: Sequence[ir.ColumnGenerator], row: Mapping[str, Any],
                rng: random.Random, fake: Any) -> str | None:
    """``g``'s value made of ``row``'s other columns the way the rows stage makes it (:func:`sources_of`): a
    ``derived`` value of its source, an ``email`` of the person the row names; None when the row holds no source."""
    if g.kind == "derived":
        return derived_value(g, row, rng, fake)
    if g.kind == "email":
        name = person_of(row, gens)
        return email_of(name, rng, fake) if name is not None else None
    return None


def made_new(g: ir.ColumnGenerator, gens: Sequence[ir.ColumnGenerator], row: Mapping[str, Any], locale: str,
             seed: int, taken: Set[Any], tries: int) -> str | None:
    """A value of ``g`` made of ``row`` (:func:`made_of_row`) that is none of ``taken`` (the values the table's
    rows hold), drawn again up to ``tries`` times (another provider, other digits) in ``locale`` with ``seed``;
    None when the row holds no source of it or every draw is taken."""
    from faker import Faker

    fake = Faker(locale)
    fake.seed_instance(seed)
    rng = random.Random(seed)
    for _ in range(tries):
        made = made_of_row(g, gens, row, rng, fake)
        if made is None:
            return None
        if made not in taken:
            return made
    return None
