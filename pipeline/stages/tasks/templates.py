"""Request templates the LLM writes once per kind of chain, for the tasks the sampler makes with no LLM.

A bank's requests are worded by the LLM (or by code when its wording fails); the sampler (``envfoundry sample``)
makes thousands of tasks at train time and may not call an LLM, so code words them. This stage gives the sampler
the LLM's words without the LLM: at the end of an environment's verification, for the kinds of chain the planner
instantiates most (:func:`kinds`), the LLM rewrites the code's request once with each value the user states as a
named slot ("When is {member_name}'s loan of {book_title} due?"). Code checks the template by filling it with the
values of several real chains of that kind and running the build's wording lint on each
(:func:`pipeline.stages.tasks.bank.lint_request`, as for a request code wrote); a template that fails after the
feedback loop is not kept, and the sampler words that kind by code, as before. Templates are stored with the
environment (``templates.json``: :func:`to_json`) and filled by code (:func:`fill`), each filled request linted
again at sample time.

A chain's *kind* (:func:`template_key`) is everything its request's words depend on except the values the user
states: the shape, the tools in order, each goal's kind, tables, columns named, asked, set or counted by, the
direction of a choice (``highest``), a yes/no value and the answer's type. Two chains of one kind differ only in
the values of their slots. A chain whose words depend on what its replay changed (a write that states no new
value), or that must state a value none of its goals holds, has no kind: code words it.

Slots are named from the columns in plain words (``book_title``, ``loan_due_date``). Two places of a chain holding
the same value share one slot (the same book named twice); a chain of that kind whose values there differ cannot
use the template. A template must hold each slot, no other braces and no digit outside a slot (a number written
into it would be stale for the next rows).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.dbmodel.keys import surrogates
from pipeline.hashing import canonical_json
from pipeline.ir import Environment
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import render_section
from pipeline.runtime.replay import fresh
from pipeline.stages.feedback import ask_with_feedback
from pipeline.stages.tasks.bank import lint_request
from pipeline.stages.tasks.code_wording import (
    QUOTES,
    Fixed,
    _Words,
    as_words,
    number_words,
    request_from_plan,
    speaks_about_itself,
    state_columns,
)
from pipeline.stages.tasks.planner import Chain, round_chains, shuffled_planner
from pipeline.stages.tasks.planner.chains import Goal

STAGE = "phrasing"
PROMPT = "phrasing"
VERSION = 1
"""Of ``templates.json``: bumped when a key or a slot would be computed otherwise."""
ROUNDS = 3
"""Planner rounds (rows in another order each) over which kinds are counted and instances gathered."""
CHECK_WITH = 4
"""Chains of a kind a template is filled with and linted on (its own first)."""
_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Phrased(BaseModel):
    model_config = ConfigDict(extra="forbid")
    template: str = Field(..., min_length=10, max_length=500)


@dataclass(frozen=True)
class Template:
    """A kind's request with named slots, and where each slot's value is in a chain of that kind."""

    key: str
    text: str
    slots: dict[str, tuple[str, ...]]
    """Slot -> the places (:func:`places`) that hold its value."""
    states: tuple[str, ...] = ()
    """The slots whose value comes from a fixed list: filled as words (``in_progress`` -> "in progress")."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "template": self.text,
                               "slots": {k: list(v) for k, v in self.slots.items()}}
        if self.states:  # absent otherwise: files written before keep their bytes
            out["states"] = list(self.states)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Template:
        return cls(str(data["key"]), str(data["template"]),
                   {str(k): tuple(str(p) for p in v) for k, v in dict(data["slots"]).items()},
                   tuple(str(s) for s in data.get("states") or ()))


# ---------------------------------------------------------------- kinds and places


def _shape_of(goal: Goal) -> dict[str, Any]:
    return {"kind": goal.kind, "table": goal.table, "owner": goal.owner, "asked": goal.asked, "items": goal.items,
            "which": goal.which, "named": [r for r, _ in goal.named],
            "values": [[c, v] if isinstance(v, bool) else [c] for c, v in goal.values],
            "refs": [[c, t, [r for r, _ in named]] for c, t, named in goal.refs], "where": [r for r, _ in goal.where]}


