"""Vocabulary lists, cleaned by their structure alone (no word list of any language).

A list the model continues from a column's examples is kept only with items that are: new (compared case-folded,
spaces collapsed), not one text with another number or capital letter ("Work A", "Work B", "Depot 3": numbered
placeholders), not two items of the list glued together ("1984 Charles Dickens"), not an item plus a short suffix
("Aspirin II", "The Great Gatsby 2": uniqueness by suffix), not ending in a digit where no example does ("Dr. Wang7"
after "Dr. Smith", "Dr. Brown": :func:`digit_ended`), not a word said twice in a row ("Antihistamines
antihistamines"), and not a variant of a value kept before it (:func:`variant_of`: "The Catcher in the Rye: The
Complete Edition (ePub)" after "The Catcher in the Rye", "... (Hardcover)" after "... (Paperback)"; one value
spelled twice, :func:`spelled_twice`: "Moby-Dick" after "Moby Dick", "Pramipexole" after "Pramipexol"). A list-valued column (every example a list of short items joined by one separator) is found
from its examples by :func:`list_separator`.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher
from typing import TypeVar

T = TypeVar("T")

SEPARATORS = (", ", "; ", " | ", " / ", "、", "，", ",", ";", "|")
"""Separators a list-valued text may use (punctuation, no words)."""
MAX_ITEM_WORDS = 4


def norm(text: str) -> str:
    return " ".join(str(text).casefold().split())


_COUNT = re.compile(r"(?<![^\W_])\d+(?![^\W_])")
"""A run of digits with no letter right before or after it: a number counting values ("Depot 12", "Item-3"), not
one that is part of a value ("200mg", "Vitamin B12")."""


def stem(text: str) -> str:
    """``text`` with each run of digits that touches no letter as '#' and each one-letter capital token as '?': one
    stem for "Work A" and "Work B", for "Depot 1" and "Depot 12"; "200mg" and "400mg" keep theirs (a dose, not a
    count)."""
    out = _COUNT.sub("#", text)
    return " ".join("?" if len(tok) == 1 and tok.isupper() else tok for tok in out.split())


def numbered(values: Sequence[str], words: Iterable[str] = ()) -> set[str]:
    """The values that share a stem with a number or a one-letter token with at least one other value: placeholders
    in any language ("Work A", "Work B"; "Depot 1", "Depot 2"); with ``words`` (the column's context,
    :func:`words_of`), also a word of them with a counter glued on (:func:`counters`: "Bike1", "ModelA")."""
    stems = [stem(v) for v in values]
    counts = Counter(stems)
    out = {v for v, s in zip(values, stems, strict=True)
           if counts[s] >= 2 and ("#" in s or "?" in s.split()) and any(ch.isalpha() for ch in s)}
    return out | counters(values, words) if words else out


def placeholder_examples(values: Sequence[str], words: Iterable[str] = ()) -> bool:
    """Whether half or more of a column's example texts are numbered placeholders (with ``words``, counted ones
    too: :func:`numbered`)."""
    texts = [v for v in values if v]
    return len(texts) >= 2 and 2 * len(numbered(texts, words)) >= len(texts)


_WORD = re.compile(r"[^\W\d_]+")
"""A run of letters of any script."""


def words_of(texts: Iterable[object]) -> frozenset[str]:
    """The words (runs of letters, case folded) of ``texts``: a column's context for :func:`counters` (its own name,
    its table's, the other columns' example values)."""
    return frozenset(w.casefold() for t in texts if t is not None for w in _WORD.findall(str(t)))


_COUNTER = re.compile(r"^(?P<stem>.*?[^\W\d_])[\s_\-.#]*(?:(?P<num>[1-9]\d?)|(?P<cap>[^\W\d_]))$")
"""A text that ends in a counter: one or two digits without a leading zero, or one letter, after a letter (glued
or after a space or a mark): "Bike12", "Model-A". The letter counts only as a capital after a lower-case letter or
a mark (:func:`_counter`)."""
COUNTER_STEM = 2
"""The fewest characters of a counter's stem."""


