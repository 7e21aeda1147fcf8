"""A create tool's guards replayed on the seeded rows of the table it inserts into: the state's own examples.

Each seeded row of the table a write tool ``INSERT``\\ s into is a call that was fine: its parameters are the values
the row holds in the columns the ``INSERT`` writes them into (``guards.inserted``; ``:today``/``:now`` written into a
column are that column's value, else the clock's). A guard of the tool is replayed on such calls, each on the seeded
state without its own row (deleted in a copy of the database, then put back): a guard that refuses more than
:data:`SHARE` of at least :data:`MIN_ROWS` rows contradicts the state and is dropped (:func:`drop`), with a note
naming the tool, the guard, the share refused and a few of the calls it refused. Issue 40: a pharmacy's "not enough
stock" guard ``... JOIN prescriptions p ... WHERE p.patient_id = :patient_id AND p.quantity + :quantity >
m.quantity`` compared the patient's other prescriptions with a per-drug column and refused 101 of the 184 existing
prescriptions replayed (the duplicate guard: none).

Judged, read from the SQL by a parser and from the rows, never from names or words:

- guards of a write tool that is the only tool of the set inserting into its table, with one ``INSERT ... (cols)
  VALUES (...)`` there (the rows are then this tool's calls, not another tool's);
- whose placeholders are all parameters that ``INSERT`` writes into a column, or the clock;
- that read the inserted table (a guard about another table is not about the inserted row: the seeded state of
  other tables is the state now, after the calls, e.g. a stock drawn down by them);
- that read no column a tool of the set changes to something else than a value the call gives (a literal, the
  clock, a move such as ``stock - :quantity``): such a column holds the state now, not at the row's call;
- ``must="not_exist"`` guards that refuse a replayed call when they find a row, and ``must="exist"`` guards that
  refuse it when they find none (the only tool making the table's rows cannot require one the row's call did not
  have: the state says the call was made).

Only rows that hold, in every column the ``INSERT`` writes a literal into, that literal are replayed (a row holding
another value was changed since its call). Not judged: conflict guards (``guards.wrong_guards`` judges them, and a
seed that breaks an overlap rule must not drop the rule), the amount guards code adds afterwards
(``amount_guards``), guards of tools that insert nothing. The threshold is a half: a business rule the generated rows
break for a minority (a member with two open loans) is kept; a guard that refuses most of the state's own calls
(:data:`MIN_ROWS` of them at least, so a handful of rows decides nothing) cannot be what the scenario means.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from pipeline import ir
from pipeline.runtime.engine import placeholders
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import qi
from pipeline.stages.tools import guards

SHARE = 0.5
"""A guard refusing more than this share of the replayed rows contradicts the state."""
MIN_ROWS = 8
"""Fewer replayable rows than this decide nothing."""
MAX_ROWS = 400
"""At most this many rows are replayed (spread over the table)."""
CLOCK = ("now", "today")


@dataclass
class Contradiction:
    tool: str
    sql: str
    must: str
    refused: int
    rows: int
    examples: list[dict[str, Any]] = field(default_factory=list)
    """A few of the calls it refused."""

    def describe(self) -> str:
        return (f"its guard `{self.sql}` (must {self.must}) refused {self.refused} of {self.rows} calls the seeded "
                f"rows were made by (each row's own values, replayed without the row), e.g. "
                f"{', '.join(str(a) for a in self.examples)}: it contradicts the state")

    def evidence(self) -> dict[str, Any]:
        return {"tool": self.tool, "guard": self.sql, "must": self.must, "finding": "contradicts_seeded_rows",
                "refused": self.refused, "rows": self.rows, "examples": self.examples}


def _insert(tool: ir.Tool) -> tuple[str, dict[str, Any]] | None:
    """The one table ``tool`` inserts into, with the literal values its ``INSERT`` writes (column -> value)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for s in tool.steps:
        tree = _parse(s.sql) if s.kind == "write" else None
        if not isinstance(tree, exp.Insert):
            continue
        if not isinstance(tree.this, exp.Schema) or not isinstance(tree.this.this, exp.Table):
            return None
        values = tree.expression
        if not isinstance(values, exp.Values) or len(values.expressions) != 1:
            return None
        literals = {c.name: (v.to_py() if not isinstance(v, exp.Null) else None)
                    for c, v in zip(tree.this.expressions, values.expressions[0].expressions, strict=False)
                    if isinstance(v, exp.Literal | exp.Null)}
        found.append((tree.this.this.name, literals))
    return found[0] if len(found) == 1 else None


def _inserters(tools: Sequence[ir.Tool]) -> dict[str, int]:
    """Table -> how many tools insert into it."""
    out: dict[str, int] = {}
    for t in tools:
        for table in guards.inserted(t):
            out[table] = out.get(table, 0) + 1
    return out


def driven(tools: Sequence[ir.Tool]) -> set[tuple[str, str]]:
    """(table, column) each ``UPDATE`` of ``tools`` sets to something else than a parameter of its tool (a literal,
    the clock, a move): state the tools drive."""
    out: set[tuple[str, str]] = set()
    for t in tools:
        params = {p.name for p in t.params}
        for s in t.steps:
            tree = _parse(s.sql) if s.kind == "write" else None
            if not isinstance(tree, exp.Update) or not isinstance(tree.this, exp.Table):
                continue
            for eq in tree.args.get("expressions") or []:
                if not (isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column)):
                    continue
                value = eq.right
                while isinstance(value, exp.Paren):
                    value = value.this
                if not (isinstance(value, exp.Placeholder) and value.name in params):
                    out.add((tree.this.name, eq.left.name))
    return out


