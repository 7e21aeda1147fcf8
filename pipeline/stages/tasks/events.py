"""What a person asks for when a write moves a row to a state: the scenario's own words for the event.

Issue 40's reader audit (2026-11-29, the library): every write that sets a state column was asked as status
dictation, "Please mark the loan of the book X for the member Y as returned", which no member or clerk says; a
person asks for the event that ends in that state ("I'm bringing back The Hobbit, it's on Laura Brown's card").
The model words such events well when asked for one in prose, with an example; it picks badly from menus. So,
once per (table, state column, value, facts that name the row) the planned writes need (:func:`needed`, the most
frequent first, at most ``limit``), the model writes the person's message with a ``{slot}`` per fact that names the
row (:func:`ask_events`). Code keeps it only when every slot is there once and no other brace, no digit or value of
its own, nothing about the message itself, neither it nor one of its sentences reading as another of the column's
values (MiniLM, :func:`sentence_nearer_other`), and the build's wording lint passes on the requests it makes for real
chains (``lint``); code then says such a write with it (:meth:`pipeline.stages.tasks.code_wording._Words.event`), the
refused half of a compound and a single refusal too (the outcome the person wants). Without a kept event, code
says the write as before. Language-neutral: slots, digits, values, sentence stops of any script and the lint; no word
lists.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.dbmodel.columns import check_enums
from pipeline.ir import Environment
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning.goals import Encode, default_encode
from pipeline.prompts import render_section
from pipeline.stages.feedback import ask_with_feedback
from pipeline.stages.tasks.code_wording import (
    Event,
    EventKey,
    Fixed,
    _Words,
    as_words,
    event_key,
    event_slots,
    request_from_plan,
    speaks_about_itself,
    state_columns,
)
from pipeline.stages.tasks.planner.chains import Chain

STAGE = "events"
PROMPT = "events"
LIMIT = 6
"""Events asked for per environment (issue 42 counts tokens): the most frequent ones."""
CHECK_WITH = 3
"""Chains an event is linted on."""
_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_QUOTED_SLOT = re.compile(r"([\"'\u2018\u2019\u201a\u201c\u201d\u201e\u00ab\u00bb\u2039\u203a])(\{[A-Za-z_][A-Za-z0-9_]*\})"
                          r"([\"'\u2018\u2019\u201b\u201c\u201d\u201f\u00ab\u00bb\u2039\u203a])")
"""A slot between quotation marks of any script ('{book_title}'): the quotes are dropped, as a person writes a title."""
MARGIN = 0.1
"""How much nearer (MiniLM cosine) an event's words may be to another of the column's values than to its own before
code refuses it: "I'm bringing back {book_title}" said for a loan becoming "pending" is 0.17 nearer "returned"; a
right event can sit a little nearer another value ("please cancel it" 0.03 nearer "scheduled" than "cancelled")."""


class Said(BaseModel):
    model_config = ConfigDict(extra="forbid")
    template: str = Field(..., min_length=8, max_length=300)


def needed(chains: Sequence[Chain], fixed: Fixed,
           first: Mapping[tuple[str, str], str] | None = None) -> dict[EventKey, list[Chain]]:
    """The events ``chains``' goals need (:func:`~pipeline.stages.tasks.code_wording.event_key`), each with the
    chains that need it, the most frequent first (ties by key). ``first``: (table, state column) -> the state a new
    row takes (:func:`pipeline.dbmodel.lifecycle.initial_state`); a write back to it needs no event. What
    makes a row hold its first state is its making, and the model words it so: asked what makes a loan "pending",
    it wrote "I'm requesting to borrow {book_title} for the member named {member_name}.", and that request, said
    for a rule's refused write (a returned loan set back to pending), made a task that scores a clerk who lends the
    book as wrong (2026-11-30, the example library). Such a write is said by code's words, as before events."""
    found: dict[EventKey, list[Chain]] = {}
    first = first or {}
    for ch in chains:
        for key in {k for g in ch.goals if (k := event_key(g, fixed)) is not None
                    if first.get((k[0], k[1])) != k[2]}:
            found.setdefault(key, []).append(ch)
    return {k: found[k] for k in sorted(found, key=lambda k: (-len(found[k]), k))}