def _counter(text: str) -> tuple[str, int] | None:
    """``text``'s stem (case folded, without the marks before the counter) and its counter as a number (a digit's
    value, a letter's place after the stem's script's own "A": any alphabet), or None."""
    m = _COUNTER.match(" ".join(str(text).split()))
    if m is None:
        return None
    stem_, cap = m.group("stem"), m.group("cap")
    if cap is not None:
        before = m.string[m.end("stem") - 1]
        glued_on = m.end("stem") == m.start("cap")
        if not cap.isupper() or (glued_on and not before.islower()):
            return None  # "BMW": a word in capitals, not "Model" and an "A"
    if len(stem_) < COUNTER_STEM:
        return None
    return stem_.casefold(), int(m.group("num")) if cap is None else ord(cap)


def _is_word(stem_: str, words: frozenset[str]) -> bool:
    """Whether a counter's stem is one of ``words`` or the same word inflected: one of the two begins with the
    other and is at most two letters longer ("bike" of the table "bikes")."""
    tail = stem_.split()[-1] if stem_.split() else stem_
    return len(tail) >= COUNTER_STEM and any(
        len(w) >= COUNTER_STEM and abs(len(w) - len(tail)) <= 2 and (w.startswith(tail) or tail.startswith(w))
        for w in words)


def counters(values: Sequence[str], words: Iterable[str]) -> set[str]:
    """The values that are a stem and a counter (:func:`_counter`: "Bike1".."Bike5", "ModelA".."ModelE"), two or
    more of them on one stem with different counters, where the stem's last word is a word of the column's context
    (``words``, :func:`words_of`: the column's name, its table's, the other columns' example values; "bike" of
    the table "bikes", "model" of the column "model"): a placeholder set, told by structure alone in any language.
    A code that counts is not one: a counter of three digits or more ("Room 101", "AB1234"), one with a leading
    zero ("SKU-001"), or a stem that is no word of the context ("Trek FX 3", "Kona Dew 2" of a column "model" of a
    table "bikes")."""
    known = frozenset(w.casefold() for w in words)
    found = {v: _counter(v) for v in values}
    by_stem: dict[str, set[int]] = {}
    for c in found.values():
        if c is not None:
            by_stem.setdefault(c[0], set()).add(c[1])
    return {v for v, c in found.items()
            if c is not None and len(by_stem[c[0]]) >= 2 and _is_word(c[0], known)}


DUMMY_DIGITS = 6
"""The fewest digits a value must hold to be a made-up number by :func:`dummy_number`."""


def dummy_number(text: str) -> bool:
    """Whether ``text`` is a made-up number: :data:`DUMMY_DIGITS` digits or more, each run of them one digit said
    again or counted up or down one at a time ("123-456-7890", "098-765-4321", "111-222-3333", "555-0000";
    digits only, in any script's writing of a number). A real number breaks the ladder somewhere ("227-672-7148",
    "9780451524935"), and so does a counter's zeros before its digit ("0001")."""
    runs = re.findall(r"\d+", str(text))
    if sum(len(r) for r in runs) < DUMMY_DIGITS:
        return False
    for run in runs:
        digits = [int(ch) for ch in run]
        steps = {(b - a) % 10 for a, b in zip(digits, digits[1:], strict=False)}
        if len(steps) > 1 or not steps <= {0, 1, 9}:
            return False
    return True


def dummy_numbers(values: Sequence[str]) -> bool:
    """Whether half or more of a column's example texts (two at least) are made-up numbers (:func:`dummy_number`):
    the model's placeholders, which a code generator draws again."""
    texts = [v for v in values if v]
    return len(texts) >= 2 and 2 * sum(dummy_number(t) for t in texts) >= len(texts)


def said_twice(text: str) -> bool:
    """A word repeated at once ("Lisinopril lisinopril")."""
    words = [norm(w) for w in str(text).split()]
    return any(a == b and any(ch.isalpha() for ch in a) for a, b in zip(words, words[1:], strict=False))


def _suffix(raw: str) -> bool:
    """A short suffix that tells values apart without meaning: a number, one or two characters, a token without
    lowercase letters ("II")."""
    return len(raw.split()) == 1 and (len(raw) <= 2 or raw.isdigit() or not any(c.islower() for c in raw))


def ends_in_digit(text: str) -> bool:
    """Whether ``text``'s last character is a digit (any script's)."""
    t = str(text).rstrip()
    return bool(t) and t[-1].isdigit()


