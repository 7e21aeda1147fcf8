"""Deriving a task's verifier by code from what its reference solution does to a fresh instance.

The task agent proposes calls and words; this module turns the state diff of replaying those calls
into SQL assertions:

* an inserted row -> ``COUNT(*)`` of rows with exactly its values; columns the agent cannot predict
  are checked for type only (an ``INTEGER PRIMARY KEY`` assigned by SQLite, values that differ
  between two replays (random), timestamps equal to the environment clock); a foreign key to a row
  inserted in the same trajectory is checked through that row's own conditions;
* an updated row -> the row, found by its key, holds exactly its final values;
* a deleted row -> no row with its key;
* per changed table: the row count, and a fingerprint of every row the reference did not touch (so
  collateral updates and deletes in a changed table fail);
* ``mutable_tables`` = the tables the reference changed (every other table must stay as it was);
* with the writes the policy forbids the request (a rule-bound task), a gate for each column they would change on a
  row the reference changes too (an exception task's forbidden write on the row of its alternative);
* with the arguments the request leaves implied (a new row's state when it is the state new rows have: "add a new
  loan", not "a new pending loan"), a new row's column also holds when it has the value the tool gives it without
  them (NULL or the column's DEFAULT), found by replaying the calls without them; a required one stays exact;
* for questions, the expected answer is read from the reference's last result.

Every ``expect`` is computed by running the assertion on the reference's final state.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.ir import Assertion, Environment, ToolCall, Verifier
from pipeline.runtime.replay import Run, fresh, play
from pipeline.runtime.state import (
    Change,
    Key,
    Row,
    TableInfo,
    diff,
    equals,
    lit,
    qi,
    query_value,
    sort_key,
    sqlite_type,
)
from verify.evaluate import ANSWER_SEP

MAX_ANSWER_ROWS = 5
COUNT = "*count"
"""The answer field of "how many ..." questions: the number of rows the last read returned."""
FINGERPRINT_LIMIT = 40_000
CLOCK_SHIFT = "2031-07-04T17:23:41"
_FLAG = re.compile(r"^(is|has|on|in|can|was)_|_(flag|active|available)$")


@dataclass(frozen=True)
class Derivation:
    """What replaying a proposed solution gave: the concrete calls, the verifier, or the error."""

    calls: tuple[ToolCall, ...]
    responses: tuple[dict[str, Any], ...]
    changes: tuple[Change, ...]
    verifier: Verifier | None
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def tables_used(env: Environment, tool_names: list[str]) -> list[str]:
    """Tables whose names appear in the SQL of the given tools."""
    text = " ".join(
        " ".join([s.sql for s in t.steps] + ([t.returns.sql] if t.returns else []))
        for t in env.tools if t.name in tool_names
    )
    return sorted(t.name for t in env.tables if re.search(rf"\b{re.escape(t.name)}\b", text, re.I))


def format_value(value: Any, flag: bool = False) -> str:
    if flag and value in (0, 1) and not isinstance(value, float):
        return "yes" if value else "no"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def extract_answer(result: Any, field_name: str) -> tuple[str | None, str | None]:
    """The expected answer from a read result: ``field_name`` of each returned row (at most 5)."""
    rows = result if isinstance(result, list) else [result]
    rows = [r for r in rows if isinstance(r, dict)]
    if field_name == COUNT:
        return (str(len(rows)), None) if rows else (None, "the call returned no rows, so there is nothing to count")
    if not rows:
        return None, "the call returned no rows, so there is nothing to ask about; choose arguments that match a row"
    if len(rows) > MAX_ANSWER_ROWS:
        return None, f"the call returned {len(rows)} rows; choose arguments that pick out at most {MAX_ANSWER_ROWS}"
    if field_name not in rows[0]:
        return None, f"the result has no field {field_name!r} (fields: {', '.join(rows[0])})"
    values = [r.get(field_name) for r in rows]
    if all(v is None for v in values):
        return None, f"field {field_name!r} is empty in the result; ask about another field"
    flag = bool(_FLAG.search(field_name))
    out: list[str] = []
    for v in values:
        s = "none" if v is None else format_value(v, flag)
        if s not in out:
            out.append(s)
    return ANSWER_SEP.join(out), None


# ---------------------------------------------------------------- conditions


def _key_cond(info: TableInfo, key: Key) -> str:
    cols = info.key
    return " AND ".join(f"rowid = {lit(v)}" if c == "rowid" else equals(c, v) for c, v in zip(cols, key, strict=True))


def _key_list(info: TableInfo, keys: list[Key]) -> str:
    if len(info.key) == 1:
        col = "rowid" if info.key == ("rowid",) else qi(info.key[0])
        return f"{col} IN ({', '.join(lit(k[0]) for k in keys)})"
    cols = ", ".join(qi(c) for c in info.key)
    values = ", ".join("(" + ", ".join(lit(v) for v in k) + ")" for k in keys)
    return f"({cols}) IN (VALUES {values})"


def _order(info: TableInfo) -> str:
    return "rowid" if info.key == ("rowid",) else ", ".join(qi(c) for c in info.key)


class _Deriver:
    def __init__(self, env: Environment, run: Run, twin_changes: list[list[Change] | None],
                 without: list[Change] | None = None):
        self.env, self.run, self.infos = env, run, run.infos
        self.without = without
        """The changes of the calls replayed without their implied arguments (None: no such arguments, or that
        replay failed, a required one among them)."""
        self.changes = run.changes()
        self.twin_changes = twin_changes
        self.notes: list[str] = []
        self.arg_values = [v for r in run.records for v in r.call.arguments.values()]
        self.arg_items = {(k, v) for r in run.records for k, v in r.call.arguments.items() if not isinstance(v, dict | list)}

    def _counterpart(self, twin: list[Change], change: Change) -> Change | None:
        if change.op != "insert":
            return next((c for c in twin if (c.table, c.op, c.key) == (change.table, change.op, change.key)), None)
        mine = [c for c in self.changes if c.table == change.table and c.op == "insert"]
        theirs = [c for c in twin if c.table == change.table and c.op == "insert"]
        if len(mine) != len(theirs):
            return None
        return theirs[mine.index(change)]

    def unpredictable(self, change: Change) -> dict[str, str]:
        """Columns of ``change.after`` checked by type only, with the reason."""
        info, row = self.infos[change.table], change.after or {}
        out: dict[str, str] = {}
        if change.op == "insert" and info.int_pk:
            pk = info.key[0]
            if (pk, row.get(pk)) not in self.arg_items:
                out[pk] = "id assigned by the database"
        for i, twin in enumerate(self.twin_changes):
            other = self._counterpart(twin, change) if twin is not None else None
            if twin is None or other is None:
                continue
            for col, v in row.items():
                if col in out or (other.after or {}).get(col) == v:
                    continue
                if i == 0:
                    out[col] = "differs between two identical replays"
                elif self._stamp(v):
                    out[col] = "timestamp from the environment clock"
        if self.twin_changes[-1] is None:  # the clock-shifted replay failed: judge by the value itself
            for col, v in row.items():
                if col not in out and self._stamp(v):
                    out[col] = "timestamp from the environment clock"
        if change.op == "update":
            out = {c: r for c, r in out.items() if c in change.changed_columns}
        return out

    def _stamp(self, v: Any) -> bool:
        """A value that is the environment clock itself (now/today), not given by any argument."""
        clock, today = self.env.clock, self.env.clock[:10]
        if not isinstance(v, str) or v in self.arg_values:
            return False
        return v == clock or v == today or v.startswith((today + "T", today + " "))

    def row_conditions(self, change: Change, depth: int = 0) -> list[str]:
        info, row = self.infos[change.table], change.after or {}
        loose = self.unpredictable(change)
        conds = [_key_cond(info, change.key)] if change.op == "update" else []
        fks = {col: (parent, pcol) for col, parent, pcol in info.foreign_keys}
        for col, v in row.items():
            if change.op == "update" and col in info.key:
                continue
            if col in loose:
                conds.append(f"typeof({qi(col)}) = '{sqlite_type(v)}'")
                if change.op == "update" and (change.before or {}).get(col) is not None:
                    conds.append(f"{qi(col)} IS NOT {lit((change.before or {})[col])}")  # it did change
                continue
            parent = self._inserted_parent(fks.get(col), v) if depth < 2 else None
            if parent is not None:
                pinfo = self.infos[parent.table]
                pcol = fks[col][1] or pinfo.key[0]
                sub = " AND ".join(self.row_conditions(parent, depth + 1)) or "1"
                conds.append(f"{qi(col)} IN (SELECT {qi(pcol)} FROM {qi(parent.table)} WHERE {sub})")
                continue
            alt = self._implied(change, col) if change.op == "insert" else None
            conds.append(f"({equals(col, v)} OR {equals(col, alt[0])})" if alt is not None else equals(col, v))
        return conds

    def _implied(self, change: Change, col: str) -> tuple[Any] | None:
        """(the value) ``col`` of the inserted row gets when the calls leave their implied arguments out, when that
        differs from the reference's; else None."""
        if self.without is None:
            return None
        other = self._counterpart(self.without, change)
        if other is None:
            return None
        v, alt = (change.after or {}).get(col), (other.after or {}).get(col)
        return (alt,) if alt != v else None

    def _inserted_parent(self, fk: tuple[str, str] | None, value: Any) -> Change | None:
        if fk is None or value is None:
            return None
        parent, pcol = fk
        for c in self.changes:
            if c.table == parent and c.op == "insert":
                pinfo = self.infos[parent]
                col = pcol or pinfo.key[0]
                if (c.after or {}).get(col) == value and col in self.unpredictable(c):
                    return c
        return None

    def _assert(self, sql: str, description: str, role: str = "goal") -> Assertion:
        return Assertion(sql=sql, expect=query_value(self.run.inst.conn, sql), description=description,
                         name="gate" if role == "gate" else None)

    def assertions(self, read_tools: list[str]) -> list[Assertion]:
        out: list[Assertion] = []
        for c in self.changes:
            t = qi(c.table)
            if c.op == "delete":
                out.append(self._assert(f"SELECT COUNT(*) FROM {t} WHERE {_key_cond(self.infos[c.table], c.key)}",
                                        f"{c.table} row {list(c.key)} is deleted"))
                continue
            conds = self.row_conditions(c)
            loose = self.unpredictable(c)
            what = f"new {c.table} row" if c.op == "insert" else f"{c.table} row {list(c.key)} updated"
            shown = {k: v for k, v in (c.after or {}).items() if k not in loose and (c.op == "insert" or k in c.changed_columns)}
            if shown:
                desc = f"{what}: {_brief(shown)}" + (f" ({', '.join(sorted(loose))} checked by type)" if loose else "")
            else:
                desc = f"{what}: {', '.join(sorted(loose))} set (checked by type)"
            out.append(self._assert(f"SELECT COUNT(*) FROM {t} WHERE {' AND '.join(conds)}", desc))
        for table in sorted({c.table for c in self.changes}):
            out.extend(self._frame(table))
        if not self.changes:
            for table in tables_used(self.env, read_tools) or sorted(self.infos):
                out.append(self._assert(f"SELECT COUNT(*) FROM {qi(table)}", f"{table} keeps its rows", "gate"))
        return out

    def _frame(self, table: str) -> list[Assertion]:
        info = self.infos[table]
        out = [self._assert(f"SELECT COUNT(*) FROM {qi(table)}", f"{table} has the expected number of rows", "gate")]
        touched = {c.key for c in self.changes if c.table == table}
        untouched = sorted((k for k in self.run.initial[table] if k not in touched), key=sort_key)
        if not untouched:
            return out
        row_expr = " || ',' || ".join(f"quote({qi(c)})" for c in info.columns)
        sql = (f"SELECT group_concat(r, char(10)) FROM (SELECT {row_expr} AS r FROM {qi(table)} "
               f"WHERE {_key_list(info, untouched)} ORDER BY {_order(info)})")
        a = self._assert(sql, f"the other {len(untouched)} {table} rows are unchanged", "gate")
        if isinstance(a.expect, str) and len(a.expect) > FINGERPRINT_LIMIT:
            self.notes.append(f"{table}: untouched-row fingerprint too large ({len(a.expect)} chars); count only")
            return out
        return out + [a]


