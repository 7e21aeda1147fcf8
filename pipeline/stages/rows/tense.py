"""Rows dated against the environment's clock as their state says (issue 40): a finished row before today.

The model's four example rows of a table are dated "around today" (``prompts/seed_data.md``), so they say nothing
of which side of the clock a row in each state lies on; drawn independently, a state and a date gave a laundry's
'closed' orders placed next month and a dental clinic's 'completed' visits half a year ahead (262 rows in two outside
builds, ``notes/closing16.md``). So the model is asked, once per state of a state column (a column drawn from a
short list of texts: its CHECK list or its generator's values) of a table with a date column, about a row in it: it
says in a few words what has happened so far to a row in that state, then whether its dates are in the past, in
the future or either (:func:`ask_tense`; the row first, as :func:`pipeline.stages.schema.
personal.ask_people`: the 1.5B model judges a row it has written better than an abstract menu). Its answer is used
two ways, by code and in any language (the values are the schema's own, the answers a fixed set):

- a date column drawn in a range is made to reach the sides of the clock its states need (:func:`crossed`): all
  before today when every state is before it, all after when every one is after, else across the clock with the
  share before today of the states' weights there (a state on either side weighs half on each): a dental clinic's
  range of today..+180 days, where 'completed' (0.3) is before, 'scheduled' (0.4) after and 'pending' (0.3) on
  either side, becomes 81 days back and 99 ahead;
- the days a crossed range gained before its start are for the states dated before today: a state on either side
  (an open order, a pending delivery) keeps to the range it had, or to its examples' distance from today, whichever
  reaches further back (:attr:`Tense.recent`); a row dated earlier than that holds a state dated before today (a
  laundry order from three months ago is closed, not open);
- each code-made row whose date is on the side its state forbids gets its state drawn again among the states its
  dates allow, by their weights (:meth:`Tense.fit`, from :meth:`pipeline.stages.rows.maker.ValueMaker.row`): the
  dates never move, so a child's dates keep within its parent's. A row no state allows keeps its state (counted).

The answer holds the row's first dates (:func:`first_dates`: those no other date of the row follows, by the order
the examples show or a ``date_after`` generator), not the later ones: a finished row began in the past, and its
due, end or expiry date falls where its relation to the first puts it. Held to every date, 'returned' (past) made
each loan returned early, out last week and due next week, 'pending': the library of 2026-11-30 ended with 16
pending loans of 20 and books on several open loans at once. A state dated after today needs nothing more (its
later dates follow its first).

A call that fails or never validates leaves the table as before (no answer, no change); so does a state the reply
leaves out, and a state answered both ways counts as 'either'.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import relations
from pipeline.meaning.spans import FIRST_DAY, LAST_DAY, MIN_SPAN
from pipeline.stages.feedback import render_section, user

STAGE = "seed_data"

Side = Literal["before", "after", "either"]
Said = Literal["past", "future", "either"]
SAID: tuple[Said, ...] = ("past", "future", "either")
SIDE: dict[str, Side] = {"past": "before", "future": "after", "either": "either"}
"""The model's words for the sides of the clock (a row's date in the past: before today), as :class:`Tense` holds
them."""
ROW_TEXT = 60
"""Characters the model writes of a row in the state before it answers (the grammar cuts it there)."""
TENSE_TOKENS = 64
"""Output tokens of one answer (a few words and the side)."""
SO_FAR, DATES = "so_far", "dates"
"""The keys of what the model writes first (what has happened so far to a row in the state) and of its answer."""
STATES_MAX = 8
"""Most values of a state column asked about (a longer list is a category, not a row's stage)."""
DATES_MAX = 3
"""Most date columns of a table asked about, in the table's order."""
SHARE_SLACK = 0.1
"""A range whose share of days before today is this close to the states' share is left as it is."""


@dataclass
class Tense:
    """The model's answer for one state column: per state, per date column it holds (the row's first dates,
    :func:`first_dates`), the side of today such a row is dated on; with the states' draw weights (the column's
    generator), and what :meth:`fit` did."""

    column: str
    sides: dict[str, dict[str, Side]]
    weights: dict[str, float]
    redrawn: int = 0
    unfit: int = 0
    crossed: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Date column -> its range before, where :func:`crossed` changed it."""
    example_days: dict[str, list[date]] = field(default_factory=dict)
    """Date column -> the days of its example rows (:func:`ask_tenses`)."""
    recent: dict[str, date] = field(default_factory=dict)
    """Crossed date column -> the earliest day a row in a state on either side of the clock is dated on: its range's
    start before it was crossed, or today less its examples' furthest distance from today, whichever is earlier
    (:func:`crossed`). Before it, only a state dated before today fits: the range reached back for those."""

    def allows(self, state: Any, row: Mapping[str, Any], today: date) -> bool:
        """Whether ``row``'s dates are on the sides of ``today`` a row in ``state`` may have (today is on both; a
        state on either side not before :attr:`recent`)."""
        for column, side in self.sides.get(state, {}).items():
            day = relations.as_date(row.get(column))
            if day is not None and ((side == "before" and day > today) or (side == "after" and day < today)
                                    or (side == "either" and column in self.recent and day < self.recent[column])):
                return False
        return True

    def fit(self, row: Mapping[str, Any], rng: random.Random, today: date) -> Any:
        """``row``'s state, or one drawn again (by the weights) among those its dates allow when its own is not."""
        state = row.get(self.column)
        if state is None or state not in self.sides or self.allows(state, row, today):
            return state
        options = [s for s in self.weights if self.weights[s] > 0 and self.allows(s, row, today)]
        if not options:
            self.unfit += 1
            return state
        self.redrawn += 1
        return rng.choices(options, weights=[self.weights[s] for s in options])[0]

    def side_weights(self, column: str, reaches: frozenset[str] = frozenset({"before", "after"})
                     ) -> tuple[float, float]:
        """The weights of the rows dated before today in ``column`` and of those after it, as the states say: a
        state on one side weighs there, one on either side half on each; (0, 0) when no state answered for it."""
        said = {s: self.sides[s][column] for s in self.weights if column in self.sides.get(s, {})}
        if not said:
            return 0.0, 0.0
        # a state on either side weighs on a side only where its range already reaches (``reaches``) or some state
        # is dated for sure: "either" alone moves no range across the clock (the pharmacy's open orders, "either"
        # beside closed "before" in a range up to today, were drawn up to three weeks after it)
        sure = set(said.values()) | set(reaches)
        half = {side: 0.5 if side in sure else 0.0 for side in ("before", "after")}
        before = sum(self.weights[s] * {"before": 1, "after": 0, "either": half["before"]}[v] for s, v in said.items())
        after = sum(self.weights[s] * {"before": 0, "after": 1, "either": half["after"]}[v] for s, v in said.items())
        return before, after


