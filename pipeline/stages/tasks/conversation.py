"""The conversational form of a task (``[stages.tasks] conversations``), derived from its plan.

Code gives the simulated user its facts: every value the request states, each with what it is (the plan's goals:
how the user names a row, the new values, the rows a new row points at, the conditions of a count), and what it
never says (the plan's hidden values: ids read from tools, the answer). The LLM writes only the opening line (what a
person says first, in general words) and a persona, in one small structured request (``prompts/user.md``
``opening_*``) that shows it the code's opening (what the person wants in general words, from the goals'
kinds and tables), not the request: it has no value to give away, so one reply usually passes the lint (no value
of the request, no identifier). When ``max_attempts`` replies (one by default) fail, the code's opening stays
(``opening_<kind>_en``); ``worded_by`` says which. The result is
``metadata.conversation`` (:class:`verify.conversation.Script` without the goal, which is the task's request).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.ir import Environment, Task
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import render_section
from pipeline.stages.feedback import ask_with_feedback
from pipeline.stages.tasks.code_wording import _Words
from pipeline.stages.tasks.planner.chains import Chain
from verify.conversation import PROMPT, Fact, Script, check_turn, says

STAGE = "conversation"
_SNAKE = re.compile(r"\b[a-z0-9]+_[a-z0-9_]+\b")
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_KIND = {"lookup": "lookup", "count": "count", "total": "count", "create": "create", "child": "create",
         "update": "update", "decide_update": "update", "delete": "delete", "decide_delete": "delete"}


class Opening(BaseModel):
    model_config = ConfigDict(extra="forbid")
    persona: str = Field(..., min_length=3, max_length=160)
    opening: str = Field(..., min_length=5, max_length=300)


def facts_of(chain: Chain, language: str = "en") -> list[Fact]:
    """The values the user knows, from the chain's goals (a value once per label and row), then any value the
    request must state that no goal holds. Two goals about rows of one table tell them apart ("book title (first
    renewal)", "book title (second renewal)"), and so do the rows each of them points at ("book title (the loan of
    the first renewal)", with the ``what_of`` section of the wording templates, so in the scenario's language), and
    two rows of one table that goals about other tables point at ("name (the patient of the prescription)", "name
    (the patient of the allergy)")."""
    w = _Words(language)
    out: list[Fact] = []
    held: dict[tuple[str, str], set[str]] = {}  # (label, value) -> the rows ("first", "second", "") it is told for

    def row_of(table: str, which: str) -> str:
        return f"{which} {w.thing(table)}" if which.isalpha() else f"{w.thing(table)} {which}".strip()

    def add(table: str, ref: str, value: Any, new: bool = False, which: str = "", of: str = "") -> None:
        """``of``: the written row (its ``about``) that the row ``ref`` belongs to points at (its parent)."""
        if value is None or isinstance(value, bool):
            return
        label = w.label(ref, table)
        # one value told once per label, but once for each row of two ("new status (first case): open" and
        # "new status (second case): open" are two facts; a lookup of the first case by its number is not)
        rows_told = held.setdefault((f"new {label}" if new else label, repr(value)), set())
        told_as = f"{which}>{of}" if of else which
        if rows_told and (not told_as or told_as in rows_told or "" in rows_told):
            return
        rows_told.add(told_as)
        about = w("what_of", thing=w.thing(table), owner=of) if of else row_of(table, which)
        out.append(Fact(label=f"new {label}" if new else label, value=value, about=about))

    # the rows of each table the goals are about, in order: two goals about one row (an update, then a lookup of
    # the same case) are about the "first case", a new row is a row of its own
    order: dict[str, list[Any]] = {}
    for i, g in enumerate(chain.goals):
        row = g.named or ("new", i)
        if row not in (seen := order.setdefault(g.owner or g.table, [])):
            seen.append(row)
    # the rows of each table the goals point at: two goals pointing at two rows of one table (a prescription's
    # patient and a new allergy's) tell each apart by the row that points at it
    pointed: dict[str, set[Any]] = {}
    for g in chain.goals:
        for _, table, named in g.refs:
            if named:
                pointed.setdefault(table, set()).add(named)
    for i, g in enumerate(chain.goals):
        owner = g.owner or g.table
        rows = order[owner]
        nth = rows.index(g.named or ("new", i)) + 1
        which = "" if len(rows) < 2 else (_ORDINALS[min(nth, len(_ORDINALS)) - 1] if language == "en" else f"#{nth}")
        for ref, v in g.named:
            add(owner, ref, v, which=which)
        for _, table, named in g.refs:
            # the parent of one of two new rows of a table is that row's ("the loan of the first renewal"), as
            # the written rows are told apart: two loans' "book title (loan)" could not be
            # (an English ordinal takes its article, "the loan of the first renewal"; "#2" in other languages)
            of = "" if not which or g.table != owner else (
                f"the {row_of(g.table, which)}" if which.isalpha() else row_of(g.table, which))
            if not of and g.table == owner and named and (
                    named not in order.get(table, [named]) or len(pointed.get(table, ())) > 1):
                # a parent row of a table another goal is about, but another row of it: the row the goal writes
                # points at it ("member name (the loan of the renewal)"), as "member name (loan)" twice, one for
                # the loan a rule refuses to reopen and one for the loan renewed, could not be told apart; and
                # two rows of the parent table, each pointed at by a row of its own table ("name (patient)" twice,
                # Rachael Chase for the prescription and Megan Morgan for the allergy, the example pharmacy's
                # compound task of 2026-12-01)
                of = f"the {row_of(g.table, which)}" if language == "en" else row_of(g.table, which)
            for ref, v in named:
                add(table, ref, v, of=of)
        for col, v in g.values:
            add(g.table, col, v, new=g.kind not in ("create", "child"), which=which if g.table == owner else "")
        for ref, v in g.where:
            add(g.items or g.table, ref, v)
    told = {repr(f.value) for f in out}
    for v in chain.must_state:
        if not isinstance(v, bool) and repr(v) not in told:
            told.add(repr(v))
            out.append(Fact(label="detail", value=v))
    return out


def code_opening(env: Environment, chain: Chain, language: str = "en") -> tuple[str, str]:
    """(opening, persona) written by code from the goals' kinds and tables."""
    w = _Words(language)
    wants: list[str] = []
    for g in chain.goals:
        kind = _KIND.get(g.kind, "update")
        table = g.owner if kind == "count" and g.owner else g.table
        thing = w.thing(table)
        text = render_section(PROMPT, f"opening_{kind}_en", thing=thing, a=article(thing),
                              items=(g.items or table).replace("_", " "))
        if text not in wants:
            wants.append(text)
    if not wants:
        wants = [render_section(PROMPT, "opening_update_en", thing="record", items="records")]
    first = wants[0] if wants[0].startswith("I ") else wants[0][0].lower() + wants[0][1:]
    more = [render_section(PROMPT, "opening_also_en", more=_infinitive(x)) for x in wants[1:]]
    opening = " ".join([render_section(PROMPT, "opening_en", wants=first), *more])
    return opening, render_section(PROMPT, "persona_en", system=env.scenario.name)


def article(thing: str) -> str:
    """"a" or "an" before an English noun, by its first letter."""
    return "an" if thing[:1].lower() in "aeiou" else "a"


def _infinitive(sentence: str) -> str:
    """"I would like to add a new loan." -> "add a new loan."; "I have a question about ..." -> "ask about ..."."""
    s = sentence
    for head, repl in (("I would like to ", ""), ("I need to ", ""), ("I have a question about ", "ask about ")):
        if s.startswith(head):
            return repl + s[len(head):]
    return s[0].lower() + s[1:]


def _words(text: str) -> set[str]:
    """The words of ``text``, casefolded: runs of letters of any script."""
    return {w.casefold() for w in re.findall(r"[^\W\d_]+", text)}


def names_system(env: Environment, persona: str) -> bool:
    """Whether ``persona`` is the application's name, or a part of it, rather than who the person is (the example
    pharmacy's "Community Pharmacy Prescription Management", 2026-11-30): every word it has is a word of the
    scenario's name. Words of any script; no list of roles."""
    mine = _words(persona)
    return not mine or mine <= _words(env.scenario.name)


def own_personas(env: Environment, forms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``forms`` (``metadata.conversation`` of an environment's tasks) with each persona that names the application
    (:func:`names_system`) replaced by the persona the model gave most often for the environment's other tasks (a
    customer, a member: a person), else by the code's (``persona_en``), which names no role but no application
    either."""
    good = Counter(f["persona"] for f in forms if not names_system(env, f["persona"]))
    code = render_section(PROMPT, "persona_en", system=env.scenario.name)
    instead = max(sorted(good), key=lambda p: good[p]) if good else code
    return [f if not names_system(env, f["persona"]) else {**f, "persona": instead} for f in forms]


def lint_opening(env: Environment, script: Script, reply: Opening, things: Collection[str] = ()) -> str | None:
    """Why an opening line or persona cannot be used, or None: it states a value of the request or an id, names an
    identifier, or (``things``: the words of the tables the request is about, in English) names none of them, as
    an opening the model wrote in the assistant's voice does ("How can I help you today?")."""
    text = f"{reply.opening} {reply.persona}"
    words = {w.casefold().rstrip("s") for w in re.findall(r"[^\W\d_]+", reply.opening)}
    if things and not words & {t.rstrip("s") for t in things}:
        return render_section(PROMPT, "opening_subject", things=", ".join(sorted(things)))
    values = [f.value for f in script.facts if says(text, f.value)]
    values += [v for v in script.hidden if says(text, v)]
    if values:
        return render_section(PROMPT, "opening_problem", values=", ".join(repr(v) for v in values))
    errors = check_turn(script, env, [], [], text, False, 0)
    if errors:
        return render_section(PROMPT, "opening_problem", values="; ".join(e.detail for e in errors))
    if snake := _SNAKE.search(text):
        return render_section(PROMPT, "opening_problem", values=repr(snake.group(0)))
    return None


def conversation_form(env: Environment, client: LLMClientProtocol, task: Task, chain: Chain, *, max_attempts: int = 1,
                      language: str = "en") -> dict[str, Any]:
    """``metadata.conversation`` for ``task`` planned as ``chain``."""
    opening, persona = code_opening(env, chain, language)
    script = Script(opening=opening, goal=task.instruction, facts=facts_of(chain, language), persona=persona,
                    question=chain.answer is not None, hidden=[v for v in chain.hidden if not isinstance(v, bool)],
                    pushback=any(r.get("verdict") == "forbids" for r in chain.rules))
    messages = [{"role": "system", "content": render_section(PROMPT, "opening_system", language=language)},
                {"role": "user", "content": render_section(PROMPT, "opening_user", system=env.scenario.name, wants=opening)}]
    things = {w.casefold() for g in chain.goals for t in (g.table, g.owner, g.items) if t
              for w in _Words(language).thing(t).split()} if language == "en" else set()

    def check(reply: Opening) -> tuple[Opening | None, str | None]:
        problem = lint_opening(env, script, reply, things)
        return (None, problem) if problem else (reply, None)

    out = ask_with_feedback(client, Opening, messages, check, stage=STAGE, max_attempts=max_attempts,
                            max_tokens=120, feedback=lambda e: e, retry_temperature=0.7)
    worded_by = "code"
    if out.value is not None:
        script = script.model_copy(update={"opening": out.value.opening.strip(), "persona": out.value.persona.strip()})
        worded_by = "llm"
    return {**script.to_metadata(), "worded_by": worded_by}
