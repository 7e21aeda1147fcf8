"""Vocabulary lists, cleaned by their structure alone (no word list of any language).

A list the model continues from a column's examples is kept only with items that are: new (compared case-folded,
spaces collapsed), not one text with another number or capital letter ("Work A", "Work B", "Depot 3": numbered
placeholders), not two items of the list glued together ("1984 Charles Dickens"), not an item plus a short suffix
("Aspirin II", "The Great Gatsby 2": uniqueness by suffix), and not a word said twice in a row ("Antihistamines
antihistamines"). A list-valued column (every example a list of short items joined by one separator) is found
from its examples by :func:`list_separator`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

SEPARATORS = (", ", "; ", " | ", " / ", "、", "，", ",", ";", "|")
"""Separators a list-valued text may use (punctuation, no words)."""
MAX_ITEM_WORDS = 4


def norm(text: str) -> str:
    return " ".join(str(text).casefold().split())


def stem(text: str) -> str:
    """``text`` with each run of digits as '#' and each one-letter capital token as '?': one stem for "Work A" and
    "Work B", for "Depot 1" and "Depot 12"."""
    out = re.sub(r"\d+", "#", text)
    return " ".join("?" if len(tok) == 1 and tok.isupper() else tok for tok in out.split())


def numbered(values: Sequence[str]) -> set[str]:
    """The values that share a stem with a number or a one-letter token with at least one other value: placeholders
    in any language ("Work A", "Work B"; "Depot 1", "Depot 2")."""
    stems = [stem(v) for v in values]
    counts = Counter(stems)
    return {v for v, s in zip(values, stems, strict=True)
            if counts[s] >= 2 and ("#" in s or "?" in s.split()) and any(ch.isalpha() for ch in s)}


def placeholder_examples(values: Sequence[str]) -> bool:
    """Whether half or more of a column's example texts are numbered placeholders."""
    texts = [v for v in values if v]
    return len(texts) >= 2 and 2 * len(numbered(texts)) >= len(texts)


def said_twice(text: str) -> bool:
    """A word repeated at once ("Lisinopril lisinopril")."""
    words = [norm(w) for w in str(text).split()]
    return any(a == b and any(ch.isalpha() for ch in a) for a, b in zip(words, words[1:], strict=False))


def _suffix(raw: str) -> bool:
    """A short suffix that tells values apart without meaning: a number, one or two characters, a token without
    lowercase letters ("II")."""
    return len(raw.split()) == 1 and (len(raw) <= 2 or raw.isdigit() or not any(c.islower() for c in raw))


def glued(text: str, items: Iterable[str] | set[str]) -> str | None:
    """The item ``text`` starts with when the rest is another item or a short suffix (:func:`_suffix`): a value
    made by gluing or by a uniqueness suffix ("1984 Charles Dickens", "Aspirin II"). None otherwise. ``items`` may
    be a set of :func:`norm` forms already."""
    known = items if isinstance(items, set) else {norm(i) for i in items}
    words = str(text).split()
    t = norm(text)
    for cut in range(len(words) - 1, 0, -1):
        head, rest = norm(" ".join(words[:cut])), " ".join(words[cut:])
        if head != t and head in known and (norm(rest) in known or _suffix(rest)):
            return head
    return None


def clean(items: Iterable[str], known: Sequence[str] = (), refused: Sequence[str] = ()) -> list[str]:
    """``items`` in order, without blanks, repeats of each other or of ``known`` (the examples, earlier items),
    numbered placeholders (counting ``refused``, values offered before and left out), glued values, suffixed
    values and words said twice."""
    seen = {norm(k) for k in known}
    out: list[str] = []
    for raw in items:
        item = " ".join(str(raw).split()).strip(" \t\"'")
        if not item or norm(item) in seen or said_twice(item):
            continue
        if glued(item, seen):
            continue
        seen.add(norm(item))
        out.append(item)
    drop = numbered([*known, *refused, *out])
    return [i for i in out if i not in drop]


def list_separator(values: Sequence[str]) -> str | None:
    """The separator of a list-valued column: at least two examples hold it, and every example split by it gives
    short items (at most ``MAX_ITEM_WORDS`` words) with no sentence mark at the end. None for other columns."""
    texts = [v.strip() for v in values if v and v.strip()]
    for sep in SEPARATORS:
        if sum(sep in t for t in texts) < 2:
            continue
        items = [i.strip() for t in texts for i in t.split(sep)]
        if all(i and len(i.split()) <= MAX_ITEM_WORDS and (i[-1].isalnum() or i[-1] == ")") for i in items):
            return None if positional(texts, sep) else sep
    return None


def positional(texts: Sequence[str], sep: str) -> bool:
    """Whether ``texts`` split by ``sep`` are parts in fixed places rather than a list of like items: every example
    has the same number of parts (two or more) and some place holds one value in all of them (three examples or
    more), or digits in all of them where another place never does ("123 Main St, Anytown, USA": a street, a town, a country; taken as a
    list, its parts were shuffled into "USA, 789 Oak St, Anytown")."""
    parts = [[i.strip() for i in t.split(sep)] for t in texts]
    if len(parts) < 2 or len({len(p) for p in parts}) != 1 or len(parts[0]) < 2:
        return False
    places = list(zip(*parts, strict=True))
    if len(parts) >= 3 and any(len({norm(v) for v in place}) == 1 for place in places):
        return True
    digits = [all(any(ch.isdigit() for ch in v) for v in place) for place in places]
    bare = [not any(ch.isdigit() for v in place for ch in v) for place in places]
    return any(digits) and any(bare)


def list_items(values: Sequence[str], sep: str) -> list[str]:
    """The items of a list-valued column's examples, each once (case-folded), as first written."""
    out: dict[str, str] = {}
    for v in values:
        for i in str(v).split(sep):
            i = i.strip()
            if i:
                out.setdefault(norm(i), i)
    return list(out.values())


def list_counts(values: Sequence[str], sep: str) -> tuple[int, int]:
    counts = [len([i for i in str(v).split(sep) if i.strip()]) for v in values if v]
    return (min(counts), max(counts)) if counts else (1, 1)


def later_lower(values: Sequence[str], sep: str) -> bool:
    """Whether the examples write every item after the first in lower case (as "Aspirin, ibuprofen")."""
    later = [i.strip() for v in values for i in str(v).split(sep)[1:] if i.strip()]
    return bool(later) and all(i[0].islower() for i in later if i[0].isalpha())