def state_columns(cols: Sequence[Column], gens: Sequence[ir.ColumnGenerator]) -> list[ir.ColumnGenerator]:
    """The generators of the columns whose value is a row's state: an ``enum`` drawn on its own (not a tuple's
    field) from 2..:data:`STATES_MAX` texts of a TEXT column."""
    by_col = {c.name: c for c in cols}
    out = []
    for g in gens:
        col = by_col.get(g.column)
        values = list(dict.fromkeys(g.values or ()))
        if col is None or g.kind != "enum" or g.after or col.ref is not None or col.pk:
            continue
        if 2 <= len(values) <= STATES_MAX and all(isinstance(v, str) and v for v in values):
            out.append(g)
    return out


def date_columns(cols: Sequence[Column], gens: Sequence[ir.ColumnGenerator], examples: Mapping[str, Sequence[Any]]
                 ) -> list[str]:
    """The table's date columns whose values code draws (a range, or days after another date), in its order, at
    most :data:`DATES_MAX`: what a row's state is dated by."""
    drawn = {g.column for g in gens if g.kind in ("date", "datetime", "date_after")}
    dated = set(relations.date_columns({c: examples.get(c, []) for c in drawn}))
    return [c.name for c in cols if c.name in drawn and (c.name in dated or not any(examples.get(c.name, [])))
            ][:DATES_MAX]


