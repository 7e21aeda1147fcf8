"""The code checks of a simulated user's turn: the one implementation, for ``envfoundry eval --conversation`` and
every export.

**Stdlib only**, importing only its siblings ``values`` and ``reward`` (relatively), so exports copy it byte for
byte beside them and a trainer's simulated user is checked exactly as envfoundry's is
(:mod:`verify.conversation` re-exports these names).

A fact is any object with ``label``, ``value`` and ``about`` attributes (``verify.conversation.Fact``, or
:class:`Fact` here, read from an exported task's ``conversation``). A mistake of the user is a :class:`UserError`,
counted apart from the agent's errors: a fact given before the agent asked for it (``leak``), a date or number it
was never given (``invented``), a tool name or an id (``tool_or_id``), an end while the agent waits for a fact it
asked for (``early_stop``), an empty turn (``empty``). ``STOP`` ends a conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from . import reward
from .values import dates, numbers, stated, without

STOP = "###STOP###"
_STOP = re.compile(r"#{2,}\s*stop\s*#*", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{3,}")
_ID_WORDS = re.compile(r"(?<![\w])(?:id|ids|identifier|record number)(?![\w])\s*[:#]?\s*\d", re.IGNORECASE)

ErrorKind = Literal["leak", "invented", "tool_or_id", "early_stop", "empty", "no_stop"]
"""``no_stop``: the user said its last turn again instead of ending a conversation (the harness ends it), or never
ended one whose task was done (found when it is scored)."""


@dataclass(frozen=True)
class Fact:
    """A value the user knows and gives when asked (an exported task's ``conversation.facts`` entry)."""

    label: str
    value: Any
    about: str = ""

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Fact:
        return cls(label=str(obj.get("label", "")), value=obj.get("value"), about=str(obj.get("about") or ""))


def fact_line(label: str, value: Any, about: str = "") -> str:
    """``- label (about): value``, as the user's prompt lists a fact."""
    about = f" ({about})" if about and about not in label else ""
    return f"- {label}{about}: {value}"


@dataclass(frozen=True)
class UserError:
    turn: int
    kind: ErrorKind
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "kind": self.kind, "detail": self.detail}


def _stem(word: str) -> str:
    w = word.casefold()
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w[:6]


def _words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(reward.normalize_text(text))}


_CLAUSE = re.compile(r"[,;:?!.()]|\band\b|\bor\b", re.IGNORECASE)


def asked_for(fact: Any, agent_text: str, facts: list[Any] | None = None) -> bool:
    """Whether the agent's message asks about ``fact``: it names a word of the fact's label that no other fact's
    label has ("patient" of "patient name" beside "medication name"); or a word the label shares, while it names
    none of those other facts by their own words; or what the fact is about, while it names no field of the other
    facts about that thing (a user asked "which book?" may give the book's title; one asked "what is the author of
    the book?" only the author)."""
    others = [f for f in facts or () if f is not fact]
    def field(f: Any) -> set[str]:  # "order" of "order date" about the order names the thing, not the field
        return _words(f.label) - _words(f.about)

    # the words that name something: the facts' fields and the things they are about, but not the connecting words
    # of an about made of others ("the loan of the renewal", the wording's ``what_of``: its "the" is in every
    # question, and would read as naming that loan in "what is the member name of the loan?")
    abouts = {f.about for f in [fact, *others] if f.about}
    named = set().union(*(field(f) for f in [fact, *others]),
                        *(_words(a) for a in abouts if not any(b != a and b in a for b in abouts)))

    label, about = field(fact), _words(fact.about)

    def own(f: Any) -> set[str]:
        return field(f) - set().union(*(field(g) for g in facts or () if g is not f))

    def asks(said: set[str]) -> bool:
        if own(fact) & said:
            return True
        if label & said:  # a shared label word: unless the clause names another such fact by words this one lacks
            mine = label | about
            return not any(((field(f) | _words(f.about)) - mine) & said & named
                           for f in others if field(f) & label)
        if about & said:
            same = [f for f in others if _words(f.about) & about]
            return not any(field(f) & said for f in same)
        return False

    # clause by clause: "who is the member, which book, and for how many days?" asks three things
    return any(asks(_words(c)) for c in _CLAUSE.split(agent_text) if c.strip())


def says(text: str, value: Any) -> bool:
    """Whether ``text`` states ``value`` (``values.stated``; a yes/no value never counts as said)."""
    return not isinstance(value, bool) and stated(text, value)


def split_stop(text: str) -> tuple[str, bool]:
    """The turn's text without the stop token, and whether it had one."""
    stop = bool(_STOP.search(text or ""))
    return _STOP.sub(" ", text or "").strip(), stop


def check_turn(facts: list[Any], hidden: list[Any], tools: list[str], agent: list[str], user: list[str], text: str,
               stop: bool, turn: int) -> list[UserError]:
    """The user errors of one user turn: ``facts`` and ``hidden`` are the user's script (what it may give when
    asked; what it never knows), ``tools`` the environment's tool names, ``agent`` the agent's messages so far (the
    last one is the message this turn answers), ``user`` the user's earlier turns (the opening first)."""
    errors: list[UserError] = []
    last = agent[-1] if agent else ""
    before = " ".join(agent + user)
    if not text.strip() and not stop:
        errors.append(UserError(turn, "empty", "the user said nothing and did not end the conversation"))
    leaked: set[str] = set()
    for f in facts:  # one value may be two facts (the renewal's book and the new loan's): asked for either is asked
        if (says(text, f.value) and not says(before, f.value) and repr(f.value) not in leaked
                and not any(asked_for(g, last, facts) for g in facts if g.value == f.value)):
            leaked.add(repr(f.value))
            errors.append(UserError(turn, "leak", f"gave {f.label} {f.value!r} before the agent asked for it"))
    known_numbers = {float(n) for f in facts for n in _numbers_of(f.value)}
    known_dates = {d for f in facts for d in dates(str(f.value))}
    said_numbers = set(numbers(before)) | known_numbers
    said_dates = set(dates(before)) | known_dates
    hidden_numbers = {float(v) for v in hidden if isinstance(v, int | float) and not isinstance(v, bool)}
    names = [f.value for f in facts if isinstance(f.value, str)]
    for n in numbers(without(text, names) if names else text):
        if n in said_numbers:
            continue
        kind: ErrorKind = "tool_or_id" if n in hidden_numbers else "invented"
        errors.append(UserError(turn, kind, f"said the number {n:g}, which it was never given"))
    for d in dates(text):
        if d not in said_dates:
            errors.append(UserError(turn, "invented", f"said the date {d}, which it was never given"))
    low = text.casefold()
    for tool in tools:
        if tool.casefold() in low and tool.casefold() not in before.casefold():
            errors.append(UserError(turn, "tool_or_id", f"named the tool {tool}"))
    for v in hidden:
        if isinstance(v, str) and says(text, v) and not says(before, v):
            errors.append(UserError(turn, "tool_or_id", f"said {v!r}, a value read from a tool"))
    if _ID_WORDS.search(text) and not _ID_WORDS.search(before):
        errors.append(UserError(turn, "tool_or_id", "gave an id"))
    questions = " ".join(re.findall(r"[^.!?]*\?", last))
    if stop and questions:  # a question that names a fact the user has not given yet
        pending = [f for f in facts if _words(f.label) & _words(questions)
                   and asked_for(f, questions, facts) and not says(before + " " + text, f.value)]
        if pending:
            errors.append(UserError(turn, "early_stop", f"ended while the agent asked for {pending[0].label}"))
    return errors


def _numbers_of(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    return [float(n) for n in numbers(str(value))]
