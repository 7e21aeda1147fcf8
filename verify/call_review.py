"""The checker: reviews every tool call of a tester attempt and says who is to blame for a failure.

Two layers. Code rules (:mod:`verify.call_rules`) replay the calls on a fresh instance and judge what can be
judged for sure. Then the LLM sees, per call, the tool's spec (description and SQL), the arguments, the
result and the rows changed, plus the rule findings, and marks each call pass / warning / fail with a reason and blames the agent or
the environment (a tool, a missing tool, the data or the task wording). The verdict per call is the
worse of the two layers; a rule finding is never overruled by the LLM. LLM claims are checked
against facts before they count (a named tool must exist; a "missing tool" cannot be, since the
reference solution completes the task with the existing tools).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.ir import Environment, Task, ToolCall
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import fill_section, render_section
from pipeline.runtime.replay import describe_call
from pipeline.settings import CheckerSettings as CheckerSettings
from verify.call_rules import CallVerdict as CallVerdict
from verify.call_rules import Fault as Fault
from verify.call_rules import Frozen
from verify.call_rules import Verdict as Verdict
from verify.call_rules import rule_review as rule_review
from verify.models import signature
from verify.tester import Attempt

STAGE = "checker"
_RANK = {"pass": 0, "warning": 1, "fail": 2}


class Review(Frozen):
    task_id: str
    attempt: int
    passed: bool
    verdicts: list[CallVerdict]
    blame: Literal["none", "agent", "environment"]
    fault: Fault | None = None
    reason: str = ""
    notes: list[str] = Field(default_factory=list)


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
    lines = [fill_section("checker", "tool", signature=signature(tool))]
    for s in tool.steps:
        if s.kind == "guard":
            lines.append(fill_section("checker", "tool_guard", kind=s.kind, sql=s.sql[:220], must=s.must, error=s.error))
        else:
            lines.append(fill_section("checker", "tool_step", kind=s.kind, sql=s.sql[:220]))
    if tool.returns:
        lines.append(fill_section("checker", "tool_returns", mode=tool.returns.mode, sql=tool.returns.sql[:220]))
    return "\n".join(lines)


def _call_line(i: int, step: Any, limit: int) -> str:
    res = json.dumps(step.response, ensure_ascii=False)
    res = res if len(res) <= limit else res[:limit] + "..."
    changed = "; ".join(json.dumps(c, ensure_ascii=False)[:160] for c in step.changes[:4]) \
        or fill_section("checker", "nothing_changed")
    return fill_section("checker", "call", index=i, tool=step.tool, arguments=json.dumps(step.arguments, ensure_ascii=False),
                        result=res, changed=changed)


def review_messages(env: Environment, task: Task, attempt: Attempt, rule_verdicts: list[CallVerdict],
                    settings: CheckerSettings) -> list[dict[str, Any]]:
    """The checker's request: every wording in ``prompts/checker.md``; this only lays the facts out."""
    names = {t.name for t in env.tools}
    used = [n for n in dict.fromkeys(s.tool for s in attempt.steps) if n in names]
    stop = {"stop": attempt.stop, "answer": repr(attempt.final_answer)}
    outcome = fill_section("checker", "outcome_passed", **stop) if attempt.passed else \
        fill_section("checker", "outcome_failed", failures="; ".join(attempt.failures)[:400], **stop)
    findings = [fill_section("checker", "finding", index=v.index, verdict=v.verdict, reason=v.reason)
                for v in rule_verdicts if v.verdict != "pass"]
    ref_tools = {c.tool for c in task.reference_solution}
    missing = sorted(ref_tools - {s.tool for s in attempt.steps})
    if missing:
        findings.append(fill_section("checker", "never_called", tools=", ".join(missing)))
    return [
        {"role": "system", "content": render_section("checker", "system")},
        {"role": "user", "content": render_section(
            "checker", "review", instruction=task.instruction, outcome=outcome,
            reference="; ".join(describe_call(c) for c in task.reference_solution),
            tools="\n".join(_tool_spec(env, n) for n in used) or fill_section("checker", "no_tools"),
            calls="\n".join(_call_line(s.index, s, settings.result_chars) for s in attempt.steps)
            or fill_section("checker", "no_calls"),
            findings="; ".join(findings) or fill_section("checker", "no_findings"),
        )},
    ]


def review_attempt(
    client: LLMClientProtocol,
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
    # replayed on the tools the attempt was offered (the tester's view): a call of another tool was refused, not run
    offered = env.model_copy(update={"tools": [t for t in env.tools if t.name in attempt.offered]}) \
        if attempt.offered else env
    verdicts, faults = rule_review(offered, calls, initial_db=initial_db)
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
