"""The policy stage: the domain's rules as the LLM knows them, grounded by code in candidates checked on real calls.

``make_policy(env, client, settings, language) -> StageResult[ir.Environment]`` (``[stages.build] policy``, after
the tools). The LLM first writes the domain's rules in prose (``prompts/policy.md`` ``prose``: what a real business
of the scenario refuses, and when; before it sees any candidate). Code proposes candidate rules from the schema and
the seeded rows and keeps those that allow some real calls of the write they govern and forbid others
(``pipeline.stages.policy.candidates``: a state some tool changes, a limit, a threshold on the request's own amount or on a
state, a time window; never a column the schema stage classified as a personal characteristic; each one dropped is
a Rejection with the reason). Each prose rule grounds in one of them (:func:`ground`: MiniLM similarity between the
prose and the candidate's :func:`gist`, best pairs first, each used once, none below :data:`GROUND_MIN`, and only
where the prose is about what the candidate is about, :func:`fits`: the nearest table to the prose is one the
candidate's tool writes, its condition reads or its row names, and the prose is near its tool's description and its
condition's columns and values, and it says the candidate's condition in the candidate's own words,
:func:`may_ground`: a state's listed value, a limit's items and a count, a date's or a threshold's column): prose
that grounds in nothing is dropped with a Rejection saying why, and a candidate no prose supports is not used. The
LLM then words the grounded rules in one small structured request (``word``: each rule's condition as code checks it, with the
prose it grounds, and an id), checked by code and fed back on a problem: a message is one whole sentence (not cut)
that says what its condition checks (:func:`unsaid`: the value compared with and a word of the column) and no
other rule (:func:`off_rule`: the message passes :func:`fits`' tests for its own candidate), and writes none of
the request's ids (:func:`ids_in`: "r2", "a7" are the request's handles, never a clerk's words); a message
that still does not is code's wording of the rule (the sections of each kind). A state guard's message is
followed by code's sentence of its whole condition (:func:`said_whole`: the row's state may no longer be changed, not only
set to the same state again). When the LLM writes no usable prose,
code picks from its shortlist and words the rules itself (a Rejection says so). A grounded cap or threshold takes
the number its prose states where real calls check it (:func:`at_stated`). Then the seeded rows obey the rules
(:func:`obeyed`: rows a rule would have forbidden writing are changed within it or deleted, or the rule is dropped;
where rows changed, the rules are checked again on them). The environment comes back with ``rules``: each with the
real calls it was checked on; ``policy.md`` is rendered from them by the catalog.

Exception paths: where code found compliant alternatives to a shortlisted candidate's write
(:func:`pipeline.stages.policy.candidates.alternatives`), the same request lists them under it (``pick_instead``; at most
:data:`ALTERNATIVES_SHOWN`, each with an id) and each picked rule may name one (``instead``). :func:`check_instead`
checks it is offered for that rule, that no other picked rule forbids it, and that the message names its value;
a message that does not (or that is refused for another reason) is fed back, and when no better reply comes the
rule keeps the alternative with code's words; a rule a later reply leaves worded by code without one keeps the
valid alternative an earlier reply picked for it (:func:`kept_picks`). A rule the LLM gives none, and every rule code picks, offers none (``ir.Rule.alternative`` None).

After a repair (the verify loop rewrote a blamed tool or a blamed table's rows), :func:`recheck_policy` checks every
rule again with the same check on real calls (each rule as the candidate it was, :func:`rule_candidates`): a rule
that no longer allows some working call and forbids another, or whose alternative no longer works where it
forbids its write (or is forbidden there by another rule kept), is dropped with a Rejection naming it and why; the
others keep the calls they now hold on.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import render_section, sections
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import qi
from pipeline.settings import BuildSettings
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, copied_words, user
from pipeline.stages.policy.candidates import (
    CHECK_MAX,
    Candidate,
    Checked,
    Finder,
    Option,
    _tables,
    alternatives,
    broken_by_rows,
    check,
    most_held,
    number_text,
    offered_conflicts,
    proposals,
    usual_calls,
)
from pipeline.stages.policy.candidates import (
    label as _label,
)
from pipeline.stages.policy.seeded import obey

STAGE = "policy"
PROMPT = "policy"
SHORTLIST = 10
"""Candidates shown to the LLM (a small model reads ten lines, not forty)."""
MIN_RULES = 3
MESSAGE_MAX = 200
MAX_TOKENS = 90
"""Reply budget per rule picked (an id and one sentence)."""
ALTERNATIVES_SHOWN = 20
"""Alternatives listed in the pick request in all (a small model reads a short list)."""
INSTEAD_TOKENS = 10
"""More reply budget per rule when alternatives are offered (an alternative's id)."""
_SNAKE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")
_WORD = re.compile(r"\w+")
OWN_WORDS = 5
"""Words a rule's message must say besides a run it shares with a tool's description: the condition."""
PROSE_MIN, PROSE_MAX = 3, 6
"""Rules the LLM writes in prose, before it sees any candidate."""
PROSE_TOKENS = 40
GROUND_MIN = 0.45
"""MiniLM similarity a prose rule needs with a candidate's :func:`gist` to ground in it. Measured on two domains
(a brewery, a permit office): a rule and the candidate that says it 0.53-0.82 (the right one first for 7 of 9 rules;
matched as one text, the action and its condition, this beat the mean of their separate similarities, 3 of 9, and
the code's message, 4 of 9); unrelated prose 0.16-0.27."""
TABLE_MARGIN = 0.05
"""How much nearer to the prose another table may be than the nearest a candidate is about (:func:`fits`); measured
(:func:`ground`): a near tie 0.005 (a fee's rule: permits, applicants), the wrong subject 0.097 (a renewal's rule: renewals
0.621, loans 0.524) and 0.126 (unpaid fines: overdue fines 0.463, loans 0.337)."""
ACTION_MIN = 0.25
"""MiniLM similarity a prose rule needs with the candidate's tool description: right pairs 0.389-0.673, a return's
rule with "Record a new loan" 0.144."""
ACTION_MARGIN = 0.02
"""How much nearer to the prose another tool's description may be than the candidate's tool's (:func:`fits`), as
:data:`TABLE_MARGIN` for tables: the prose's nearest write tool is the one the rule is about. Measured on the pharmacy
of the committed example (``tests/fixtures/pharmacy_orders.json``, 2026-11-30): "If a patient's medication
expiration date has passed, the prescription will be rejected." is nearer add_prescription (0.428) than
add_medicine (0.403, a new medication's expiration date): refused; "A prescription cannot be filled if the patient's
age is less than 18." add_prescription 0.470, add_medicine 0.359. A state the prose names by its listed value is
exempt (the value says which row's state: "An order whose status is 'closed' may no longer be changed." on
update_orders_quantity, a frozen state), as a guard is from the table's test; so is a link (``linked``: the prose
names the link table, and the table its tool writes is the nearest to the prose, in place of the table's test: "A
prescription cannot be filled if the patient's allergies do not match the medication." is nearer
update_prescriptions_quantity, 0.464, than create_prescriptions, 0.434); so is a count (a ``form``), whose items
and number :func:`counted` has read in the prose ("At most 47 orders per medication." is nearer another tool's
description, 0.41, than create_orders', 0.27)."""
CONDITION_MIN = 0.2
"""MiniLM similarity a prose rule needs with the candidate's condition in words: right pairs 0.265-0.875 ("stronger
than 6.2 percent" for "the abv given is above 6.2" the least), unrelated prose at most 0.1."""


GUARD_MIN = 0.4
"""The joint similarity a state guard (:func:`guards`) named by its listed value needs with its valued :func:`gist`
(the action as setting the value, :func:`guard_action`), in place of :data:`GROUND_MIN` and of the nearest-table
test: the value, said in its own characters, is what says the prose is about that row's state. Measured on the
library of the committed example (2026-11-28, ``tests/fixtures/book_lending_guard.json``): "A member cannot return a
book that has already been returned." with update_loans_status' "the loan's status is 'returned'" 0.432 (action
0.350 as "Set the status of one loan: returned", 0.220 as the description alone; its nearest table books 0.286,
loans 0.167), with the renewals' same guard 0.412; prose not about the state 0.16-0.27 (:data:`GROUND_MIN`)."""


def _written(tool: ir.Tool) -> set[str]:
    """The tables ``tool``'s write steps name."""
    return {t for s in tool.steps if s.kind == "write" for t in _tables(s.sql)}


def guards(env: ir.Environment, c: Checked) -> bool:
    """Whether candidate ``c`` is a state guard: a state of a row (``state``) that its own tool sets (a parameter of
    the tool lists the state's value, and the tool writes the row's table), so the rule forbids changing a row already
    in that state ("a loan already returned cannot be set again")."""
    w = c.candidate.words
    if w.get("section") != "state" or not w.get("value"):
        return False
    written = _written(env.tool(c.candidate.tool))
    tool = env.tool(c.candidate.tool)
    return (bool(written & _tables(c.candidate.condition))
            and any(p.enum and w["value"] in [str(v) for v in p.enum] for p in tool.params))


def guard_action(c: Checked, env: ir.Environment, words: Words) -> str:
    """A state guard's action as setting its state's value (the ``guard_action`` section: "Set the status of one
    loan: returned"): what prose that forbids doing it again says ("cannot return a book already returned")."""
    action = env.tool(c.candidate.tool).description.strip().split(";")[0].rstrip(".")
    return words("guard_action", action=action, value=c.candidate.words["value"].replace("_", " "))


RULE_MESSAGE_MAX = next(m.max_length for m in ir.Rule.model_fields["message"].metadata if hasattr(m, "max_length"))
"""The longest message a rule holds (``ir.Rule.message``)."""


def said_whole(text: str, c: Checked, env: ir.Environment, words: Words) -> str | None:
    """The LLM's message ``text`` for candidate ``c`` followed, for a state guard (:func:`guards`), by code's
    sentence of its whole condition (the ``state_guard`` section: "Once the loan's status is 'returned', the loan may
    no longer be changed."). A guard grounds prose that forbids setting its value again (:func:`guard_action`), and
    its message names the value (:func:`unsaid`), but the condition forbids every call of its tool on a row in that
    state, a move to another state too (the refused write a task plans:
    ``pipeline.dbmodel.lifecycle.behind``, since the same state again would change nothing). The model's
    sentence keeps the domain's reason in its words; code's says what the condition forbids, whole: whether the
    model's sentence already does is not read (that would need each language's words for "again" and "change").
    ``text`` as it is for any other candidate, or when it already holds code's sentence; None when the two do not
    fit in a rule's message (:data:`RULE_MESSAGE_MAX`): the rule is then code's wording alone.

    Seen 2026-11-29 (the library of the committed example): "A member cannot return a book that has already been
    returned." for update_loan_status' "the loan's status is 'returned'", whose tasks ask to refuse "mark the loan
    ... as pending" on a returned loan: the policy gave an agent no grounds for it."""
    if not guards(env, c):
        return text
    w = c.candidate.words
    extra = words("state_guard", **w)  # the value as the rows hold it, quoted: what an agent reads in them
    if " ".join(extra.split()).casefold() in " ".join(text.split()).casefold():
        return text
    joined = f"{text} {extra}"
    return joined if len(joined) <= RULE_MESSAGE_MAX else None


class Words:
    """The ``prompts/policy.md`` sections in one language (English where it has none of its own)."""

    def __init__(self, language: str = "en") -> None:
        self.language, self.keys = language, set(sections(PROMPT))

    def __call__(self, key: str, **values: Any) -> str:
        own = f"{key}_{self.language}"
        return render_section(PROMPT, own if own in self.keys else key, **values)


def message(c: Checked, words: Words) -> str:
    """What a clerk says for the candidate, written by code: the section of its kind, a listed value's underscores
    read as spaces (``in_conservation`` is "in conservation", as :func:`names_value` reads it). The sections need no
    article before a noun the schema names ("the object's status", "per object"): no language's rule for one is
    guessed."""
    w = c.candidate.words
    return words(w["section"], **{k: v.replace("_", " ") if k in ("value", "which") else v for k, v in w.items()})


def describe(c: Checked, rid: str, env: ir.Environment, words: Words,
             offered: Sequence[tuple[str, Option]] = (), prose: str = "") -> str:
    """One line of the ``pick`` prompt: the id, the action (the tool's description) and when it is forbidden (and,
    with ``prose``, the LLM's own rule it grounds: ``candidate_prose``); then a line per alternative action offered
    for it (``candidate_instead_set`` / ``candidate_instead``: the action and the values it may set, each with its
    id)."""
    action = env.tool(c.candidate.tool).description.strip().rstrip(".")
    when = words(c.candidate.words["section"] + "_when", **c.candidate.words)
    if prose:
        when = words("candidate_prose", when=when, prose=prose)
    groups: dict[tuple[str, ...], list[str]] = {}
    for aid, o in offered:  # one line per alternative action, its values side by side ("a1 'x', a2 'y'")
        shape = tuple(f"{k}={v}" for k, v in sorted(o.words.items()) if k != "value")
        groups.setdefault(shape, []).append(f"{aid} '{o.words['value']}'")
    lines = []
    for shape, choices in groups.items():
        w = dict(item.split("=", 1) for item in shape)
        lines.append(words("candidate_" + w["section"], **{**w, "choices": ", ".join(choices)}))
    return "\n".join([words("candidate", id=rid, action=action, when=when)] + lines)


def instead(o: Option, words: Words) -> str:
    """What a clerk offers instead, written by code (the ``instead_set`` or ``instead`` section)."""
    return words(o.words["section"], **o.words)


_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:[,.'\u00a0\u202f ]\d{3})+(?![\w]|[.,]\d)")
"""A whole number written with a separator between groups of three digits ("1,200,000", "1.200.000", "1 200 000")."""


def names_value(text: str, value: Any) -> bool:
    """Whether ``text`` names an alternative's distinguishing value (a CHECK-listed value, its underscores read as
    spaces: ``on_hold`` is "on hold"), as whole words, whatever the case; a whole number also as written with its
    digits grouped by threes ("1,200,000" for 1200000)."""
    said = re.escape(str(value).replace("_", " ").strip()).replace(r"\ ", r"[\s_-]+")
    if not said:
        return False
    if re.search(rf"(?<!\w){said}(?!\w)", text, re.I) is not None:
        return True
    digits = str(value).strip()
    return digits.isdigit() and any(re.sub(r"\D", "", m.group()) == digits for m in _GROUPED.finditer(text))


def one_request(text: str, c: Checked) -> str | None:
    """A value of one request that a rule's message names, or None: the row or the value the rule was probed with
    (its probed parameter's values in the calls it was checked on: an id, a code, an amount) or another number of
    those calls from 10 up, other than the numbers its condition compares with. A rule is a condition any request
    may meet, not a fact about one ("The amount due 657 is above 566, so ..."); small numbers are left alone (a
    count of 3 and a row 3 read alike)."""
    own = {c.candidate.words.get(k, "") for k in ("value", "which")}
    for call in (*c.forbidden, *c.allowed):
        for name, v in call.items():
            if v is None or isinstance(v, bool):
                continue
            if isinstance(v, int | float):
                said = number_text(v)
                if abs(v) < 10 or said in own:
                    continue
            elif name == c.candidate.probe and isinstance(v, str) and len(v.strip()) >= 3 and v not in own:
                said = v
            else:
                continue
            if names_value(text, said):
                return said
    return None


def _stem(word: str) -> str:
    return word.casefold()[:max(3, min(5, len(word) - 1))]


def unsaid(text: str, c: Checked) -> str | None:
    """What of its condition a rule's message leaves out, or None: the value the condition compares with (a listed
    value, a threshold, a cap; as :func:`names_value` reads it) and, but for a listed value (which names its state:
    "a submitted permit"), a word of the column it reads or of the items it counts (the schema's own name, a word of
    the message starting as it does: "published" says "publication year"); a cap's number as a count of its items,
    per the row it groups by (:func:`counted`: "A request for a new order must be made within 24 hours of the
    previous one." names 24 and orders, and says no cap of 24 orders per medication). So a message says what its
    condition checks, whole, whatever the language of the schema."""
    w = c.candidate.words
    for key in ("value", "which") if w.get("section") == "limit_where" else ("value",):
        if w.get(key) and not names_value(text, w[key]):
            return repr(w[key])
    said = [x.casefold() for x in _WORD.findall(text)]
    if w.get("section") == "parent_state" and not _names(said, w.get("owner", "")):
        return w["owner"]  # whose state: the value alone may be the row's own ("a returned renewal")
    if w.get("section") in ("state", "parent_state"):
        return None  # a listed value names its state ("a submitted permit")
    for key in ("label", "items") if w.get("section", "").startswith("limit") else ("label",):
        if not _names(said, _own(w) if key == "label" else w.get(key, "")):
            return w[key]
    if w.get("section", "").startswith("limit") and not counted(text, c)[0]:
        return f"{w['value']} {w['items']} per {w['thing']}"  # its number counts them, per the row grouped by
    return None


def _own(w: dict[str, str]) -> str:
    """The words of a candidate's column (``label``) that name it and not another column of its table (``kin``):
    a word they share ("date" of "due date" and "loan date", "amount" of two amounts) says neither; those that
    also name its row (``thing``: "loan" of a loan's "loan date") only when nothing else is left. The schema's own
    words, so this holds whatever its language; the whole label when every word is shared."""
    words = [x for x in _WORD.findall(w.get("label", "")) if len(x) > 2]
    kin = {x.casefold() for x in _WORD.findall(w.get("kin", ""))}
    own = [x for x in words if x.casefold() not in kin]
    mine = [x for x in own if not _names([x.casefold()], w.get("thing", ""))]
    return " ".join(mine or own) or w.get("label", "")


def _names(said: Sequence[str], label: str) -> bool:
    """Whether the words ``said`` (case-folded) name a word of ``label`` (the schema's own name), as
    :func:`unsaid` reads them; a label without a word of three letters is named by anything."""
    names = [x for x in _WORD.findall(label) if len(x) > 2]
    return not names or any(y.startswith(_stem(x)) for x in names for y in said)


DATED = ("row_past", "row_future", "value_past")
"""Conditions on a date against today: a prose rule says one by naming the date it reads."""


def _said_words(text: str) -> list[str]:
    return [x.casefold() for x in _WORD.findall(text)]


_DATES = re.compile(r"\d+(?:[-/:.]\d+){2,}|\d+[/:]\d+")
"""A date or a time written with digits ("2026-01-15", "15.01.2026", "12/31", "09:30"): no number a rule compares."""
_NUMBER = re.compile(r"(?<![\dA-Za-z.,-])(\d+)(?:[.,](\d+))?(?![0-9A-Za-z]|-\d)(\s?[%\u066a\u2030])?")
"""A number written with digits (any script's), with a decimal part after a point or a comma, and a percent sign;
next to a letter of a script without spaces it is still one ("一人5冊"), next to a Latin one it is an ordinal or a
code ("5th", "A7"), and a part of a code ("BP-2025-014") is none."""


@dataclass(frozen=True)
class Stated:
    """A number a prose rule states: its value, and whether it counts (a whole number, no decimal part, no percent:
    what a cap may be)."""

    value: float | int
    count: bool


def numbers(text: str) -> list[Stated]:
    """The numbers ``text`` states with digits, in its order (dates and times aside; "1,200,000" and "1.200.000"
    read as one number, :data:`_GROUPED`). Numbers written as words are not read: that would need each language's
    words for them (the prose request asks for digits)."""
    return [st for _, _, st in _spans(text)]


def _spans(text: str) -> list[tuple[int, int, Stated]]:
    """:func:`numbers` with where each one is written in ``text`` (start, end)."""
    found: list[tuple[int, int, Stated]] = []
    masked = text
    for m in _GROUPED.finditer(text):
        found.append((m.start(), m.end(), Stated(int(re.sub(r"\D", "", m.group())), True)))
        masked = masked[:m.start()] + " " * (m.end() - m.start()) + masked[m.end():]
    masked = _DATES.sub(lambda m: " " * len(m.group()), masked)
    for m in _NUMBER.finditer(masked):
        whole_part, decimals, percent = m.group(1), m.group(2), m.group(3)
        value: float | int = float(f"{int(whole_part)}.{decimals}") if decimals else int(whole_part)
        found.append((m.start(), m.end(), Stated(value, not decimals and not percent and int(whole_part) > 0)))
    return sorted(found, key=lambda e: e[0])


NEAR = 3
"""Words on each side of a number that say what it counts (:func:`near`): "at most 3 inspections", "3 active
loans", "renewed at most 2 times"; "within 24 hours of the previous one" names no order."""
WORD_MIN = 0.6
"""MiniLM similarity of a word next to a number with what a cap counts (or a threshold's column) for the word to
name it when it does not start as the schema's word does (:func:`Similar`)."""


def _breaks(ch: str) -> bool:
    """A character that ends a clause: punctuation other than a quote, a hyphen, a percent or a connector."""
    return unicodedata.category(ch) in ("Po", "Ps", "Pe") and ch not in "'%\u066a\u2030&@#*/\\"


def near(text: str, start: int, end: int, k: int = NEAR) -> tuple[list[str], list[str]]:
    """The words (case-folded, no number) before and after ``text[start:end]``, at most ``k`` on each side, within
    its clause (no clause-ending punctuation between): what a number is a number of, in any language's order."""
    before, after = text[:start], text[end:]
    cut = max((i for i, ch in enumerate(before) if _breaks(ch)), default=-1)
    before = before[cut + 1:]
    cut = next((i for i, ch in enumerate(after) if _breaks(ch)), len(after))
    after = after[:cut]

    def words(part: str) -> list[str]:
        return [w.casefold() for w in _WORD.findall(part) if not w.isdigit()]

    return words(before)[-k:], words(after)[:k]


class Similar:
    """Whether a word names a label: the schema's word (:func:`_names`) or, with MiniLM (``embed``), a word at
    least :data:`WORD_MIN` similar to it ("books" and "loans" are not; "prescriptions" and "scripts" may be). Without
    ``embed``, the schema's words alone."""

    def __init__(self, embed: bool = False) -> None:
        self.embed = embed
        self._cache: dict[tuple[str, str], float] = {}

    def __call__(self, word: str, label: str) -> bool:
        if not label or _names([word], label):
            return bool(label)
        if not self.embed or len(word) < 3:
            return False
        key = (word, label)
        if key not in self._cache:
            self._cache[key] = similarities([word], [label])[0][0]
        return self._cache[key] >= WORD_MIN


def counted(text: str, c: Checked, same: Similar | None = None) -> tuple[list[Stated], str]:
    """The numbers prose ``text`` states that speak of what candidate ``c`` (a threshold or a cap) compares, and
    why none does (or ""):

    - a cap (``limit``, ``limit_where``) counts its items per row of the table it groups by (``thing``): a number
      counts them when a word next to it (:func:`near`) names the items, or a table they belong to other than the
      one grouped by (``others``: "5 books" for the loans of a member), and the first word after it does not name
      the row grouped by ("5 medications" counts medications, not orders per medication); and the prose must name
      the row grouped by elsewhere ("per medication", "a patient"). A number of something else ("within 24 hours
      of the previous one") is no cap's number;
    - a threshold on a column (``row_over``, ``value_over``): the number's clause names the column, or (the
      request's own value) the number lies within the column's seeded values ("stronger than 6.2 percent" for
      the abv).

    Words are the schema's own (:func:`_names`), or MiniLM-near ones (``same``), in whatever language; numbers are
    digits. Seen 2026-11-28 (the pharmacy of the committed example): "A request for a new order must be made within
    24 hours of the previous one." grounded in a pharmacy-wide cap of 24 orders per medication, and the build
    deleted 23 seeded orders to fit it."""
    same = same or Similar()
    w = c.candidate.words
    section = w.get("section", "")
    spans = _spans(text)
    if section.startswith("limit"):
        items = [w.get("items", ""), *[x for x in w.get("others", "").split(",") if x.strip()]]
        grouped = w.get("thing", "")
        out = []
        for start, end, st in spans:
            if not st.count:
                continue
            before, after = near(text, start, end)
            if after and grouped and same(after[0], grouped):
                continue
            if any(same(x, label) for x in before + after for label in items):
                out.append(st)
        if not out:
            said = ", ".join(number_text(n.value) for n in numbers(text)) or "no number"
            return [], (f"the rule states {said}, none of it a count of {w.get('items', '')} (the cap counts "
                        f"{w.get('items', '')} per {grouped})")
        words = [x.casefold() for x in _WORD.findall(text)]
        if grouped and not any(same(x, grouped) for x in words):
            return [], (f"the rule does not say per what it counts: the cap counts {w.get('items', '')} per "
                        f"{grouped}, a word the rule does not name")
        return out, ""
    if section in ("row_over", "value_over"):
        label = w.get("label", "")
        seeded = [v for v in getattr(c.candidate, "values", ()) if isinstance(v, int | float)] \
            if section == "value_over" else []
        out = []
        for start, end, st in spans:
            before, after = near(text, start, end, k=len(text))
            if any(same(x, label) for x in before + after) or (seeded and min(seeded) <= st.value <= max(seeded)):
                out.append(st)
        if not out:
            said = ", ".join(number_text(n.value) for n in numbers(text)) or "no number"
            return [], f"the rule states {said}, none of it said of the {label}"
        return out, ""
    return numbers(text), ""


OTHER_NEAR = 5
"""Words on each side of a threshold's number read for another column's name (:func:`said_of_other`)."""


def said_of_other(text: str, c: Checked, columns: Sequence[str]) -> str:
    """The column of ``columns`` (the environment's, but keys) the prose says its numbers of, when it does not name
    the column of candidate ``c`` (a threshold on the request's own value, ``value_over``, that :func:`may_ground`
    lets ground by a number within its seeded values), else "". Every number within the seeded values has another
    column's word (the schema's own, :func:`_names`) next to it (:data:`OTHER_NEAR`): the prose says the number of
    that column, not of the candidate's. Seen 2026-11-30 on the pharmacy of the committed example: "A prescription
    cannot be filled if the patient's age is less than 18." grounded in a threshold on a new medication's dosage
    (18 among the seeded dosages), "If a medication's expiration date is within 30 days ..." in one on a medication's
    new dosage."""
    w = c.candidate.words
    if w.get("section") != "value_over" or _names(_said_words(text), w.get("label", "")):
        return ""
    seeded = [v for v in getattr(c.candidate, "values", ()) if isinstance(v, int | float)]
    own = w.get("column", "")
    others = [x for x in columns if x != own]
    named = ""
    for start, end, st in _spans(text):
        if not seeded or not min(seeded) <= st.value <= max(seeded):
            continue
        before, after = near(text, start, end, k=OTHER_NEAR)
        hit = next((x for x in others if _names(before + after, x.replace("_", " "))), "")
        if not hit:
            return ""
        named = named or hit
    return named


def may_ground(text: str, c: Checked) -> bool:
    """Whether prose ``text`` says candidate ``c``'s condition in the candidate's own words, so that it may ground
    in it beyond MiniLM's say: a state by its listed value (:func:`names_value`); a limit by a word of the items it
    counts (or of the column it counts them by; and the value it counts them with) and a count stated in digits
    (:func:`numbers`: a whole number, no percent); a date by a word of its column; a threshold by a number stated in
    digits and a word of its column, or (a threshold on the request's own value) a number within its seeded values
    ("stronger than 6.2 percent" for the abv). A number is what a threshold or a cap takes from the prose
    (:func:`at_stated`): prose that states none says no threshold and no cap ("A project must have at least one
    billing record before it can be invoiced." grounded, on a project billing domain, in a cap of 5 invoices per
    billing record). Words and values are the schema's and the seeded rows' own, numbers are digits, in whatever
    language they are (:func:`_names` reads a word by its first letters), so this holds in any language; prose in
    another language than the schema's grounds in nothing.

    Seen 2026-11-28: on the library, "A book cannot be returned before it is due." grounded at MiniLM's word in
    "adding a book is forbidden when the publication date given is before today"; on the museum
    (tests/stages/test_meaning_calls_real.py), "... an object that is damaged or missing" in "the object's insured
    value is above 1200000" and "... currently being used by another museum" in "the object's status is
    'in_conservation'": prose about another thing, near the candidate through the action they share ("lend an
    object"); on the permit office and the brewery (the real model's prose), "A permit must be issued within 30
    days of application." in "the permit's status is 'submitted'" and "A keg must be filled before it can be sold."
    in "the keg's batch has status 'packaged'"."""
    w = c.candidate.words
    section = w.get("section", "")
    if not section:
        return True  # a rule checked again after a repair: no words to read (it grounds nothing)
    if section in ("state", "parent_state"):
        return bool(w.get("value")) and names_value(text, w["value"])
    said = _said_words(text)
    if section == "linked":  # the link table's own word ("allergies", "allergic")
        return _names(said, w.get("label", ""))
    if section.startswith("limit"):  # what it counts, and how many: a count in digits
        return (any(_names(said, w[k]) for k in ("items", "label") if w.get(k))
                and (section != "limit_where" or names_value(text, w.get("which", "")))
                and any(n.count for n in numbers(text)))
    if section in DATED:  # the date's own word, not the row's name ("renew" names the renewals, not their date)
        own = [x for x in _WORD.findall(w.get("label", "")) if not _names([x.casefold()], w.get("thing", ""))
               or len(x) <= 2]
        return _names(said, " ".join(own) if any(len(x) > 2 for x in own) else w.get("label", ""))
    stated = numbers(text)
    if not stated:
        return False
    if _names(said, w.get("label", "")):
        return True
    seeded = [v for v in getattr(c.candidate, "values", ()) if isinstance(v, int | float)] \
        if section == "value_over" else []
    return bool(seeded) and any(min(seeded) <= n.value <= max(seeded) for n in stated)


def _condition_words(c: Checked) -> str:
    """What a prose rule must say of candidate ``c``'s condition (:func:`may_ground`), for a Rejection's reason."""
    w = c.candidate.words
    if w.get("section") in ("state", "parent_state"):
        return repr(w.get("value", "").replace("_", " "))
    if w.get("section", "").startswith("limit"):
        which = f" with {w.get('which', '').replace('_', ' ')!r}" if w.get("section") == "limit_where" else ""
        return " or ".join(repr(w[k]) for k in ("items", "label") if w.get(k)) + which + ", and a count in digits"
    if w.get("section") in DATED or w.get("section") == "linked":
        return repr(w.get("label", ""))
    return f"a number in digits, and {w.get('label', '')!r} or a number near {w.get('value', '')}"


def _shape(c: Checked) -> tuple[str, str, str]:
    return c.candidate.tool, c.candidate.words.get("section", ""), c.candidate.words.get("label", "")


def shortlist(checked: Sequence[Checked], n: int = SHORTLIST) -> list[Checked]:
    """At most ``n`` candidates spread over kinds, tools and columns: each round takes, per kind, the first
    candidate of a tool not in the list yet, else of a (template, column) not in it, else of a new (tool, template,
    column), else the next one; so the values of one status column do not fill the list."""
    out: list[Checked] = []
    kinds = list(dict.fromkeys(c.candidate.kind for c in checked))

    def novelty(c: Checked) -> tuple[bool, bool, bool]:
        shapes = {_shape(d) for d in out}
        return (c.candidate.tool in {s[0] for s in shapes}, _shape(c)[1:] in {s[1:] for s in shapes},
                _shape(c) in shapes)

    while len(out) < min(n, len(checked)):
        for kind in kinds:
            left = [c for c in checked if c.candidate.kind == kind and c not in out]
            if left and len(out) < n:
                out.append(min(left, key=novelty))  # the first of the most novel
    return out


def code_pick(short: Sequence[Checked], k: int) -> list[Checked]:
    """Code's pick when the LLM's fails: the shortlist's order, a tool once before any tool twice."""
    first = [c for i, c in enumerate(short) if c.candidate.tool not in {d.candidate.tool for d in short[:i]}]
    return (first + [c for c in short if c not in first])[:k]


def _rule_ids(picked: Sequence[Checked]) -> list[str]:
    ids: list[str] = []
    for c in picked:
        rid, i = c.candidate.key, 2
        while rid in ids:
            rid, i = f"{c.candidate.key[:60]}_{i}", i + 1
        ids.append(rid)
    return ids


Picked = tuple[Checked, str, str, Option | None]
"""A rule as picked: the candidate, its message, who worded it, and the alternative the message names."""


def to_rules(picked: Sequence[Picked]) -> list[ir.Rule]:
    """``(checked, message, worded_by, option)`` as IR rules, each with the calls it was checked on (two of each)
    and its alternative (None: the rule offers none)."""
    out = []
    for (c, text, by, option), rid in zip(picked, _rule_ids([p[0] for p in picked]), strict=True):
        rule = c.candidate.rule(rid, text, by)
        calls: dict[str, Any] = {side: [ir.ToolCall(tool=c.candidate.tool, arguments=a) for a in getattr(c, side)[:2]]
                                 for side in ("allowed", "forbidden")}
        if option is not None:
            calls["alternative"] = option.alternative
        out.append(rule.model_copy(update=calls))
    return out


# ------------------------------------------------------------------ the LLM's pick


def reply_model(ids: Sequence[str], low: int, high: int, alt_ids: Sequence[str] = ()) -> type[BaseModel]:
    """``{"rules": [{"id": <one of ids>, "message": str}, ...]}`` with ``low`` to ``high`` items; with ``alt_ids``
    each item also has ``instead``: one of them, or "" for none (and may leave it out)."""
    fields: dict[str, Any] = {"id": (Literal[tuple(ids)], ...)}
    if alt_ids:
        fields["instead"] = (Literal[(*alt_ids, "")], "")
    fields["message"] = (str, Field(min_length=8, max_length=MESSAGE_MAX))
    item = create_model("PickedRule", **fields, __base__=BaseModel)  # type: ignore[call-overload]
    return create_model("PolicyPick", rules=(list[item], Field(min_length=low, max_length=high)),  # type: ignore[valid-type]
                        __base__=BaseModel)


def check_pick(reply: Any, env: ir.Environment) -> tuple[list[tuple[str, str]] | None, str | None]:
    """The (id, message) pairs of a reply, or why it does not work: a message in plain words (no braces, no tool
    or snake_case name, not a tool's description: a run of :data:`~pipeline.stages.tasks.code_wording.COPIED_WORDS` words of
    one with fewer than :data:`OWN_WORDS` words besides)."""
    got = [(r.id, " ".join(r.message.split())) for r in reply.rules]
    ids = [i for i, _ in got]
    if len(set(ids)) < len(ids):
        return None, "each candidate id may be picked once; pick different candidates"
    names = {t.name for t in env.tools}  # a table's name is a plain word ("kegs"); a snake_case one is caught below
    for rid, text in got:
        if "{" in text or "}" in text:
            return None, f"the message of {rid} has braces; write plain words"
        named = sorted({w for w in _SNAKE.findall(text)} | {n for n in names if re.search(rf"\b{re.escape(n)}\b", text)})
        if named:
            return None, f"the message of {rid} names {', '.join(named)}; say it in plain words, as a clerk would"
        if len(text.split()) < 3 or not whole(text):
            return None, f"the message of {rid} is not one whole sentence; write it whole, ending with a full stop"
        # the candidate lines show each tool's description: a message that is mostly that description says what
        # the tool does, not the rule (seen: "Set the status of a case; returns the case as changed"). A rule may
        # name its action in the description's words ("No one may book an inspection of a permit on a date in the
        # past", seen on the permit office) as long as it says the condition in words of its own.
        own = len(_WORD.findall(text))
        for tool in env.tools:
            if (run := copied_words(text, tool.description)) and own - len(run.split()) < OWN_WORDS:
                return None, (f"the message of {rid} copies the words {run!r} of an action's description and says "
                              "little else; say the rule (what is not allowed, and when) in your own words, as a "
                              "clerk would")
    return got, None


def check_instead(reply: Any, env: ir.Environment, by_id: dict[str, Checked],
                  offered: dict[str, dict[str, Option]], words: Words) -> tuple[list[Picked] | None, str | None]:
    """The rules of a reply with their alternatives (:func:`check_pick`'s checks first): an alternative must be one
    offered for its rule (``offered``: rule id -> alternative id -> option) and not one another rule picked
    forbids, and its message must name the alternative's value. Each problem is fed back, and the reply is still
    acceptable with code's wording of that rule: its condition, and the alternative whenever the reply picked a
    valid one (the message refused for missing its value, its condition, or for saying another rule); its condition
    alone (no alternative) when the pick is not valid. So a small model's pick of rules and alternatives is kept."""
    got, err = check_pick(reply, env)
    if got is None:
        return None, err
    chosen = {r.id: getattr(r, "instead", "") or "" for r in reply.rules}
    keys = {by_id[rid].candidate.key: rid for rid, _ in got}
    shown = {*by_id, *(a for per in offered.values() for a in per)}
    out: list[Picked] = []
    problems: list[str] = []
    for rid, text in got:
        c, aid = by_id[rid], chosen.get(rid, "")
        option = offered.get(rid, {}).get(aid)
        against = sorted(keys[k] for k in option.conflicts if k in keys) if option is not None else []
        kept = option if option is not None and not against else None  # a valid pick: kept whatever the message
        by_code = message(c, words) + (f" {instead(kept, words)}" if kept is not None else "")
        if ids := ids_in(text, shown):
            # seen 2026-11-28 (the museum, real model): "...; instead, set the object's status to one of: a7 'in
            # storage', a8 'on loan', a9 '": the request's list copied, ids and all, and cut at MESSAGE_MAX
            problems.append(f"the message of {rid} copies the ids {', '.join(ids)} of the list; a clerk says no id: "
                            "write the rule, and what to do instead, in plain words")
            out.append((c, by_code, "code", kept))
            continue
        if (missing := unsaid(text, c)) is not None:
            problems.append(f"the message of {rid} must say what the rule checks ({missing}); say it as a condition "
                            "any request may meet")
            out.append((c, by_code, "code", kept))
            continue
        if (fact := one_request(text, c)) is not None:
            problems.append(f"the message of {rid} names {fact!r}, a value of one request; state the rule as a "
                            "condition any request may meet")
            out.append((c, by_code, "code", kept))
            continue
        if (other := off_rule(env, text, c, words)) is not None:
            problems.append(f"the message of {rid} {other}; say that rule, as a condition any request may meet")
            out.append((c, by_code, "code", kept))
            continue
        if c.candidate.words.get("section") == "linked":
            # a link said backwards, seen 2026-11-30 (the pharmacy, real model): "A prescription cannot be filled if
            # the patient's allergies do not match the medication list." for a condition that refuses a patient who
            # already has an allergy to the medication. No check reads a negation in any language: code's sentence,
            # which says the link as it is checked, is the message
            out.append((c, by_code, "code", kept))
            continue
        full = said_whole(text, c, env, words)  # None: the model's sentence and code's do not fit in one message
        if not aid:
            out.append((c, full, "llm", None) if full is not None else (c, by_code, "code", kept))
        elif option is None:
            mine = ", ".join(offered.get(rid, {})) or "none"
            problems.append(f"{aid} is not an alternative of {rid} (its alternatives: {mine}); pick one listed under "
                            f"{rid}, or leave instead empty")
            out.append((c, message(c, words), "code", None))
        elif against:
            problems.append(f"the alternative {aid} of {rid} breaks rule {', '.join(against)}, which you also "
                            f"picked; pick another alternative for {rid}, or none")
            out.append((c, message(c, words), "code", None))
        elif names_value(text, option.alternative.value):
            out.append((c, full, "llm", option) if full is not None else (c, by_code, "code", kept))
        else:
            problems.append(f"the message of {rid} must say what to do instead, the value "
                            f"{str(option.alternative.value).replace('_', ' ')!r} in plain words; say it in the "
                            "message, or leave instead empty")
            out.append((c, f"{message(c, words)} {instead(option, words)}", "code", option))
    return out, "; ".join(problems) or None


def kept_picks(final: list[Picked], picks: dict[str, Option], words: Words) -> list[Picked]:
    """``final`` (the reply the pick ends with), where a rule worded by code has no alternative but an earlier reply
    picked a valid one for it (``picks``: candidate key -> option) that no rule of ``final`` forbids: that rule with
    it, worded by code (its condition and the alternative). A retry that fixes one message often drops the
    alternatives (seen 2026-11-28, the library: "a1" picked for r3, then moved to r2, then none): a valid pick is
    never thrown away."""
    keys = {c.candidate.key for c, _, _, _ in final}
    out: list[Picked] = []
    for c, text, by, option in final:
        earlier = picks.get(c.candidate.key)
        if by == "code" and option is None and earlier is not None and not keys & set(earlier.conflicts):
            out.append((c, f"{message(c, words)} {instead(earlier, words)}", "code", earlier))
        else:
            out.append((c, text, by, option))
    return out


def ids_in(text: str, shown: Collection[str]) -> list[str]:
    """The ids of the request (``shown``: its rules' and alternatives' ids, "r2", "a7") that ``text`` writes as
    whole words, in its order: an id is the request's handle, never words a clerk says."""
    return list(dict.fromkeys(w for w in _WORD.findall(text) if w in shown))


def off_rule(env: ir.Environment, text: str, c: Checked, words: Words) -> str | None:
    """Why a rule's message says another rule than its candidate, in words fed back to the LLM, or None: the
    message must pass :func:`fits`' tests of what it is about, its action and its condition, as the prose it
    grounds did (seen 2026-11-28: "A renewal request must be made within 30 days of the original loan date." as the
    message of "a new loan may not have a loan date before today": it names the loan date, and is about renewals)."""
    f = fits(env, [text], [c], words, threshold=-1.0)[0][0]
    if f.gate in ("", "said", "number", "counts"):  # a condition the message does not say is :func:`unsaid`'s to say
        return None
    action = env.tool(c.candidate.tool).description.strip().split(";")[0].rstrip(".")
    when = words(c.candidate.words["section"] + "_when", **c.candidate.words)
    about = f"speaks of {_label(f.nearest)}, " if f.gate == "table" else "says another rule: "
    return f"{about}but the rule forbids \"{action}\" {when}"


def offer(by_id: dict[str, Checked], options: dict[str, list[Option]],
          n: int = ALTERNATIVES_SHOWN) -> dict[str, dict[str, Option]]:
    """At most ``n`` alternatives shown in the pick (rule id -> alternative id -> option): each rule's first, in the
    shortlist's order, before any rule's second; numbered ``a1``... in the order the prompt lists them."""
    chosen: list[tuple[str, int]] = []
    for depth in range(max(map(len, options.values()), default=0)):
        for rid, c in by_id.items():
            if depth < len(options.get(c.candidate.key, [])) and len(chosen) < n:
                chosen.append((rid, depth))
    out: dict[str, dict[str, Option]] = {}
    i = 0
    for rid, c in by_id.items():
        for depth in sorted(d for r, d in chosen if r == rid):
            i += 1
            out.setdefault(rid, {})[f"a{i}"] = options[c.candidate.key][depth]
    return out


def pick(env: ir.Environment, short: Sequence[Checked], client: LLMClientProtocol, settings: BuildSettings,
         words: Words, prose: Sequence[str] = ()) -> tuple[list[Picked], list[ir.Rejection]]:
    """The LLM's messages for the rules of ``short`` (each grounded in ``prose``, the LLM's own rule: all of them
    are kept) and, where code found some, the alternatives they name; code's words (with no alternative: which
    one makes sense is the LLM's judgement) when its reply fails. Without ``prose`` the LLM picks 3 to
    ``policy_rules`` of ``short``."""
    k = min(settings.policy_rules, len(short))
    low = k if prose else min(MIN_RULES, k)
    ids = [f"r{i}" for i in range(1, len(short) + 1)]
    by_id = dict(zip(ids, short, strict=True))
    options = alternatives(env, list(short))
    offered = offer(by_id, options)
    alt_ids = [a for per in offered.values() for a in per]
    lines = "\n".join(describe(c, i, env, words, list(offered.get(i, {}).items()),
                               prose[n] if n < len(prose) else "")
                      for n, (i, c) in enumerate(by_id.items()))
    section = ("word" if prose else "pick") + ("_instead" if alt_ids else "")
    prompt = words(section, name=env.scenario.name,
                   description=" ".join(env.scenario.description.split()), candidates=lines, low=low, high=k)
    budget = (MAX_TOKENS + (INSTEAD_TOKENS if alt_ids else 0)) * k + 32
    picks: dict[str, Option] = {}  # candidate key -> the latest valid alternative a reply picked for it

    def checked(reply: Any) -> tuple[list[Picked] | None, str | None]:
        got, err = check_instead(reply, env, by_id, offered, words)
        picks.update({c.candidate.key: o for c, _, _, o in got or [] if o is not None})
        return got, err

    out = ask_with_feedback(client, reply_model(ids, low, k, alt_ids), user(prompt), checked,
                            stage=STAGE, max_attempts=settings.max_attempts, max_tokens=budget,
                            retry_temperature=settings.retry_temperature,
                            feedback=lambda e: words("feedback", error=e))
    if out.value is not None:
        return kept_picks(list(out.value), picks, words), []
    note = ir.Rejection(stage=STAGE, item="pick", reason=f"the LLM's pick of rules failed ({out.error}); code "
                                                         "picked and worded them",
                        evidence={"attempts": out.attempts})
    return [(c, message(c, words), "code", None) for c in code_pick(short, k)], [note]


# ------------------------------------------------------------------ the domain's rules in prose, grounded


class ProseReply(BaseModel):
    rules: list[str] = Field(min_length=PROSE_MIN, max_length=PROSE_MAX)


def check_prose(reply: Any, prompt: str = "") -> tuple[list[str] | None, str | None]:
    """The prose rules of a reply, each one whole sentence (not cut: it ends on punctuation, whatever the script),
    said once, none copied from ``prompt`` (its examples are another business's rules: a rule whose text the
    prompt holds is dropped, in any language)."""
    asked = " ".join(prompt.split()).casefold()
    got = [" ".join(r.split()) for r in reply.rules]
    copied = [r for r in got if r and r.casefold().rstrip(".!?。") in asked]
    got = [r for i, r in enumerate(got) if r and r not in copied
           and r.casefold() not in {g.casefold() for g in got[:i]}]
    if len(got) < PROSE_MIN:
        if copied:
            return None, (f"{copied[0]!r} is an example from the request, not a rule of this business; write at "
                          f"least {PROSE_MIN} different rules of your own")
        return None, f"write at least {PROSE_MIN} different rules"
    for r in got:
        if len(r.split()) < 3 or not whole(r):
            return None, f"{r!r} is not a whole sentence; write each rule as one whole sentence"
    return got, None


_CLOSING = ("Pf", "Pe")
"""Unicode categories of a closing quote or bracket: a sentence may end inside one ("... 'packaged'.")."""


def whole(text: str) -> bool:
    """Whether ``text`` ends a sentence: closing quotes and brackets aside (any script's, and the ASCII quotes that
    close as often as they open), its last character is punctuation that ends something (any script's), so it was
    not cut. Seen 2026-11-28 (the museum, real model): a message cut at :data:`MESSAGE_MAX` characters on an
    opening quote, "... a8 'on loan', a9 '", passed when a quote counted as the end."""
    t = text.rstrip()
    core = t
    while core and (core[-1] in "'\"" or unicodedata.category(core[-1]) in _CLOSING):
        core = core[:-1].rstrip()
    if not core or unicodedata.category(t[-1]) in ("Ps", "Pi"):
        return False
    return unicodedata.category(core[-1]) in ("Po", "Pf", "Pe") and core[-1] not in ",;:"


def prose(env: ir.Environment, client: LLMClientProtocol, settings: BuildSettings, words: Words) -> tuple[list[str], list[ir.Rejection]]:
    """The domain's rules as the LLM knows them, in prose (``prompts/policy.md`` ``prose``), before it sees any
    candidate: what a real business of the scenario refuses, and when."""
    prompt = words("prose", name=env.scenario.name, description=" ".join(env.scenario.description.split()),
                   tables=", ".join(t.name.replace("_", " ") for t in env.tables), low=PROSE_MIN, high=PROSE_MAX)
    out = ask_with_feedback(client, ProseReply, user(prompt), lambda r: check_prose(r, prompt), stage=STAGE,
                            max_attempts=settings.max_attempts, max_tokens=PROSE_TOKENS * PROSE_MAX + 16,
                            retry_temperature=settings.retry_temperature,
                            feedback=lambda e: words("feedback", error=e))
    if out.value is None:
        return [], [ir.Rejection(stage=STAGE, item="prose", reason=f"the LLM wrote no usable rules in prose "
                                                                   f"({out.error}); code picked and worded them",
                                 evidence={"attempts": out.attempts})]
    return list(out.value), []


def gist(c: Checked, env: ir.Environment, words: Words) -> str:
    """What a candidate forbids, in code's words (the ``gist`` section: the action, its tool's description to the
    first ``;``, and when, the ``<kind>_when`` section): the text a prose rule is matched with."""
    action = env.tool(c.candidate.tool).description.strip().split(";")[0].rstrip(".")
    return words("gist", action=action, when=words(c.candidate.words["section"] + "_when", **c.candidate.words))


def similarities(texts: Sequence[str], others: Sequence[str]) -> list[list[float]]:
    """Cosine similarity (MiniLM, ``pipeline.embed``) of each of ``texts`` with each of ``others``."""
    from pipeline.embed import get_embedder

    if not texts or not others:
        return [[0.0] * len(others) for _ in texts]
    enc = get_embedder()
    a, b = enc.encode(list(texts)), enc.encode(list(others))
    return [[round(float(x), 4) for x in row] for row in (a @ b.T)]


@dataclass(frozen=True)
class Fit:
    """How a prose rule fits one checked candidate (MiniLM cosine similarities, :func:`fits`): ``joint`` with its
    :func:`gist` (the action and its condition as one text: the order of pairs), ``action`` with its tool's
    description, ``condition`` with its condition in words (the ``<kind>_when`` section: the columns and values it
    checks), ``table`` with the nearest of the tables it is about
    (:meth:`~pipeline.stages.policy.candidates.Finder.about`) and ``best_table`` with the nearest table of all
    (``nearest`` names it); ``refused`` says why the pair may not ground, or is empty, and ``gate`` which test
    refused it ("table", "action", "condition", "number", "said", "counts", "joint"; "counts": its numbers are
    none of what the candidate compares, :func:`counted`; "number": the prose states a number
    that a state or a date candidate does not check: "A renewal request must be made within 30 days of the original
    loan date." grounded in "the loan's due date is before today" in the example regenerated on 2026-11-28;
    "subject": a rival the prose says in the same words is on a tool or a table the prose names more,
    :func:`rivals`). ``subject`` is the similarity with the candidate's tool name in words (``change loan
    status``)."""

    joint: float
    action: float
    condition: float
    table: float
    best_table: float
    nearest: str
    refused: str = ""
    gate: str = ""
    subject: float = 0.0


def fits(env: ir.Environment, rules: Sequence[str], checked: Sequence[Checked], words: Words,
         threshold: float = GROUND_MIN) -> list[list[Fit]]:
    """Per prose rule, how it fits each candidate. A pair may ground only when the prose is about what the candidate
    is about and says its condition: the nearest table to the prose (by name, measuring columns and description)
    is one the candidate is about, or one within :data:`TABLE_MARGIN` of it is (a renewal's rule is about the
    renewals, not about the loans a loan tool writes); the prose is close to its tool's description
    (:data:`ACTION_MIN`) and to its condition (:data:`CONDITION_MIN`); it says the condition in the candidate's own
    words (:func:`may_ground`: a listed value, a word of the column or of the items counted); and the joint
    similarity reaches ``threshold``."""
    with EnvInstance(env) as inst:
        finder = Finder(env, inst.conn)
        tables = [finder.table_text(t) for t in env.tables]
        about = [finder.about(c.candidate) for c in checked]
        keys = {(t.name, r[3]) for t in env.tables
                for r in inst.conn.execute(f'PRAGMA foreign_key_list("{t.name}")')}
        columns = sorted({r[1] for t in env.tables for r in inst.conn.execute(f'PRAGMA table_info("{t.name}")')
                          if not r[5] and (t.name, r[1]) not in keys})
    names = [t.name for t in env.tables]
    guard = [j for j, c in enumerate(checked) if guards(env, c)]
    texts = ([gist(c, env, words) for c in checked]
             + [env.tool(c.candidate.tool).description.strip().split(";")[0].rstrip(".") for c in checked]
             + [words(c.candidate.words["section"] + "_when", **c.candidate.words) for c in checked] + tables
             + [words("gist", action=guard_action(checked[j], env, words),
                      when=words("state_when", **checked[j].candidate.words)) for j in guard]
             + [guard_action(checked[j], env, words) for j in guard]
             + [_label(c.candidate.tool) for c in checked])
    n, m, g = len(checked), len(tables), len(guard)
    same = Similar(embed=True)
    out = []
    for i, row in enumerate(similarities(rules, texts)):
        by_table = dict(zip(names, row[3 * n:3 * n + m], strict=True))
        nearest = max(names, key=lambda t: by_table[t])
        # a state guard the prose names by its value: the action as setting that value (:func:`guard_action`)
        valued = {j: (row[3 * n + m + k], row[3 * n + m + g + k]) for k, j in enumerate(guard)
                  if names_value(rules[i], checked[j].candidate.words["value"])}
        best_action = max(row[n:2 * n], default=0.0)  # the nearest write tool's description
        fit = []
        for j, c in enumerate(checked):
            mine = max((by_table[t] for t in about[j]), default=-1.0)
            if c.candidate.words.get("section") == "linked":  # about the row it writes, the link its condition
                mine = max((by_table[t] for t in _written(env.tool(c.candidate.tool)) if t in by_table), default=-1.0)
            f = Fit(row[j], row[n + j], row[2 * n + j], round(mine, 4), by_table[nearest], nearest,
                    subject=row[3 * n + m + 2 * g + j])
            if j in valued:
                f = replace(f, joint=max(f.joint, valued[j][0]), action=max(f.action, valued[j][1]))
            why, gate = "", ""
            if mine < f.best_table - TABLE_MARGIN and j not in valued:
                why, gate = (f"the rule is about {_label(nearest)} ({f.best_table}), the candidate about "
                             f"{', '.join(sorted(_label(t) for t in about[j])) or 'no table'} ({f.table})"), "table"
            elif f.action < ACTION_MIN:
                why, gate = f"the rule is far from the candidate's action ({f.action} < {ACTION_MIN})", "action"
            elif f.condition < CONDITION_MIN:
                why, gate = (f"the rule is far from the candidate's condition ({f.condition} < {CONDITION_MIN})",
                             "condition")
            elif c.candidate.form is None and c.candidate.words.get("section") and (stated := numbers(rules[i])):
                why, gate = (f"the rule states {', '.join(number_text(n.value) for n in stated)}, a number the "
                             "candidate does not check"), "number"
            elif not may_ground(rules[i], c):
                why, gate = (f"the rule does not say the candidate's condition "
                             f"({_condition_words(c)})"), "said"
            elif other := said_of_other(rules[i], c, columns):
                why, gate = (f"the rule states its number of the {other.replace('_', ' ')}, the candidate checks "
                             f"the {c.candidate.words.get('label', '')}"), "said"
            elif c.candidate.form is not None and not (got := counted(rules[i], c, same))[0]:
                why, gate = got[1], "counts"
            elif (f.action < best_action - ACTION_MARGIN and j not in valued and c.candidate.form is None
                  and c.candidate.words.get("section") != "linked"
                  and not (c.candidate.words.get("section") in ("state", "parent_state")
                           and names_value(rules[i], c.candidate.words.get("value", "")))):
                why, gate = (f"the rule is nearer another tool ({best_action}) than the candidate's "
                             f"{c.candidate.tool} ({f.action})"), "action"
            elif f.joint < (min(threshold, GUARD_MIN) if j in valued else threshold):
                least = min(threshold, GUARD_MIN) if j in valued else threshold
                why, gate = f"the rule is far from the candidate ({f.joint} < {least})", "joint"
            fit.append(replace(f, refused=why, gate=gate))
        out.append(rivals(fit, checked))
    return out


def _said_as(c: Checked) -> tuple[str, str]:
    """What a prose rule must say to ground in ``c`` (:func:`may_ground`): its template and its condition's words."""
    return c.candidate.words.get("section", ""), _condition_words(c)


def rivals(fit: list[Fit], checked: Sequence[Checked]) -> list[Fit]:
    """One prose rule's fits (:func:`fits`) with the candidates it fits refused where a rival it also fits says the
    same condition in the same words (the same template and the same words :func:`may_ground` reads: a state's
    listed value, a column, the items a cap counts) on another table (its condition reads other tables: the same
    state of the same row on two tools is no rival, the action tells them apart, "A permit that is only submitted
    cannot be inspected." is book_inspection's, not set_permit_status') and is on a tool or a table the prose names
    more: the
    similarity of the prose with the tool's name in words (``subject``: the schema's own words, the action and its
    table, "change loan status"), then with its nearest table (``table``). The prose says the condition of both;
    what it is about, the row it speaks of, says which one it means. The joint similarity alone mixes in each
    tool's description and code's sentence of the condition, which name the table no more than the prose does.

    Seen 2026-11-30 on the library of the committed example (``tests/fixtures/book_lending_rivals.json``): the
    model's schema gives renewals the loans' states ('pending', 'returned'), and "A member cannot return a book that
    has already been returned." fit both guards on 'returned'; the renewals' won at the joint similarity (0.432;
    the loans' 0.427) and the policy said "Once the renewal's status is 'returned' ...". The prose is nearer
    "change loan status" (0.219) than "change renewal status" (0.185), and the loans' table (0.162, the renewals'
    0.150)."""
    out = list(fit)
    tables = [_tables(c.candidate.condition) for c in checked]
    for j, f in enumerate(fit):
        if f.refused:
            continue
        better = [k for k, o in enumerate(fit) if k != j and not o.refused and _said_as(checked[k]) == _said_as(checked[j])
                  and tables[k] != tables[j] and (o.subject, o.table) > (f.subject, f.table)]
        if better:
            k = max(better, key=lambda k: (fit[k].subject, fit[k].table))
            other = checked[k].candidate
            out[j] = replace(f, gate="subject", refused=(
                f"the rule says the condition of {other.key} too, on a tool it names more: {_label(other.tool)} "
                f"({fit[k].subject}, its table {fit[k].table}) than {_label(checked[j].candidate.tool)} "
                f"({f.subject}, its table {f.table})"))
    return out


def ground(env: ir.Environment, rules: Sequence[str], checked: Sequence[Checked], words: Words,
           threshold: float = GROUND_MIN) -> tuple[list[tuple[str, Checked]], list[ir.Rejection]]:
    """Each prose rule with the checked candidate it grounds in: among the pairs :func:`fits` allows (the prose says
    the candidate's condition in its own words, :func:`may_ground`, among other tests), the best joint match first
    (MiniLM similarity of the prose to the candidate's :func:`gist`), each prose rule and each candidate used once. Prose that grounds in nothing is dropped with a Rejection (the nearest candidate and why it
    was refused); a candidate no prose rule supports is not used (one Rejection lists them). In the prose's order.

    Measured on the library regenerated on 2026-11-28 (``tests/fixtures/book_lending.json``: two write tools,
    ``add_book`` and ``create_loans``; five candidates hold), its prose as the model wrote it (joint, action,
    condition; the nearest table and the candidate's):

    - "A renewal request must be made within 30 days of the original loan date." grounded, at the joint similarity
      alone, in "Record a new loan is not allowed when the loan date given is before today" (0.524; action 0.438,
      condition 0.601): the prose is about renewals (0.62), the candidate about loans (0.52): refused.
    - "A book cannot be returned before it is due." nearest "Add a new book to the library is not allowed when the
      publication date given is before today" (0.530; condition 0.244): :func:`may_ground` refuses it.
    - "A member cannot renew more than once per month." (renewals 0.58; best candidate 0.362) and "A member cannot
      return a book that is overdue by more than 14 days." (overdue fines 0.345; add_book 0.518, its date unnamed;
      create_loans' action 0.144) ground in nothing.
    - "A member with unpaid fines may not borrow." (not the model's; the issue's example) would ground, at the
      joint similarity, in "... when the member already has 9 loans or more" (0.542): it is about overdue fines
      (0.463), the candidate about loans and members (0.337): refused. No candidate reads the fines.
    - "A loan cannot be recorded with a loan date in the past." grounds in create_loans' loan date candidate
      (0.718; action 0.573, condition 0.544, loans 0.575 the nearest table).

    On the brewery and the permit office (tests/stages/test_policy.py) every rule grounds where it did: action
    0.389-0.673, condition 0.265-0.875, the candidate's table the nearest (a near tie for "Fees above 1200 need a
    supervisor.": permits 0.214, applicants 0.209)."""
    table = fits(env, rules, checked, words, threshold)
    same = Similar(embed=True)
    pairs = sorted(((table[i][j].joint, i, j) for i in range(len(rules)) for j in range(len(checked))
                    if not table[i][j].refused), key=lambda e: (-e[0], e[1], e[2]))
    by_rule: dict[int, int] = {}
    used: set[int] = set()
    at: dict[tuple[int, int], Checked] = {}  # a cap or a threshold at the prose's number
    unheld: dict[tuple[int, int], str] = {}  # why the prose's numbers do not hold for a candidate
    for _sim, i, j in pairs:
        if i not in by_rule and j not in used:
            held, why = at_stated(env, rules[i], checked[j], same)
            if held is None:
                unheld[i, j] = why
                continue
            at[i, j] = held
            by_rule[i] = j
            used.add(j)
    notes = []
    for i, text in enumerate(rules):
        if i not in by_rule:
            # the nearest candidate the prose fits, when one does (its number did not hold: say why), else the nearest
            fitting = [j for j in range(len(checked)) if not table[i][j].refused] or range(len(checked))
            best = max(fitting, key=lambda j: table[i][j].joint, default=None)
            evidence: dict[str, Any] = {"prose": text}
            if best is not None:
                f = table[i][best]
                evidence |= {"nearest": checked[best].candidate.key, "similarity": f.joint, "about": f.nearest,
                             "why": f.refused or unheld.get((i, best)) or "its candidates ground other rules"}
            notes.append(ir.Rejection(stage=STAGE, item="prose", reason="a rule in prose grounds in no candidate "
                                      "that holds on real calls; dropped", evidence=evidence))
    unsupported = [c.candidate.key for j, c in enumerate(checked) if j not in used]
    if unsupported:
        notes.append(ir.Rejection(stage=STAGE, item="unsupported", reason="candidates no rule in prose supports are "
                                  "not used", evidence={"candidates": unsupported}))
    return [(rules[i], at[i, by_rule[i]]) for i in sorted(by_rule)], notes


FORBIDDEN_MAX = 0.5
"""The share of the calls drawn from the seeded rows (:func:`~pipeline.stages.policy.candidates.usual_calls`) a cap
or a threshold may forbid: a rule that refuses most of what the business usually does is a ration of a whole
category, not a business rule (the permit office's "fees above 900" forbids 3 of its 7 seeded fees)."""


def rationed(conn: Any, c: Candidate) -> str:
    """Why a threshold or a cap is no business rule of the environment whose initial state is on ``conn``, or "":
    a cap below what the seeded rows already hold (:func:`~pipeline.stages.policy.candidates.most_held`: a row with
    more of its items than the cap allows; the model's own example rows are among them), or a rule that forbids more
    than :data:`FORBIDDEN_MAX` of the calls drawn from the seeded rows. The numbers are in the reason.

    A cap is the most a row may hold; the seeded rows are this domain's ordinary activity, so one that holds more
    says the prose's number is not this environment's: the rule is refused rather than the seed rewritten to fit it
    (:mod:`pipeline.stages.policy.seeded` would delete the rows past it). Seen 2026-11-28/29: the pharmacy of the
    committed example, a cap of 24 orders per medication would delete 23 of its 188 seeded orders (one drug's 47
    cut to 24); on a project billing domain built outside the project (/work/out/u3), "A project cannot be recorded if
    the client already has 2 projects or more." deleted 2 seeded projects (a client held 3), under the 10 % of a
    table's rows a cap could then break."""
    most = most_held(conn, c)
    if c.words.get("section", "").startswith("limit") and c.number is not None and most > c.number:
        n, table = broken_by_rows(conn, c), c.words.get("table", "")
        total = conn.execute(f"SELECT COUNT(*) FROM {qi(table)}").fetchone()[0]
        return (f"the seeded rows already hold up to {most} {c.words.get('items', '')} per {c.words.get('thing', '')} "
                f"({n} of the {total} {_label(table)} rows past {number_text(c.number)}): the seed would be rewritten "
                "to fit it")
    forbidden, of = usual_calls(conn, c)
    if of and forbidden > FORBIDDEN_MAX * of:
        return (f"it forbids {forbidden} of the {of} calls drawn from the seeded rows ({100 * forbidden / of:.0f} % > "
                f"{100 * FORBIDDEN_MAX:.0f} %)")
    return ""


def at_stated(env: ir.Environment, text: str, c: Checked, same: Similar | None = None) -> tuple[Checked | None, str]:
    """Candidate ``c`` (a threshold or a cap) at a number prose ``text`` states of what it compares
    (:func:`counted`, in the prose's order; a cap takes a count): the first one that is checkable on real calls
    (:func:`~pipeline.stages.policy.candidates.check`: some working call it allows, another it forbids) and that is
    no ration (:func:`rationed`); None (and why) when none is, so the prose does not ground in ``c``. A state or a
    date comes back as it is.

    Not code's number instead: on the library regenerated on 2026-11-28, "A renewal request must be made within 30
    days of the original loan date." names the renewals a cap counts and states a number; a cap of 30 renewals per
    loan forbids no call, and the seeded cap (4) would have made "At most 4 renewals per loan." of it, a rule the
    prose never said."""
    cand = c.candidate
    if cand.form is None or cand.number is None:
        return c, ""
    cap = cand.words.get("section", "").startswith("limit")
    said, why_not = counted(text, c, same)
    if not said:
        return None, why_not
    stated = list(dict.fromkeys(n.value for n in said if n.count or not cap))
    why: list[str] = []
    for x in stated:
        if x == cand.number:
            kept: list[Checked] = [c]
        else:
            kept, dropped = check(env, [cand.at(x)])
            if not kept:
                why.append(f"at {number_text(x)}, "
                           f"{dropped[0].reason.removeprefix('rule dropped: ') if dropped else 'it does not hold'}")
                continue
        with EnvInstance(env) as inst:
            ration = rationed(inst.conn, kept[0].candidate)
        if ration:
            why.append(f"at {number_text(x)}, {ration}")
            continue
        return kept[0], ""
    return None, "the number the rule states does not hold as the candidate's: " + "; ".join(why)


def make_policy(env: ir.Environment, client: LLMClientProtocol, settings: BuildSettings, language: str = "en") -> StageResult[ir.Environment]:
    """``env`` with its rules (none when no candidate holds or none grounds a rule in prose; the environment is never
    rejected here)."""
    words = Words(language)
    with EnvInstance(env) as inst:
        candidates, left = proposals(env, inst.conn)
    checked, rejections = check(env, candidates)
    if left:  # said, not silent: a rule the prose names may be among them
        rejections = [*rejections, ir.Rejection(
            stage=STAGE, item="unchecked", evidence={"candidates": [c.key or c.words.get("section", "") for c in left]},
            reason=f"{len(left)} candidates past the first {CHECK_MAX} (the write tools in turn) were not checked, so "
                   "no rule in prose can ground in them")]
    if not checked:
        why = "no candidate rule holds on the seeded rows" if candidates else "no candidate rule found"
        return StageResult(env, (*rejections, ir.Rejection(stage=STAGE, item="policy", reason=why)))
    rules, notes = prose(env, client, settings, words)
    if not rules:  # no prose to ground in: code picks from its shortlist and words the rules (module docstring)
        # a frozen state (a listed column no tool changes) may be a category of what the row is: prose only
        short = shortlist([c for c in checked if not c.candidate.words.get("frozen")])
        coded: list[Picked] = [(c, message(c, words), "code", None)
                               for c in code_pick(short, min(settings.policy_rules, len(short)))]
        ruled, fixed = obeyed(env.model_copy(update={"rules": to_rules(coded)}), coded)
        return StageResult(ruled, (*rejections, *notes, *fixed))
    grounded, more = ground(env, rules, checked, words)
    notes += more
    if not grounded:
        return StageResult(env, (*rejections, *notes, ir.Rejection(
            stage=STAGE, item="policy", reason="no rule in prose grounds in a candidate that holds")))
    short = [c for _, c in grounded][:settings.policy_rules]
    picked, picking = pick(env, short, client, settings, words, [p for p, _ in grounded][:len(short)])
    ruled, fixed = obeyed(env.model_copy(update={"rules": to_rules(picked)}), picked)
    return StageResult(ruled, (*rejections, *notes, *picking, *fixed))


def obeyed(ruled: ir.Environment, picked: Sequence[Picked]) -> tuple[ir.Environment, list[ir.Rejection]]:
    """``ruled`` (its rules made of ``picked``, in order) with seeded rows that obey its rules
    (:func:`pipeline.stages.policy.seeded.obey`: values changed within a rule, rows no row references deleted, or
    the rule dropped); where rows changed, every rule checked again on them (:func:`recheck_policy`: the calls each
    allows and forbids are the new rows'). Each change and each rule dropped is a Rejection."""
    fixed, dropped, notes = obey(ruled, [p[0].candidate for p in picked], [r.id for r in ruled.rules])
    kept = fixed.model_copy(update={"rules": [r for r in fixed.rules if r.id not in dropped]})
    if fixed is ruled:
        return kept, notes
    again = recheck_policy(kept, why="after the seeded rows were made to obey the policy")
    return again.value or kept, [*notes, *again.rejections]


# ------------------------------------------------------------------ the rules again, after a repair

_PARAM = re.compile(r"(?<![\w:]):([A-Za-z_]\w*)")


def _probe_values(finder: Finder, tool: ir.Tool, probe: str, clock: str) -> list[Any]:
    """The seeded values a candidate on parameter ``probe`` of ``tool`` is probed with, as :class:`Finder` gives
    them: the keys of the table of the row it names, else the values of the column it writes (numbers in order;
    dates with a week before and after today)."""
    prm = next((q for q in tool.params if q.name == probe), None)
    if prm is None:
        return []
    if (subject := finder.subject(tool, prm)) is not None:
        return finder.values(*subject)
    written = finder.written(tool, prm)
    if written is None:
        return []
    values = finder.values(written[0], written[1].name)
    if all(isinstance(v, int | float) for v in values):
        return sorted(set(values))
    if finder.dated(written[0], written[1].name):
        today = dt.date.fromisoformat(clock[:10])
        return sorted({str(v) for v in values} | {(today + dt.timedelta(days=d)).isoformat() for d in (-7, 7)})
    return values


def rule_candidates(env: ir.Environment, conn: Any, rule: ir.Rule) -> list[Candidate] | None:
    """``rule`` as the candidates it is checked as, one per tool it governs (initial state on ``conn``): the first
    parameter of the tool its condition names is the probe, varied over the seeded values of what it names or
    writes; the calls the rule was last checked on are tried too. None when it governs a tool ``env`` lacks."""
    names = {t.name for t in env.tools}
    if any(t not in names for t in rule.tools):
        return None
    finder = Finder(env, conn)
    named = _PARAM.findall(rule.condition)
    out = []
    for name in rule.tools:
        tool = env.tool(name)
        probe = next((n for n in named if any(q.name == n for q in tool.params)), "")
        tried = tuple(dict(c.arguments) for c in [*rule.allowed, *rule.forbidden] if c.tool == name)
        values = _probe_values(finder, tool, probe, env.clock)
        values += [a[probe] for a in tried if probe in a and a[probe] not in values]
        out.append(Candidate(rule.id, rule.kind, name, rule.condition, probe, tuple(values), tried=tried))
    return out


def _dropped(rule: ir.Rule, reason: str, why: str) -> ir.Rejection:
    return ir.Rejection(stage=STAGE, item=rule.id, reason=f"rule {rule.id} dropped {why}: {reason}",
                        evidence={"tools": list(rule.tools), "kind": rule.kind, "condition": rule.condition,
                                  "message": rule.message})


def recheck_policy(env: ir.Environment, why: str = "after a repair") -> StageResult[ir.Environment]:
    """``env`` with the rules that still hold on its tools and rows (see the module docstring), each with the real
    calls it now allows and forbids (two of each, as :func:`to_rules` keeps), in their order; a Rejection per rule
    dropped. An environment without rules comes back as it is."""
    if not env.rules:
        return StageResult(env)
    with EnvInstance(env) as inst:
        per_rule = {r.id: rule_candidates(env, inst.conn, r) for r in env.rules}
    checked, failed = check(env, [c for cs in per_rule.values() for c in cs or []])
    held: dict[str, list[Checked]] = {}
    for c in checked:
        held.setdefault(c.candidate.key, []).append(c)
    first_failure: dict[str, str] = {}
    for r in failed:
        first_failure.setdefault(r.item, r.reason.removeprefix("rule dropped: "))
    rejections: list[ir.Rejection] = []
    kept: list[tuple[ir.Rule, list[Checked]]] = []
    for rule in env.rules:
        cands = per_rule[rule.id]
        if cands is None:
            missing = ", ".join(t for t in rule.tools if t not in {x.name for x in env.tools})
            rejections.append(_dropped(rule, f"it governs {missing}, which the environment no longer has", why))
        elif len(held.get(rule.id, [])) < len(cands):
            rejections.append(_dropped(rule, first_failure.get(rule.id, "it no longer holds"), why))
        else:
            kept.append((rule, held[rule.id]))
    out: list[ir.Rule] = []
    for rule, ok in kept:
        alt = rule.alternative
        if alt is not None:  # the message offers it: it must still work where the rule forbids, and be allowed
            others = [c.candidate for r, cs in kept if r.id != rule.id for c in cs if c.candidate.tool == alt.tool]
            found = [offered_conflicts(env, alt, c, others) for c in ok if c.candidate.tool == rule.tools[0]]
            if any(f is None for f in found):
                rejections.append(_dropped(rule, f"its alternative ({alt.tool} with {alt.fixed}) no longer works, "
                                                 "or changes nothing, where the rule forbids its write", why))
                continue
            against = sorted({k for f in found for k in f or ()})
            if against:
                rejections.append(_dropped(rule, f"its alternative ({alt.tool} with {alt.fixed}) is forbidden "
                                                 f"there by rule {', '.join(against)}", why))
                continue
        calls = {side: [ir.ToolCall(tool=c.candidate.tool, arguments=a) for c in ok for a in getattr(c, side)[:2]]
                 for side in ("allowed", "forbidden")}
        out.append(rule.model_copy(update=calls))
    return StageResult(env.model_copy(update={"rules": out}), tuple(rejections))