def digit_ended(text: str, examples: Sequence[str]) -> bool:
    """Whether ``text`` ends in a digit where none of ``examples`` does (there being some): a number the
    examples never end in, written on as a uniqueness suffix ("Dr. Wang7", "Dr. Liu2" after "Dr. Smith",
    "Dr. Brown"; a digit glued to a word, which :func:`stem` and :func:`glued` do not see as a count). The
    examples' own character class decides, in any language: where one of them ends in digits, so may a value."""
    return bool(examples) and ends_in_digit(text) and not any(ends_in_digit(e) for e in examples)


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


SHARED = 0.75
"""A value whose beginning, shared with a value kept before it and cut back to a word boundary, covers this share
of the shorter one's characters (spaces collapsed, case folded) is a variant of it. Measured 2026-11-28 (pairs in
tests/meaning/test_meaning.py): distinct values stay under it ("The Lord of the Rings" / "The Lord of the Flies"
0.71, "Der Herr der Ringe" / "Der Herr der Diebe" 0.67, "無印良品 アロマオイル" / "無印良品 アロマディフューザー" 0.73,
"ソニー ワイヤレスイヤホン ブラック" / "... ホワイト" 0.72, "Cien años de soledad" / "Cien años de perdón" 0.63,
"Harry Potter and the Chamber of Secrets" / "... the Prisoner of Azkaban" 0.51); a value and the same with more
words after it is 1.0; the library's editions written without punctuation ("The Catcher in the Rye Complete
Edition Paperback" / "... Hardcover") 0.80. The line sits between a last word that changes after a long shared
beginning (a variant) and a shared beginning of two or three words (a series, a brand: distinct values)."""
SHARED_HEAD = 0.5
"""The same share for a beginning that ends at a punctuation mark (':' '(' '：' '（' ..., a mark not between two
letters or digits, so not "Blu-ray", "J.K", "ハリー・ポッター"): a head and its qualifiers ("The Hobbit: A
Comprehensive Edition (ePub)" / "... (Audio Book)" 0.88, "The Catcher in the Rye: A Novel" / "The Catcher in the
Rye: The Complete Edition" 0.74, "Die Verwandlung (Taschenbuch)" / "Die Verwandlung (Gebundene Ausgabe)" 0.59).
A short head stays under it ("Star Wars: A New Hope" / "Star Wars: The Empire Strikes Back" 0.48)."""