@cache
def tense_model() -> type[BaseModel]:
    """``{"so_far": str, "dates": "past"|"future"|"either"}``: what has happened so far to a row in the state asked
    about, in the model's words, then the side of the clock its dates are on. One state a call: asked for every
    state of a list at once, the model answered by the list's order (a laundry's 'open' orders past and 'closed'
    ones future); one answer for all of a row's dates: asked per date column, it called a closed order's delivery
    date future and its order date past, and every closed order code made fell between the two (the answer holds
    the row's first dates: :func:`first_dates`)."""
    return create_model("StateDates", row=(str, Field(alias=SO_FAR, max_length=ROW_TEXT)),
                        dates=(Literal[SAID], Field(alias=DATES)), __base__=BaseModel)  # type: ignore[arg-type]


def prompt(scenario: ir.Scenario, table: ir.Table, column: str, value: str, dates: Sequence[str]) -> str:
    return render_section("seed_data", "tense", name=scenario.name, description=scenario.description,
                          ddl=table.ddl, column=column, table=table.name, value=json.dumps(value, ensure_ascii=False),
                          dates=", ".join(dates), shape=f'{{"{SO_FAR}": "...", "{DATES}": "past"|"future"|"either"}}')


def first_dates(dates: Sequence[str], gens: Sequence[ir.ColumnGenerator], examples: Mapping[str, Sequence[Any]]
                ) -> list[str]:
    """The dates of ``dates`` that follow none of the others: not the later date of an order every example shows
    (:func:`pipeline.meaning.relations.date_orders`: a loan's due date after its day) nor drawn days after one of
    them (``date_after``). A row's state holds these to its side of the clock; a later date falls where its
    relation puts it (a loan returned early began in the past, its due date may be next week). All of ``dates``
    when every one follows another."""
    later = {o.second for o in relations.date_orders({c: examples.get(c, []) for c in dates})}
    later |= {g.column for g in gens if g.kind == "date_after" and g.after in dates}
    return [c for c in dates if c not in later] or list(dates)


def ask_tense(client: LLMClientProtocol, scenario: ir.Scenario, table: ir.Table, g: ir.ColumnGenerator,
              dates: Sequence[str], held: Sequence[str] | None = None) -> Tense | str:
    """One call per state of ``g``'s column (``prompts/seed_data.md`` ``tense``, about the row's ``dates``): the
    side of today a row in it has its ``held`` dates on (all of ``dates`` when None; :func:`first_dates` from
    :func:`ask_tenses`); or why there is no answer (no reply validated). A state whose call never validated is
    left out (its rows keep their state). An endpoint that fails raises, as every stage's call does."""
    values = tuple(dict.fromkeys(str(v) for v in g.values or ()))
    sides: dict[str, dict[str, Side]] = {}
    errors = []
    for value in values:
        try:
            reply: Any = client.structured(tense_model(), user(prompt(scenario, table, g.column, value, dates)),
                                           stage=STAGE, max_tokens=TENSE_TOKENS)
        except LLMUnavailable:
            raise
        except LLMError as e:
            errors.append(str(e))
            continue
        sides[value] = dict.fromkeys(dates if held is None else held, SIDE[reply.dates])
    if not sides:
        return errors[0] if errors else "no state asked"
    weights: dict[str, float] = {}
    for v, w in zip(g.values or (), g.weights or [1.0] * len(g.values or ()), strict=False):
        weights[str(v)] = weights.get(str(v), 0.0) + float(w)
    return Tense(g.column, sides, weights)


