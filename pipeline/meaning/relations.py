"""Relations a table's example rows show, to hold in every generated row (read from values, never from names).

- :func:`date_orders`: two date columns whose values come in one order in every example (a loan before its due
  date), with the examples' gaps in days.
- :func:`clock_side`: a date column whose every example sits on one side of the environment's clock (all loans
  began by today).
- :func:`currents`, :func:`states`: two date columns of a row that every example has under way at the clock (a loan
  issued by today and due after it), and the state the examples are in (a 'pending' loan), for the rows in that
  state to keep; every row, where the examples hold every value of their list (:func:`every_state`: prescriptions
  'open' and 'closed', all under way).
- :func:`sign`: a numeric column whose every example is positive, or at least zero.
- :func:`number_range`, :func:`range_misfit`: the range a numeric column's examples span, widened by half that
  span on each side, and why a chosen range disagrees with them (leaves an example out, or is far wider).
- :func:`parent_orders`: a child's date column that is never before (or never after) a date of the parent row
  its reference names, in every example (a renewal after its loan began; after, not on, its loan's day when the
  examples are all on one day, :func:`habit`).
- :func:`parent_clocks`: the parents a child exists for, when every example child names a parent whose date is on
  one side of the environment's clock (or of the parent's own later date, where it has one: its return) while
  other parents are on the other (a fine only on a loan past due; the child needs no date of its own).
- :func:`counters`: a parent's integer column that counts the rows of a child table naming it (a loan's renewal
  count), from the example rows' values or MiniLM similarity of its name to the child table's name.
- :func:`positional`: whether the example children name the parents the model was shown first, in that order (a
  choice by position, which shows nothing about the parents).
- :func:`violations`: the rows that break an order.
- :func:`null_share`, :func:`some_null`, :func:`repeated_shares`: how often a column's examples leave it empty
  (when two or more do, :data:`MIN_NULLS`), and each value two or more of them hold with its share (a patient
  without allergies in 2 of 4 examples), for the drawn rows to keep.
- :func:`clock_window`, :class:`RowRelations`, :func:`fit_new_row`, :func:`broken`: the same relations for one row
  a task writes (a new row dated where the examples are, its dates in their order, a child's after its parent's).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Literal

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MIN_PAIRS = 2


def as_date(value: Any) -> date | None:
    if not isinstance(value, str) or not _DATE.match(value):
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def date_columns(examples: Mapping[str, Sequence[Any]]) -> list[str]:
    """Columns whose every non-null example value is an ISO date or date-time (and that have one)."""
    out = []
    for name, values in examples.items():
        vals = [v for v in values if v is not None]
        if vals and all(as_date(v) is not None for v in vals):
            out.append(name)
    return out


@dataclass(frozen=True)
class DateOrder:
    """``second`` is ``min_days``..``max_days`` days after ``first`` in every example row holding both."""

    first: str
    second: str
    min_days: int
    max_days: int


def date_orders(examples: Mapping[str, Sequence[Any]]) -> list[DateOrder]:
    """Every ordered pair of date columns the examples show (both set in at least ``MIN_PAIRS`` rows, the second
    never before the first and after it at least once)."""
    cols = date_columns(examples)
    out = []
    for a in cols:
        for b in cols:
            if a == b:
                continue
            gaps = [(db - da).days for va, vb in zip(examples[a], examples[b], strict=True)
                    for da, db in [(as_date(va), as_date(vb))] if da is not None and db is not None]
            if len(gaps) >= MIN_PAIRS and min(gaps) >= 0 and max(gaps) > 0:
                out.append(DateOrder(a, b, min(gaps), max(gaps)))
    return out


def nearest_before(orders: Sequence[DateOrder]) -> dict[str, DateOrder]:
    """For each column that follows another, the order with the closest predecessor (smallest gaps): the one to
    draw it from, so that a chain (ordered, shipped, delivered) is drawn link by link."""
    out: dict[str, DateOrder] = {}
    for o in orders:
        cur = out.get(o.second)
        if cur is None or (o.max_days, o.min_days, o.first) < (cur.max_days, cur.min_days, cur.first):
            out[o.second] = o
    return out


def clock_side(values: Sequence[Any], today: date) -> Literal["past", "future"] | None:
    """'past' when every example date is on or before ``today``, 'future' when every one is on or after it (and
    not all equal to it), None when they straddle it or there are none."""
    days = [d for d in (as_date(v) for v in values) if d is not None]
    if not days:
        return None
    if all(d <= today for d in days):
        return "past"
    if all(d >= today for d in days):
        return "future"
    return None


CLOCK_SPAN = 180
"""Days a range on one side of the clock spans at least (its examples all on the clock's day give it none)."""


def clock_range(start: date, end: date, side: Literal["past", "future"] | None, today: date
                ) -> tuple[date, date] | None:
    """``start``..``end`` moved onto ``side`` of ``today`` (its examples' side), at least :data:`CLOCK_SPAN` days
    wide when it had to move or was a single day (examples all dated today, a range of today alone: every row of
    the table on one day); None when it needs no change."""
    if side == "past" and (end > today or start >= end):
        end = min(end, today)
        return min(start, end - timedelta(days=CLOCK_SPAN)), end
    if side == "future" and (start < today or start >= end):
        start = max(start, today)
        return start, max(end, start + timedelta(days=CLOCK_SPAN))
    return None


@dataclass(frozen=True)
class Current:
    """Every example row is under way at the clock: its ``first`` date on or before today and its ``second`` after
    it (a loan out now and not yet due, a lease running, a booking begun and not ended)."""

    first: str
    second: str

    def shift(self, row: Mapping[str, Any], today: date) -> tuple[int, int] | None:
        """The days ``row``'s two dates may move together by to be under way at ``today`` (the least and the most),
        None when it has not both or they are not ``first`` before ``second``."""
        a, b = as_date(row.get(self.first)), as_date(row.get(self.second))
        if a is None or b is None or b <= a:
            return None
        return (today - b).days + 1, (today - a).days

    def holds(self, row: Mapping[str, Any], today: date) -> bool:
        a, b = as_date(row.get(self.first)), as_date(row.get(self.second))
        return a is None or b is None or a <= today < b


def currents(examples: Mapping[str, Sequence[Any]], today: date) -> list[Current]:
    """The ordered pairs of date columns (:func:`date_orders`) under way at ``today`` in every example row holding
    both (at least :data:`MIN_PAIRS`): the model's loans issued today and due in a month are current loans, which
    the rows in the examples' state keep (:func:`states`) wherever code moves or draws them. Values only."""
    out = []
    for o in date_orders(examples):
        rows = [{o.first: a, o.second: b} for a, b in zip(examples[o.first], examples[o.second], strict=True)
                if as_date(a) is not None and as_date(b) is not None]
        if len(rows) >= MIN_PAIRS and all(Current(o.first, o.second).holds(r, today) for r in rows):
            out.append(Current(o.first, o.second))
    return out


def states(examples: Mapping[str, Sequence[Any]], choices: Mapping[str, Sequence[Any]]) -> dict[str, frozenset[Any]]:
    """The columns among ``choices`` (column -> the values code draws it from: a CHECK list, a generator's values,
    yes and no) whose example values are some of those and not all, with the values they hold: the state the
    example rows are in (a loan 'pending', never 'returned'). A row holding one of them in each such column is in
    the examples' state, and keeps what they show of the clock (:func:`currents`)."""
    out = {}
    for name, allowed in choices.items():
        held = frozenset(v for v in examples.get(name, []) if v is not None)
        if held and held < frozenset(allowed):
            out[name] = held
    return out


def every_state(examples: Mapping[str, Sequence[Any]], choices: Mapping[str, Sequence[Any]]) -> bool:
    """Whether the examples hold every value of a column among ``choices`` (at least one) and only some of none
    (:func:`states` is empty): no value tells a row apart from the examples, so every row is in their state and keeps
    what they show of the clock (:func:`currents`). The pharmacy of 2026-11-29: its four example prescriptions,
    two 'open' and two 'closed', were all under way at the clock, and with no state of their own none of the
    code-made ones was kept so (43 of 98 open prescriptions had ended before the clock)."""
    if states(examples, choices):
        return False
    return any(frozenset(allowed) <= frozenset(v for v in examples.get(name, []) if v is not None)
               for name, allowed in choices.items() if allowed)


def in_state(row: Mapping[str, Any], held: Mapping[str, frozenset[Any]]) -> bool:
    """Whether ``row`` is in the examples' state (:func:`states`): one of their values in every state column, and
    there is one."""
    return bool(held) and all(row.get(c) in vs for c, vs in held.items())


def sign(values: Sequence[Any]) -> Literal["positive", "non_negative"] | None:
    nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if not nums:
        return None
    if all(v > 0 for v in nums):
        return "positive"
    if all(v >= 0 for v in nums):
        return "non_negative"
    return None



MIN_NULLS = 2
"""NULL examples needed before drawn rows keep the examples' share of NULL. One NULL among a handful of examples is
weak evidence, and the embedded model leaves its last example row's optional column empty out of habit (project
billing, 2026-11-29: 1 of 4 invoices without an amount became 18 of 56; 1 of 4 consultants without contact, 48 of
259); an amount on an invoice is the point of the row. Two or more (2 of 4 employees without a termination date)
show an empty value the domain has."""


def null_share(values: Sequence[Any]) -> float | None:
    """The share of the example ``values`` that are NULL when at least :data:`MIN_NULLS` are and some are not (an
    employee without a termination date in 2 of 4 examples: 0.5); None when fewer are NULL (1 of 4: every drawn
    row gets a value), or none has a value (a column left NULL in every row the examples show is filled, not kept
    empty). A date that ends the row's life keeps its NULLs another way: :func:`some_null`."""
    empty = sum(v is None for v in values)
    return empty / len(values) if MIN_NULLS <= empty < len(values) else None


def some_null(values: Sequence[Any]) -> bool:
    """Whether some but not all example ``values`` are NULL: a later date of the row that such examples leave
    empty is left empty where no day on its examples' side of the clock fits (a loan still out has no return date
    yet), however few of them are NULL."""
    empty = sum(v is None for v in values)
    return 0 < empty < len(values)


def repeated_shares(values: Sequence[Any]) -> dict[Any, float]:
    """Each value that two or more of the non-NULL example ``values`` hold, with its share of them ('None' in 2 of
    4 patients' allergies: 0.5). Values held once are left to the continued list, which draws them with its other
    items. Empty when no value repeats, or when one value is every example (a list would never be drawn)."""
    held = [v for v in values if v is not None]
    counts: dict[Any, int] = {}
    for v in held:
        counts[v] = counts.get(v, 0) + 1
    out = {v: n / len(held) for v, n in counts.items() if n >= 2}
    return {} if len(counts) == 1 else out


def share_weights(pool: Sequence[Any], shares: Mapping[Any, float]) -> list[float] | None:
    """Drawing weights over ``pool`` that give each value of ``shares`` its share and spread the rest evenly over
    the other items; None when no value of ``shares`` is in the pool (drawn uniformly)."""
    held = {v: s for v, s in shares.items() if v in pool}
    if not held:
        return None
    others = [p for p in pool if p not in held]
    rest = max(0.0, 1.0 - sum(held.values()))
    if not others or rest <= 0:
        return [held.get(p, 0.0) for p in pool]
    return [held[p] if p in held else rest / len(others) for p in pool]


SPREAD_PAD = 0.5
"""How far beyond its examples a numeric column's range reaches, as a share of their span on each side (of their
magnitude when they are all one value, at least 1): four invoices of 50-100 give 25-125, four ages of 25-40 give
18-47 (integers rounded inwards), four fines of 3.50-6.00 give 2.25-7.25."""
SPREAD_MAX = 4.0
"""How many times the examples' span (their magnitude when they are all one value, at least 1) a chosen range may
be wide before it is narrowed to :func:`number_range`. Measured 2026-11-28 on the embedded model's choices for
four domains (benchmarks/results/number_ranges.md): the ranges a reader keeps are 1.0-3.0 times the span (dosages
10-200 for 15-200, ages 18-65 for 25-45, years 1800-2026 for 1813-1960, renewals 0-3 for four zeros); those a
reader refuses are 8-40 times (ages 0-120 for 25-40: minors in a clinical trial; years 0-2026 for 1813-1960;
invoices 0-1000 for 50-100; fines 0-100 for 3.50-6.00; quantities 0-100 for 1-5)."""


def numbers(values: Sequence[Any]) -> list[float]:
    """The numbers among ``values`` (no booleans, no NULL, no text)."""
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]