def _wide(ch: str) -> bool:
    """A character of a script written without spaces between words (East Asian wide or full-width: 東, ア)."""
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _boundary(text: str, i: int) -> bool:
    """Whether a word may end before ``text[i]``: the end of the text, a character on either side that is
    neither a letter nor a digit, or a wide one (each ideograph or kana may end a word)."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    return not (a.isalnum() and b.isalnum()) or _wide(a) or _wide(b)


def _mark(text: str, i: int) -> bool:
    """Whether ``text[i]`` is a punctuation mark that ends a head ("Dune:", "Dune (", "デューン：") rather than one
    inside a word ("Blu-ray", "J.K", "Philosopher's")."""
    ch = text[i]
    if not unicodedata.category(ch).startswith("P"):
        return False
    return not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum())


def extends(longer: str, shorter: str) -> bool:
    """Whether ``longer`` is ``shorter`` followed by more words ("The Great Gatsby in New York" of "The Great
    Gatsby"; "東京タワー" of "東京"), compared by :func:`norm`."""
    a, b = norm(longer), norm(shorter)
    return len(a) > len(b) > 0 and a.startswith(b) and _boundary(a, len(b))


def shared_share(a: str, b: str) -> tuple[float, float]:
    """How much of the shorter of ``a`` and ``b`` (by :func:`norm`) their common beginning covers: (up to its last
    word boundary, up to its last punctuation mark that ends a head; :func:`_mark`), each over the shorter's
    length; spaces at the cut are not counted."""
    x, y = norm(a), norm(b)
    short = min(len(x), len(y))
    if not short:
        return 0.0, 0.0
    n = 0
    while n < short and x[n] == y[n]:
        n += 1
    while n > 0 and not (_boundary(x, n) and _boundary(y, n)):
        n -= 1
    head = x[:n].rstrip()
    marks = [i for i in range(len(head)) if _mark(x, i)]
    return len(head) / short, (marks[-1] + 1) / short if marks else 0.0


SPELLED, SPELLED_LEN = 0.9, 10
"""Two values of at least ``SPELLED_LEN`` characters whose letters match this share (difflib's ratio, case folded)
are one value spelled twice. Measured 2026-11-28 on the pharmacy's continued medicines ("Pramipexol" /
"Pramipexole" 0.95, "Dipyridamol" / "Dipyridamole" 0.96, "Lisinopril" / "Lisinoprol" 0.90); distinct values stay
under it ("The Lord of the Rings" / "The Lord of the Flies" 0.86, "Vitamin B12" / "Vitamin B6" 0.86, "Losartan" /
"Valsartan" 0.82, "Rivastatin" / "Fluvastatin" 0.76). Numbered episodes fall over it ("Star Wars: Episode IV" /
"... V" 0.98), as numbered values do elsewhere."""


def bare(text: str) -> str:
    """``text`` case folded with only its letters and digits ("Moby-Dick" and "Moby Dick": "mobydick")."""
    return "".join(ch for ch in str(text).casefold() if ch.isalnum())


def spelled_twice(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are one value written twice: the same letters and digits once punctuation and
    spaces are left out ("Moby Dick" / "Moby-Dick"), or long values that differ in a letter or two
    (:data:`SPELLED`)."""
    x, y = norm(a), norm(b)
    if x == y or not bare(x):
        return x == y
    if bare(x) == bare(y):
        return True
    return min(len(x), len(y)) >= SPELLED_LEN and SequenceMatcher(None, x, y).ratio() >= SPELLED


def variant_of(text: str, kept: Iterable[str]) -> str | None:
    """The value of ``kept`` that ``text`` is a variant of, or None: one of them is the other followed by more
    words (:func:`extends`), or they share most of their beginning (:func:`shared_share`, :data:`SHARED`; a head
    ending in a punctuation mark, :data:`SHARED_HEAD`). Their structure only: no word of any language is read."""
    t = norm(text)
    for k in kept:
        other = norm(k)
        if not other or other == t:
            continue
        if extends(t, other) or extends(other, t) or spelled_twice(t, other):
            return k
        words, head = shared_share(t, other)
        if words >= SHARED or head >= SHARED_HEAD:
            return k
    return None


def spread(values: Sequence[T], k: int, turn: int = 0) -> list[T]:
    """``k`` of ``values`` spread evenly over the whole list, in its order (all of them when there are no more than
    ``k``); ``turn`` moves the picks along (a golden-ratio step each turn, so successive calls see different
    values). Deterministic."""
    n = len(values)
    if n <= k:
        return list(values)
    step = n / k
    offset = (turn * 0.6180339887) % 1.0
    picks = sorted({min(n - 1, int((i + offset) * step)) for i in range(k)})
    return [values[i] for i in picks]


def clean(items: Iterable[str], known: Sequence[str] = (), refused: Sequence[str] = (),
          variants: bool = True) -> list[str]:
    """``items`` in order, without blanks, repeats of each other or of ``known`` (the examples, earlier items),
    numbered placeholders (counting ``refused``, values offered before and left out, and every item given), glued values, suffixed
    values (a digit at the end where no value of ``known`` ends in one: :func:`digit_ended`), words said twice and (with ``variants``) variants of ``known`` or of an earlier item
    (:func:`variant_of`). The model's own examples are cleaned with ``variants`` off: they are the column's
    specification, and two of them may share a beginning."""
    items = list(items)
    seen = {norm(k) for k in known}
    kept = [norm(k) for k in known]
    shown = [str(k) for k in known if str(k).strip()]
    out: list[str] = []
    for raw in items:
        item = " ".join(str(raw).split()).strip(" \t\"'")
        if not item or norm(item) in seen or said_twice(item) or digit_ended(item, shown):
            continue
        if shown and foreign_letters(item, shown):  # another writing system than every example's
            continue
        if glued(item, seen) or (variants and variant_of(item, kept)):
            continue
        seen.add(norm(item))
        kept.append(norm(item))
        out.append(item)
    drop = numbered(list(dict.fromkeys([*known, *refused, *out, *(" ".join(str(i).split()) for i in items)])))
    return [i for i in out if i not in drop]


def scripts(text: str) -> frozenset[str]:
    """The writing systems of ``text``'s letters, as Unicode names them ("LATIN", "CJK", "CYRILLIC", "GREEK",
    "HIRAGANA", ...: the first word of each letter's Unicode name); digits, marks and punctuation have none."""
    out: set[str] = set()
    for ch in text:
        if ch.isalpha():
            try:
                name = unicodedata.name(ch).split()[0].split("-")[0]  # "KATAKANA-HIRAGANA PROLONGED ..."
            except ValueError:  # a letter with no name
                continue
            out.add(ONE_SCRIPT.get(name, name))
    return frozenset(out)


ONE_SCRIPT = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HALFWIDTH": "CJK", "IDEOGRAPHIC": "CJK", "HANGUL": "CJK"}
"""Writing systems one language mixes as a matter of course (Japanese writes kanji, hiragana and katakana in one
sentence), read as one by :func:`scripts`."""


def foreign_letters(text: str, known: Iterable[object]) -> str | None:
    """The letters of ``text`` (joined, in order) whose writing system no text of ``known`` uses, or None: the 1.5B
    model slips into another language's script mid-value ("Customer reported that他们的", an outside support-case
    build of 2026-11-30, its request cut there). Read from Unicode's names of the letters, in any language."""
    seen = frozenset().union(*(scripts(str(k)) for k in known))
    if not seen:
        return None
    odd = "".join(ch for ch in text if ch.isalpha() and not scripts(ch) <= seen)
    return odd or None


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


def clean_tuples(rows: Iterable[Sequence[str]], known: Sequence[Sequence[str]] = (),
                 refused: Sequence[Sequence[str]] = (), distinct: Iterable[int] = (0,),
                 variants: bool = True, loose: Iterable[int] = ()) -> list[tuple[str, ...]]:
    """Rows of several text columns continued together (a title with its author, a make with its model), cleaned
    field by field by the rules of :func:`clean`: a row is kept only when it is new (case-folded) and each of its
    fields passes. A field may repeat a value its column holds in a kept row (an author of two books, a make of
    two models), except in the ``distinct`` places (the key a row is named by: a title is not written twice with
    two authors); a field new to its column must not be blank, a word said twice, glued from values of the rows so
    far (any column's: "1984 George Orwell") or suffixed (:func:`digit_ended` too, by its column's ``known`` values), a variant of the column's values so far (with
    ``variants``), nor another column's value ("Moby Dick" as an author, or its own row's); a numbered placeholder in any place
    (counting ``refused`` and every row given) drops its row. ``known`` (the examples, rows kept before) sets the width.
    The ``loose`` places (a number, a value of a CHECK list: the caller checks them) need only be set: they may repeat
    and equal another place, and are neither a text to compare nor a value to glue."""
    width = len(known[0]) if known else None
    keys = set(distinct)
    free = set(loose)
    kept: list[tuple[str, ...]] = [tuple(str(v) for v in k) for k in known]
    seen_rows = {tuple(norm(v) for v in k) for k in kept}
    columns: list[list[str]] = [[norm(k[i]) for k in kept] for i in range(width or 0)]
    every = {v for i, col in enumerate(columns) if i not in free for v in col}
    shown: list[list[str]] = [[str(k[i]) for k in kept if str(k[i]).strip()] for i in range(width or 0)]
    out: list[tuple[str, ...]] = []
    rows = [tuple(r) for r in rows]
    for raw in rows:
        row = tuple(" ".join(str(v).split()).strip(" \t\"'") for v in raw)
        if width is None:
            width = len(row)
            columns = [[] for _ in range(width)]
            shown = [[] for _ in range(width)]
        key = tuple(norm(v) for v in row)
        texts = [k for i, k in enumerate(key) if i not in free]
        if len(row) != width or not all(row) or key in seen_rows or len(set(texts)) < len(texts):
            continue
        ok = True
        for i, value in enumerate(row):
            n = key[i]
            if i in free:
                continue
            if n in columns[i]:
                if i in keys:
                    ok = False
                continue
            others = {v for j, col in enumerate(columns) if j != i and j not in free for v in col}
            if (said_twice(value) or n in others or glued(value, every) or digit_ended(value, shown[i])
                    or (variants and variant_of(value, columns[i]))):
                ok = False
            if not ok:
                break
        if not ok:
            continue
        seen_rows.add(key)
        for i, n in enumerate(key):
            columns[i].append(n)
            if i not in free:
                every.add(n)
        out.append(row)
    drop: set[tuple[str, ...]] = set()
    for i in range(width or 0):
        if i in free:
            continue
        place = numbered(list(dict.fromkeys([*(str(k[i]) for k in known),
                                             *(str(r[i]) for r in [*refused, *rows] if len(r) > i),
                                             *(r[i] for r in out)])))
        drop.update(r for r in out if r[i] in place)
    return [r for r in out if r not in drop]