def ask_tenses(client: LLMClientProtocol, scenario: ir.Scenario, table: ir.Table, cols: Sequence[Column],
               gens: Sequence[ir.ColumnGenerator], examples: Mapping[str, Sequence[Any]]
               ) -> tuple[list[Tense], int, list[ir.Rejection]]:
    """:func:`ask_tense` for each state column of a table that has a drawn date column; the answers, the calls
    made, and a note per call that gave no answer."""
    dates = date_columns(cols, gens, examples)
    if not dates:
        return [], 0, []
    held = first_dates(dates, gens, examples)
    out: list[Tense] = []
    notes = []
    asked = state_columns(cols, gens)
    for g in asked:
        got = ask_tense(client, scenario, table, g, dates, held)
        if isinstance(got, str):
            notes.append(ir.Rejection(stage=STAGE, item=f"{table.name}.{g.column}",
                                      reason=f"no answer on which side of the clock each {g.column} is dated "
                                             f"(rows keep the state drawn): {got}", evidence={"kind": "tense"}))
        elif any(s != "either" for said in got.sides.values() for s in said.values()):
            got.example_days = {c: [d for v in examples.get(c, []) if (d := relations.as_date(v)) is not None]
                                for c in dates}
            out.append(got)
    return out, sum(len(set(g.values or ())) for g in asked), notes


def _range(start: date, end: date, before: float, after: float, today: date) -> tuple[date, date] | None:
    """``start``..``end`` on the sides of ``today`` the states' weights need (``before``, ``after``: the weights of
    the states dated before today and after it), or None when it has them already."""
    width = max((end - start).days, MIN_SPAN)
    if after == 0:
        return relations.clock_range(start, end, "past", today)
    if before == 0:
        return relations.clock_range(start, end, "future", today)
    share = before / (before + after)
    had = min(1.0, max(0.0, (today - start).days / max(1, (end - start).days)))
    if abs(had - share) <= SHARE_SLACK:
        return None
    return today - timedelta(days=round(width * share)), today + timedelta(days=round(width * (1 - share)))


def crossed(gens: list[ir.ColumnGenerator], tenses: Sequence[Tense], today: date) -> list[ir.ColumnGenerator]:
    """``gens`` with each date column drawn in a range (``date``, ``datetime``) moved onto the sides of ``today``
    its states need (:func:`_range`, by the first state column that answers for it), the change noted on the
    generator and in the :class:`Tense` (:attr:`Tense.recent` where the range gained days before its start)."""
    out = []
    for g in gens:
        tense = next((t for t in tenses if g.kind in ("date", "datetime") and g.start and g.end
                      and any(t.sides[s].get(g.column, "either") != "either" for s in t.sides)), None)
        if tense is None:
            out.append(g)
            continue
        start, end = relations.as_date(g.start), relations.as_date(g.end)
        reaches = frozenset(({"before"} if start and start < today else set()) | ({"after"} if end and end > today
                                                                                   else set()))
        moved = _range(start, end, *tense.side_weights(g.column, reaches), today) if start and end else None
        if moved is None or start is None:
            out.append(g)
            continue
        lo, hi = max(moved[0], FIRST_DAY), min(moved[1], LAST_DAY)
        tense.crossed[g.column] = (str(g.start), str(g.end))
        reach = max((abs((d - today).days) for d in tense.example_days.get(g.column, [])), default=0)
        recent = min(start, today - timedelta(days=reach))
        if lo < recent:  # the days gained before the range's start: for the states dated before today
            tense.recent[g.column] = recent
        note = f"{lo}..{hi}: the sides of today its rows' {tense.column} need, as the model says"
        out.append(g.model_copy(update={"start": lo.isoformat(), "end": hi.isoformat(),
                                        "note": f"{g.note}; {note}" if g.note else note}))
    return out


def notes(table: ir.Table, tenses: Sequence[Tense]) -> list[ir.Rejection]:
    """One note per answer used (``report.json``, evidence kind ``tense``): the sides, the ranges changed, the
    rows whose state was drawn again and those no state fits."""
    return [ir.Rejection(
        stage=STAGE, item=f"{table.name}.{t.column}",
        reason=f"{t.column} held to the side of the clock each state is dated on (the model's answer): "
               f"{t.redrawn} code-made rows' {t.column} drawn again" + (f", {t.unfit} fit no state" if t.unfit
                                                                       else ""),
        evidence={"kind": "tense", "sides": t.sides, "crossed": {c: list(r) for c, r in t.crossed.items()},
                  "recent": {c: d.isoformat() for c, d in t.recent.items()},
                  "redrawn": t.redrawn, "unfit": t.unfit}) for t in tenses]