def _scale(nums: Sequence[float]) -> float:
    span = max(nums) - min(nums)
    return span if span > 0 else max(abs(nums[0]), 1.0)


def number_range(values: Sequence[Any], integer: bool) -> tuple[float, float] | None:
    """The range a numeric column's example ``values`` show: their smallest to largest, widened by
    :data:`SPREAD_PAD` of their span on each side, never across zero when every example is positive (an integer
    then starts at 1) or below it when none is negative; with ``integer`` both ends whole numbers, rounded
    inwards (ages 25-40 give 18-47, not 17-48). None without a number."""
    nums = numbers(values)
    if not nums:
        return None
    lo, hi = min(nums), max(nums)
    pad = SPREAD_PAD * _scale(nums)
    a, b = lo - pad, hi + pad
    side = sign(nums)
    if side == "positive":
        a = max(a, 1.0 if integer else min(lo / 2, 0.01))
    elif side == "non_negative":
        a = max(a, 0.0)
    if integer:
        a, b = float(math.ceil(a)), float(math.floor(b))
        b = max(a, b)
    return a, b


def upper_reach(values: Sequence[Any], lo: float, integer: bool) -> float | None:
    """How far above its examples a range the model chose wider than them (:func:`range_misfit`) stays when it is
    narrowed, for examples that are all positive (a ratio scale: ages, amounts, quantities spread by factors, and
    their tail runs upwards): the largest example times the examples' own ratio (largest over smallest), at most
    :data:`SPREAD_MAX` times their span above ``lo`` (the width the rule keeps), an integer rounded down. Ages 25-40
    reach 64 (not 47: a pharmacy's patients), quantities 5-11 reach 24, fines 3.50-6.00 reach 10.29, years 1813-1960
    2118 (their ratio is 1.08), which the model's own range, 0-2026, cuts back to 2026 as before. None when an example
    is zero or negative, or without a number. The caller keeps the result inside the model's own range (a range the
    model chose that holds every example: its bounds, age 120, are no values to draw near)."""
    nums = numbers(values)
    if not nums or min(nums) <= 0:
        return None
    top = max(nums) * (max(nums) / min(nums))
    top = min(top, lo + SPREAD_MAX * _scale(nums))
    return float(math.floor(top)) if integer else top


