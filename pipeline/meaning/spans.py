"""The days a date column's generated rows are drawn from, as its example rows show them (read from values, never
from names).

- :func:`clock_counts`: how many example dates lie before, on and after the environment's clock.
- :func:`spacing`: the examples' mean gap in days between one distinct date and the next (four holidays on
  2026-01-01, -04, -05 and -13: one every 4 days).
- :func:`spread`: a range widened to a width while keeping the share of its days before the clock that the
  examples have (two of four examples before today: half the range before it); its days all on one side when
  every example is.
- :func:`example_span`: the range a column's examples give when the model gave none (the fallback): every example
  inside it, at least :data:`MIN_SPAN` days wide, or the examples' spacing times the table's rows for a column
  no two rows may share (not one value a day where the examples are days apart).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from pipeline.meaning.relations import CLOCK_SPAN, as_date

MIN_SPAN = CLOCK_SPAN
"""Days a range drawn for a table's rows spans at least (four examples within two weeks give half a year)."""
FIRST_DAY, LAST_DAY = date(1900, 1, 1), date(2100, 12, 31)
"""The days a range may reach (as :func:`pipeline.stages.rows.generators.check_column` judges plausible)."""


def _days(values: Sequence[Any]) -> list[date]:
    return sorted(d for d in (as_date(v) for v in values) if d is not None)


def clock_counts(values: Sequence[Any], today: date) -> tuple[int, int, int]:
    """(before, on, after): the example dates before ``today``, on it and after it."""
    days = _days(values)
    return (sum(d < today for d in days), sum(d == today for d in days), sum(d > today for d in days))


def spacing(values: Sequence[Any]) -> float | None:
    """The mean gap in days between the examples' distinct dates, one after another; None with fewer than two."""
    days = sorted(set(_days(values)))
    if len(days) < 2:
        return None
    return (days[-1] - days[0]).days / (len(days) - 1)


def dense_width(values: Sequence[Any], rows: int) -> int:
    """Days ``rows`` different dates need at the examples' :func:`spacing` (one day each at least)."""
    gap = spacing(values)
    return max(rows, math.ceil(rows * gap) if gap is not None else rows)


def spread(lo: date, hi: date, width: int, counts: tuple[int, int, int], today: date | None) -> tuple[date, date]:
    """A range holding ``lo``..``hi``, ``width`` days wide at least, with the share of its days before ``today``
    that the examples have (``counts``, :func:`clock_counts`). Examples none of which is after the clock (or no
    clock): it ends at ``hi`` and reaches back; none before it: it starts at ``lo`` and reaches forward; some on
    each side: before and after the clock in the examples' proportion (an example on the clock's day counts on
    neither side). Within :data:`FIRST_DAY`..:data:`LAST_DAY`."""
    before, _, after = counts
    if today is None or after == 0:
        start, end = min(lo, hi - timedelta(days=width)), hi
    elif before == 0:
        start, end = lo, max(hi, lo + timedelta(days=width))
    else:
        share = before / (before + after)
        total = max(width, (hi - lo).days, (today - lo).days / share, (hi - today).days / (1 - share))
        start = min(lo, today - timedelta(days=math.ceil(total * share)))
        end = max(hi, today + timedelta(days=math.ceil(total * (1 - share))))
    return max(start, FIRST_DAY), min(end, LAST_DAY)


def example_span(values: Sequence[Any], today: date | None, rows: int | None = None) -> tuple[date, date] | None:
    """The range a date column's rows are drawn from when only its example ``values`` say (the model's choice had
    no usable dates): every example inside it, :data:`MIN_SPAN` days wide at least, and with ``rows`` (a column
    no two rows may share) at least :func:`dense_width`; on the clock's sides as the examples are
    (:func:`spread`). None without an example date."""
    days = _days(values)
    if not days:
        return None
    width = max(MIN_SPAN, dense_width(values, rows)) if rows else MIN_SPAN
    counts = clock_counts(values, today) if today is not None else (len(days), 0, 0)
    return spread(days[0], days[-1], width, counts, today)