def spoken(chain: Chain, events: Mapping[EventKey, Event], fixed: Fixed) -> Chain:
    """``chain`` with the states its events say left out of what its request must state: "I'm bringing back The
    Hobbit" asks for the loan to become returned without the word (a value another goal also holds stays)."""
    said = [g for g in chain.goals if (k := event_key(g, fixed)) is not None and k in events]
    if not said:
        return chain
    implied = {repr(g.values[0][1]) for g in said}
    held = {repr(v) for g in chain.goals if g not in said
            for v in [*(v for _, v in g.named), *(v for _, v in g.values), *(v for _, v in g.where)]}
    held |= {repr(v) for g in said for _, v in g.named}
    must = [v for v in chain.must_state if repr(v) not in implied or repr(v) in held]
    return replace(chain, must_state=must) if len(must) != len(chain.must_state) else chain


def unquoted(text: str) -> str:
    """``text`` with the quotation marks around its slots dropped (:data:`_QUOTED_SLOT`)."""
    return _QUOTED_SLOT.sub(r"\2", text)


_STOPS = ("!.?\u0589\u055c\u055e\u061f\u06d4\u0964\u0965\u104a\u104b\u1362\u1367\u1368\u166e\u17d4\u17d5"
          "\u1803\u1809\u2026\u203c\u203d\u2047\u2048\u2049\u2e2e\u3002\ufe12\ufe52\ufe56\ufe57\uff01\uff0e"
          "\uff1f\uff61")
_SENTENCE_END = re.compile(f"[{re.escape(_STOPS)}]+[\"'\u2019\u201d\u00bb\u300d\u300f)\\]]*(?=\\s|$)"
                           "|[\u3002\uff01\uff1f\uff61\ufe12]+")
"""The end of a sentence in any script: a run of sentence stops (Unicode's sentence terminals: ". ! ?", the
ideographic full stop, the danda, the Arabic question mark, ...) before a space or the end, closing quotes
included; the full stops of scripts written without spaces anywhere."""
MIN_LETTERS = 8
"""A piece between two stops with fewer letters (:func:`_letters`) than this ("Mr.", "Thanks!", "谢谢！") is no sentence
of its own: it is judged with the next one (the last, with the one before)."""


def sentences(text: str) -> list[str]:
    """``text`` split into its sentences (:data:`_SENTENCE_END`), each as written, a piece of fewer than
    :data:`MIN_LETTERS` letters (slots left out) joined to its neighbour. Punctuation and letters only, so in any
    language."""
    pieces: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        pieces.append(text[start:m.end()].strip())
        start = m.end()
    pieces.append(text[start:].strip())
    out: list[str] = []
    carry = ""
    for p in (p for p in pieces if p):
        p = f"{carry} {p}".strip() if carry else p
        carry = "" if _letters(p) >= MIN_LETTERS else p
        if not carry:
            out.append(p)
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


def _letters(text: str) -> int:
    """The letters of ``text``, slots left out: a letter or mark of any script, a wide one (an ideograph, a kana: a
    script written without spaces, where one character says what a word says) as three."""
    return sum((3 if unicodedata.east_asian_width(ch) in "WF" else 1)
               for ch in _SLOT.sub(" ", text) if ch.isalpha() or unicodedata.category(ch).startswith("M"))


def nearer_other(text: str, value: Any, values: Sequence[Any], encode: Encode) -> Any | None:
    """Another of ``values`` that ``text`` (slots left out) is clearly nearer than ``value`` (by :data:`MARGIN`,
    MiniLM cosine of the words with each value as words), or None: the event says another state than the one its
    writes set. Language-neutral: the column's own values, in the scenario's words."""
    got = sentence_nearer_other(text, value, values, encode, whole=True)
    return got[1] if got is not None else None


def sentence_nearer_other(text: str, value: Any, values: Sequence[Any], encode: Encode,
                          whole: bool = False) -> tuple[str, Any] | None:
    """(the words, the other value) when ``text`` as a whole (:func:`nearer_other`'s measure), or one of its sentences
    (:func:`sentences`), reads clearly as another of ``values`` than ``value``; None otherwise (``whole``: the whole
    message only). Seen (2026-11-29): "I'm bringing back {book_title} for {member_name}." was refused for a loan
    becoming "pending"; the model added "Please place the book in the library's collection." and the whole passed.
    A sentence counts when it is :data:`MARGIN` nearer the other value than its own and says that value at least as
    strongly as any sentence says ``value``: a sentence that says no state ("It's on the card of {member_name}.",
    "Thanks so much.") leans by chance, a hair nearer one value or another, and is said weaker than the event."""
    others = [v for v in values if v != value]
    if not others:
        return None
    parts = sentences(text) if not whole else []
    parts = [text, *parts] if len(parts) > 1 else [text]
    vecs = encode([*(_SLOT.sub(" ", p) for p in parts), as_words(str(value)), *(as_words(str(v)) for v in others)])
    n = len(parts)
    own = [float(vecs[n] @ vecs[i]) for i in range(n)]
    near = [max((float(vecs[n + 1 + j] @ vecs[i]), j) for j in range(len(others))) for i in range(n)]
    if near[0][0] - own[0] > MARGIN:
        return text, others[near[0][1]]
    strongest = max(own[1:], default=0.0)
    for i in range(1, n):
        sim, j = near[i]
        if sim - own[i] > MARGIN and sim >= strongest:
            return parts[i], others[j]
    return None


