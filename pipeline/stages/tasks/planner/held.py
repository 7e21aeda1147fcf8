"""Relations between tables that every seeded row holds, for the tasks to hold too (read from values, never names).

The rows stage makes the seeded rows agree with one another (a loan's renewal count is its number of renewals; one
fine per loan; fines on loans past due). A task whose reference breaks such a relation teaches an agent a state no
row of the environment has ("add a second renewal", "set the renewal count to 4", "fine a loan never overdue"). Each
relation is inferred from the environment's own rows, over all of them (not only the model's examples):

- :class:`Count`: a parent's integer column that equals its number of child rows in every parent row
  (:func:`pipeline.meaning.relations.counts_shown` over the seeded rows). No planned task writes it apart from its
  children: a write that leaves it disagreeing with them is not planned (a tool that adds a renewal and counts it
  keeps it; a request to set the count is a state no row has).
- :class:`Single`: a child table whose only reference to another table names each parent at most once, in at least
  :data:`MIN_CHILDREN` rows, and that has no name of its own (a table of details of one parent: a loan's fine; the
  rows stage's ``one_each`` reads the same from the examples and makes the seeded rows so): a new child only for a
  parent without one (:func:`room`).
- :class:`Within`: every child's parent is on one side of the clock by a date column
  (:func:`pipeline.meaning.relations.parent_clocks`: a fine only on a loan past due, or past due when it came back),
  or holds one of a proper subset of a status-like column's states, where chance would seldom put all of them there
  (:data:`CHANCE`: the share of parents that meet the relation, to the power of the distinct parents the children
  name) or, for a side of the clock, where the model's example children show it too: a new child only for a
  parent that meets it (:func:`room`), and no task's end state leaves a child on a parent that broke it
  (:func:`broken`).
"""

from __future__ import annotations

import sqlite3
from collections import Counter as Tally
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from pipeline.meaning import relations
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import Planner

MIN_CHILDREN = 3
"""Child rows, each naming another parent, needed before one child per parent is taken as the table's shape."""
CHANCE = 0.05
"""A parent relation is kept only when children placed on parents at random would meet it less often than this."""


@dataclass(frozen=True)
class Link:
    child: str
    via: str
    parent: str
    key: str


@dataclass(frozen=True)
class Count:
    """``link.parent``'s ``column`` holds its number of ``link.child`` rows, in every seeded row."""

    link: Link
    column: str


@dataclass(frozen=True)
class Single:
    """Each parent has at most one ``link.child`` row, in every seeded row."""

    link: Link


@dataclass(frozen=True)
class Within:
    """Every ``link.child`` row's parent meets ``clock`` (a side of the environment's clock) or holds one of
    ``states`` in ``column``."""

    link: Link
    column: str
    clock: relations.ParentClock | None = None
    states: tuple[Any, ...] = ()

    def holds(self, parent: Mapping[str, Any] | None, today: date) -> bool:
        if parent is None:
            return True
        if self.clock is not None:
            return self.clock.holds(parent, today)
        return parent.get(self.column) in self.states


@dataclass(frozen=True)
class Held:
    counts: tuple[Count, ...] = ()
    singles: tuple[Single, ...] = ()
    withins: tuple[Within, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.counts or self.singles or self.withins)


