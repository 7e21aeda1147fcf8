"""Requests written by code, and how the lint reads a value written in a request.

When the LLM's wording of a planned task still fails the lint after its repairs, code writes the request from the
plan's facts (the chain's :class:`~pipeline.stages.tasks.planner.chains.Goal` records) with one template per kind of
goal, kept in ``prompts/wording.md`` (English; a section ``<key>_<language>`` overrides one for another language),
so the bank keeps every proved plan. The request goes through the same lint as the LLM's words: it names no tool,
no snake_case table and no id the user cannot know.

How the lint reads values (``[stages.tasks] template_fallback``; :mod:`pipeline.runtime.values`): a value is stated when it is written exactly, or
in a form that gives it back exactly: a date with its year in words ("January 14, 2026", "14 January 2026",
"Jan 14th, 2026", "14th of January 2026"; not "January 14th"), a date and time with its time, a number with
thousands separators or trailing zeros ("1,250", "12.50"); the numbers inside a date are not numbers. Text that
speaks about the request itself ("must state", "as written") is refused whatever the language of the rest.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pipeline.dbmodel.analysis import analyse
from pipeline.dbmodel.columns import check_enums
from pipeline.dbmodel.ddl import scratch_db
from pipeline.dbmodel.keynames import singular
from pipeline.dbmodel.keys import _unique_columns
from pipeline.ir import Environment
from pipeline.prompts import render_section, sections
from pipeline.runtime import reward
from pipeline.runtime import values as _values
from pipeline.runtime.state import Change, table_infos
from pipeline.runtime.values import _ISO_VALUE, dates, numbers  # noqa: F401 (re-exported)
from pipeline.stages.tasks.planner.chains import Chain, Goal, Named, by_name, row_parts

PROMPT = "wording"

# ---------------------------------------------------------------- reading values

_SELF = re.compile(r"must state|as written|must be stated|the (?:request|message) (?:must|should)|user_request")


def speaks_about_itself(text: str) -> str | None:
    """The phrase by which ``text`` speaks about the request rather than as its user ("must state", "as
    written"), in whatever language the rest is; None when it does not."""
    m = _SELF.search(reward.normalize_text(text))
    return m.group(0) if m else None


_CLAUSE_MARK = re.compile(r"[^\w\s'’-]+")  # any punctuation of any script ends a clause


def copied_clause(text: str, description: str, min_words: int = 5) -> str | None:
    """A whole clause of a tool's ``description`` (its words between two punctuation marks, ``min_words`` or more)
    that ``text`` says word for word, normalized; None when it says none. Seen (2026-11-28): "Set the status of an
    order; returns the order as changed, for the order of ..." took "returns the order as changed" from the tool
    that sets an order's status. A clause of ``text`` that is one of those clauses but for one word inserted,
deleted or replaced counts too. Words and punctuation only, so in any language."""
    norm = reward.normalize_text(text)
    said = " " + " ".join(re.findall(r"\w+", norm)) + " "
    own = [re.findall(r"\w+", c) for c in _CLAUSE_MARK.split(norm)]
    clauses = [w for c in _CLAUSE_MARK.split(reward.normalize_text(description))
               if len(w := re.findall(r"\w+", c)) >= min_words]
    for words in clauses:
        if f" {' '.join(words)} " in said:
            return " ".join(words)
    for words in clauses:
        # a clause of the text that is the description's but for one word ("Set the quantity of an order;" from
        # "Set the quantity of one order; ...", the model's repair of a refused copy, 2026-11-28)
        near = next((c for c in own if abs(len(c) - len(words)) <= 1 and _word_edits(c, words) <= 1), None)
        if near is not None:
            return " ".join(near)
    return None


def _word_edits(a: Sequence[str], b: Sequence[str]) -> int:
    """Words inserted, deleted or replaced to turn ``a`` into ``b`` (Levenshtein over words)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = row
    return prev[-1]


def as_words(value: str) -> str:
    """A value of a fixed list as a person writes it: its underscores as spaces (``in_progress`` -> "in progress");
    other values as they are."""
    return value.replace("_", " ").strip() if "_" in value and "@" not in value else value


def number_words(v: int | float) -> str:
    """A number as people write it: a whole amount held as REAL without its ".0" (``4.0`` -> "4", ``101.0`` ->
    "101"; issue 40's audit: "with quantity 4.0", "fine amount 6.0"), any other as Python writes it."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return str(v)


def stated(text: str, value: Any) -> bool:
    """Whether ``text`` states ``value`` in a form that gives it back exactly (:func:`pipeline.runtime.values.stated`),
    a value of a fixed list written as words too (:func:`as_words`: "in progress" states ``in_progress``; the tool's
    list of values gives the exact one back)."""
    if _values.stated(text, value):
        return True
    return isinstance(value, str) and as_words(value) != value and reward.mentions(text, as_words(value))


def without(text: str, values: Sequence[Any]) -> str:
    """``text`` (normalized) with the text ``values`` it mentions taken out, as written or as words."""
    extra = [as_words(v) for v in values if isinstance(v, str) and as_words(v) != v]
    return _values.without(text, [*values, *extra])


class Fixed(NamedTuple):
    """The columns whose text values come from a fixed list (``CHECK (col IN (...))``), as (table, column): a
    person writes such a value as a word ("in progress"), never in quotes as the database holds it."""

    lists: frozenset[tuple[str, str]] = frozenset()
    states: frozenset[tuple[str, str]] = frozenset()
    """Those of them a tool updates by itself (the only column it sets): a state the row moves through, which a
    person says as one ("Please mark it as returned", "a new pending loan"); a fixed list no tool changes (a
    frequency, a genre) is not said as a change of state ("mark it as daily"), but one such value of a new row or of
    a count is said before the thing all the same ("a new daily medication", "How many daily medications are
    there?")."""
    names: frozenset[tuple[str, str]] = frozenset()
    """The column that names a table's row by itself (its declared one-column natural key, else its first text
    column declared UNIQUE): a new row is said by it, "Please add Angel Morgan as a new member", not "a new member
    with name Angel Morgan"."""


_FIXED: dict[int, tuple[Environment, Fixed]] = {}


def state_columns(env: Environment) -> Fixed:
    """:class:`Fixed` of ``env``, read from its DDL and from what its update tools write (language-neutral: the
    schema and the tools, not the columns' names). Kept per environment object (the sampler asks per chain)."""
    hit = _FIXED.get(id(env))
    if hit is not None and hit[0] is env:
        return hit[1]
    if len(_FIXED) >= 16:
        _FIXED.clear()
    found = _state_columns(env)
    _FIXED[id(env)] = (env, found)
    return found


def _names(env: Environment, conn: Any) -> frozenset[tuple[str, str]]:
    """:attr:`Fixed.names`, read from the DDL (``conn``: the tables created, empty) and the declared natural keys."""
    out: set[tuple[str, str]] = set()
    for t in env.tables:
        cols = [(r[1], str(r[2]).upper()) for r in conn.execute(f'PRAGMA table_info("{t.name}")')]
        declared = list(t.natural_key or [])
        if len(declared) == 1 and any(c == declared[0] for c, _ in cols):
            out.add((t.name, declared[0]))
            continue
        unique = {u[0] for u in _unique_columns(conn, t.name) if len(u) == 1}
        first = next((c for c, typ in cols if c in unique and typ == "TEXT"), None)
        if first is not None:
            out.add((t.name, first))
    return frozenset(out)


def _state_columns(env: Environment) -> Fixed:
    lists: set[tuple[str, str]] = set()
    for t in env.tables:
        for col, allowed in check_enums(t.ddl).items():
            if allowed and all(isinstance(v, str) for v in allowed):
                lists.add((t.name, col))
    conn = scratch_db(env.tables)
    try:
        names = _names(env, conn)
        if not lists:
            return Fixed(names=names)
        shapes = analyse(env, conn, table_infos(conn))
    finally:
        conn.close()
    # a state is what a tool moves the row to by itself (a tool that sets the status); a column a tool sets among
    # others (a medication's frequency, with its name and dosage) is a property: "the frequency daily", not "daily"
    updated: set[tuple[str, str]] = set()
    for s in shapes.values():
        if s.kind == "write" and s.op == "update":
            sets = {u.column for us in s.uses.values() for u in us if u.role == "value" and u.column is not None}
            if len(sets) == 1:
                updated |= sets
    return Fixed(frozenset(lists), frozenset(lists & updated), names)


QUOTES = "'\"\u2018\u2019\u201c\u201d\u00ab\u00bb\u201e\u300c\u300d"
"""Quotation marks of any language."""


def needs_quotes(value: str) -> bool:
    """Whether a value holds the punctuation that would run it into the sentence (a list, "aspirin, ibuprofen"), or
    space at its ends, and so is written in quotes; a name, a title or a date is not."""
    return not value or value.strip() != value or bool(re.search(r"[,;:]|\s[-–]\s", value))


def _quoted_forms(values: Sequence[Any]) -> list[tuple[str, re.Pattern[str]]]:
    """(the value as written, a pattern of it between quotation marks of any script) for each of ``values`` that a
    person writes without quotes (:func:`needs_quotes`), as written and as words (:func:`as_words`); longest first."""
    forms: set[str] = set()
    for v in values:
        if isinstance(v, bool) or v is None:
            continue
        s = str(v)
        if needs_quotes(s):
            continue
        forms |= {s, as_words(s)}
    return [(f, re.compile(rf"(?<!\w)[{QUOTES}]\s*({re.escape(f)})\s*[{QUOTES}](?!\w)", re.IGNORECASE))
            for f in sorted(forms, key=lambda f: (-len(f), f))]


def quoted_value(text: str, values: Sequence[Any]) -> str | None:
    """The first of ``values`` that ``text`` writes between quotation marks ("the medication 'Cetirizine'"), else
    None. People do not quote the names and dates they state; a value that needs quotes (:func:`needs_quotes`) may
    have them. Language-neutral: quotation marks of any script (:data:`QUOTES`)."""
    for form, pattern in _quoted_forms(values):
        if pattern.search(text):
            return form
    return None


def unquoted(text: str, values: Sequence[Any]) -> str:
    """``text`` with the quotation marks around each of ``values`` it states taken away (:func:`quoted_value`):
    "renew my loan of 'Moby-Dick'" -> "renew my loan of Moby-Dick"."""
    for _form, pattern in _quoted_forms(values):
        text = pattern.sub(lambda m: m.group(1), text)
    return text


def quoted_listed(chain: Chain, text: str, fixed: Fixed) -> str | None:
    """A value of a fixed list (:class:`Fixed`) the chain's goals hold that ``text`` writes in quotes, as the database
    holds it ("status 'pending'"), else None. Language-neutral: the schema and quotation marks."""
    held: set[str] = set()
    for g in chain.goals:
        pairs = [(ref if "." in ref else f"{g.table}.{ref}", v) for ref, v in g.values]
        pairs += [(ref if "." in ref else f"{g.items or g.table}.{ref}", v) for ref, v in g.where]
        pairs += [(ref, v) for ref, v in g.named if "." in ref]
        held |= {v for ref, v in pairs if isinstance(v, str) and tuple(ref.rsplit(".", 1)) in fixed.lists}
    for v in sorted(held):
        for form in {v, as_words(v)}:
            if re.search(rf"[{QUOTES}]\s*{re.escape(form)}\s*[{QUOTES}]", text, re.IGNORECASE):
                return v
    return None


# ---------------------------------------------------------------- writing a request


EventKey = tuple[str, str, str, tuple[str, ...]]
"""(table, state column, the value a write moves the row to, the references of the facts that name the row)."""


@dataclass(frozen=True)
class Event:
    """How a person asks for what ends with a row in a state (:mod:`pipeline.stages.tasks.events`, the model's
    words): "I'm bringing back {book_title}, it's on {member_name}'s card" for a loan that becomes returned."""

    text: str
    slots: tuple[tuple[str, str], ...]
    """(slot, the reference of the fact it holds, ``books.title``), in the order the goal names the row."""


def event_key(goal: Goal, fixed: Fixed) -> EventKey | None:
    """The :data:`EventKey` of a write that moves one named row to a state and sets nothing else (an update of a
    column a tool sets by itself, :attr:`Fixed.states`); None for any other goal."""
    if goal.kind != "update" or goal.owner or not goal.named or goal.refs or len(goal.values) != 1:
        return None
    (ref, v), = goal.values
    t, _, c = ref.rpartition(".")
    if (t or goal.table) != goal.table or (goal.table, c) not in fixed.states or not isinstance(v, str):
        return None
    return goal.table, c, v, tuple(sorted(r for r, _ in goal.named))  # one event however the planner orders them


def event_slots(key: EventKey, language: str = "en") -> tuple[tuple[str, str], ...]:
    """The slots of ``key``'s event, named from the facts' columns in plain words (``book_title``,
    ``member_name``, ``renewal_date``), each once."""
    w = _Words(language)
    out: list[tuple[str, str]] = []
    for ref in key[3]:
        t, _, c = ref.rpartition(".")
        label = w.label(ref, key[0])
        if t and t != key[0] and w.thing(t).split()[-1] not in label.split():
            label = f"{w.thing(t)} {label}"
        name = re.sub(r"\W+", "_", label.strip().lower()).strip("_") or "value"
        taken = {n for n, _ in out}
        out.append((name if name not in taken else f"{name}_{len(out) + 1}", ref))
    return tuple(out)


class _Words:
    """The template sections in one language (English where the language has no section of its own)."""

    def __init__(self, language: str, fixed: Fixed | None = None,
                 events: Mapping[EventKey, Event] | None = None) -> None:
        self.language = language
        self.keys = set(sections(PROMPT))
        self.fixed = fixed or Fixed()
        self.events = events or {}
        """What a person says for a write that moves a row to a state (:class:`Event`), by :func:`event_key`."""
        self.last: tuple[str, Named, str] | None = None
        """(table, named, owner) of the row the sentence before wrote on: said again as "that order"."""

    def __call__(self, key: str, **values: Any) -> str:
        own = f"{key}_{self.language}"
        return render_section(PROMPT, own if own in self.keys else key, **values)

    def has(self, key: str) -> bool:
        """Whether the language has its own ``key`` section (English: the plain one)."""
        return f"{key}_{self.language}" in self.keys or (self.language == "en" and key in self.keys)

    def state(self, ref: str, table: str, value: Any) -> bool:
        """Whether ``value`` of ``ref`` (``table.column`` or a bare column of ``table``) is a state a tool moves the
        row to (:class:`Fixed`)."""
        t, _, c = ref.rpartition(".")
        return isinstance(value, str) and (t or table, c) in self.fixed.states

    def listed(self, ref: str, table: str, value: Any) -> bool:
        """Whether ``value`` of ``ref`` comes from a fixed list (:class:`Fixed`): written as a word."""
        t, _, c = ref.rpartition(".")
        return isinstance(value, str) and (t or table, c) in self.fixed.lists

    def event(self, goal: Goal) -> str | None:
        """``goal`` said as the event that ends in the state it sets (:class:`Event`), its slots filled with the
        facts that name the row as a person writes them; None when no event is known for it."""
        key = event_key(goal, self.fixed)
        ev = self.events.get(key) if key is not None else None
        if ev is None:
            return None
        facts = dict(goal.named)
        said = {slot: self.value(facts[ref], self.listed(ref, goal.table, facts[ref])) for slot, ref in ev.slots}
        return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: said.get(m.group(1), m.group(0)), ev.text)

    def join(self, items: Sequence[str]) -> str:
        items = list(items)
        if not items:
            return ""
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {self('and')} " + items[-1]

    def value(self, v: Any, state: bool = False) -> str:
        """``v`` as a person writes it: yes/no, a number, a date in words (with the language's ``months``), a value
        of a fixed list as words (``state``: :func:`as_words`), other text as it is, in quotes only when it holds
        the punctuation that would run it into the sentence (a list, "aspirin, ibuprofen")."""
        if isinstance(v, bool):
            return self("yes" if v else "no")
        if isinstance(v, int | float):
            return number_words(v)
        s = str(v)
        if (m := _ISO_VALUE.match(s)) and m.group(2) is None and self.has("months"):
            # a date as people write it ("January 15, 2026"), with the month names of the scenario's language
            months = [x.strip() for x in self("months").split(",")]
            year, month, day = s.split("-")
            if len(months) == 12:
                return self("date", month=months[int(month) - 1], day=str(int(day)), year=year)
        if _ISO_VALUE.match(s):
            return s
        if state:
            return as_words(s)
        if not needs_quotes(s):
            return s
        return f'"{s}"' if "'" in s else f"'{s}'"

    def thing(self, table: str) -> str:
        words = table.replace("_", " ").split()
        if self.language == "en" and words:
            words[-1] = singular(words[-1])
        return " ".join(words)

    def label(self, ref: str, table: str) -> str:
        """``table.column`` (or a bare column of ``table``) in plain words; another table's column says whose."""
        t, _, c = ref.rpartition(".")
        label = c.replace("_", " ").strip()
        if t and t != table:
            owner = self.thing(t)
            if owner.split()[-1] not in label.split():
                label = f"{owner} {label}"
        return label

    def when(self, label: str) -> str | None:
        """The verb of a column named for when something was done, in English ("brewed on" -> "brewed"): it reads
        "when was ... brewed", not "the brewed on of"; None for other columns and other languages."""
        words = label.split()
        if self.language == "en" and len(words) >= 2 and words[-1] in ("on", "at") and words[-2].endswith("ed"):
            return " ".join(words[:-1])
        return None

    def plural(self, label: str) -> bool:
        """Whether an English label ends in a plural ("allergies": "what are the allergies of")."""
        words = label.split()
        return self.language == "en" and bool(words) and singular(words[-1]) != words[-1]

    def named(self, named: Named, table: str) -> str:
        return self.join([self.pair(ref, table, v) for ref, v in named])

    def pair(self, ref: str, table: str, v: Any) -> str:
        return self("pair", label=self.label(ref, table), value=self.value(v, self.listed(ref, table, v)))

    def name(self, table: str, value: Any) -> str:
        """A row of ``table`` named by ``value``: "the book Emma"; the name alone when it begins with the thing's
        word ("Project B", not "the project Project B")."""
        shown = self.value(value)
        first = shown.split()[0].strip("'\"").casefold() if shown.split() else ""
        if first and first == self.thing(table).split()[-1].casefold() and self.has("what_named"):
            return self("what_named", value=shown)
        return self("what_name", thing=self.thing(table), value=shown)

    def what(self, table: str, named: Named, owner: str = "") -> str:
        """The row of ``table`` that ``named`` names (``owner``: a row of ``owner`` named so, and ``table``'s row
        of it) as a person names it: by a name ("the book 'Emma'"), by its parents ("the loan of the book 'Emma'
        and the member 'Bob Stone'"), by its own columns in words; a language without the sections for names and
        parents says every column ("the loan with book title 'Emma' and member name 'Bob Stone'")."""
        if named and (table, named, owner) == self.last and self.has("that"):
            return self("that", thing=self.thing(table))  # the row the sentence before wrote on: "that order"
        if owner:
            return self("what_of", thing=self.thing(table), owner=self.what(owner, named))
        own, parents = row_parts(table, named)
        if not parents and by_name(own) and not _address(own[0][1]) and self.has("what_name"):
            return self.name(table, own[0][1])
        if not parents and (day := self.dated(table, own)) and self.has("what_dated"):
            return self("what_dated", thing=self.thing(table), value=day)  # "the loan from January 5, 2026"
        if not parents or not self.has("what_parents"):
            return self("what", thing=self.thing(table), named=self.named(named, table))
        said = [self.name(t, pairs[0][1]) if by_name(pairs) and not _address(pairs[0][1]) and self.has("what_name") else
                self("what_dated", thing=self.thing(t), value=day) if (day := self.dated(t, pairs)) and self.has(
                    "what_dated") else self("what", thing=self.thing(t), named=self.named(tuple(pairs), t))
                for t, pairs in parents]
        # two parents: "the loan of the book Emma for the member Bob Stone", where the language says so
        rows = self("parents", first=said[0], second=said[1]) if len(said) == 2 and self.has("parents") \
            else self.join(said)
        if own and (day := self.dated(table, own)) and self.has("what_parents_dated"):
            return self("what_parents_dated", thing=self.thing(table), parents=rows, value=day)
        if own:
            return self("what_parents_with", thing=self.thing(table), parents=rows, named=self.named(tuple(own), table))
        return self("what_parents", thing=self.thing(table), parents=rows)

    def dated(self, table: str, facts: Sequence[tuple[str, Any]]) -> str | None:
        """The day ``facts`` name a row of ``table`` by, in words, when they are one date (no time) of a column
        named for the row itself or for its day alone ("loan date" of a loan, a prescription's "date"): "the loan
        from January 5, 2026", not "the loan with loan date January 5, 2026" (issue 40's audit: column-speak);
        else None. The schema's names, no word list."""
        if len(facts) != 1:
            return None
        ref, v = facts[0]
        m = _ISO_VALUE.match(v) if isinstance(v, str) else None
        if m is None or m.group(2) is not None:
            return None
        label = self.label(ref, table).split()
        if len(label) != 1 and not set(self.thing(table).split()) <= set(label):
            return None
        return self.value(v)


_ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _address(value: Any) -> bool:
    """Whether ``value`` is an e-mail address: no name a person calls a row by ("the subscriber
    joseph.baldwin@gmail.com", issue 40's outside audit), said with its label ("the subscriber with email ...")."""
    return isinstance(value, str) and _ADDRESS.fullmatch(value.strip()) is not None


def _changes(w: _Words, goal: Goal, changes: Sequence[Change], skip: Collection[tuple[str, str]],
              others: Collection[str], mark: bool) -> tuple[list[str], list[str]]:
    """What a write sets, in words: (the values of fixed lists it sets, as words: "returned"; the other changes, "the
    renewal count to 4", and the rows they point at) or, for a write that takes no new value, the columns its
    replay changed on its row, else on the rows of tables no other goal updates."""
    sets: list[tuple[str, Any]] = list(goal.values)
    refs = [w("change", label=w.thing(t), value=w.what(t, named)) for _c, t, named in goal.refs]  # not "book id"
    if not sets and not refs and not goal.kind.endswith("delete"):
        mine = [c for c in changes if c.op == "update" and c.table == goal.table and goal.key and
                tuple(c.key) == goal.key]
        for ch in mine or [c for c in changes if c.op == "update" and c.table not in others]:
            for col in ch.changed_columns:
                new = (ch.after or {}).get(col)
                if new is not None and (ch.table, col) not in skip:
                    sets.append((f"{ch.table}.{col}", new))
    states = [w.value(v, True) for c, v in sets if w.state(c, goal.table, v)] if mark else []
    rest = [w("change", label=w.label(c, goal.table), value=w.value(v, w.listed(c, goal.table, v)))
            for c, v in sets if not (states and w.state(c, goal.table, v))]
    return states, rest + refs


def _removed(goal: Goal, changes: Sequence[Change]) -> bool:
    """Whether the replay deleted the row ``goal.named`` names (a delete tool on another table may remove it too:
    a member with their loans)."""
    own = [(ref.rpartition(".")[2], v) for ref, v in goal.named if ref.rpartition(".")[0] == goal.owner]
    return bool(own) and any(c.op == "delete" and c.table == goal.owner and
                             all((c.before or {}).get(k) == v for k, v in own) for c in changes)


def _split_states(w: _Words, goal: Goal, pairs: Sequence[tuple[str, Any]], table: str, key: str
                  ) -> tuple[str, list[tuple[str, Any]]]:
    """``pairs`` split into the values of fixed lists, said as words before the thing ("a new pending loan", when
    the language has the ``key`` section), and the others."""
    if not w.has(key):
        return "", list(pairs)
    states = [w.value(v, True) for c, v in pairs if w.state(c, table, v)]
    return w.join(states) if states else "", [(c, v) for c, v in pairs if not w.state(c, table, v)]


def _sentence(w: _Words, goal: Goal, changes: Sequence[Change], skip: Collection[tuple[str, str]],
              others: Collection[str], number: bool = False, parent: str = "") -> str | None:
    """One goal in words (``number``: the answer is a number; ``parent``: for a ``child`` goal, the table of the row
    created just before); None when its facts cannot be said plainly (a count over a filtered list, a write whose
    change is not known). A value of a fixed list reads as a word where the language has the sections for it:
    "How many pending loans are there?", "Please mark ... as returned", "a new pending loan"."""
    k = goal.kind
    if k == "lookup":
        asked = w.label(goal.asked, goal.table)
        if verb := w.when(asked):
            return w("lookup_when", verb=verb, what=w.what(goal.table, goal.named))
        many = w.plural(asked) and not number  # "volume liters" is one number
        return w("lookup_many" if many else "lookup", asked=asked, what=w.what(goal.table, goal.named))
    if k in ("count", "total", "decide_update", "decide_delete") and not goal.items:
        return None
    items = goal.items.replace("_", " ")
    if k == "count" and goal.where:
        state, where_pairs = _split_states(w, goal, goal.where, goal.items, "count_state")
        if not state and len(goal.where) == 1 and w.listed(goal.where[0][0], goal.items, goal.where[0][1]) and w.has(
                "count_all_state"):
            # one value of a fixed list no tool sets by itself said before the noun too, as a new row's is ("a new
            # open prescription"): "How many open prescriptions are there?", not "have the status open" (issue 40's
            # audit of the example pharmacy, 2026-11-30)
            state, where_pairs = w.value(goal.where[0][1], True), []
        if state and not where_pairs:
            if not goal.named:
                return w("count_all_state", items=items, state=state)
            return w("count_state", items=items, state=state, what=w.what(goal.table, goal.named))
        where = w.join([w.pair(ref, goal.items, v) for ref, v in goal.where])
        if not goal.named:
            return w("count_all_where", items=items, where=where)
        return w("count_where", items=items, where=where, what=w.what(goal.table, goal.named))
    if k == "count":
        return w("count", items=items, what=w.what(goal.table, goal.named))
    if k == "total":
        return w("total", asked=w.label(goal.asked, goal.items), items=items, what=w.what(goal.table, goal.named))
    if k in ("create", "child"):
        state, pairs = _split_states(w, goal, goal.values, goal.table, k + "_state")
        # the new row said by its name where the language says so: "Please add Angel Morgan as a new member"
        named = next(((c, v) for c, v in pairs if (goal.table, c) in w.fixed.names and isinstance(v, str)
                      and not _ISO_VALUE.match(v)), None) if not state and w.has(k + "_as") else None
        if named is not None:
            pairs = [p for p in pairs if p != named]
        listed = [(c, v) for c, v in pairs if w.listed(c, goal.table, v)]
        if not state and named is None and len(listed) == 1 and w.has(k + "_state"):
            # the new row's one value of a fixed list said before it too, "a new open prescription", not "with
            # ..., status open, ..." (issue 40's audit of the example pharmacy: form dictation)
            state, pairs = w.value(listed[0][1], True), [p for p in pairs if p != listed[0]]
        details = ""
        if goal.refs:
            details += " " + w("for", refs=w.join([w.what(t, named) for _, t, named in goal.refs]))
        if pairs:
            stated = [w.pair(c, goal.table, v) for c, v in pairs]
            details += ("," if goal.refs else "") + " " + w("with", values=w.join(stated))
        if k == "child" and parent and any(t == parent for _, t, _ in goal.refs) and w.has("child_named"):
            k = "child_named"  # the refs name the new parent ("for the member Angel Morgan"): not "for this member"
        key = k + "_state" if state else k + "_as" if named is not None else k
        return w(key, thing=w.thing(goal.table), details=details, state=state,
                 parent=w.thing(parent) if parent else w.thing(goal.table),
                 name=w.value(named[1]) if named is not None else "")
    if k == "delete":
        if goal.owner and _removed(goal, changes):
            return w("delete", what=w.what(goal.owner, goal.named))
        return w("delete", what=w.what(goal.table, goal.named, goal.owner))
    if k == "update" and (event := w.event(goal)) is not None:
        return event  # what the person wants done, in the scenario's words: not "mark ... as returned"
    verb = w.when(w.label(goal.asked, goal.table)) if k.startswith("decide_") else None
    mark = w.has("mark") and w.has("mark_and") if k == "update" else \
        k == "decide_update" and w.has(k + "_mark" + ("_when" if verb else ""))
    states, sets = _changes(w, goal, changes, skip, others, mark)
    if k == "update":
        what = w.what(goal.table, goal.named, goal.owner)
        if states:
            return w("mark_and" if sets else "mark", what=what, state=w.join(states), changes=w.join(sets))
        return w("update", what=what, changes=w.join(sets)) if sets else None
    if k in ("decide_update", "decide_delete"):
        if k == "decide_update" and not sets and not states:
            return None
        asked = w.label(goal.asked, goal.table)
        marking = bool(states)
        base = k + ("_mark" if marking else "") + ("_when" if verb else "")
        # a date named for the row itself (a loan's "loan date"): "the latest loan of the book Emma", not "the one
        # with the latest loan date" (the schema's names, no word list; a language with its own sections only)
        own = not verb and goal.which in ("latest", "earliest") and set(w.thing(goal.items).split()) <= set(
            asked.split()) and w.has(base + "_own")
        if own:
            return w(base + "_own", thing=w.thing(goal.items), what=w.what(goal.owner, goal.named), which=w(goal.which),
                     changes=w.join(sets) if sets else "", state=w.join(states),
                     also=(" " + w("and_change", changes=w.join(sets))) if marking and sets else "")
        which = w("last" if goal.which in ("highest", "latest") else "first") if verb else w(goal.which)
        # "the one brewed last", not "the one with the latest brewed on"
        return w(base, items=items, what=w.what(goal.owner, goal.named), verb=verb or "", which=which, asked=asked,
                 changes=w.join(sets) if sets else "", state=w.join(states),
                 also=(" " + w("and_change", changes=w.join(sets))) if marking and sets else "")
    return None


def request_from_plan(chain: Chain, changes: Sequence[Change] = (), *, skip: Collection[tuple[str, str]] = (),
                      language: str = "en", states: Fixed | None = None,
                      events: Mapping[EventKey, Event] | None = None) -> str | None:
    """The request for ``chain`` written from its goals in plain words (``changes``: its replay's row changes, for a
    write that takes no new value; ``skip``: the (table, column) pairs users do not know, ids; ``states``: the
    columns whose values come from a fixed list, :func:`state_columns`; ``events``: what a person says for a write
    that moves a row to a state, :class:`Event`). A value the chain needs that no sentence states is added at the
    end. None when some goal cannot be said plainly."""
    if not chain.goals:
        return None
    w = _Words(language, states, events)
    number = chain.answer is not None and chain.answer.get("type") == "number"
    parts = []
    for i, g in enumerate(chain.goals):
        others = [o.table for o in chain.goals if o is not g and o.kind in ("update", "decide_update")]
        parent = chain.goals[i - 1].table if g.kind == "child" and i else ""
        parts.append(_sentence(w, g, changes, skip, others, number, parent))
        w.last = (g.table, g.named, g.owner) if g.kind in ("update", "delete") and g.named else None
    if any(p is None for p in parts):
        return None
    text = " ".join(p for p in parts if p)
    left = [v for v in chain.must_state if not stated(text, v)]
    if left:
        text += " " + w("also", values=w.join([w.value(v) for v in left]))
    return _one_mark(text)


_MARK_TWICE = re.compile(r"(?<!\.)([.!?])\.(?=\s|$)")


def _one_mark(text: str) -> str:
    """``text`` without a sentence's closing full stop right after a value that closes with its own mark ("... in
    troubleshooting it.. Please", "... and note Is it fixed?."; an outside support-case build of 2026-11-30): the
    value keeps its mark, the sentence adds none. An ellipsis stays."""
    return _MARK_TWICE.sub(r"\1", text)