def gap_range(order: DateOrder) -> tuple[int, int]:
    """The days a date column following another (``order``) is drawn after it where the model gave none usable:
    the examples' gaps widened by :data:`SPREAD_PAD` of their span on each side (four examples are not the
    population: 3-15 days of a prescription's course give 2-21), never under half the shortest gap (no course of 0
    days where every example has some). Gaps all one length stay that length (a loan due 31 days after its day: a
    rule of the house, not a spread)."""
    a, b = order.min_days, order.max_days
    if a == b:
        return a, b
    pad = SPREAD_PAD * (b - a)
    return max(math.ceil(a / 2), math.ceil(a - pad)), math.floor(b + pad)


def range_misfit(lo: float, hi: float, values: Sequence[Any]) -> str | None:
    """Why the range ``lo``..``hi`` disagrees with a numeric column's example ``values``: an example outside it,
    or a width over :data:`SPREAD_MAX` times the examples' span (their magnitude when all one value, at least
    1). None when it fits or there is no number."""
    nums = numbers(values)
    if not nums:
        return None
    shown = ", ".join(f"{v:g}" for v in sorted(set(nums)))
    out = [v for v in nums if not lo <= v <= hi]
    if out:
        return f"the examples {shown} are not all within {lo:g}..{hi:g}"
    width, scale = hi - lo, _scale(nums)
    if width > SPREAD_MAX * scale:
        return f"{lo:g}..{hi:g} is {width / scale:.0f} times as wide as the examples ({shown}) spread"
    return None