def _rows(conn: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cur = conn.execute(f"SELECT * FROM {qi(table)}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur]


def links(p: Planner) -> list[Link]:
    """Every reference of a table to another table's row, through a single column naming its key."""
    out = []
    for child, info in sorted(p.infos.items()):
        for c, pt, pc in info.foreign_keys:
            if pt == child or pt not in p.infos:
                continue
            key = pc or (p.infos[pt].key[0] if len(p.infos[pt].key) == 1 else None)
            if key is not None:
                out.append(Link(child, c, pt, key))
    return out


def _status_like(p: Planner, table: str, col: str) -> tuple[Any, ...] | None:
    from pipeline.dbmodel import lifecycle as states

    return states.states(p, table, col)


def infer(p: Planner) -> Held:
    """The relations the rows on ``p.conn`` (the environment's initial state) hold (see the module). Cached."""
    if "held" not in p._cache:
        p._cache["held"] = _infer(p, p.conn)
    out: Held = p._cache["held"]
    return out


def _initial(p: Planner, ln: Link) -> tuple[set[tuple[Any, ...]], dict[Any, dict[str, Any]]]:
    """The child rows of ``ln`` (as item tuples) and its parent rows by key in the initial state, read once."""
    key = f"held_initial:{ln}"
    if key not in p._cache:
        p._cache[key] = ({tuple(r.items()) for r in _rows(p.conn, ln.child)},
                         {r[ln.key]: r for r in _rows(p.conn, ln.parent)})
    out: tuple[set[tuple[Any, ...]], dict[Any, dict[str, Any]]] = p._cache[key]
    return out


def _infer(p: Planner, conn: sqlite3.Connection) -> Held:
    today = date.fromisoformat(p.env.clock[:10])
    counts, singles, withins = [], [], []
    every = links(p)
    for ln in every:
        parents = {r[ln.key]: r for r in _rows(conn, ln.parent) if r.get(ln.key) is not None}
        kids = [r[ln.via] for r in _rows(conn, ln.child) if r.get(ln.via) is not None]
        if not parents or not kids:
            continue
        mine = [o for o in every if (o.child, o.parent) == (ln.child, ln.parent)]
        pinfo = p.infos[ln.parent]
        fks = {c for c, _, _ in pinfo.foreign_keys}
        if len(mine) == 1:  # two references to one parent (a lender and a borrower) make a count ambiguous
            for col in pinfo.columns:
                if col in pinfo.key or col in fks:
                    continue
                values = {k: r.get(col) for k, r in parents.items()}
                if relations.counts_from_zero(list(values.values())) and relations.counts_shown(values, kids):
                    counts.append(Count(ln, col))
        others = [c for c, pt, _ in p.infos[ln.child].foreign_keys if pt != ln.child and c != ln.via]
        if not others and len(kids) >= MIN_CHILDREN and len(set(kids)) == len(kids) and not _own_name(p, ln):
            singles.append(Single(ln))
        found = _withins(p, ln, parents, kids, today)
        if found:
            _initial(p, ln)
        withins += found
    return Held(tuple(counts), tuple(singles), tuple(withins))


def _own_name(p: Planner, ln: Link) -> bool:
    """Whether a UNIQUE set or a declared natural key of the child names its rows by more than the parent (a project
    with a name of its own, of which a client may own several): a thing of its own, not a detail of its parent (as
    the rows stage's ``one_each`` reads it)."""
    from pipeline.dbmodel.keys import _unique_columns

    pk = tuple(p.infos[ln.child].key)
    sets = [s for s in _unique_columns(p.conn, ln.child) if s != pk]
    nk = p.keys.get(ln.child)
    if nk is not None and nk.declared:
        sets.append(tuple(nk.columns))
    return any(set(s) != {ln.via} for s in sets)


def _chance(share: float, named: int) -> bool:
    return share ** named < CHANCE


def _withins(p: Planner, ln: Link, parents: Mapping[Any, Mapping[str, Any]], kids: Sequence[Any], today: date
             ) -> list[Within]:
    named = [parents[k] for k in dict.fromkeys(kids) if k in parents]
    if len(named) < relations.MIN_PARENTS:
        return []
    out = []
    everyone = list(parents.values())
    shown = _example_clocks(p, ln, parents, today)
    for rel in dict.fromkeys([*relations.parent_clocks({ln.via: list(kids)}, ln.via, parents, today), *shown]):
        share = sum(1 for r in everyone if rel.holds(r, today)) / len(everyone)
        if all(rel.holds(r, today) for r in named) and (rel in shown or _chance(share, len(named))):
            out.append(Within(ln, rel.parent_column, clock=rel))
    for col in p.infos[ln.parent].columns:
        listed = _status_like(p, ln.parent, col)
        if listed is None:
            continue
        held = {r.get(col) for r in named}
        present = {r.get(col) for r in everyone}
        if held >= present or None in held:
            continue
        share = sum(1 for r in everyone if r.get(col) in held) / len(everyone)
        if _chance(share, len(named)):
            out.append(Within(ln, col, states=tuple(s for s in listed if s in held)))
    return out


def counted(p: Planner, table: str, column: str) -> bool:
    """Whether ``table.column`` counts the rows of a child table in every seeded row (:class:`Count`): a write
    states no value for it (an update of it is not planned; a new row starts it at zero, with no children)."""
    return any((c.link.parent, c.column) == (table, column) for c in infer(p).counts)


def _example_clocks(p: Planner, ln: Link, parents: Mapping[Any, Mapping[str, Any]], today: date
                    ) -> list[relations.ParentClock]:
    """The sides of the clock the model's example children's parents show (what the rows stage held the seeded
    children to: :func:`pipeline.meaning.relations.parent_clocks`, with the parents in the order its prompt lists
    them), kept even where the seeded children are too few for :data:`CHANCE` alone."""
    from pipeline.dbmodel.examples import listed_keys
    from pipeline.dbmodel.lifecycle import example_rows

    examples = example_rows(p, ln.child)
    if not examples.get(ln.via) or len(examples[ln.via]) == p.conn.execute(
            f"SELECT COUNT(*) FROM {qi(ln.child)}").fetchone()[0]:
        return []  # every row is an example (no plan): the seeded rows' evidence alone
    return relations.parent_clocks(examples, ln.via, parents, today, listed_keys(p.conn, ln.parent, ln.key))


def room(p: Planner, child: str, via: str, parent: Mapping[str, Any]) -> bool:
    """Whether a new ``child`` row may name ``parent`` through ``via``: the parent has no child yet where each has
    at most one (:class:`Single`), and meets every relation the seeded children's parents meet (:class:`Within`)."""
    held = infer(p)
    today = date.fromisoformat(p.env.clock[:10])
    for s in held.singles:
        if (s.link.child, s.link.via) == (child, via):
            key = parent.get(s.link.key)
            n = p.conn.execute(f"SELECT COUNT(*) FROM {qi(child)} WHERE {qi(via)} = ?", (key,)).fetchone()[0]
            if n:
                return False
    return all(w.holds(parent, today) for w in held.withins if (w.link.child, w.link.via) == (child, via))


def broken(p: Planner, after: sqlite3.Connection) -> list[str]:
    """The relations (:func:`infer`) that the state on ``after`` (a chain's reference replayed from the initial
    state) breaks, in words for a report: a counter that disagrees with its children, a parent with a second child
    where each had one, a child on a parent that does not meet its relation (a child the chain added, or one whose
    parent the chain changed)."""
    held = infer(p)
    if not held:
        return []
    today = date.fromisoformat(p.env.clock[:10])
    out = []
    for c in held.counts:
        ln = c.link
        tally = Tally(r[0] for r in after.execute(f"SELECT {qi(ln.via)} FROM {qi(ln.child)}"))
        for key, value in after.execute(f"SELECT {qi(ln.key)}, {qi(c.column)} FROM {qi(ln.parent)}"):
            if (value or 0) != tally.get(key, 0):
                out.append(f"{ln.parent}.{c.column} {value} of {key} against {tally.get(key, 0)} {ln.child}")
    for s in held.singles:
        ln = s.link
        for key, n in after.execute(f"SELECT {qi(ln.via)}, COUNT(*) FROM {qi(ln.child)} WHERE {qi(ln.via)} IS NOT NULL "
                                    f"GROUP BY {qi(ln.via)} HAVING COUNT(*) > 1"):
            out.append(f"{n} {ln.child} of one {ln.parent} {key}")
    for w in held.withins:
        ln = w.link
        before, parents_before = _initial(p, ln)
        parents_now = {r[ln.key]: r for r in _rows(after, ln.parent)}
        for r in _rows(after, ln.child):
            par = parents_now.get(r.get(ln.via))
            if par is None or w.holds(par, today):
                continue
            new = tuple(r.items()) not in before
            if new or w.holds(parents_before.get(r.get(ln.via)), today):
                out.append(f"{ln.child} on {ln.parent} {r.get(ln.via)} whose {w.column} is "
                           f"{par.get(w.column)}")
    return out
