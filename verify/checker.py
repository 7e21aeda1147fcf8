"""The checker: reviews every tool call of a tester attempt and says who is to blame for a failure.

Two layers. Code rules replay the calls on a fresh instance and judge what can be judged for sure
(a raw SQL error from a tool, a read tool that wrote, a write that touched a table its SQL never
names, a statement without ``WHERE`` that changed every row of a table). Then the LLM sees, per
call, the tool's spec (description and SQL), the arguments, the result and the rows changed, plus
the rule findings, and marks each call pass / warning / fail with a reason and blames the agent or
the environment (a tool, a missing tool, the data or the task wording). The verdict per call is the
worse of the two layers; a rule finding is never overruled by the LLM. LLM claims are checked
against facts before they count (a named tool must exist; a "missing tool" cannot be, since the
reference solution completes the task with the existing tools).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.ir import Environment, Task, ToolCall
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.settings import CheckerSettings as CheckerSettings
from pipeline.stages.feedback import render_section
from verify.models import signature
from verify.replay import call_once, describe_call, fresh
from verify.state import Change, qi
from verify.tester import Attempt

STAGE = "checker"
Verdict = Literal["pass", "warning", "fail"]
FaultKind = Literal["tool", "missing_tool", "data", "task"]
_RANK = {"pass": 0, "warning": 1, "fail": 2}
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


class Review(Frozen):
    task_id: str
    attempt: int
    passed: bool
    verdicts: list[CallVerdict]
    blame: Literal["none", "agent", "environment"]
    fault: Fault | None = None
    reason: str = ""
    notes: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- code rules


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


# ---------------------------------------------------------------- the LLM review


class CallReview(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: Verdict
    reason: str = Field(..., max_length=200)


Blame = Literal["none", "agent", "environment"]
ClaimedFault = Literal["none", "tool", "missing_tool", "data", "task"]


def reply_model(n_calls: int) -> type[BaseModel]:
    blame: Any = Blame
    fault: Any = ClaimedFault
    return create_model(  # type: ignore[call-overload, no-any-return]
        "CheckerReply", __config__=ConfigDict(extra="forbid"),
        calls=(list[CallReview], Field(..., min_length=n_calls, max_length=n_calls)),
        blame=(blame, ...),
        fault=(fault, ...),
        target=(str, Field(..., max_length=80)),
        reason=(str, Field(..., max_length=300)),
    )


def _tool_spec(env: Environment, name: str) -> str:
    tool = env.tool(name)
    lines = [f"- {signature(tool)}"]
    for s in tool.steps:
        extra = f" must {s.must}, else error '{s.error}'" if s.kind == "guard" else ""
        lines.append(f"    {s.kind}: {s.sql[:220]}{extra}")
    if tool.returns:
        lines.append(f"    returns ({tool.returns.mode}): {tool.returns.sql[:220]}")
    return "\n".join(lines)


def _call_line(i: int, step: Any, limit: int) -> str:
    res = json.dumps(step.response, ensure_ascii=False)
    res = res if len(res) <= limit else res[:limit] + "..."
    changed = "; ".join(json.dumps(c, ensure_ascii=False)[:160] for c in step.changes[:4]) or "nothing"
    return f"{i}. {step.tool}({json.dumps(step.arguments, ensure_ascii=False)}) -> {res}\n   rows changed: {changed}"


def review_messages(env: Environment, task: Task, attempt: Attempt, rule_verdicts: list[CallVerdict],
                    settings: CheckerSettings) -> list[dict[str, Any]]:
    names = {t.name for t in env.tools}
    used = [n for n in dict.fromkeys(s.tool for s in attempt.steps) if n in names]
    outcome = "passed" if attempt.passed else "failed: " + "; ".join(attempt.failures)[:400]
    outcome += f" (stopped: {attempt.stop}; final answer: {attempt.final_answer!r})"
    findings = [f"call {v.index}: {v.verdict}: {v.reason}" for v in rule_verdicts if v.verdict != "pass"]
    ref_tools = {c.tool for c in task.reference_solution}
    missing = sorted(ref_tools - {s.tool for s in attempt.steps})
    if missing:
        findings.append(f"the assistant never called {', '.join(missing)} (the correct solution does)")
    return [
        {"role": "system", "content": render_section("checker", "system")},
        {"role": "user", "content": render_section(
            "checker", "review", instruction=task.instruction, outcome=outcome,
            reference="; ".join(describe_call(c) for c in task.reference_solution),
            tools="\n".join(_tool_spec(env, n) for n in used) or "(none)",
            calls="\n".join(_call_line(s.index, s, settings.result_chars) for s in attempt.steps) or "(no calls)",
            findings="; ".join(findings) or "none",
        )},
    ]


def review_attempt(
    client: Any,
    env: Environment,
    task: Task,
    attempt: Attempt,
    *,
    initial_db: str | Path | None = None,
    settings: CheckerSettings | None = None,
) -> Review:
    """Rules, then (if enabled) the LLM; returns per-call verdicts and the blame for the attempt."""
    settings = settings or CheckerSettings()
    calls = [ToolCall(tool=s.tool, arguments=s.arguments) for s in attempt.steps]
    verdicts, faults = rule_review(env, calls, initial_db=initial_db)
    notes: list[str] = []
    llm_reply: Any = None
    if settings.use_llm and client is not None:
        try:
            llm_reply = client.structured(reply_model(len(calls)), review_messages(env, task, attempt, verdicts, settings),
                                          stage=STAGE, max_tokens=settings.max_tokens)
        except LLMUnavailable:
            raise
        except LLMError as e:
            notes.append(f"LLM review unavailable: {str(e)[:200]}")
    if llm_reply is not None:
        merged = []
        for v, r in zip(verdicts, llm_reply.calls, strict=True):
            if _RANK[r.verdict] > _RANK[v.verdict]:
                merged.append(CallVerdict(index=v.index, tool=v.tool, verdict=r.verdict, reason=r.reason, source="llm"))
            else:
                merged.append(v)
        verdicts = merged
    blame, fault, reason = _blame(env, attempt, faults, verdicts, llm_reply, settings, notes)
    return Review(task_id=task.task_id, attempt=attempt.attempt, passed=attempt.passed, verdicts=verdicts,
                  blame=blame, fault=fault, reason=reason, notes=notes)


def _blame(env: Environment, attempt: Attempt, faults: list[Fault], verdicts: list[CallVerdict], reply: Any,
           settings: CheckerSettings, notes: list[str]) -> tuple[Any, Fault | None, str]:
    if faults:
        return "environment", faults[0], faults[0].reason
    if attempt.passed:
        return "none", None, "the attempt passed the verifier"
    if reply is None:
        return "agent", None, "no rule found an environment fault"
    names = {t.name for t in env.tools}
    if reply.blame != "environment" or reply.fault == "none":
        return "agent", None, reply.reason or "the assistant did not complete the task"
    kind, target = reply.fault, reply.target.strip()
    if kind == "missing_tool":
        notes.append(f"checker claimed a missing tool ({target}): {reply.reason}")
        return "agent", None, "the reference solution completes the task with the existing tools"
    if kind == "tool" and target not in names:
        failed = [v.tool for v in verdicts if v.verdict == "fail" and v.source == "llm" and v.tool in names]
        if not failed:
            notes.append(f"checker blamed tool {target!r}, which is not a tool of this environment")
            return "agent", None, reply.reason
        target = failed[0]
    fault = Fault(kind=kind, target=target, reason=reply.reason, source="llm")
    if not settings.act_on_llm_faults:
        notes.append(f"checker claimed an environment fault (not acted on): {kind} {target}: {reply.reason}")
        return "agent", None, reply.reason
    return "environment", fault, reply.reason