@dataclass(frozen=True)
class ParentOrder:
    """The child's ``column`` is on or after (``after``) or on or before its parent's ``parent_column``, the parent
    named by the child's ``via`` column, in every example (``min_days`` is 0: the examples' smallest gap is no
    rule; taken as one, a loan 76 years after its book's publication made every later loan of that book 2037's)."""

    column: str
    via: str
    parent_column: str
    after: bool
    min_days: int
    strict: bool = False
    """Never on the parent's day in any example (a renewal after its loan's day, not on it)."""
    same_day: bool = False
    """On the parent's day in every example, the examples on different days (:func:`on_parents_day`: an order's line
    dated on its order's day; drawn on or after it, lines fell months after their orders)."""

    def holds(self, child: Any, parent: Any) -> bool:
        dc, dp = as_date(child), as_date(parent)
        if dc is None or dp is None:
            return True
        gap = (dc - dp).days if self.after else (dp - dc).days
        if self.same_day:
            return gap == 0
        return gap > 0 if self.strict else gap >= 0


MIN_PARENT_PAIRS = 3
"""Example children whose date and whose parent's date are both set, needed before their order is taken as a
relation: two agree by chance one time in two. Measured 2026-11-28 on the HR leave domain (out/u2): two of its four
example employees had a termination date, both before their example leave, and "a leave after its employee's
termination" held for the seeded leaves made 259 of 263 start after the employee had left."""


def habit(values: Sequence[Any]) -> bool:
    """Whether the example date ``values`` are at least :data:`MIN_PARENT_PAIRS` and all on one day: the model's
    habit of dating every example on the clock, which shows no day of the column's own."""
    days = [d for d in (as_date(v) for v in values) if d is not None]
    return len(days) >= MIN_PARENT_PAIRS and len(set(days)) == 1


def on_parents_day(values: Sequence[Any], gaps: Sequence[int]) -> bool:
    """Whether every example child (its date ``values``) is on its parent's day (``gaps``, in days, all 0: at
    least :data:`MIN_PARENT_PAIRS`) while the children are on two days or more: the day is the parent's, not the
    model's habit of dating every example today (:func:`habit`)."""
    days = {d for d in (as_date(v) for v in values) if d is not None}
    return len(gaps) >= MIN_PARENT_PAIRS and not any(gaps) and len(days) >= 2


def parent_orders(examples: Mapping[str, Sequence[Any]], via: str, parents: Mapping[Any, Mapping[str, Any]]
                  ) -> list[ParentOrder]:
    """Orders between the child's date columns and the parent row's date columns that every example shows (in at
    least :data:`MIN_PARENT_PAIRS` example children holding both dates). A child the examples date on its parent's
    start (the first of two ordered dates of the parent's rows: a loan's issue, with its due date after it) is
    after it, never on it, when the examples are all on one day (:func:`habit`: the model's renewals and loans all
    dated today show that the renewal follows the loan, not that it falls on the loan's day). A child every
    example dates on its parent's day, on different days (:func:`on_parents_day`: an order's lines), is on it."""
    out = []
    keys = examples.get(via, [])
    rows = [parents.get(k) for k in keys]
    names = list(dict.fromkeys(c for r in rows if r for c in r))
    pcols = date_columns({c: [r.get(c) for r in rows if r] for c in names})
    everyone = list(parents.values())
    starts = {o.first for o in date_orders({c: [r.get(c) for r in everyone] for c in pcols})}
    for col in date_columns(examples):
        for pc in pcols:
            gaps = [(dc - dp).days for v, r in zip(examples[col], rows, strict=True) if r is not None
                    for dc, dp in [(as_date(v), as_date(r.get(pc)))] if dc is not None and dp is not None]
            if len(gaps) < MIN_PARENT_PAIRS:
                continue
            if on_parents_day(examples[col], gaps):
                out.append(ParentOrder(col, via, pc, True, 0, same_day=True))
            elif min(gaps) >= 0:  # the order, not the examples' smallest gap: 76 years between a loan and its
                strict = min(gaps) > 0 or (habit(examples[col]) and pc in starts)  # book's publication made 2037's
                out.append(ParentOrder(col, via, pc, True, 0, strict))
            elif max(gaps) <= 0:
                out.append(ParentOrder(col, via, pc, False, 0, max(gaps) < 0))
    return out


MIN_PARENTS = 3
"""Distinct example parents needed before their side of the clock is taken as a relation (two agree by chance one
time in two)."""


@dataclass(frozen=True)
class ParentClock:
    """Children name only parent rows whose ``parent_column`` is on ``side`` of the clock (on or before today for
    'past', on or after it for 'future'), the parent named by the child's ``via`` column. With ``until``, the
    parent's own clock is its ``until`` date where it has one, today where not (a fine only on a loan that was past
    due when it came back, or is past due now: not on one returned before its due date)."""

    via: str
    parent_column: str
    side: Literal["past", "future"]
    until: str | None = None

    def holds(self, parent: Mapping[str, Any] | None, today: date) -> bool:
        day = as_date(parent.get(self.parent_column)) if parent is not None else None
        if day is None:
            return False
        if self.until is not None:
            assert parent is not None
            today = as_date(parent.get(self.until)) or today
        return day <= today if self.side == "past" else day >= today