def places(chain: Chain) -> dict[str, Any]:
    """Where the values the user states sit in ``chain``'s goals: ``"<goal>.<field>.<column>"`` -> value (a yes/no
    value is part of the kind, not a place)."""
    out: dict[str, Any] = {}
    for i, g in enumerate(chain.goals):
        for ref, v in g.named:
            out[f"{i}.named.{ref}"] = v
        for col, v in g.values:
            if not isinstance(v, bool):
                out[f"{i}.values.{col}"] = v
        for col, _t, named in g.refs:
            for ref, v in named:
                out[f"{i}.refs.{col}.{ref}"] = v
        for ref, v in g.where:
            out[f"{i}.where.{ref}"] = v
    return out


def says_changes(chain: Chain) -> bool:
    """Whether the request's words depend on what the calls change (``pipeline.stages.tasks.code_wording``: a write that
    states no new value says the change its replay made; a delete through another table says which row went)."""
    return any((g.kind in ("update", "decide_update") and not g.values and not g.refs) or
               (g.kind == "delete" and g.owner) for g in chain.goals)


def template_key(chain: Chain) -> str | None:
    """``chain``'s kind (see the module docstring), or None when code must word it."""
    if not chain.goals or says_changes(chain):
        return None
    held = {repr(v) for v in places(chain).values()}
    if any(not isinstance(v, bool) and repr(v) not in held for v in chain.must_state):
        return None
    answer = chain.answer.get("type") if chain.answer is not None else None
    return canonical_json({"shape": chain.shape, "tools": [c.tool for c in chain.calls], "answer": answer,
                           "goals": [_shape_of(g) for g in chain.goals]})


def _place_ref(chain: Chain, place: str) -> tuple[Goal, str, str, str]:
    """(the goal, its field, the column reference and the table it is read against) of a place of ``chain``."""
    i, field, *rest = place.split(".", 2)
    g = chain.goals[int(i)]
    ref = rest[0]
    if field == "refs":
        col, _, ref = ref.partition(".")
        table = next(t for c, t, _ in g.refs if c == col)
    else:
        table = {"named": g.owner or g.table, "values": g.table, "where": g.items or g.table}[field]
    return g, field, ref, table


def _slot_name(chain: Chain, place: str, language: str) -> str:
    w = _Words(language)
    g, field, ref, table = _place_ref(chain, place)
    label = w.label(ref, table)
    thing = w.thing(table)
    if thing.split()[-1] not in label.split():
        label = f"{thing} {label}"
    if field == "values" and g.kind not in ("create", "child"):  # what a write sets: "new order status"
        label = f"new {label}"
    return re.sub(r"\W+", "_", label.strip().lower()).strip("_") or "value"


def slotted(chain: Chain, *, skip: Collection[tuple[str, str]] = (), language: str = "en",
            states: Fixed | None = None) -> Template | None:
    """The code's request for ``chain`` with each stated value as a named slot, or None (no kind, or a value the
    code's words do not show as written, or show more often than the chain holds it: a value that is also one of
    the request's own words, a status "new" in "a new order")."""
    key = template_key(chain)
    if key is None:
        return None
    text = request_from_plan(chain, (), skip=skip, language=language, states=states)
    if text is None:
        return None
    w = _Words(language, states)
    groups: dict[str, list[str]] = {}  # the value as the code wrote it -> its places
    fixed: set[str] = set()  # the places holding a value of a fixed list
    for place, v in places(chain).items():
        _g, _f, ref, table = _place_ref(chain, place)
        listed = w.listed(ref, table, v)
        groups.setdefault(w.value(v, listed), []).append(place)
        if listed:
            fixed.add(place)
    slots: dict[str, tuple[str, ...]] = {}
    names: Counter[str] = Counter()
    for shown in sorted(groups, key=lambda s: (-len(s), s)):  # longer first: 'Emma' inside 'Emma II' stays
        pattern = re.compile(rf"(?<![\w.\-/:]){re.escape(shown)}(?![\w\-/:]|\.\d)", re.IGNORECASE)
        found = len(pattern.findall(text))
        if not found or found > len(groups[shown]):
            return None
        name = _slot_name(chain, groups[shown][0], language)
        names[name] += 1
        if names[name] > 1:
            name = f"{name}_{names[name]}"
        text = pattern.sub("{" + name + "}", text)  # a name is letters, digits and underscores
        slots[name] = tuple(groups[shown])
    return Template(key, text, slots, tuple(n for n, where in slots.items() if fixed & set(where)))


