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
from collections.abc import Collection, Sequence
from typing import Any

from pipeline.dbmodel.keynames import singular
from pipeline.prompts import render_section, sections
from pipeline.runtime import reward
from pipeline.runtime.state import Change
from pipeline.runtime.values import _ISO_VALUE, dates, numbers, stated, without  # noqa: F401 (re-exported)
from pipeline.stages.tasks.planner.chains import Chain, Goal, Named, by_name, row_parts

PROMPT = "wording"

# ---------------------------------------------------------------- reading values

_SELF = re.compile(r"must state|as written|must be stated|the (?:request|message) (?:must|should)|user_request")


def speaks_about_itself(text: str) -> str | None:
    """The phrase by which ``text`` speaks about the request rather than as its user ("must state", "as
    written"), in whatever language the rest is; None when it does not."""
    m = _SELF.search(reward.normalize_text(text))
    return m.group(0) if m else None


# ---------------------------------------------------------------- writing a request


class _Words:
    """The template sections in one language (English where the language has no section of its own)."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.keys = set(sections(PROMPT))

    def __call__(self, key: str, **values: Any) -> str:
        own = f"{key}_{self.language}"
        return render_section(PROMPT, own if own in self.keys else key, **values)

    def has(self, key: str) -> bool:
        """Whether the language has its own ``key`` section (English: the plain one)."""
        return f"{key}_{self.language}" in self.keys or (self.language == "en" and key in self.keys)

    def join(self, items: Sequence[str]) -> str:
        items = list(items)
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {self('and')} " + items[-1]

    def value(self, v: Any) -> str:
        if isinstance(v, bool):
            return self("yes" if v else "no")
        if isinstance(v, int | float):
            return str(v)
        s = str(v)
        if (m := _ISO_VALUE.match(s)) and m.group(2) is None and self.has("months"):
            # a date as people write it ("January 15, 2026"), with the month names of the scenario's language
            months = [x.strip() for x in self("months").split(",")]
            year, month, day = s.split("-")
            if len(months) == 12:
                return self("date", month=months[int(month) - 1], day=str(int(day)), year=year)
        if _ISO_VALUE.match(s):
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
        return self.join([self("pair", label=self.label(ref, table), value=self.value(v)) for ref, v in named])

    def what(self, table: str, named: Named, owner: str = "") -> str:
        """The row of ``table`` that ``named`` names (``owner``: a row of ``owner`` named so, and ``table``'s row
        of it) as a person names it: by a name ("the book 'Emma'"), by its parents ("the loan of the book 'Emma'
        and the member 'Bob Stone'"), by its own columns in words; a language without the sections for names and
        parents says every column ("the loan with book title 'Emma' and member name 'Bob Stone'")."""
        if owner:
            return self("what_of", thing=self.thing(table), owner=self.what(owner, named))
        own, parents = row_parts(table, named)
        if not parents and by_name(own) and self.has("what_name"):
            return self("what_name", thing=self.thing(table), value=self.value(own[0][1]))
        if not parents or not self.has("what_parents"):
            return self("what", thing=self.thing(table), named=self.named(named, table))
        rows = self.join([self("what_name", thing=self.thing(t), value=self.value(pairs[0][1]))
                          if by_name(pairs) and self.has("what_name") else self("what", thing=self.thing(t), named=self.named(tuple(pairs), t))
                          for t, pairs in parents])
        if own:
            return self("what_parents_with", thing=self.thing(table), parents=rows, named=self.named(tuple(own), table))
        return self("what_parents", thing=self.thing(table), parents=rows)


def _changes(w: _Words, goal: Goal, changes: Sequence[Change], skip: Collection[tuple[str, str]],
             others: Collection[str]) -> list[str]:
    """What a write sets, in words: its new values and the rows they point at, or (a write that takes no new
    value) the columns its replay changed on its row, else on the rows of tables no other goal updates."""
    out = [w("change", label=w.label(c, goal.table), value=w.value(v)) for c, v in goal.values]
    out += [w("change", label=w.thing(t), value=w.what(t, named)) for _c, t, named in goal.refs]  # not "book id"
    if out or goal.kind.endswith("delete"):
        return out
    mine = [c for c in changes if c.op == "update" and c.table == goal.table and goal.key and tuple(c.key) == goal.key]
    for ch in mine or [c for c in changes if c.op == "update" and c.table not in others]:
        for col in ch.changed_columns:
            new = (ch.after or {}).get(col)
            if new is not None and (ch.table, col) not in skip:
                out.append(w("change", label=w.label(f"{ch.table}.{col}", goal.table), value=w.value(new)))
    return out


def _removed(goal: Goal, changes: Sequence[Change]) -> bool:
    """Whether the replay deleted the row ``goal.named`` names (a delete tool on another table may remove it too:
    a member with their loans)."""
    own = [(ref.rpartition(".")[2], v) for ref, v in goal.named if ref.rpartition(".")[0] == goal.owner]
    return bool(own) and any(c.op == "delete" and c.table == goal.owner and
                             all((c.before or {}).get(k) == v for k, v in own) for c in changes)


def _sentence(w: _Words, goal: Goal, changes: Sequence[Change], skip: Collection[tuple[str, str]],
              others: Collection[str], number: bool = False) -> str | None:
    """One goal in words (``number``: the answer is a number); None when its facts cannot be said plainly (a count
    over a filtered list, a write whose change is not known)."""
    k = goal.kind
    if k == "lookup":
        asked = w.label(goal.asked, goal.table)
        if verb := w.when(asked):
            return w("lookup_when", verb=verb, what=w.what(goal.table, goal.named))
        many = w.plural(asked) and not number  # "volume liters" is one number
        return w("lookup_many" if many else "lookup", asked=asked, what=w.what(goal.table, goal.named))
    if k in ("count", "total", "decide_update", "decide_delete") and not goal.items:
        return None
    if k == "count" and goal.where:
        where = w.join([w("pair", label=w.label(ref, goal.items), value=w.value(v)) for ref, v in goal.where])
        if not goal.named:
            return w("count_all_where", items=goal.items.replace("_", " "), where=where)
        return w("count_where", items=goal.items.replace("_", " "), where=where, what=w.what(goal.table, goal.named))
    if k == "count":
        return w("count", items=goal.items.replace("_", " "), what=w.what(goal.table, goal.named))
    if k == "total":
        return w("total", asked=w.label(goal.asked, goal.items), items=goal.items.replace("_", " "),
                 what=w.what(goal.table, goal.named))
    if k in ("create", "child"):
        details = ""
        if goal.refs:
            details += " " + w("for", refs=w.join([w.what(t, named) for _, t, named in goal.refs]))
        if goal.values:
            pairs = [w("pair", label=w.label(c, goal.table), value=w.value(v)) for c, v in goal.values]
            details += ("," if goal.refs else "") + " " + w("with", values=w.join(pairs))
        return w(k, thing=w.thing(goal.table), details=details)
    if k == "delete":
        if goal.owner and _removed(goal, changes):
            return w("delete", what=w.what(goal.owner, goal.named))
        return w("delete", what=w.what(goal.table, goal.named, goal.owner))
    sets = _changes(w, goal, changes, skip, others)
    if k == "update":
        return w("update", what=w.what(goal.table, goal.named, goal.owner), changes=w.join(sets)) if sets else None
    if k in ("decide_update", "decide_delete"):
        if k == "decide_update" and not sets:
            return None
        asked = w.label(goal.asked, goal.table)
        if verb := w.when(asked):  # "the one brewed last", not "the one with the latest brewed on"
            return w(k + "_when", items=goal.items.replace("_", " "), what=w.what(goal.owner, goal.named), verb=verb,
                     which=w("last" if goal.which in ("highest", "latest") else "first"),
                     changes=w.join(sets) if sets else "")
        return w(k, items=goal.items.replace("_", " "), what=w.what(goal.owner, goal.named), which=w(goal.which),
                 asked=asked, changes=w.join(sets) if sets else "")
    return None


def request_from_plan(chain: Chain, changes: Sequence[Change] = (), *, skip: Collection[tuple[str, str]] = (),
                      language: str = "en") -> str | None:
    """The request for ``chain`` written from its goals in plain words (``changes``: its replay's row changes, for a
    write that takes no new value; ``skip``: the (table, column) pairs users do not know, ids). A value the
    chain needs that no sentence states is added at the end. None when some goal cannot be said plainly."""
    if not chain.goals:
        return None
    w = _Words(language)
    number = chain.answer is not None and chain.answer.get("type") == "number"
    parts = [_sentence(w, g, changes, skip, [o.table for o in chain.goals
                                             if o is not g and o.kind in ("update", "decide_update")], number)
             for g in chain.goals]
    if any(p is None for p in parts):
        return None
    text = " ".join(p for p in parts if p)
    left = [v for v in chain.must_state if not stated(text, v)]
    if left:
        text += " " + w("also", values=w.join([w.value(v) for v in left]))
    return text
