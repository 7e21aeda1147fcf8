"""A parent's amount that is the sum of its children's lines, held in every seeded row: once every table is filled, a
parent's number column that the rows of a child table add up to (an order's total: its lines' quantity times the
price of the row each line names) is set from those rows (issue 40: no order's total equalled its lines).

Found from the schema's foreign keys and types and the example rows' values, never from names or words. A
candidate (:func:`candidates`) is a parent's only REAL column (neither key, reference nor CHECK list), a child
table naming the parent whose only such integer column is the quantity, and a price: the child's only such REAL
column, or the only such REAL column of another table the child names. Its sum over a parent's children is
``sum(quantity x price)``.

- ``examples``: every example parent with example children holds exactly that sum (to the price's decimals), at
  least :data:`MIN_PARENTS` of them.
- ``nearest``: the examples cannot show it when the parent's examples were written before any child existed (a
  parent's rows are always asked before its children's, and the children's prompt does not show the amount): the
  embedded model's order totals were 39.99 for five prints at 25.49. The relation is then taken only where exactly
  one candidate of the schema passes: every example parent's amount lies within the range of its sum over the
  example parents' children while neither the sum of the quantities nor of the prices alone does (the amounts
  are of the scale of lines priced, not of counts or unit prices). The same two tables read the other way (a
  product's price as the sum of its lines' quantity times their order's total) is a candidate too, which the
  range refuses (unit prices of 10.99..30.79 against sums of 179.98..419.93).

Set from the children rather than children drawn to match it: the children are drawn by their own relations, so
only the rows that exist give the sum. A code-made parent left with no child that no row names is deleted (a sum
over no lines is no amount: an order of nothing is no order); the model's example parents, and parents another
row names, are kept as they are and counted in the record.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pipeline import ir
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.ddl import row_order
from pipeline.stages.rows.counts import example_rows

MIN_PARENTS = 2
"""Example parents with example children needed before their amounts say anything."""


@dataclass(frozen=True)
class Total:
    """``parent.column`` (keyed by ``key``) = sum over ``child`` rows naming it by ``via`` of ``quantity`` x
    ``price`` (a column of ``price_table``: the child itself when ``price_via`` is None, else the table the child
    names by ``price_via``, keyed by ``price_key``)."""

    parent: str
    column: str
    key: str
    child: str
    via: str
    quantity: str
    price_table: str
    price: str
    price_via: str | None = None
    price_key: str | None = None
    shown: Literal["examples", "nearest"] = "examples"

    def formula(self) -> str:
        where = self.child if self.price_via is None else self.price_table
        return f"sum of {self.child}.{self.quantity} x {where}.{self.price}"


@dataclass
class Settled:
    total: Total
    changed: int = 0
    refused: dict[Any, Any] = field(default_factory=dict)
    deleted: int = 0
    childless: int = 0
    """Parents left with no child (the model's examples, or named by another row): their amount as it was."""


def _plain(c: Column, table: str, types: tuple[str, ...]) -> bool:
    return not c.pk and c.enum is None and (c.ref is None or c.ref[0] == table) and c.type.upper() in types


def candidates(conn: sqlite3.Connection, tables: Sequence[ir.Table]) -> list[Total]:
    """Every (parent amount, child quantity, price) the schema allows, from foreign keys and types alone."""
    cols = {t.name: table_columns(conn, t) for t in tables}
    reals = {n: [c.name for c in cs if _plain(c, n, ("REAL",))] for n, cs in cols.items()}
    out: list[Total] = []
    for child, ccols in cols.items():
        ints = [c.name for c in ccols if _plain(c, child, ("INTEGER", "INT"))]
        refs = [c for c in ccols if c.ref is not None and c.ref[0] != child and c.ref[0] in cols]
        if len(ints) != 1:
            continue
        for up in refs:
            assert up.ref is not None
            parent, key = up.ref
            if len(reals[parent]) != 1:
                continue
            prices: list[tuple[str, str, str | None, str | None]] = []
            if len(reals[child]) == 1:
                prices.append((child, reals[child][0], None, None))
            for other in refs:
                assert other.ref is not None
                if other.ref[0] != parent and len(reals[other.ref[0]]) == 1:
                    prices.append((other.ref[0], reals[other.ref[0]][0], other.name, other.ref[1]))
            out.extend(Total(parent, reals[parent][0], key, child, up.name, ints[0], *p) for p in prices)
    return out


def _decimals(values: Sequence[Any]) -> int:
    """The most decimals any of ``values`` is written with (at most 6)."""
    most = 0
    for v in values:
        if isinstance(v, int | float):
            text = f"{round(float(v), 6):.6f}".rstrip("0")
            most = max(most, len(text.split(".")[1]) if "." in text else 0)
    return most


def _price_of(conn: sqlite3.Connection, t: Total) -> dict[Any, Any]:
    if t.price_via is None:
        return {}
    return dict(conn.execute(f'SELECT "{t.price_key}", "{t.price}" FROM "{t.price_table}"').fetchall())


def example_sums(conn: sqlite3.Connection, t: Total, examples: Mapping[str, int | None]
                 ) -> list[tuple[float, list[tuple[float, float]]]]:
    """Per example parent with example children: (its amount, its children's (quantity, price)). A parent whose
    amount, or a child whose quantity or price, is missing is left out."""
    prices = _price_of(conn, t)
    kids: dict[Any, list[tuple[float, float]]] = {}
    broken: set[Any] = set()
    for r in example_rows(conn, t.child, examples.get(t.child)):
        q = r.get(t.quantity)
        p = r.get(t.price) if t.price_via is None else prices.get(r.get(t.price_via))
        if not isinstance(q, int | float) or not isinstance(p, int | float):
            broken.add(r.get(t.via))
            continue
        kids.setdefault(r.get(t.via), []).append((float(q), float(p)))
    out = []
    for r in example_rows(conn, t.parent, examples.get(t.parent)):
        k, amount = r.get(t.key), r.get(t.column)
        if k in kids and k not in broken and isinstance(amount, int | float):
            out.append((float(amount), kids[k]))
    return out


def _within(amounts: Sequence[float], sums: Sequence[float]) -> bool:
    return all(min(sums) <= a <= max(sums) for a in amounts)


def shown(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int | None]) -> list[Total]:
    """The candidates the example rows hold exactly (``examples``); else the only candidate whose sum the example
    amounts lie within while the quantities' and the prices' sums alone do not (``nearest``)."""
    exact, near = [], []
    for t in candidates(conn, tables):
        pairs = example_sums(conn, t, examples)
        if len(pairs) < MIN_PARENTS:
            continue
        places = _decimals([p for _, kids in pairs for _, p in kids])
        amounts = [a for a, _ in pairs]
        sums = [round(sum(q * p for q, p in kids), places) for _, kids in pairs]
        if all(abs(a - s) <= 0.5 * 10 ** -places + 1e-9 for a, s in zip(amounts, sums, strict=True)):
            exact.append(t)
        elif (_within(amounts, sums) and not _within(amounts, [sum(q for q, _ in kids) for _, kids in pairs])
              and not _within(amounts, [sum(p for _, p in kids) for _, kids in pairs])):
            near.append(t)
    if exact:
        return exact
    if len(near) == 1:
        return [replace(near[0], shown="nearest")]
    return []