_QUOTED_SLOT = re.compile(rf"(?<!\w)[{QUOTES}]\s*(\{{[A-Za-z_][A-Za-z0-9_]*\}})\s*[{QUOTES}](?!\w)")


def unquote_slots(text: str) -> str:
    """A template without the quotation marks (of any script) around its slots: "the medication '{medication_name}'"
    -> "the medication {medication_name}"; people write the names they state without quotes (the lint refuses a
    stated value in quotes)."""
    return _QUOTED_SLOT.sub(lambda m: m.group(1), text)


def fill(template: Template, chain: Chain) -> str | None:
    """``template`` filled with ``chain``'s values, or None when ``chain`` is not of its kind or gives two places
    of one slot different values."""
    if template_key(chain) != template.key:
        return None
    at = places(chain)
    values: dict[str, str] = {}
    for name, where in template.slots.items():
        got = {repr(at.get(p)) for p in where}
        if len(got) != 1 or where[0] not in at:
            return None
        v = at[where[0]]  # a string without quotes: the template says what it is; a whole amount without ".0"
        shown = number_words(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)
        values[name] = as_words(shown) if name in template.states else shown
    # a template written before the quotes were taken away (a stored templates.json) fills as one without them
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), unquote_slots(template.text))


def problem(env: Environment, template: Template, chains: Sequence[Chain], same: str | None = None) -> str | None:
    """Why ``template`` cannot word its kind, or None: a slot missing or unknown, a digit of its own, the
    program's words (``same``: the code's slotted request) as they were, words about the message itself, or the
    lint refusing it filled with one of ``chains``; a value the first of ``chains`` gives a slot, written out."""
    found = _SLOT.findall(template.text)
    missing = [s for s in template.slots if s not in found]
    if missing:
        return render_section(PROMPT, "missing", slots=", ".join("{" + s + "}" for s in missing))
    extra = sorted({s for s in found if s not in template.slots})
    outside = _SLOT.sub(" ", template.text)
    if extra or "{" in outside or "}" in outside:
        return render_section(PROMPT, "unknown", slots=", ".join("{" + s + "}" for s in template.slots))
    if re.search(r"\d", outside):
        return render_section(PROMPT, "digits")
    if same is not None:  # a slot said more often than the program says it: one value for two facts ("due on
        # {loan_date} ... with the loan date {loan_date}"), a template at odds with itself
        base = _SLOT.findall(same)
        twice = next((s for s in template.slots if found.count(s) > max(1, base.count(s))), None)
        if twice is not None:
            return render_section(PROMPT, "twice", slot="{" + twice + "}")
    for name in template.states:  # "status '{loan_status}'": the value as the database holds it, not as a word
        if re.search(rf"[{QUOTES}]\{{{name}\}}|\{{{name}\}}[{QUOTES}]", template.text):
            return render_section(PROMPT, "quoted", slot="{" + name + "}")
    for ch in chains[:1]:  # the values the LLM was shown: written out, they would be stale for the next rows
        at = places(ch)
        for name, where in template.slots.items():
            shown = str(at.get(where[0], ""))
            if len(shown) > 1 and re.search(rf"(?<!\w){re.escape(shown)}(?!\w)", outside, re.IGNORECASE):
                return render_section(PROMPT, "value", value=shown, slot="{" + name + "}")
    if same is not None and " ".join(template.text.split()).casefold() == " ".join(same.split()).casefold():
        return render_section(PROMPT, "same")
    if re.search(r"placeholder|\bbraces?\b", outside, re.IGNORECASE) or speaks_about_itself(outside):
        return render_section(PROMPT, "itself")
    for ch in chains:
        text = fill(template, ch)
        if text is None:
            continue
        why = lint_request(env, ch, text, plain=True)
        if why:
            return render_section(PROMPT, "lint", text=text, problem=why)
    return None


# ---------------------------------------------------------------- the stage