_WORD = re.compile(r"\w+")


def tacked_on(text: str, scenario: str, own: Sequence[str]) -> tuple[str, str] | None:
    """(the slot, the words before it) when ``text`` puts a slot at the end of its sentence one word after a phrase of
    the scenario's own description, which closes the clause by itself: "... that I borrowed from the library by
    {member_name}." (the example library's event for a returned loan, 2026-11-30: "from a library" is the
    description's, and the member's name, glued on by "by", reads as the library's); ("", the words) when a sentence
    ends on that one word with no slot after it (the model's answer to the refusal: "{member_name}, I want to return
    ... that I borrowed from the library by."). The phrase is the three words
    before that one word, the description's three in a row but for one of the first two (an article the model
    changed), the last word the same and not a word of ``own`` (the tables' and slots' words: "the order for
    {patient_name}" names the thing, no place); None otherwise. Words, slots and sentence stops only: any language."""
    said = [m.group(0).casefold() for m in _WORD.finditer(scenario)]
    grams = {tuple(said[i:i + 3]) for i in range(len(said) - 2)}
    mine = {w.casefold() for o in own for w in _WORD.findall(o.replace("_", " "))}
    for sentence in sentences(text):
        found = list(_SLOT.finditer(sentence))
        if found and not _WORD.search(sentence[found[-1].end():]):  # the sentence ends with a slot
            slot, before = found[-1].group(1), _WORD.findall(sentence[found[-2].end() if len(found) > 1 else 0:
                                                                       found[-1].start()])
        else:  # a sentence ending on a word: the slot taken out and its word left behind ("from the library by.")
            slot, before = "", _WORD.findall(sentence[found[-1].end() if found else 0:])
        phrase = tuple(w.casefold() for w in before[-4:-1])
        if len(before) < 4 or any(w in mine for w in phrase):
            continue
        if any(g[2] == phrase[2] and sum(a != b for a, b in zip(g[:2], phrase[:2], strict=True)) <= 1 for g in grams):
            return slot, " ".join(before[-4:])
    return None


def problem(key: EventKey, event: Event, chains: Sequence[Chain], fixed: Fixed, language: str,
            lint: Callable[[Chain, str], str | None], values: Sequence[Any] = (),
            encode: Encode | None = None, scenario: str = "", own: Sequence[str] = ()) -> str | None:
    """Why ``event`` cannot say ``key``'s writes, or None: a slot missing, unknown or said twice, a digit or one of
    the first chain's values written out, words about the message itself, a slot tacked on after the scenario's own
    words (:func:`tacked_on`, ``scenario``: its name and description, ``own``: the tables' names), or ``lint``
    refusing the request code writes with it for one of ``chains``."""
    thing = _Words(language).thing(key[0])
    slots = [s for s, _ in event.slots]
    found = _SLOT.findall(event.text)
    missing = [s for s in slots if s not in found]
    if missing:
        return render_section(PROMPT, "missing", slots=", ".join("{" + s + "}" for s in missing))
    outside = _SLOT.sub(" ", event.text)
    if any(s not in slots for s in found) or "{" in outside or "}" in outside:
        return render_section(PROMPT, "unknown", slots=", ".join("{" + s + "}" for s in slots))
    twice = next((s for s in slots if found.count(s) > 1), None)
    if twice is not None:
        return render_section(PROMPT, "twice", slot="{" + twice + "}")
    if re.search(r"\d", outside):
        return render_section(PROMPT, "digits")
    if speaks_about_itself(outside):
        return render_section(PROMPT, "itself")
    glued = tacked_on(event.text, scenario, [*own, *slots]) if scenario else None
    if glued is not None:
        if not glued[0]:
            return render_section(PROMPT, "dangling", words=glued[1])
        return render_section(PROMPT, "tacked", slot="{" + glued[0] + "}", words=glued[1], thing=thing)
    found_other = sentence_nearer_other(event.text, key[2], values, encode) if encode is not None else None
    if found_other is not None:
        part, other = found_other
        words = {"thing": thing, "value": as_words(str(key[2])), "other": as_words(str(other))}
        if part == event.text:
            return render_section(PROMPT, "other", **words)
        return render_section(PROMPT, "other_sentence", sentence=part, **words)
    for ch in chains[:1]:  # the values the model was shown: written out, they would be wrong for the next row
        goal = next(g for g in ch.goals if event_key(g, fixed) == key)
        facts = dict(goal.named)
        for slot, ref in event.slots:
            shown = str(facts.get(ref, ""))
            if len(shown) > 1 and re.search(rf"(?<!\w){re.escape(shown)}(?!\w)", outside, re.IGNORECASE):
                return render_section(PROMPT, "value", value=shown, slot="{" + slot + "}", thing=thing)
    for ch in chains:
        ch = spoken(ch, {key: event}, fixed)
        text = request_from_plan(ch, (), language=language, states=fixed, events={key: event})
        if text is None:
            continue
        why = lint(ch, text)
        if why:
            return render_section(PROMPT, "lint", text=text, problem=why, thing=thing)
    return None


