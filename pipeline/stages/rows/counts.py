"""A parent's count of its children, held in every seeded row: once every table is filled, a parent's integer
column that counts the rows of a child table naming it (:func:`pipeline.meaning.relations.counters`: a loan's
renewal count, its renewals) is set from those rows.

Set from the children rather than children drawn to match it: a child is drawn by its own relations (which parents
its examples' children had, a date within its parent's, a row SQLite refuses drawn again or dropped), so a count
planned before the children are drawn is not the number that exists after; the number of rows that exist is. The
counter's own generator then decides nothing, and its plan says so (:func:`noted`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import row_order
from pipeline.meaning import relations

Similarity = Callable[[Sequence[str], Sequence[str]], Sequence[Sequence[float]]]


def example_rows(conn: sqlite3.Connection, table: str, examples: int | None) -> list[dict[str, Any]]:
    """The first ``examples`` rows of ``table`` in insertion order (every row when None: rows all written by the
    LLM)."""
    limit = "" if examples is None else f" LIMIT {int(examples)}"
    cur = conn.execute(f'SELECT * FROM "{table}" ORDER BY {row_order(conn, table)}{limit}')
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur]


def _defaults(conn: sqlite3.Connection, table: str) -> dict[str, Any]:
    return {r[1]: r[4] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def candidates_and_links(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int | None]
                         ) -> tuple[list[relations.CounterCandidate], list[relations.ChildLink]]:
    """Every table's integer columns that could count rows (neither key, reference nor CHECK list; example values
    :func:`pipeline.meaning.relations.counts_from_zero`), with their example rows' values by key, and every
    reference from a child table to another table, with the keys its example rows name."""
    cands: list[relations.CounterCandidate] = []
    links: list[relations.ChildLink] = []
    keyed: dict[str, str] = {}
    for t in tables:
        for c in table_columns(conn, t):
            if c.ref is not None and c.ref[0] != t.name:
                keyed.setdefault(c.ref[0], c.ref[1])
    for t in tables:
        cols = table_columns(conn, t)
        rows = example_rows(conn, t.name, examples.get(t.name))
        defaults = _defaults(conn, t.name)
        key = keyed.get(t.name)
        for c in cols:
            if c.ref is not None and c.ref[0] != t.name:
                links.append(relations.ChildLink(t.name, c.ref[0], c.name, [r[c.name] for r in rows]))
            if key is None or c.pk or c.ref is not None or c.enum or c.type not in ("INTEGER", "INT"):
                continue
            values = [r[c.name] for r in rows]
            if values and relations.counts_from_zero(values, defaults.get(c.name)):
                cands.append(relations.CounterCandidate(t.name, c.name, {r[key]: r[c.name] for r in rows}))
    return cands, links


@dataclass
class Settled:
    """What :func:`settle` did for one counter: rows whose value it changed, and rows SQLite refused the count
    (a CHECK that caps it), key -> (value kept, children)."""

    counter: relations.Counter
    key: str
    changed: int = 0
    refused: dict[Any, tuple[Any, int]] = field(default_factory=dict)


def settle(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int | None],
           similarity: Similarity | None = None, parents: set[str] | None = None) -> list[Settled]:
    """Find the counters (:func:`pipeline.meaning.relations.counters`) and set each parent row's counter to the
    number of child rows naming it; only counters of ``parents`` when given. ``examples``: per table, how many of
    its first rows the LLM wrote (None: all)."""
    cands, links = candidates_and_links(conn, tables, examples)
    out = []
    by_name = {t.name: t for t in tables}
    for ctr in relations.counters(cands, links, similarity):
        if parents is not None and ctr.parent not in parents:
            continue
        ref = next(c.ref for c in table_columns(conn, by_name[ctr.child]) if c.name == ctr.via)
        assert ref is not None
        key = ref[1]
        done = Settled(ctr, key)
        rows = conn.execute(
            f'SELECT p."{key}", p."{ctr.column}", (SELECT COUNT(*) FROM "{ctr.child}" c WHERE c."{ctr.via}" = '
            f'p."{key}") FROM "{ctr.parent}" p ORDER BY {row_order(conn, ctr.parent)}').fetchall()
        for k, value, n in rows:
            if value == n:
                continue
            try:
                conn.execute(f'UPDATE "{ctr.parent}" SET "{ctr.column}" = ? WHERE "{key}" = ?', (n, k))
                done.changed += 1
            except sqlite3.Error:
                done.refused[k] = (value, n)
        out.append(done)
    return out


def shown_most(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int | None], child: str,
               similarity: Similarity | None = None) -> dict[str, int]:
    """Per reference column of ``child`` (its rows so far: its examples), the most children one parent's example
    row counts in a counter of ``child`` (:func:`pipeline.meaning.relations.counters`: a loan's renewal count of 3
    among 1, 1, 1, 3, its renewals), for the child's rows to allow as many per parent. Empty without one."""
    cands, links = candidates_and_links(conn, tables, {k: v for k, v in examples.items() if k != child})
    out: dict[str, int] = {}
    for ctr in relations.counters(cands, links, similarity):
        if ctr.child != child:
            continue
        cand = next(c for c in cands if (c.parent, c.column) == (ctr.parent, ctr.column))
        most = max((v for v in cand.values.values() if isinstance(v, int)), default=None)
        if most is not None:
            out[ctr.via] = max(out.get(ctr.via, 0), most)
    return out


def noted(table: str, plan: ir.RowPlan, settled: Sequence[Settled]) -> ir.RowPlan:
    """``table``'s ``plan`` with the note of each of its counter columns' generators saying its values are set from
    the children."""
    why = {"examples": "as its example rows show", "name": "its name is that table's count"}
    notes = {s.counter.column: f"set from the number of {s.counter.child} rows naming it by {s.counter.via} "
                               f"({why[s.counter.shown]})"
             for s in settled if s.counter.parent == table}
    gens = [g.model_copy(update={"note": "; ".join(x for x in (g.note, notes[g.column]) if x)})
            if g.column in notes else g for g in plan.generators]
    return plan.model_copy(update={"generators": gens})


def rejections(settled: Sequence[Settled], stage: str) -> list[ir.Rejection]:
    """What :func:`settle` changed and could not change, as rejections (``report.json`` lists them)."""
    out = []
    for s in settled:
        c = s.counter
        if s.changed:
            out.append(ir.Rejection(
                stage=stage, item=f"{c.parent}.{c.column}",
                reason=f"{s.changed} {c.parent} rows' {c.column} disagreed with their number of {c.child} rows: set "
                       f"from them", evidence={"kind": "counter", "child": c.child, "via": c.via, "shown": c.shown}))
        if s.refused:
            shown = [{s.key: k, "value": v, "children": n} for k, (v, n) in list(s.refused.items())[:10]]
            out.append(ir.Rejection(
                stage=stage, item=f"{c.parent}.{c.column}",
                reason=f"{len(s.refused)} {c.parent} rows' {c.column} could not be set to their number of {c.child} "
                       f"rows (SQLite refused it): they still disagree",
                evidence={"kind": "counter", "rows": shown}))
    return out