def positional(keys: Sequence[Any], listed: Sequence[Any]) -> bool:
    """Whether the distinct non-null ``keys`` the example children name are the first of ``listed`` (the parent keys
    in the order the model was shown them): a model that takes the first parents it sees chose nothing. The head
    only: the embedded 1.5B model names keys 1, 2, 3, 4 (or 1, 3, 6, 8) whatever rows they are and however they are
    listed (``benchmarks/results/parent_choice_2026-11-30.md``), so a listing not in key order would pass here."""
    named = list(dict.fromkeys(k for k in keys if k is not None))
    return bool(named) and set(named) == set(listed[: len(named)])


def parent_clocks(examples: Mapping[str, Sequence[Any]], via: str, parents: Mapping[Any, Mapping[str, Any]],
                  today: date, listed: Sequence[Any] = ()) -> list[ParentClock]:
    """The sides of the clock every example child's parent is on, for each date column of the parent whose rows
    lie on both sides (one side for every parent restricts nothing). None from fewer than :data:`MIN_PARENTS`
    distinct parents, nor from children that name the first parents of ``listed`` (:func:`positional`)."""
    keys = [k for k in examples.get(via, []) if k is not None]
    named = [parents[k] for k in dict.fromkeys(keys) if k in parents]
    if len(named) < MIN_PARENTS or positional(keys, listed):
        return []
    everyone = list(parents.values())
    names = list(dict.fromkeys(c for r in everyone for c in r))
    out = []
    dated = date_columns({c: [r.get(c) for r in everyone] for c in names})
    for pc in dated:
        side = clock_side([r.get(pc) for r in named], today)
        if side is None:
            continue
        rel = ParentClock(via, pc, side)
        if not all(rel.holds(r, today) for r in everyone):
            out.append(rel)
        for until in dated:  # the parent's own end where it has one (its return), today where not
            if until == pc or all(r.get(until) is None for r in everyone):
                continue
            rel = ParentClock(via, pc, side, until)
            if all(rel.holds(r, today) for r in named) and not all(rel.holds(r, today) for r in everyone) \
                    and any(r.get(until) is not None for r in named):
                out.append(rel)
    return out


def violations(rows: Sequence[Mapping[str, Any]], order: DateOrder) -> list[Mapping[str, Any]]:
    """The rows whose ``order.second`` is before their ``order.first``."""
    out = []
    for r in rows:
        a, b = as_date(r.get(order.first)), as_date(r.get(order.second))
        if a is not None and b is not None and b < a:
            out.append(r)
    return out


# ------------------------------------------------------------------ one row a task writes


def clock_window(values: Sequence[Any], today: date) -> tuple[int, int] | None:
    """The days from ``today`` a new row's date may lie at, as the example ``values`` are: their smallest to largest
    distance from the clock, widened by :data:`SPREAD_PAD` of that span on each side, never across the clock when
    every example is on one side of it (examples all dated today give today alone: a new loan is issued today, not
    months back). None without a date."""
    days = [(d - today).days for d in (as_date(v) for v in values) if d is not None]
    if not days:
        return None
    lo, hi = min(days), max(days)
    pad = int(SPREAD_PAD * (hi - lo))
    a, b = lo - pad, hi + pad
    side = clock_side(values, today)
    if side == "past":
        b = min(b, 0)
    elif side == "future":
        a = max(a, 0)
    return a, b


@dataclass(frozen=True)
class RowRelations:
    """What one table's example rows show about a row's dates: their orders within the row, each date column's
    window around the clock (:func:`clock_window`) and the orders against the parent rows its references name."""

    orders: tuple[DateOrder, ...] = ()
    windows: tuple[tuple[str, int, int], ...] = ()
    parents: tuple[ParentOrder, ...] = ()


def row_relations(examples: Mapping[str, Sequence[Any]], today: date,
                  parents: Mapping[str, Mapping[Any, Mapping[str, Any]]] = {}) -> RowRelations:  # noqa: B006
    """:class:`RowRelations` from a table's example rows (column -> values) and, per reference column, the rows of the
    table it names (key -> row)."""
    windows = []
    for c in date_columns(examples):
        w = clock_window(examples[c], today)
        if w is not None:
            windows.append((c, w[0], w[1]))
    po = [o for via, rows in parents.items() for o in parent_orders(examples, via, rows)]
    return RowRelations(tuple(date_orders(examples)), tuple(windows), tuple(po))


def moved(value: Any, day: date) -> str:
    """``day`` written as ``value`` writes its date (a time after it kept)."""
    return day.isoformat() + (value[10:] if isinstance(value, str) else "")


def fit_new_row(rel: RowRelations, row: Mapping[str, Any], parents: Mapping[str, Mapping[str, Any]], today: date
                ) -> dict[str, Any]:
    """The date values of a new ``row`` (column -> value) moved so that the relations hold: each into its window
    around the clock, then each column that follows another (:func:`nearest_before`) set from it by the row's own
    gap (brought within the examples' gaps), then a child's date that falls on the wrong side of its parent's
    (``parents``: reference column -> the row it names) moved just past it, and what follows it again. Only
    columns ``row`` holds move; the changed ones are returned (column -> new value)."""
    new = dict(row)
    days = {c: as_date(v) for c, v in row.items()}
    gaps = {o.second: (days[o.second] - days[o.first]).days for o in rel.orders  # type: ignore[operator]
            if days.get(o.first) is not None and days.get(o.second) is not None}
    for c, lo, hi in rel.windows:
        d = days.get(c)
        if d is not None and not lo <= (d - today).days <= hi:
            days[c] = today + timedelta(days=min(max((d - today).days, lo), hi))
    chain = nearest_before(rel.orders)

    def follow() -> None:
        for _ in range(len(chain)):
            for second, o in chain.items():
                a, b = days.get(o.first), days.get(second)
                if a is None or b is None:
                    continue
                days[second] = a + timedelta(days=min(max(gaps.get(second, (b - a).days), o.min_days), o.max_days))

    follow()
    for po in rel.parents:
        par = parents.get(po.via)
        d, pd = days.get(po.column), as_date(par.get(po.parent_column)) if par else None
        if d is None or pd is None or po.holds(d.isoformat(), pd.isoformat()):
            continue
        step = int(po.strict)
        days[po.column] = pd + timedelta(days=step if po.after else -step)
        gaps.pop(po.column, None)  # the column now follows its parent, not its own row's predecessor
        follow()
    for c, d in days.items():
        if d is not None and d != as_date(row.get(c)):
            new[c] = moved(row[c], d)
    return {c: v for c, v in new.items() if v != row.get(c)}