def _brief(values: Row, limit: int = 6) -> str:
    items = [f"{k}={v!r}" for k, v in list(values.items())[:limit]]
    return ", ".join(items) + (", ..." if len(values) > limit else "")


def forbidden_calls(rules: Sequence[dict[str, Any]]) -> list[ToolCall]:
    """The writes a rule-bound task's verdicts (``metadata.rules``) forbid, once each, in order."""
    out: list[ToolCall] = []
    for r in rules:
        call = ToolCall(tool=r["tool"], arguments=dict(r.get("arguments") or {}))
        if r.get("verdict") == "forbids" and call not in out:
            out.append(call)
    return out


def is_refusal(verifier: Verifier, rules: Sequence[dict[str, Any]]) -> bool:
    """Whether a task is a refusal: its request asks only for writes the policy forbids, so its gold is the state
    it starts from (no table may change) and a reply that says why (its ``answer``: the value the forbidding rule
    checks, as the row holds it, :func:`refusal_reason`). Doing nothing keeps the state but says nothing, so it
    fails; the forbidden write changes what its goals pin, so doing what was asked fails too (the proofs'
    ``blind``)."""
    return not verifier.mutable_tables and bool(forbidden_calls(rules))


_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def refusal_reason(env: Environment, responses: Sequence[dict[str, Any]], forbidden: Sequence[ToolCall]
                   ) -> str | None:
    """Why a refusal refuses, as a value its reply must name: a text value the reference's reads returned (the
    evidence) that a rule governing a forbidden write compares with in its condition (a quoted literal of its SQL:
    the loan's status 'returned' for "a returned loan may no longer be changed"). None unless exactly one such
    value: a refusal whose reason the evidence does not show is not planned. Read from the rule's SQL and the rows,
    so it holds in any language; the policy tells the agent to refuse a request that breaks a rule and say why."""
    literals = _quoted(env, forbidden)
    found = sorted({v for r in responses for v in _strings(r.get("result")) if v in literals})
    return found[0] if len(found) == 1 else None