def kinds(env: Environment, planner: Any, initial_db: str | Path | None, *, rules: bool = False,
          rounds: int = ROUNDS) -> list[list[Chain]]:
    """The chains ``planner`` instantiates over ``rounds`` rounds of rows in another order (``planner.reorder``,
    :class:`pipeline.stages.tasks.planner.ShuffledPlanner`), grouped by kind: the most frequent kinds first, taken in
    turn across tiers (so deep chains are not crowded out by one-call lookups); chains in the order found."""
    groups: dict[str, list[Chain]] = {}
    for rnd in range(rounds):
        for ch in round_chains(planner, 0, rnd, initial_db, rules):
            key = template_key(ch)
            if key is not None:
                groups.setdefault(key, []).append(ch)
    by_tier: dict[int, list[str]] = {}
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        by_tier.setdefault(groups[key][0].tier, []).append(key)
    order: list[str] = []
    while any(by_tier.values()):
        for tier in sorted(by_tier):
            if by_tier[tier]:
                order.append(by_tier[tier].pop(0))
    return [groups[k] for k in order]


def write_templates(env: Environment, client: LLMClientProtocol, groups: Sequence[Sequence[Chain]], *, limit: int,
                    skip: Iterable[tuple[str, str]] = (), language: str = "en",
                    max_attempts: int = 2) -> tuple[list[Template], list[str]]:
    """Templates for the first ``limit`` kinds of ``groups`` the code can slot, and a line per kind the LLM's
    template failed for (its last problem)."""
    skip = set(skip)
    states = state_columns(env)
    kept: list[Template] = []
    failed: list[str] = []
    asked = 0
    for chains in groups:
        if asked >= limit:
            break
        base = slotted(chains[0], skip=skip, language=language, states=states)
        if base is None:
            continue
        asked += 1
        examples = "\n".join(f"{{{name}}}: {places(chains[0])[where[0]]}" for name, where in base.slots.items())
        messages = [{"role": "system", "content": render_section(PROMPT, "system", language=language)},
                    {"role": "user", "content": render_section(
                        PROMPT, "user", system=env.scenario.name, description=env.scenario.description,
                        request=base.text, slots=examples or "(none)")}]
        check_on = list(chains[:CHECK_WITH])

        def check(reply: Phrased, base: Template = base, check_on: list[Chain] = check_on
                  ) -> tuple[Template | None, str | None]:
            t = Template(base.key, unquote_slots(" ".join(reply.template.split())), base.slots, base.states)
            why = problem(env, t, check_on, same=base.text)
            return (None, why) if why else (t, None)

        out = ask_with_feedback(client, Phrased, messages, check, stage=STAGE, max_attempts=max_attempts,
                                max_tokens=200, feedback=lambda e: render_section(PROMPT, "feedback", problem=e),
                                retry_temperature=0.7)
        if out.value is not None:
            kept.append(out.value)
        else:
            failed.append(f"{' -> '.join(c.tool for c in chains[0].calls)}: {out.error or 'no reply'}")
    return kept, failed


def phrase_environment(env: Environment, client: LLMClientProtocol, initial_db: str | Path | None, *, limit: int,
                       language: str = "en") -> tuple[dict[str, Any], dict[str, Any]]:
    """``templates.json`` for ``env`` (empty when no template was kept) and what the stage did, for the report
    (kinds found, asked, kept, and why each failed one failed)."""
    with fresh(env, initial_db) as run:
        planner = shuffled_planner(env, run)
        ids = surrogates(run.infos)
        groups = kinds(env, planner, initial_db, rules=bool(env.rules))
    kept, failed = write_templates(env, client, groups, limit=limit, skip=ids, language=language)
    summary = {"kinds": len(groups), "asked": len(kept) + len(failed), "kept": len(kept), "failed": failed}
    return (to_json(kept) if kept else {}), summary


def to_json(templates: Sequence[Template]) -> dict[str, Any]:
    return {"version": VERSION, "templates": [t.to_json() for t in templates]}


def read_templates(path: str | Path) -> dict[str, Template]:
    """The templates of a ``templates.json`` by kind (none when the file is missing); a bad file raises
    ``ValueError`` naming it."""
    p = Path(path)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        if data.get("version") != VERSION:
            return {}  # another version's keys: code words every kind
        return {t.key: t for t in map(Template.from_json, data["templates"])}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{p}: not a templates file ({e})") from None