def broken(rel: RowRelations, row: Mapping[str, Any], parents: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The relations a written ``row`` breaks, in words for a report: an order of its own dates, or one against the
    parent row a reference names (``parents``: reference column -> that row)."""
    out = [f"{o.second} before {o.first}" for o in rel.orders if violations([row], o)]
    for po in rel.parents:
        par = parents.get(po.via)
        if par is not None and not po.holds(row.get(po.column), par.get(po.parent_column)):
            how = "not on" if po.same_day else "before" if po.after else "after"
            out.append(f"{po.column} {how} its {po.via}'s {po.parent_column}")
    return out


# ------------------------------------------------------------------ a value made of another column's value

RESERVED_DOMAINS = ("example", "test", "invalid", "localhost")
"""Names reserved for examples (RFC 2606, RFC 6761: example.com, ``.test``, ...): an e-mail domain the examples
write with one of them as its last or second-to-last label is a stand-in, drawn again by the row maker."""


@dataclass(frozen=True)
class Derived:
    """``column``'s value is made of ``source``'s value in the same row, in every example: the words of the source
    by place (:func:`recipe_of`: ``"{0}.{-1}"`` the first and last word joined by '.', ``"{0:1}{-1}"`` the first
    word's initial and the last word), lower-cased (and transliterated to ASCII where the examples are), followed
    by one of ``tails`` (what the examples write after it: "@example.com", "42@mail.de"). ``also``: more columns
    whose values follow the source's as more of its words (a last name after the first name: "john.doe@example.com"
    of "John" and "Doe"; :func:`derived_columns`)."""

    column: str
    source: str
    recipe: str
    tails: tuple[str, ...]
    also: tuple[str, ...] = ()

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source, *self.also)


def _fold(text: str) -> str:
    """``text`` case folded, its accents dropped when that leaves ASCII ("José" -> "jose"; "山田" stays)."""
    import unicodedata

    low = unicodedata.normalize("NFC", text).casefold()
    bare = "".join(ch for ch in unicodedata.normalize("NFKD", low) if not unicodedata.combining(ch))
    return bare if bare.isascii() else low


def words_of(value: str) -> list[str]:
    """The words of a source value (whitespace-separated), case folded, each with its letters and digits only
    ("O'Brien" -> "obrien"); empty words left out."""
    out = []
    for tok in str(value).split():
        w = "".join(ch for ch in _fold(tok) if ch.isalnum())
        if w:
            out.append(w)
    return out


def _place(i: int, n: int) -> int:
    """A word's place as a recipe names it: 0 the first, -1 the last (of two or more), else its index."""
    return 0 if i == 0 else -1 if i == n - 1 else i


def _parse(d: str, words: list[str]) -> tuple[list[tuple[int, bool] | str], int] | None:
    """The longest run of ``d`` from its start made of ``words`` (each at most once, whole or as its initial),
    joined by nothing or by one character that is neither a letter, a digit nor a space, and not followed by a
    letter: (pieces, characters covered), or None when it holds no whole word of two characters or more."""
    best: list[tuple[list[tuple[int, bool] | str], int]] = []

    def walk(pos: int, used: frozenset[int], pieces: list[tuple[int, bool] | str], whole: bool) -> None:
        if whole and (not best or pos > best[0][1]) and not (pos < len(d) and d[pos].isalpha()):
            best[:] = [(list(pieces), pos)]
        seps = [""]
        if pieces and pos < len(d) and not d[pos].isalnum() and not d[pos].isspace() and d[pos] not in "{}":
            seps.append(d[pos])
        for sep in seps:
            at = pos + len(sep)
            head = [sep] if sep else []
            for i, w in enumerate(words):
                if i in used:
                    continue
                if len(w) >= 2 and d.startswith(w, at):
                    walk(at + len(w), used | {i}, [*pieces, *head, (i, True)], True)
                if at < len(d) and d[at] == w[0]:
                    walk(at + 1, used | {i}, [*pieces, *head, (i, False)], whole)

    walk(0, frozenset(), [], False)
    return best[0] if best else None


def _recipe(pieces: list[tuple[int, bool] | str], n: int) -> str:
    out = []
    for p in pieces:
        if isinstance(p, str):
            out.append(p)
        else:
            i, whole = p
            out.append(f"{{{_place(i, n)}}}" if whole else f"{{{_place(i, n)}:1}}")
    return "".join(out)


def recipe_of(source: str, derived: str) -> tuple[str, str] | None:
    """How ``derived`` is made of ``source``: (recipe, tail), or None. The recipe names the source's words by place;
    a head before them is kept literally ("info@{0}{-1}"). The made part holds a whole word of two characters or
    more; head and tail hold no space, the head ends and the tail starts with no letter (a name "Al" does not make
    "alice"). Compared case folded, accents dropped where that leaves ASCII (:func:`words_of`)."""
    words = words_of(source)
    d = _fold(str(derived).strip())
    if not words or not d:
        return None
    for start in range(len(d)):
        head = d[:start]
        if head and (head[-1].isalnum() or any(ch.isspace() or ch in "{}" for ch in head)):
            continue
        got = _parse(d[start:], words)
        if got is None:
            continue
        pieces, end = got
        tail = d[start + end:]
        if any(ch.isspace() for ch in tail):
            return None
        return head + _recipe(pieces, len(words)), tail
    return None


def derive(recipe: str, source: str) -> str | None:
    """The part of a derived value made of ``source`` by ``recipe`` (:func:`recipe_of`); a place the source has no
    word for is left out with the separator before it (a one-word name of "{0}.{-1}" gives its one word); None
    when no word of the recipe is there."""
    words = words_of(source)
    if not words:
        return None
    out: list[str] = []
    used: set[int] = set()
    sep = ""
    made = False
    for m in re.finditer(r"\{(-?\d+)(:1)?\}|([^{}])", recipe):
        if m.group(3) is not None:
            sep += m.group(3)
            continue
        place = int(m.group(1))
        i = len(words) - 1 if place == -1 else place
        if not 0 <= i < len(words) or i in used:
            if made:
                sep = ""
            continue
        used.add(i)
        out.append(sep + (words[i] if m.group(2) is None else words[i][0]))
        sep = ""
        made = True
    if not made:
        return None
    return "".join(out) + sep


def derived_columns(examples: Mapping[str, Sequence[Any]], columns: Sequence[str]) -> list[Derived]:
    """The columns among ``columns`` whose every example value (at least :data:`MIN_PAIRS` rows holding both) is
    made of another column's value in the same row by one recipe (:func:`recipe_of`; a copy of the value is not
    made of it). A column made of several: the one whose words cover
    most of it (then the first). A value whose endings hold another column's value of the same row (every example
    of them: "john.doe@example.com" of "John" with the ending ".doe@example.com" where the row's last name is "Doe")
    is made of both, the other's words following the source's (``Derived.also``): a value made of one name with the
    others' surnames copied after it would not match its own row. A column that is made of another is nobody's
    source. Values only, no name read; any script whose words the examples write as they are (or, for accented
    letters, without their accents)."""
    texts = {c: list(examples.get(c, [])) for c in columns}
    found: dict[str, tuple[int, Derived]] = {}
    for d in columns:
        for s in columns:
            if s == d:
                continue
            got = _made_of(texts, d, (s,))
            if got is None:
                continue
            if d not in found or got[0] > found[d][0]:
                found[d] = got
            cover, single = got
            for t in columns:  # the endings hold another column's value: made of it too
                if t in (s, d) or not _in_tails(texts, d, single.tails, s, t):
                    continue
                both = _made_of(texts, d, (s, t))
                if both is not None and both[0] > found[d][0]:
                    found[d] = both
    out = [v for _, v in found.values()]
    made = {r.column for r in out}
    return [r for r in out if not made & set(r.sources)]


def _rows_of(texts: Mapping[str, list[Any]], d: str, sources: Sequence[str]) -> list[tuple[str, str]]:
    """(the sources' values joined by a space, ``d``'s value) of the rows holding text in all of them."""
    out = []
    for i, b in enumerate(texts[d]):
        vals = [texts[s][i] if i < len(texts[s]) else None for s in sources]
        if isinstance(b, str) and b.strip() and all(isinstance(a, str) and a.strip() for a in vals):
            out.append((" ".join(str(a) for a in vals), b))
    return out


def _made_of(texts: Mapping[str, list[Any]], d: str, sources: Sequence[str]) -> tuple[int, Derived] | None:
    """``d`` made of ``sources`` (their values joined, as one source's words) by one recipe in every row holding
    them all (at least :data:`MIN_PAIRS`), with the characters its recipe covers; None when it is not (or is a
    copy)."""
    pairs = _rows_of(texts, d, sources)
    if len(pairs) < MIN_PAIRS:
        return None
    recipes = [recipe_of(a, b) for a, b in pairs]
    if any(r is None for r in recipes) or len({r[0] for r in recipes if r}) != 1:
        return None
    if all(_fold(a).split() == _fold(b).split() for a, b in pairs):
        return None  # a copy of the value, not a value made of it
    tails = tuple(dict.fromkeys(r[1] for r in recipes if r))
    recipe = recipes[0][0] if recipes[0] else ""
    cover = sum(len(_fold(b)) - len(r[1]) for (_, b), r in zip(pairs, recipes, strict=True) if r)
    return cover, Derived(d, sources[0], recipe, tails, tuple(sources[1:]))


def _in_tails(texts: Mapping[str, list[Any]], d: str, tails: Sequence[str], source: str, other: str) -> bool:
    """Whether, in every row holding ``d``, ``source`` and ``other``, the ending of ``d`` after what ``source``
    makes holds ``other``'s value (its words, :func:`words_of`) and not only a word ``source`` has too."""
    if not any(tails):
        return False
    rows = 0
    for i, b in enumerate(texts[d]):
        a = texts[source][i] if i < len(texts[source]) else None
        o = texts[other][i] if i < len(texts[other]) else None
        if not (isinstance(b, str) and isinstance(a, str) and isinstance(o, str) and b.strip() and o.strip()):
            continue
        got = recipe_of(a, b)
        words = [w for w in words_of(o) if w not in words_of(a)]
        if got is None or not words or not all(w in got[1] for w in words):
            return False
        rows += 1
    return rows >= MIN_PAIRS


def reserved_domain(tail: str) -> bool:
    """Whether the e-mail domain in ``tail`` (after its '@') is one reserved for examples (:data:`RESERVED_DOMAINS`)."""
    if "@" not in tail:
        return False
    labels = tail.rsplit("@", 1)[1].casefold().strip(".").split(".")
    return bool(labels) and (labels[-1] in RESERVED_DOMAINS or (len(labels) >= 2 and labels[-2] in RESERVED_DOMAINS))


# ------------------------------------------------------------------ a parent's count of its children

COUNTER_SIM = 0.6
"""MiniLM cosine similarity between a parent's integer column's name and a child table's name (each with its '_'
read as a space) from which the column is taken as that table's count, when it is also the closest pair both ways
(:func:`counters`). Measured 2026-11-28 (benchmarks/results/counters_2026-11-28.md): "X count" against "Xs" 0.67-0.85
in English, French, German and Polish (renewal count / renewals 0.85); counts named by a synonym are missed (fine
count / overdue fines 0.26, visit count / appointments 0.36); integers that are no count 0.08-0.56 (seats / bookings
0.56, stock / orders 0.44). Limits and what is left score as high as counts (max renewals / renewals 0.82, refills
remaining / refills 0.84): :func:`counts_from_zero` keeps those out when they do not start at zero."""


@dataclass(frozen=True)
class Counter:
    """The parent table's integer ``column`` holds how many rows of ``child`` name its row through ``via`` (a loan's
    renewal count: its renewals). ``shown`` says why: 'examples' (every example parent's value is its number of
    example children) or 'name' (:data:`COUNTER_SIM`)."""

    parent: str
    column: str
    child: str
    via: str
    shown: Literal["examples", "name"]


def counts_from_zero(values: Sequence[Any], default: Any = None) -> bool:
    """Whether a column's example ``values`` could be a count of rows: every one a whole number, none negative, and
    the column starts at zero (its DEFAULT is 0, or an example is 0). A limit (3 renewals at most), an age, a year,
    a quantity of 1..5 or a price does not start at zero."""
    nums = [v for v in values if v is not None]
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in nums):
        return False
    return str(default).strip("'\" ") == "0" or 0 in nums