def _quoted(env: Environment, forbidden: Sequence[ToolCall]) -> set[str]:
    """The text values the conditions of the rules governing ``forbidden``'s tools quote (their SQL literals)."""
    tools = {f.tool for f in forbidden}
    return {m.replace("''", "'") for r in env.rules if tools & set(r.tools) for m in _LITERAL.findall(r.condition)}


def _refusal(env: Environment, initial_db: str | Path | None, run: Run, calls: tuple[ToolCall, ...],
             responses: tuple[dict[str, Any], ...], forbidden: Sequence[ToolCall]) -> Derivation:
    """The verifier of a refusal (:func:`is_refusal`): per row the ``forbidden`` writes would change after the
    reference's reads, a goal that it keeps what it holds (the columns an update would set, a row a delete would
    remove; a table a create would add to keeps its row count), and no table may change. An error when they would
    change nothing: the gold state could not tell doing them from refusing them."""
    gold = run.final()
    with fresh(env, initial_db) as twin:
        play(twin, list(calls), changes=False)
        play(twin, list(forbidden), stop_on_error=False, changes=False)
        extra = diff(gold, twin.final())
    if not extra:
        return Derivation(calls, responses, (), None, "the forbidden writes would change nothing: refusing them "
                          "leaves the state doing them leaves")
    reason = refusal_reason(env, responses, forbidden)
    if reason is None:
        return Derivation(calls, responses, (), None, "a refusal needs the reason its reply must give: no one value "
                          "the reference read is one its forbidding rule checks")
    conn, out, counted = run.inst.conn, [], set()
    for c in extra:
        info = run.infos[c.table]
        if c.op == "insert":
            if c.table not in counted:
                counted.add(c.table)
                sql = f"SELECT COUNT(*) FROM {qi(c.table)}"
                out.append(Assertion(sql=sql, expect=query_value(conn, sql),
                                     description=f"no {c.table} row is added (the request's is refused)"))
            continue
        where = _key_cond(info, c.key)
        cols = [col for col in c.changed_columns if col not in info.key] if c.op == "update" else []
        sql = f"SELECT COUNT(*) FROM {qi(c.table)} WHERE " + " AND ".join(
            [where] + [equals(col, (c.before or {}).get(col)) for col in cols])
        what = (f"{c.table} row {list(c.key)} keeps {', '.join(cols)} (the change asked for is refused)" if cols
                else f"{c.table} row {list(c.key)} stays (its deletion is refused)")
        out.append(Assertion(sql=sql, expect=query_value(conn, sql), description=what))
    stated = sorted({v for f in forbidden for v in _strings(f.arguments)}
                    | {v for c in calls for v in _strings(c.arguments)})
    listed = [[str(x) for x in p.enum] for t in env.tools for p in t.params if p.enum and reason in map(str, p.enum)]
    others = sorted((_quoted(env, forbidden) | {v for values in listed for v in values}) - {reason, *stated})
    answer = {"type": "text", "value": reason, "stated": stated, **({"others": others} if others else {})}
    return Derivation(calls, responses, (), Verifier(assertions=out, mutable_tables=[], answer=answer), None)


