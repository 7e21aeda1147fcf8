"""One open child per parent where the domain has it (issue 40): a book is not out on two loans at once.

The rows maker fans several children per parent and draws each child's state on its own; a child in the examples'
state that is under way at the clock (a loan 'pending': issued by today, due after it; ``maker.ValueMaker.under_way``)
is moved to be under way today, so two such children of one parent overlap (the library of 2026-11-29: Brave New
World out on loans 4 and 20). Whether a parent may have two at once is the domain's: a patient holds several open
prescriptions, a member several open loans, a book one. The example rows cannot say it (the model's four example
children name four different parents), so the model is asked one short constrained question per (child table,
reference column, state): "can one row of <parent> have two rows of <child> in state X, both under way today, at the
same time?", asked both ways (is it possible? is it impossible?) with a yes/no the grammar holds it to (:class:`Answer`), and
held only where the two answers agree (:func:`ask`). Where it
says no, a later child that would be a second open one of its parent is drawn again in a state the examples do not
show (:meth:`pipeline.stages.rows.maker.ValueMaker.row`, :class:`pipeline.stages.rows.maker.SingleOpen`): the loan is
'returned'. Nothing is read from names or words; the replies are cached like every other call (same cache, same
rows)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import relations
from pipeline.stages.feedback import render_section, user

STAGE = "seed_data"
ANSWER_TOKENS = 20


class Answer(BaseModel):
    """The model's reply, held to yes or no by the grammar."""

    answer: Literal["yes", "no"]


@dataclass(frozen=True)
class Question:
    """Whether one parent row (of ``parent``, named through ``column``) may have two children in ``state`` (column ->
    the values the examples hold) under way at once (``current``: the date pairs every example has under way)."""

    column: str
    parent: str
    state: tuple[tuple[str, tuple[Any, ...]], ...]
    current: tuple[tuple[str, str], ...]


def questions(table: str, cols: Sequence[Column], states: Mapping[str, frozenset[Any]],
              current: Sequence[relations.Current]) -> list[Question]:
    """The questions to ask of ``table``: one per reference to another table, where its rows in the examples' state
    (``states``, :func:`pipeline.meaning.relations.states`: a loan 'pending', never 'returned') are kept under way
    at the clock (``current`` non-empty). None where no state tells rows apart (every row is under way) or none is
    under way: no child is then moved onto today beside another."""
    if not states or not current:
        return []
    state = tuple((c, tuple(sorted(vs, key=str))) for c, vs in sorted(states.items()))
    pairs = tuple((c.first, c.second) for c in current)
    return [Question(c.name, c.ref[0], state, pairs) for c in cols if c.ref is not None and c.ref[0] != table]


def _state_text(q: Question) -> str:
    return " and ".join(f"{c} = {json.dumps(vs[0], ensure_ascii=False)}" if len(vs) == 1 else
                        f"{c} in ({', '.join(json.dumps(v, ensure_ascii=False) for v in vs)})" for c, vs in q.state)


def prompt(scenario: ir.Scenario, table: ir.Table, q: Question, key: str = "single_open") -> str:
    """The question in one wording (``key``: ``single_open`` asks whether it is possible, ``single_open_not``
    whether it is impossible)."""
    dates = "; ".join(f"{a} before today, {b} after today" for a, b in q.current)
    return render_section("seed_data", key, name=scenario.name, description=scenario.description,
                          table=table.name, parent=q.parent, column=q.column, state=_state_text(q), dates=dates)


def ask(scenario: ir.Scenario, table: ir.Table, q: Question, client: LLMClientProtocol) -> bool | None:
    """Whether the model says one parent row may have two ``table`` rows in ``q``'s state at once, asked both
    ways (possible? impossible?): True when it says possible and not impossible, False when impossible and not
    possible, None when the two answers disagree or a reply is not valid (nothing is then held: the rows are drawn
    as before). The embedded 1.5B model says yes to both wordings of every domain tried (2026-11-30): one wording
    alone would hold its habit, not the domain."""
    said = []
    for key in ("single_open", "single_open_not"):
        try:
            reply, _ = client.structured_reply(Answer, user(prompt(scenario, table, q, key)), stage=STAGE,
                                               max_tokens=ANSWER_TOKENS)
        except LLMUnavailable:
            raise
        except LLMError:
            return None
        said.append(reply.answer == "yes")
    possible, impossible = said
    return possible if possible != impossible else None


def wanted(setting: str, client: LLMClientProtocol) -> bool:
    """Whether the questions are asked (``[stages.build] ask_single_open``): "on", or "auto" with a client that is
    not the embedded model (a configured endpoint; the embedded 1.5B model agrees with both wordings every time, so
    its 2 calls per question hold nothing)."""
    return setting == "on" or (setting == "auto" and not getattr(client, "embedded", False))


@dataclass(frozen=True)
class Asked:
    """What :func:`one_open` found: the reference columns whose parent holds one open child at a time, and the
    record of every question (for the build's report)."""

    single: tuple[str, ...]
    rejections: tuple[ir.Rejection, ...]
    calls: int


def one_open(scenario: ir.Scenario, table: ir.Table, cols: Sequence[Column],
             states: Mapping[str, frozenset[Any]], current: Sequence[relations.Current],
             client: LLMClientProtocol) -> Asked:
    """Ask each of :func:`questions` of ``table`` and return the reference
    columns answered no, with a note per question (evidence kind ``single_open``)."""
    single: list[str] = []
    notes: list[ir.Rejection] = []
    calls = 0
    for q in questions(table.name, cols, states, current):
        calls += 2
        got = ask(scenario, table, q, client)
        if got is False:
            single.append(q.column)
        said = {True: "may have several at once", False: "has at most one at a time (later ones drawn in another "
                "state)", None: "no answer (its two wordings disagree): not held"}[got]
        notes.append(ir.Rejection(
            stage=STAGE, item=f"{table.name}.{q.column}",
            reason=f"one {q.parent} row and its {table.name} rows with {_state_text(q)}, under way today: the model "
                   f"says it {said}",
            evidence={"kind": "single_open", "parent": q.parent, "state": {c: list(vs) for c, vs in q.state},
                      "answer": None if got is None else ("yes" if got else "no")}))
    return Asked(tuple(single), tuple(notes), calls)