def _messages(env: Environment, key: EventKey, slots: tuple[tuple[str, str], ...], example: Chain, fixed: Fixed,
              language: str) -> list[dict[str, Any]]:
    w = _Words(language)
    table, column, value, _refs = key
    goal = next(g for g in example.goals if event_key(g, fixed) == key)
    facts = dict(goal.named)
    ddl = next((t.ddl for t in env.tables if t.name == table), "")
    values = [as_words(str(v)) for v in check_enums(ddl).get(column, ())] or [as_words(value)]
    return [{"role": "system", "content": render_section(PROMPT, "system", language=language)},
            {"role": "user", "content": render_section(
                PROMPT, "user", system=env.scenario.name, description=env.scenario.description,
                thing=w.thing(table), label=w.label(column, table), values=", ".join(values), value=as_words(value),
                slots="\n".join(f"{{{s}}}: for example {w.value(facts[ref])}" for s, ref in slots))}]


def ask_events(env: Environment, client: LLMClientProtocol, chains: Sequence[Chain], *,
               lint: Callable[[Chain, str], str | None], language: str = "en", limit: int = LIMIT,
               max_attempts: int = 3, encode: Encode | None = default_encode,
               first: Mapping[tuple[str, str], str] | None = None) -> tuple[dict[EventKey, Event], list[str]]:
    """The events the first ``limit`` of ``chains``' needed ones (:func:`needed`) are said by, as the model wrote
    them and code kept them (:func:`problem`), and a line per event the model's words failed for (its last
    problem): code says those writes as before. ``first``: the state a new row takes, per state column
    (:func:`needed`): no event is asked for a write back to it."""
    fixed = state_columns(env)
    kept: dict[EventKey, Event] = {}
    failed: list[str] = []
    for key, users in list(needed(chains, fixed, first).items())[:limit]:
        slots = event_slots(key, language)
        check_on = users[:CHECK_WITH]
        ddl = next((t.ddl for t in env.tables if t.name == key[0]), "")
        values = list(check_enums(ddl).get(key[1], ()))

        def check(reply: Said, key: EventKey = key, slots: tuple[tuple[str, str], ...] = slots,
                  check_on: list[Chain] = check_on, values: list[Any] = values) -> tuple[Event | None, str | None]:
            ev = Event(unquoted(" ".join(reply.template.split())), slots)
            why = problem(key, ev, check_on, fixed, language, lint, values, encode,
                          scenario=f"{env.scenario.name}. {env.scenario.description}", own=[t.name for t in env.tables])
            return (None, why) if why else (ev, None)

        out = ask_with_feedback(client, Said, _messages(env, key, slots, users[0], fixed, language), check,
                                stage=STAGE, max_attempts=max_attempts, max_tokens=120,
                                feedback=lambda e: render_section(PROMPT, "feedback", problem=e),
                                retry_temperature=0.7)
        if out.value is not None:
            kept[key] = out.value
        else:
            failed.append(f"{key[0]}.{key[1]} -> {key[2]}: {out.error or 'no reply'}")
    return kept, failed