def _forbidden_gates(env: Environment, initial_db: str | Path | None, d: _Deriver, calls: list[ToolCall],
                     forbidden: Sequence[ToolCall]) -> list[Assertion]:
    """Gates for what the ``forbidden`` writes would change on the rows the reference changes too (an exception
    task's forbidden write and its alternative name the same row): the columns they would set keep the values the
    reference leaves, the rows they would delete stay. Their changes elsewhere already break the row-count and
    untouched-row gates and the frame."""
    if not forbidden:
        return []
    touched = {(c.table, c.key) for c in d.changes}
    with fresh(env, initial_db) as run:
        play(run, calls, changes=False)
        gold = run.final()
        play(run, list(forbidden), stop_on_error=False, changes=False)
        extra = diff(gold, run.final())
    out: list[Assertion] = []
    for c in extra:
        if (c.table, c.key) not in touched or c.op == "insert":
            continue
        info = d.infos[c.table]
        where = _key_cond(info, c.key)
        if c.op == "update":
            cols = [col for col in c.changed_columns if col not in info.key]
            conds = " AND ".join([where] + [equals(col, (c.before or {}).get(col)) for col in cols])
            what = f"a forbidden write leaves {', '.join(cols)} of {c.table} row {list(c.key)} unchanged"
        else:
            conds, what = where, f"a forbidden write leaves {c.table} row {list(c.key)} in place"
        out.append(d._assert(f"SELECT COUNT(*) FROM {qi(c.table)} WHERE {conds}", what, "gate"))
    return out