def _calls(conn: sqlite3.Connection, table: str, cols: dict[str, str], literals: dict[str, Any]
           ) -> list[tuple[int, dict[str, Any]]]:
    """(rowid, the call it was made by: parameter -> value) for the rows of ``table`` that hold the ``INSERT``'s
    literals, at most :data:`MAX_ROWS` spread over the table."""
    params = list(cols)
    where = " AND ".join(f"{qi(c)} IS ?" for c in literals) or "1"
    rows = conn.execute(f"SELECT rowid, {', '.join(qi(cols[p]) for p in params)} FROM {qi(table)} WHERE {where} "
                        "ORDER BY rowid", list(literals.values())).fetchall()
    if len(rows) > MAX_ROWS:
        step = (len(rows) - 1) / (MAX_ROWS - 1)
        rows = [rows[round(i * step)] for i in range(MAX_ROWS)]
    return [(r[0], dict(zip(params, r[1:], strict=True))) for r in rows]


def _judged(tool: ir.Tool, step: ir.Step, table: str, cols: dict[str, str], drive: set[tuple[str, str]],
            conn: sqlite3.Connection) -> bool:
    """Whether the guard ``step`` is one this module judges (see the module docstring), the conflict guards aside."""
    if step.kind != "guard" or step.must not in ("exist", "not_exist"):
        return False
    names = set(placeholders(step.sql))
    if not names <= set(cols) | set(CLOCK):
        return False
    tree = _parse(step.sql)
    if not isinstance(tree, exp.Select | exp.Union):
        return False
    tables = {t.name for t in tree.find_all(exp.Table)}
    if table not in tables:
        return False
    read = {c.name for c in tree.find_all(exp.Column)}
    if any(t in tables and c in read for t, c in drive):
        return False
    return not guards.conflict_guard(conn, tool, step)


def _refuses(conn: sqlite3.Connection, step: ir.Step, args: dict[str, Any]) -> bool | None:
    try:
        row = conn.execute(f"SELECT EXISTS ({step.sql})", {n: args.get(n) for n in placeholders(step.sql)}).fetchone()
    except sqlite3.Error:
        return None
    found = bool(row and row[0])
    return found if step.must == "not_exist" else not found


def judge(conn: sqlite3.Connection, tools: Sequence[ir.Tool], tool: ir.Tool, clock: str) -> list[Contradiction]:
    """The guards of ``tool`` that refuse more than :data:`SHARE` of the calls ``conn``'s seeded rows were made by
    (see the module docstring). ``conn`` is only read: the rows are replayed in a copy."""
    if tool.kind != "write" or (ins := _insert(tool)) is None:
        return []
    table, literals = ins
    if _inserters(tools).get(table, 0) != 1:
        return []
    cols = guards.inserted(tool).get(table, {})
    drive = driven(tools)
    steps = [s for s in tool.steps if _judged(tool, s, table, cols, drive, conn)]
    if not steps:
        return []
    try:
        calls = _calls(conn, table, cols, literals)
    except sqlite3.Error:
        return []
    if len(calls) < MIN_ROWS:
        return []
    copy = sqlite3.connect(":memory:")
    try:
        copy.deserialize(conn.serialize())  # rows not yet committed included (a backup would wait for them)
        copy.execute("PRAGMA foreign_keys = OFF")
        copy.execute("BEGIN")
        out = []
        for step in steps:
            refused: list[dict[str, Any]] = []
            for rowid, call in calls:
                args = {"now": clock, "today": str(clock)[:10], **call}
                if "today" in call and "now" not in call and isinstance(call["today"], str):
                    args["now"] = call["today"]
                if "now" in call and "today" not in call and isinstance(call["now"], str):
                    args["today"] = call["now"][:10]
                copy.execute("SAVEPOINT replay")
                try:
                    copy.execute(f"DELETE FROM {qi(table)} WHERE rowid = ?", (rowid,))
                    verdict = _refuses(copy, step, args)
                except sqlite3.Error:
                    verdict = None
                finally:
                    copy.execute("ROLLBACK TO replay")
                    copy.execute("RELEASE replay")
                if verdict is None:
                    break
                if verdict:
                    refused.append({p: v for p, v in call.items() if p not in CLOCK})
            else:
                if len(refused) > SHARE * len(calls):
                    out.append(Contradiction(tool.name, step.sql, step.must or "", len(refused), len(calls),
                                             refused[:3]))
        return out
    finally:
        copy.close()


def without(tool: ir.Tool, found: Sequence[Contradiction]) -> ir.Tool:
    """``tool`` without the guards of ``found``."""
    drop = {f.sql for f in found}
    return tool.model_copy(update={"steps": [s for s in tool.steps if not (s.kind == "guard" and s.sql in drop)]})


def rejection(found: Contradiction, stage: str = "tools") -> ir.Rejection:
    return ir.Rejection(stage=stage, item=found.tool, reason=f"guard dropped: {found.describe()}",
                        evidence=found.evidence())
