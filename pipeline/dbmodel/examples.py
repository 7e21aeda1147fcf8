"""What the rows stage and the task planner both read of the model's example rows (shared, as ``pipeline.dbmodel``
is: a stage never imports another stage)."""

from __future__ import annotations

import sqlite3
from typing import Any

from pipeline import ir
from pipeline.dbmodel.ddl import row_order

MAX_REF_VALUES = 40
"""Parent keys a child's prompt lists (the parent's first rows)."""


def as_written(seed: ir.SeedRows) -> list[dict[str, Any]]:
    """``seed``'s example rows as the model wrote them (their dates before :func:`respread` moved them): the
    specification a new row is dated by. Every row when code made none."""
    if seed.plan is None:
        return list(seed.rows)
    rows = [dict(r) for r in seed.rows[: seed.plan.examples]]
    for c, values in seed.plan.example_dates.items():
        for r, v in zip(rows, values, strict=False):
            r[c] = v
    return rows


def listed_keys(conn: sqlite3.Connection, parent: str, key: str, limit: int = MAX_REF_VALUES) -> list[Any]:
    """The parent keys a child's prompt lists, in that order (the parent's first rows)."""
    return [r[0] for r in conn.execute(f'SELECT "{key}" FROM "{parent}" ORDER BY {row_order(conn, parent)} '
                                       f'LIMIT {int(limit)}') if r[0] is not None]