def _named(conn: sqlite3.Connection, tables: Sequence[ir.Table], parent: str, key: str) -> set[Any]:
    """The keys of ``parent`` that any row of another table names."""
    out: set[Any] = set()
    for t in tables:
        for c in table_columns(conn, t):
            if c.ref is not None and c.ref[0] == parent and c.ref[1] == key:
                out |= {r[0] for r in conn.execute(f'SELECT DISTINCT "{c.name}" FROM "{t.name}"')}
    return out


def settle(conn: sqlite3.Connection, tables: Sequence[ir.Table], examples: Mapping[str, int | None]
           ) -> list[Settled]:
    """Set each parent amount :func:`shown` finds from its children's rows; delete the code-made parents left with
    no child that no row names (rows after the parent's ``examples`` first rows)."""
    out = []
    for t in shown(conn, tables, examples):
        s = Settled(t)
        prices = _price_of(conn, t)
        places = _decimals(list(prices.values()) if t.price_via is not None else
                           [r[0] for r in conn.execute(f'SELECT "{t.price}" FROM "{t.child}"')])
        sums: dict[Any, float] = {}
        cols = f'"{t.via}", "{t.quantity}", "{t.price if t.price_via is None else t.price_via}"'
        for k, q, p in conn.execute(f'SELECT {cols} FROM "{t.child}" WHERE "{t.via}" IS NOT NULL'):
            price = p if t.price_via is None else prices.get(p)
            sums[k] = sums.get(k, 0.0) + (float(q) * float(price) if q is not None and price is not None else 0.0)
        for k, amount in conn.execute(f'SELECT "{t.key}", "{t.column}" FROM "{t.parent}"').fetchall():
            if k not in sums:
                continue
            value = round(sums[k], places)
            if amount == value:
                continue
            try:
                conn.execute(f'UPDATE "{t.parent}" SET "{t.column}" = ? WHERE "{t.key}" = ?', (value, k))
                s.changed += 1
            except sqlite3.Error:
                s.refused[k] = (amount, value)
        n = examples.get(t.parent)
        firsts = {r[0] for r in conn.execute(f'SELECT "{t.key}" FROM "{t.parent}" ORDER BY '
                                             f'{row_order(conn, t.parent)}' + ("" if n is None else f" LIMIT {int(n)}"))}
        named = _named(conn, [x for x in tables if x.name != t.child], t.parent, t.key)
        for (k,) in conn.execute(f'SELECT "{t.key}" FROM "{t.parent}"').fetchall():
            if k in sums:
                continue
            if n is None or k in firsts or k in named:
                s.childless += 1
                continue
            conn.execute(f'DELETE FROM "{t.parent}" WHERE "{t.key}" = ?', (k,))
            s.deleted += 1
        out.append(s)
    return out