def derive_verifier(
    env: Environment,
    calls: list[ToolCall],
    *,
    initial_db: str | Path | None = None,
    answer_field: str | None = None,
    answer: dict[str, Any] | None = None,
    forbidden: Sequence[ToolCall] = (),
    implied: Sequence[tuple[int, str]] = (),
) -> Derivation:
    """Replay ``calls`` on fresh instances and derive the verifier (see the module docstring).

    ``answer``: for questions, the typed expected answer (computed by the planner from what the calls read);
    ``answer_field`` (older tasks): the field of the last call's result that answers them.
    Assertions on what changed are goals; row counts, untouched rows and "keeps its rows" are gates; a goal
    that already holds on the initial state becomes a gate (it cannot tell doing the task from doing nothing).
    ``forbidden``: writes the policy forbids the request (a rule-bound task's): what they would change on the rows
    the reference changes is gated too (:func:`_forbidden_gates`). ``implied``: (call index, argument) the request
    does not state (a ``create``'s state new rows have, ``metadata.sources`` ``"implied"``): a new row's column they
    set also holds with the value the calls give it without them (a required one, left out, fails the replay:
    exact).
    """
    with fresh(env, initial_db) as run:
        play(run, calls, changes=False)  # the whole run's changes are what the verifier is derived from
        calls_done = tuple(r.call for r in run.records)
        responses = tuple(r.response for r in run.records)
        if run.error:
            return Derivation(calls_done, responses, (), None, run.error)
        changes = run.changes()
        reads = [c.tool for c in calls_done if env.tool(c.tool).kind == "read"]
        if not changes and answer_field is None and answer is None:
            if forbidden:  # a refusal: the request asks only for writes the policy forbids
                return _refusal(env, initial_db, run, calls_done, responses, forbidden)
            return Derivation(calls_done, responses, (), None, "the calls changed nothing in the database")
        if changes and (answer_field is not None or answer is not None):
            answer_field, answer = None, None  # a task that changes the state is judged by the state
        expected: dict[str, Any] | str | None = answer
        if answer_field is not None:
            expected, err = extract_answer(responses[-1].get("result"), answer_field)
            if err:
                return Derivation(calls_done, responses, tuple(changes), None, err)
        twins: list[list[Change] | None] = []
        shifted = env.model_copy(update={"clock": CLOCK_SHIFT})  # its id is cheap: the seed's JSON is remembered
        for twin_env in (env, shifted):
            with fresh(twin_env, initial_db) as twin:
                play(twin, list(calls_done), changes=False)
                twins.append(None if twin.error else twin.changes())
        without = None
        if implied:
            drop = {(i, a) for i, a in implied}
            bare = [c.model_copy(update={"arguments": {k: v for k, v in c.arguments.items() if (i, k) not in drop}})
                    for i, c in enumerate(calls_done)]
            with fresh(env, initial_db) as twin:
                play(twin, bare, changes=False)
                without = None if twin.error else twin.changes()
        d = _Deriver(env, run, twins, without)
        found = d.assertions(reads) + _forbidden_gates(env, initial_db, d, list(calls_done), forbidden)
        verifier = Verifier(assertions=_gate_what_holds_initially(env, initial_db, found),
                            mutable_tables=sorted({c.table for c in changes}), answer=expected)
        return Derivation(calls_done, responses, tuple(changes), verifier, None, tuple(d.notes))



def _gate_what_holds_initially(env: Environment, initial_db: str | Path | None,
                              assertions: list[Assertion]) -> list[Assertion]:
    """A goal that already holds on the initial state cannot tell doing the task from doing nothing: it
    becomes a gate. Gates follow the goals (the contract keeps one list; ``name: "gate"`` marks them)."""
    goals: list[Assertion] = []
    gates: list[Assertion] = []
    with fresh(env, initial_db) as start:
        for a in assertions:
            if a.name != "gate":
                try:
                    held = query_value(start.inst.conn, a.sql) == a.expect
                except Exception:
                    held = False
                if not held:
                    goals.append(a)
                    continue
                a = a.model_copy(update={"name": "gate"})
            gates.append(a)
    return goals + gates