def counts_shown(parents: Mapping[Any, Any], children: Sequence[Any]) -> bool:
    """Whether every example parent's value (``parents``: key -> value) is its number of example children
    (``children``: the key each example child names), over at least :data:`MIN_PARENTS` parents, one at least with a
    child (all zero with no child shows nothing)."""
    if len(parents) < MIN_PARENTS:
        return False
    named = {k: sum(1 for c in children if c == k) for k in parents}
    return any(named.values()) and all(parents[k] == n for k, n in named.items())


@dataclass(frozen=True)
class CounterCandidate:
    """A parent's integer column that could count rows (:func:`counts_from_zero`), with its example rows' values
    (parent key -> value)."""

    parent: str
    column: str
    values: Mapping[Any, Any]


@dataclass(frozen=True)
class ChildLink:
    """A child table naming a parent through ``via``, with the keys its example rows name there."""

    child: str
    parent: str
    via: str
    keys: Sequence[Any]


def counters(candidates: Sequence[CounterCandidate], links: Sequence[ChildLink],
             similarity: Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]] | None = None
             ) -> list[Counter]:
    """The candidates that count the rows of a child table naming their parent (:class:`Counter`): those whose
    example values equal their number of example children (:func:`counts_shown`), then, with ``similarity`` (names
    x names -> cosine similarities; MiniLM), those whose name is at least :data:`COUNTER_SIM` similar to a child
    table's name and whose pair is the closest both ways (the candidate closest to that child table among its
    parent's candidates, the child table closest to it among its parent's children). One child table is counted by
    at most one column of a parent, through a single reference to it (two references, a loan's lender and
    borrower, make the count ambiguous)."""
    out: list[Counter] = []
    single = [ln for ln in links if sum(1 for o in links if (o.child, o.parent) == (ln.child, ln.parent)) == 1]
    done: set[tuple[str, str]] = set()
    taken: set[tuple[str, str]] = set()
    for cand in candidates:
        for ln in single:
            if ln.parent == cand.parent and (cand.parent, cand.column) not in done and \
                    (ln.child, ln.parent) not in taken and counts_shown(cand.values, ln.keys):
                out.append(Counter(cand.parent, cand.column, ln.child, ln.via, "examples"))
                done.add((cand.parent, cand.column))
                taken.add((ln.child, ln.parent))
    if similarity is None:
        return out
    for parent in dict.fromkeys(c.parent for c in candidates):
        cands = [c for c in candidates if c.parent == parent and (parent, c.column) not in done]
        kids = [ln for ln in single if ln.parent == parent and (ln.child, parent) not in taken]
        if not cands or not kids:
            continue
        sims = similarity([c.column.replace("_", " ") for c in cands], [k.child.replace("_", " ") for k in kids])
        for i, c in enumerate(cands):
            row = [float(x) for x in sims[i]]
            j = row.index(max(row))
            column = [float(sims[i2][j]) for i2 in range(len(cands))]
            if column.index(max(column)) == i and row[j] >= COUNTER_SIM:
                out.append(Counter(parent, c.column, kids[j].child, kids[j].via, "name"))
    return out
