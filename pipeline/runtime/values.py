"""How a value is read in text a person wrote: stated exactly, or in a form that gives it back exactly.

A date with its year in words ("January 14, 2026", "14 January 2026", "Jan 14th, 2026", "14th of January 2026"; not
"January 14th"), a date and time with its time, a number with thousands separators or trailing zeros ("1,250",
"12.50"); the numbers inside a date are not numbers. The tasks stage's lint reads requests with it
(``pipeline.stages.tasks.code_wording``), the conversation checks read a simulated user's turns with it
(``verify.conversation``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from . import reward  # relative: exports vendor this file beside reward.py (and usercheck.py)

_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?")
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE_SPAN = re.compile(
    r"(?<!\d)\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2})?)?(?!\d)"
    r"|(?<!\d)\d{1,2}[./-]\d{1,2}[./-]\d{4}(?!\d)"
    rf"|(?<!\w){_DAY}\s+(?:of\s+)?{_MONTH},?\s+\d{{4}}(?!\w)"
    rf"|(?<!\w){_MONTH}\s+{_DAY},?\s+\d{{4}}(?!\w)")
_DAY_OF = re.compile(rf"(?<!\w)(\d{{1,2}})(?:st|nd|rd|th)?\s+of\s+({_MONTH}),?\s+(\d{{4}})(?!\w)")
_ISO_VALUE = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})(:\d{2})?)?$")
_CANONICAL_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d*[1-9])?")


def dates(text: str) -> list[str]:
    """The dates written in ``text`` with their year, as ISO ``YYYY-MM-DD`` (``reward.dates_in`` plus "14th of
    January 2026")."""
    return reward.dates_in(_DAY_OF.sub(r"\1 \2 \3", reward.normalize_text(text)))


def numbers(text: str) -> list[float]:
    """The numbers written in ``text`` as whole tokens, leaving out those inside a date ("January 14, 2026" states
    no 14)."""
    return [n for n, _ in reward.numbers_in(_DATE_SPAN.sub(" ", reward.normalize_text(text)))]


def stated(text: str, value: Any) -> bool:
    """Whether ``text`` states ``value`` in a form that gives it back exactly."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return any(abs(n - value) < 1e-9 for n in numbers(text))
    v = str(value)
    if reward.mentions(text, v):
        return True
    if m := _ISO_VALUE.match(v):
        if m.group(1) not in dates(text):
            return False
        if m.group(2) is None:
            return True
        seconds = m.group(3) or ""
        return reward.mentions(text, m.group(2) + seconds) or (seconds in ("", ":00") and
                                                                reward.mentions(text, m.group(2)))
    if _CANONICAL_NUMBER.fullmatch(v):  # a number kept as text: "1250" stated as "1,250"
        return any(abs(n - float(v)) < 1e-9 for n in numbers(text))
    return False


def without(text: str, values: Sequence[Any]) -> str:
    """``text`` (normalized) with the text ``values`` it mentions taken out: a number inside a stated name
    ("Lidocaine 2") is part of the name, not a statement of that number."""
    out = reward.normalize_text(text)
    for v in sorted({reward.normalize_text(str(v)) for v in values if isinstance(v, str)}, key=len, reverse=True):
        if v.strip():
            out = re.sub(rf"(?<![\w-]){re.escape(v)}(?![\w-])", " ", out)
    return out
