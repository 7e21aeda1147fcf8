"""The checker's code rules: replay a tester's calls on a fresh instance and judge what can be judged for
sure, with no LLM: a raw SQL error from a tool, a read tool that wrote, a write that touched a table its
SQL never names, a statement without ``WHERE`` that changed every row of a table.

A finding is a :class:`CallVerdict` per call and, when the environment is at fault, a :class:`Fault`
(``source="rule"``): a fact, which the LLM review (``verify.call_review``) never overrules.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.ir import Environment, ToolCall
from pipeline.runtime.replay import call_once, fresh
from pipeline.runtime.state import Change, qi

Verdict = Literal["pass", "warning", "fail"]
FaultKind = Literal["tool", "missing_tool", "data", "task"]
_TARGET = re.compile(r"^\s*(?:UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM|INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO)\s+[\"`\[]?(\w+)", re.I)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallVerdict(Frozen):
    index: int
    tool: str
    verdict: Verdict
    reason: str
    source: Literal["rule", "llm"]


class Fault(Frozen):
    kind: FaultKind
    target: str
    reason: str
    source: Literal["rule", "llm"]


def _write_targets(env: Environment, tool_name: str) -> list[tuple[str, bool]]:
    """(table, has WHERE) for each UPDATE/DELETE/INSERT step of a tool."""
    out = []
    for s in env.tool(tool_name).steps:
        if s.kind == "write":
            m = _TARGET.match(s.sql)
            if m:
                out.append((m.group(1), bool(re.search(r"\bWHERE\b", s.sql, re.I))))
    return out


def _tool_tables(env: Environment, tool_name: str) -> set[str]:
    tool = env.tool(tool_name)
    text = " ".join([s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else []))
    return {t.name for t in env.tables if re.search(rf"\b{re.escape(t.name)}\b", text, re.I)}


def rule_review(
    env: Environment, calls: list[ToolCall], *, initial_db: str | Path | None = None
) -> tuple[list[CallVerdict], list[Fault]]:
    """Replay ``calls`` on a fresh instance and judge each by the code rules."""
    verdicts: list[CallVerdict] = []
    faults: list[Fault] = []
    names = {t.name for t in env.tools}
    with fresh(env, initial_db) as run:
        for i, call in enumerate(calls, 1):
            counts = {t: run.inst.conn.execute(f"SELECT COUNT(*) FROM {qi(t)}").fetchone()[0] for t in run.infos}
            record = call_once(run, call)
            v, reason, fault = _judge(env, call, record.response, record.changes, counts, names)
            verdicts.append(CallVerdict(index=i, tool=call.tool, verdict=v, reason=reason, source="rule"))
            if fault is not None and fault not in faults:
                faults.append(fault)
    return verdicts, faults


def _judge(env: Environment, call: ToolCall, resp: dict[str, Any], changes: list[Change], counts: dict[str, int],
           names: set[str]) -> tuple[Verdict, str, Fault | None]:
    if call.tool not in names:
        return "pass", "unknown tool, rejected with an error", None
    tool = env.tool(call.tool)
    if not resp.get("ok"):
        kind, msg = resp.get("kind"), str(resp.get("error", ""))
        if kind == "sql" and msg.startswith("rejected by the database"):
            return "warning", f"the database rejected the input without a guard: {msg[:160]}", None
        if kind == "sql":
            reason = f"tool raised an internal SQL error: {msg[:200]}"
            return "fail", reason, Fault(kind="tool", target=call.tool, reason=reason, source="rule")
        return "pass", f"clean {kind} error", None
    if tool.kind == "read" and changes:
        reason = f"read tool changed {len(changes)} rows"
        return "fail", reason, Fault(kind="tool", target=call.tool, reason=reason, source="rule")
    if tool.kind == "read":
        return "pass", "read without side effects", None
    if not changes:
        return "warning", "write tool reported success but changed nothing", None
    own = _tool_tables(env, call.tool)
    stray = sorted({c.table for c in changes} - own)
    if stray:
        reason = f"changed tables its SQL never names: {', '.join(stray)}"
        return "fail", reason, Fault(kind="tool", target=call.tool, reason=reason, source="rule")
    for table, has_where in _write_targets(env, call.tool):
        touched = sum(1 for c in changes if c.table == table and c.op in ("update", "delete"))
        if touched >= 3 and touched == counts.get(table) and tool.params:
            reason = f"one call changed all {touched} rows of {table}"
            if not has_where:
                reason += " (its statement has no WHERE clause)"
                return "fail", reason, Fault(kind="tool", target=call.tool, reason=reason, source="rule")
            return "warning", reason, None
    return "pass", f"changed {len(changes)} rows", None
