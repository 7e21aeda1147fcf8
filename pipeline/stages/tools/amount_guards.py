"""A guard for a write that draws a running amount down: the amount must hold the move.

A write ``UPDATE medications SET stock = stock - :quantity WHERE medication_id = :medication_id`` takes the move from
the row whatever the row holds: a pharmacy filled 20 tablets from a stock of 15 and kept -5 (issue 40; the model's
own "not enough stock" guard compared another column). :func:`add` gives such a tool, when none of its guards
already compares the amount, a guard that must find no row: ``SELECT 1 FROM medications WHERE (medication_id =
:medication_id) AND stock < :quantity`` (the write's own ``WHERE``, the move as the write takes it). Read from the
SQL by a parser (``added_values.moves``), no names, no words; a row whose amount is NULL passes (no amount is
known to be short). An amount only counted up gets no guard.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from pipeline import ir
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import qi
from pipeline.stages.tools.added_values import moves

_ORDER = (exp.LT, exp.LTE, exp.GT, exp.GTE)


def _guarded(tool: ir.Tool, table: str, column: str) -> bool:
    """Whether a guard of ``tool`` already compares ``column`` by order (``stock >= :quantity``)."""
    for step in tool.steps:
        tree = _parse(step.sql) if step.kind == "guard" else None
        if tree is None or not any(t.name == table for t in tree.find_all(exp.Table)):
            continue
        for cmp in tree.find_all(*_ORDER):
            if any(isinstance(side, exp.Column) and side.name == column for side in (cmp.left, cmp.right)):
                return True
    return False


def drawn_down(tool: ir.Tool) -> list[tuple[int, str, str, str, str]]:
    """``(step index, table, column, where, move)`` for each write step of ``tool`` that sets a column to itself
    minus a move, with a ``WHERE`` (SQL text in SQLite's dialect; ``added_values.moves``)."""
    return [(i, table, column, where.sql(dialect="sqlite"), move.sql(dialect="sqlite"))
            for i, table, column, sign, move, where in moves(tool) if sign < 0 and where is not None]


def add(tools: Sequence[ir.Tool], stage: str = "tools") -> tuple[list[ir.Tool], list[ir.Rejection]]:
    """``tools`` with a guard before each write that draws an amount down unguarded (see the module docstring), and a
    note per guard added."""
    out: list[ir.Tool] = []
    notes: list[ir.Rejection] = []
    for tool in tools:
        steps = list(tool.steps)
        added = 0
        for i, table, column, where, move in drawn_down(tool) if tool.kind == "write" else []:
            if _guarded(tool, table, column):
                continue
            params = [p.name for p in tool.params if f":{p.name}" in move]
            asked = f" ({', '.join('{' + p + '}' for p in params)} asked)" if params else ""
            guard = ir.Step(kind="guard", must="not_exist",
                            sql=f"SELECT 1 FROM {qi(table)} WHERE ({where}) AND {qi(column)} < {move}",
                            error=f"Not enough {column.replace('_', ' ')} left{asked}")
            steps.insert(i + added, guard)
            added += 1
            notes.append(ir.Rejection(stage=stage, item=tool.name, reason=(
                f"guard added to {tool.name}: it draws {table}.{column} down by {move} with no guard comparing it; "
                f"a call moving more than the row holds is refused ({guard.sql})"),
                evidence={"tool": tool.name, "table": table, "column": column, "guard": guard.sql}))
        out.append(tool.model_copy(update={"steps": steps}) if added else tool)
    return out, notes
