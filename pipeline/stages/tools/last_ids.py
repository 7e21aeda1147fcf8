"""A ``:last_id`` that means an earlier INSERT's row, pinned to that row.

The engine binds ``:last_id`` to the row the latest INSERT made (``pipeline.runtime.engine``). A tool that inserts a
row and then its children reads it as the first row's id throughout: an outside support-case build of 2026-11-30
wrote ``add_customer_support_case`` as ``INSERT INTO customer_support_cases ...``, ``INSERT INTO sla (case_id, ...)
VALUES (:last_id, 0)``, ``INSERT INTO escalation (case_id, ...) VALUES (:last_id, 'support')`` and returned ``SELECT
... FROM customer_support_cases WHERE case_id = :last_id``: the escalation went to the case whose id was the new SLA
row's, and the tool answered with another existing case. A reviewer's task then required that misplaced escalation.

:func:`pin` finds, for each statement of a write tool that uses ``:last_id`` after two INSERTs into different tables
(and its returns query), which table's row ``:last_id`` names there: the parent of the foreign-key column an INSERT
writes it into, or the table of the key column (or the parent of the foreign-key column) a ``WHERE`` compares it
with. Where that is an earlier INSERT's table rather than the latest's, a query step right after that INSERT binds
its id (``SELECT :last_id AS id``, bound as ``new_<table>``) and the statement reads ``:new_<table>_id`` instead.
Read from the SQL by a parser and from the schema's keys, no names of columns or words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sqlglot import exp

from pipeline import ir
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import TableInfo

_LAST = re.compile(r":last_id\b")


def _is_last(e: object) -> bool:
    return isinstance(e, exp.Placeholder) and e.name == "last_id"


def _insert_table(tree: exp.Expression | None) -> str | None:
    if isinstance(tree, exp.Insert):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Table):
            return target.name
    return None


def _parent(infos: Mapping[str, TableInfo], table: str, column: str) -> str | None:
    info = infos.get(table)
    if info is None:
        return None
    if tuple(info.key) == (column,):
        return table
    return next((parent for col, parent, _ in info.foreign_keys if col == column), None)


def _named(tree: exp.Expression, infos: Mapping[str, TableInfo]) -> set[str]:
    """The tables whose row ``:last_id`` names in ``tree``: an INSERT's column it fills (that column's parent), or a
    comparison with a key or foreign-key column (the table it keys). Unknown: an empty set."""
    out: set[str] = set()
    table = _insert_table(tree)
    if table is not None and isinstance(tree.this, exp.Schema) and isinstance(tree.expression, exp.Values):
        cols = [c.name for c in tree.this.expressions]
        for row in tree.expression.expressions:
            for col, val in zip(cols, row.expressions, strict=False):
                if _is_last(val) and (parent := _parent(infos, table, col)) is not None:
                    out.add(parent)
    tables = {t.alias_or_name: t.name for t in tree.find_all(exp.Table)}
    for eq in tree.find_all(exp.EQ):
        for side, other in ((eq.left, eq.right), (eq.right, eq.left)):
            if not (_is_last(other) and isinstance(side, exp.Column)):
                continue
            alone = next(iter(tables.values())) if len(set(tables.values())) == 1 else None
            owner = tables.get(side.table) if side.table else alone
            if owner is not None and (parent := _parent(infos, owner, side.name)) is not None:
                out.add(parent)
    return out


def pin(tools: Sequence[ir.Tool], infos: Mapping[str, TableInfo], stage: str = "tools"
        ) -> tuple[list[ir.Tool], list[ir.Rejection]]:
    """``tools`` with each ``:last_id`` that names an earlier INSERT's row pinned to it (see the module docstring),
    and a note per tool changed."""
    out: list[ir.Tool] = []
    notes: list[ir.Rejection] = []
    for tool in tools:
        pinned = _pin(tool, infos) if tool.kind == "write" else None
        if pinned is None:
            out.append(tool)
            continue
        new, moved = pinned
        out.append(new)
        notes.append(ir.Rejection(stage=stage, item=tool.name, reason=(
            f"{tool.name}: :last_id named the row of an earlier INSERT ({', '.join(sorted(moved))}) after another "
            "INSERT had made a row: pinned to that row's id"), evidence={"tool": tool.name, "tables": sorted(moved)}))
    return out, notes


def _pin(tool: ir.Tool, infos: Mapping[str, TableInfo]) -> tuple[ir.Tool, set[str]] | None:
    inserts: list[tuple[int, str]] = []  # (step index, table), in order
    wanted: dict[int, str] = {}  # statement index (len(steps) for the returns query) -> table its :last_id names
    statements = [s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else [])
    for i, sql in enumerate(statements):
        tree = _parse(sql)
        if _LAST.search(sql) and inserts and tree is not None:
            named = _named(tree, infos)
            latest = inserts[-1][1]
            earlier = {t for _, t in inserts}
            if len(named) == 1 and (t := next(iter(named))) != latest and t in earlier:
                wanted[i] = t
        if i < len(tool.steps) and tool.steps[i].kind == "write" and (table := _insert_table(tree)) is not None:
            inserts.append((i, table))
    if not wanted:
        return None
    steps = list(tool.steps)
    returns = tool.returns
    for i, table in wanted.items():
        name = f"new_{table}"
        if i < len(tool.steps):
            steps[i] = steps[i].model_copy(update={"sql": _LAST.sub(f":{name}_id", tool.steps[i].sql)})
        elif returns is not None:
            returns = returns.model_copy(update={"sql": _LAST.sub(f":{name}_id", returns.sql)})
    # after the latest INSERT into each table named before the statement that names it: its id, bound
    binds: dict[int, str] = {}
    for i, table in wanted.items():
        at = max(j for j, t in inserts if t == table and j < i)
        binds[at] = table
    for at in sorted(binds, reverse=True):
        steps.insert(at + 1, ir.Step(kind="query", sql="SELECT :last_id AS id", bind=f"new_{binds[at]}"))
    return tool.model_copy(update={"steps": steps, "returns": returns}), set(wanted.values())
