"""Values a planned write states: a new value for a column that differs from the current one and fits the
parameter, or a plain value for a parameter that is not a column (see ``shapes``)."""

from __future__ import annotations

import re
from collections.abc import Set
from typing import Any

from pipeline import ir
from pipeline.dbmodel.draws import drawn
from pipeline.hashing import content_hash
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import _DATE, Planner, rotate  # noqa: F401 (rotate: re-exported)


def enum_of(p: Planner, table: str, col: str) -> list[Any] | None:
    for t in p.env.tools:
        for prm in t.params:
            if prm.enum and p.shapes[t.name].column_of(prm.name) == (table, col):
                return list(prm.enum)
    return None


def new_value(p: Planner, table: str, col: str, current: Any, param: Any, unique: bool) -> Any | None:
    """A value for ``table.col`` that differs from ``current`` and fits the parameter."""
    enum = list(param.enum or []) or (enum_of(p, table, col) or [])
    if enum:
        others = [e for e in enum if e != current]
        return others[0] if others else None
    if param.type == "boolean":
        return not bool(current)
    if isinstance(current, bool):
        return not current
    if isinstance(current, int):
        cand = current + 3 if param.maximum is None or current + 3 <= param.maximum else current - 1
        return cand if cand != current else None
    if isinstance(current, float):
        return round(current + 1.5, 2)
    if isinstance(current, str) and _DATE.match(current):
        from datetime import date, timedelta

        try:
            d = date.fromisoformat(current[:10]) + timedelta(days=7)
        except ValueError:
            return None
        return d.isoformat() + current[10:]
    if isinstance(current, str):
        if not unique:
            vals = [r[0] for r in p.conn.execute(
                f"SELECT DISTINCT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL AND {qi(col)} != ? ORDER BY 1 LIMIT 1",
                (current,))]
            if vals:
                return vals[0]
        taken = {r[0] for r in p.conn.execute(f"SELECT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL")}
        made = generator_of(p, table, col)
        if made is None and taken and all(isinstance(v, str) and _EMAIL.fullmatch(v) for v in taken):
            made = (ir.ColumnGenerator(column=col, kind="email"), 0)  # no plan: e-mail addresses, as every row holds
        return fresh_text(current, taken, made, locale_of(p))
    return None


def plain_value(param: Any) -> Any:
    """A value for a parameter that is not a column value: the first enum value, or a small number."""
    if param.enum:
        return param.enum[0]
    if param.type in ("integer", "number"):
        lo = param.minimum if param.minimum is not None else 1
        v = max(lo, min(7, param.maximum if param.maximum is not None else 7))
        return int(v) if param.type == "integer" else float(v)
    return None


_DIGITS = re.compile(r"\d+")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
FRESH_DRAWS = 40
"""Values drawn from a column's generator for a new one before giving up (each checked against the rows)."""


def generator_of(p: Planner, table: str, col: str) -> tuple[ir.ColumnGenerator, int] | None:
    """How the rows stage made ``table.col`` (its ``SeedRows.plan``) and the plan's seed; None without a plan."""
    for s in p.env.seed:
        if s.table == table and s.plan is not None:
            g = next((g for g in s.plan.generators if g.column == col), None)
            return (g, s.plan.seed) if g is not None else None
    return None


def locale_of(p: Planner) -> str:
    return next((s.plan.locale for s in p.env.seed if s.plan is not None), "en_US")


def fresh_text(value: str, taken: Set[Any] = frozenset(),
               made: tuple[ir.ColumnGenerator, int] | None = None, locale: str = "en_US") -> str | None:
    """A new value for the column of ``value`` that no row has (``taken``), or None (the planner then picks another
    task): an item of the column's own vocabulary that no row uses (``made``: its generator and the plan's seed; a
    list the rows stage continued from the examples), else a value of its generator (people, companies, places,
    phones, e-mail addresses, code patterns) drawn with a seed from the plan's and the value, else, for a code or
    number written as text, its last digits moved on (``K-004`` -> ``K-005``, ``555-0101`` -> ``555-0102``, the
    same width). Never a suffix ("The Great Gatsby II", "jane2@example.com": a value made unique, not a real one).
    Deterministic."""
    seed = int(content_hash({"value": value, "seed": made[1] if made else 0}, 12), 16)
    if made is not None:
        g = made[0]
        if g.kind == "text_pool" and g.pool and not (g.pattern and g.max):  # a list-valued column is no vocabulary
            unused = [v for v in g.pool if v not in taken]
            if unused:
                return unused[seed % len(unused)]
        fresh = [v for v in drawn(g, locale, seed, FRESH_DRAWS) if v not in taken and v != value]
        if fresh:
            return fresh[0]
    runs = list(_DIGITS.finditer(value))
    if runs:
        m = runs[-1]
        for step in range(1, 200):
            digits = str(int(m.group()) + step).zfill(len(m.group()))
            cand = value[:m.start()] + digits + value[m.end():]
            if cand not in taken:
                return cand
    return None


def unique_cols(p: Planner, table: str) -> set[str]:
    from pipeline.dbmodel.keys import _unique_columns

    return {c for cols in _unique_columns(p.conn, table) if len(cols) == 1 for c in cols}