def noted(table: str, plan: ir.RowPlan, settled: Sequence[Settled]) -> ir.RowPlan:
    """``table``'s ``plan`` with the note of each amount column's generator saying its values are its children's
    sum."""
    why = {"examples": "as its example rows show",
           "nearest": "the only sum the schema allows, which its example amounts lie within"}
    notes = {s.total.column: f"set from the {s.total.formula()} of the rows naming it ({why[s.total.shown]})"
             for s in settled if s.total.parent == table}
    gens = [g.model_copy(update={"note": "; ".join(x for x in (g.note, notes[g.column]) if x)})
            if g.column in notes else g for g in plan.generators]
    return plan.model_copy(update={"generators": gens})


def rejections(settled: Sequence[Settled], stage: str) -> list[ir.Rejection]:
    """What :func:`settle` changed, deleted and could not change, as rejections (``report.json`` lists them)."""
    out = []
    for s in settled:
        t = s.total
        item = f"{t.parent}.{t.column}"
        evidence: dict[str, Any] = {"kind": "total", "formula": t.formula(), "shown": t.shown}
        if s.changed:
            out.append(ir.Rejection(stage=stage, item=item, reason=f"{s.changed} {t.parent} rows' {t.column} "
                                    f"disagreed with the {t.formula()} of their rows: set from them", evidence=evidence))
        if s.deleted or s.childless:
            out.append(ir.Rejection(
                stage=stage, item=item,
                reason=f"{s.deleted} code-made {t.parent} rows with no {t.child} row deleted; {s.childless} kept "
                       f"(example rows, or named by another row), their {t.column} as drawn",
                evidence={**evidence, "deleted": s.deleted, "kept": s.childless}))
        if s.refused:
            rows = [{t.key: k, "value": v, "sum": w} for k, (v, w) in list(s.refused.items())[:10]]
            out.append(ir.Rejection(stage=stage, item=item, reason=f"{len(s.refused)} {t.parent} rows' {t.column} "
                                    f"could not be set to their sum (SQLite refused it): they still disagree",
                                    evidence={**evidence, "rows": rows}))
    return out
