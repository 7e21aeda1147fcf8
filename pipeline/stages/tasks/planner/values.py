"""Values a planned write states: a new value for a column that differs from the current one and fits the
parameter, or a plain value for a parameter that is not a column (see ``shapes``)."""

from __future__ import annotations

import re
from collections.abc import Set
from typing import Any

from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import _DATE, Planner


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
        return fresh_text(current, taken)
    return None


def rotate(rows: list[Any], k: int) -> list[Any]:
    """``rows`` starting at its ``k``-th item (modulo its length), the items before it at the end."""
    return rows[k % len(rows):] + rows[: k % len(rows)] if rows else rows


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


def fresh_text(value: str, taken: Set[Any] = frozenset()) -> str:
    """A value like ``value`` that no row has: a code or number with its last digits moved on (``K-004`` ->
    ``K-005``, ``555-0101`` -> ``555-0102``), an address with a 2 in its local part, else a second of a name."""
    runs = list(_DIGITS.finditer(value))
    if runs:
        m = runs[-1]
        for step in range(1, 200):
            digits = str(int(m.group()) + step).zfill(len(m.group()))
            cand = value[:m.start()] + digits + value[m.end():]
            if cand not in taken:
                return cand
    if "@" in value:
        local, _, domain = value.partition("@")
        return f"{local}2@{domain}"
    return f"{value} II"


def unique_cols(p: Planner, table: str) -> set[str]:
    from pipeline.dbmodel.keys import _unique_columns

    return {c for cols in _unique_columns(p.conn, table) if len(cols) == 1 for c in cols}
