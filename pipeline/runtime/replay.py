"""Running a list of tool calls on a fresh environment instance and recording what each did.

Arguments may refer to an earlier call's result as ``"$N.field"`` (N counts from 1): the value is
resolved during replay and the recorded calls hold the concrete value, so a reference solution is
always a plain list of calls that replays the same way over HTTP.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.ir import Environment, ToolCall
from pipeline.runtime import EnvInstance, engine
from pipeline.runtime.reward import WriteLog, track_writes
from pipeline.runtime.state import Change, Snapshot, TableInfo, diff, snapshot, table_infos

_REF = re.compile(r"^\$(\d+)\.([A-Za-z_][A-Za-z0-9_]*)$")


@dataclass
class CallRecord:
    call: ToolCall
    response: dict[str, Any]
    changes: list[Change]

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))


@dataclass
class Run:
    """A trajectory replayed on one instance (left open so callers can query the final state)."""

    inst: EnvInstance
    infos: dict[str, TableInfo]
    initial: Snapshot
    """Shared by every run of the same initial state: read-only."""
    records: list[CallRecord] = field(default_factory=list)
    error: str | None = None
    _state: tuple[int, Snapshot] | None = None
    """(``conn.total_changes``, the snapshot taken at that count): the state is re-read only once a
    statement has changed rows since (a read-only call leaves the count, and so the snapshot, as it was)."""
    writes: WriteLog | None = None
    """The tables a statement on the instance may have written (:func:`pipeline.runtime.reward.track_writes`, installed
    by :func:`fresh`): only those are re-read, the others are the initial snapshot's own (same) rows. None:
    every table is re-read."""

    @property
    def calls(self) -> list[ToolCall]:
        return [r.call for r in self.records]

    def final(self) -> Snapshot:
        """The current state (read-only)."""
        count = self.inst.conn.total_changes
        if self._state is None:
            self._state = (count, self.initial) if count == 0 else (count, self._read())
        elif self._state[0] != count:
            self._state = (count, self._read())
        return self._state[1]

    @property
    def written(self) -> set[str] | None:
        """The tables (lower-cased) a statement may have written since the run began (more, never fewer), or
        None when not tracked: for :func:`verify.evaluate.evaluate`'s ``written``."""
        return None if self.writes is None else self.writes.tables

    def _read(self) -> Snapshot:
        return _current(self.inst.conn, self.infos, self.initial, self.writes)

    def changes(self) -> list[Change]:
        return diff(self.initial, self.final())


class Watch:
    """Row changes of ``inst`` since its initial state, for loops that reset, call and look: ``changes()`` is
    ``diff(initial, snapshot(inst.conn))``, reading again only the tables a statement prepared on the instance
    may have written since the watch began (a :class:`pipeline.runtime.reward.WriteLog` in front of the engine's guard).
    The log is never cleared, across resets too: a statement the connection has cached runs again without being
    authorized again, so only the union since the start is sure to name every table a call may have written.
    Start it on an instance that has prepared no write yet."""

    def __init__(self, inst: EnvInstance) -> None:
        self.inst = inst
        self.infos = inst.initial("table_infos", table_infos)
        infos = self.infos
        self.initial: Snapshot = inst.initial("snapshot", lambda conn: snapshot(conn, infos))
        self.writes = _log_writes(inst)

    def changes(self) -> list[Change]:
        return diff(self.initial, _current(self.inst.conn, self.infos, self.initial, self.writes))


def _log_writes(inst: EnvInstance) -> WriteLog | None:
    """A write log installed in front of the engine's authorizer (which it calls in turn), as ``conn.writes``;
    None on a connection without the engine's guard."""
    guard = getattr(inst.conn, "guard", None)
    writes = track_writes(inst.conn, guard) if isinstance(guard, engine.Guard) else None
    inst.conn.writes = writes
    return writes


def _current(conn: Any, infos: dict[str, TableInfo], initial: Snapshot, writes: WriteLog | None) -> Snapshot:
    """The state on ``conn``: the tables ``writes`` names read again, the others ``initial``'s own (same) rows,
    which :func:`pipeline.runtime.state.diff` skips; every table read when ``writes`` is None."""
    if writes is None:
        return snapshot(conn, infos)
    tables = {name: info for name, info in infos.items() if name.lower() in writes.tables}
    now = snapshot(conn, tables) if tables else {}
    return {name: now[name] if name in now else initial[name] for name in infos}


@contextmanager
def fresh(env: Environment, initial_db: str | Path | None = None):
    """A fresh instance of ``env`` (closed on exit) with its table infos and initial snapshot."""
    inst = EnvInstance(env, initial_db)
    try:
        infos = inst.initial("table_infos", table_infos)
        writes = _log_writes(inst)
        yield Run(inst, infos, inst.initial("snapshot", lambda conn: snapshot(conn, infos)), writes=writes)
    finally:
        inst.close()


def field_of(result: Any, name: str) -> Any:
    """``name`` of a tool result: a row object, or the first row of a list of rows."""
    row = result[0] if isinstance(result, list) and result else result
    if isinstance(row, dict) and name in row:
        return row[name]
    raise KeyError(name)


def resolve(arguments: dict[str, Any], responses: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for k, v in arguments.items():
        m = _REF.match(v) if isinstance(v, str) else None
        if m:
            n, name = int(m.group(1)), m.group(2)
            if not 1 <= n <= len(responses):
                raise ValueError(f"argument {k!r} refers to call {n}, but only {len(responses)} calls came before")
            resp = responses[n - 1]
            if not resp.get("ok"):
                raise ValueError(f"argument {k!r} refers to call {n}, which failed")
            try:
                v = field_of(resp["result"], name)
            except KeyError:
                raise ValueError(f"argument {k!r}: the result of call {n} has no field {name!r}") from None
        out[k] = v
    return out


def call_once(run: Run, call: ToolCall, *, changes: bool = True) -> CallRecord:
    """One tool call on ``run.inst``, recorded with the rows it changed (``changes=False``: not looked at,
    the record's ``changes`` is empty; for runs that judge only the final state)."""
    if not changes:
        record = CallRecord(call, run.inst.call(call.tool, dict(call.arguments)), [])
        run.records.append(record)
        return record
    before = run.final()
    resp = run.inst.call(call.tool, dict(call.arguments))
    after = run.final()
    record = CallRecord(call, resp, [] if after is before else diff(before, after))
    run.records.append(record)
    return record


def play(run: Run, calls: list[ToolCall], *, stop_on_error: bool = True, changes: bool = True) -> Run:
    """Call each tool on ``run.inst``; records the response and (unless ``changes=False``) the rows each call
    changed."""
    responses = [r.response for r in run.records]
    for i, call in enumerate(calls, len(run.records) + 1):
        try:
            args = resolve(dict(call.arguments), responses)
        except ValueError as e:
            run.error = f"call {i} ({call.tool}): {e}"
            break
        resp = call_once(run, ToolCall(tool=call.tool, arguments=args), changes=changes).response
        responses.append(resp)
        if not resp.get("ok") and run.error is None:
            run.error = f"call {i} {call.tool}({_args(args)}) failed: {resp.get('error')}"
            if stop_on_error:
                break
    return run


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def describe_call(call: ToolCall) -> str:
    return f"{call.tool}({_args(call.arguments)})"
