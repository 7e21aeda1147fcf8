"""Deterministic proofs for one task, each on a fresh instance (no LLM involved).

* ``reference``: replaying the reference solution succeeds call by call and passes the verifier
  (for questions the expected answer must also be found in what the reference read);
* ``initial_state``: the initial state fails the verifier (for a task that is not a question, some
  assertion fails on it, which is what external checkers that run only assertions see);
* ``no_op``: a trajectory that only reads (the reference's read calls) and gives no answer fails;
* ``wrong_answer`` (questions): a perturbed answer fails;
* ``destructive``: broad writes through the tools (every write tool on many rows) fail, even when
  the trajectory also states the right answer;
* ``destructive_after_reference``: the reference followed by the same broad writes fails.

A rule-bound task (``metadata.rules``: the environment's rules it exercises, each with its verdict and the write
it judges) also meets an adversarial panel (:func:`rule_panel`):

* ``overreach``: "call every write tool the request could touch": the reference, the writes its rules forbid,
  and every write tool of the environment called with the values the request names (its arguments and the
  fields of the rows it read) fails;
* ``blind`` (a task with a forbidden write): "do everything the request asks without reading anything": the
  reference's writes and the forbidden ones, and no read, fails.

A refusal (``verify.derive.is_refusal``: the request asks only for a write the policy forbids) keeps the initial
state as its gold and its reply says why (the answer: the value the forbidding rule checks, as the evidence read
shows it, ``verify.derive.refusal_reason``): ``initial_state`` and ``no_op`` (which keep the state but give no
reason) must fail, and ``blind`` (the forbidden write done) fails on the row its goals pin. A bank pairs each with a
decide task whose write is allowed (``pipeline.stages.tasks.planner.decide_fits``): a blind writer passes that one.

A destructive trajectory whose writes all bounce off guards changes nothing beyond the reference;
that proof is then vacuous (recorded as such, not as a failure).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.ir import Environment, Task, TaskMetadata, ToolCall
from pipeline.runtime import engine, reward
from pipeline.runtime.replay import Run, call_once, describe_call, fresh, play
from pipeline.runtime.state import Snapshot, TableInfo, diff, id_table, qi, sort_key
from verify.derive import COUNT, forbidden_calls, is_refusal, tables_used
from verify.evaluate import evaluate, render_answer

ProofName = Literal["reference", "initial_state", "no_op", "wrong_answer", "destructive", "destructive_after_reference",
                    "overreach", "blind"]
CALLS_PER_TOOL = 6
MAX_BROAD_CALLS = 48
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


class ProofResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: ProofName
    ok: bool
    detail: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class ProofReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ok: bool
    results: list[ProofResult]

    def failed(self) -> list[ProofResult]:
        return [r for r in self.results if not r.ok]

    def reason(self) -> str:
        return "; ".join(f"{r.name}: {r.detail}" for r in self.failed()) or "all proofs hold"


def prove(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> ProofReport:
    """Run every proof of ``task`` on fresh instances of ``env``."""
    v = task.verifier
    results: list[ProofResult] = []
    ref_calls = list(task.reference_solution)

    given = render_answer(v.answer) if v.answer is not None else None
    with fresh(env, initial_db) as run:
        play(run, ref_calls, changes=False)
        if run.error:
            results.append(ProofResult(name="reference", ok=False, detail=f"reference replay failed: {run.error}"))
        else:
            ev = evaluate(v, run.inst.conn, initial=run.initial, answer=given, infos=run.infos,
                          written=run.written)
            detail = "reference replay passes the verifier" if ev.passed else "reference replay fails: " + ev.summary()
            ok = ev.passed
            if ok and v.answer is not None and not _grounded(v.answer, run, task.metadata):
                ok, detail = False, f"the expected answer {given!r} is not in what the reference read"
            results.append(ProofResult(name="reference", ok=ok, detail=detail,
                                       evidence={"changes": [c.to_json() for c in run.changes()][:20]}))
        ref_final = run.final()

    refusal = is_refusal(v, task.metadata.get("rules") or [])
    with fresh(env, initial_db) as run:
        ev = evaluate(v, run.inst.conn, initial=run.initial, answer=None, infos=run.infos,
                      written=run.written)
        ok, detail = not ev.passed, "initial state fails the verifier: " + ev.summary()
        if ev.passed:
            detail = "the verifier already holds on the initial state (the task asks for nothing)"
        if refusal and not ev.passed:  # its state is the initial one: the reason its reply gives is what fails
            detail = "a refusal: the initial state without the reason fails the verifier: " + ev.summary()
        results.append(ProofResult(name="initial_state", ok=ok, detail=detail))

    reads = [c for c in ref_calls if _kind(env, c.tool) == "read"]
    with fresh(env, initial_db) as run:
        play(run, reads, stop_on_error=False, changes=False)
        ev = evaluate(v, run.inst.conn, initial=run.initial, answer="I could not complete the task.", infos=run.infos,
                      written=run.written)
        no_op_ok = not ev.passed if refusal else ev.partial == 0.0
        detail = ("a read-only trajectory earns reward" if ev.partial else "read-only trajectory scores 0: " + ev.summary())
        if refusal:  # reading keeps the state it pins; a reply that does not say why still fails
            detail = ("a refusal: reading and replying without the reason passes" if ev.passed else
                      "a refusal: reading and replying without the reason fails: " + ev.summary())
        results.append(ProofResult(
            name="no_op", ok=no_op_ok, detail=detail,
            evidence={"calls": [describe_call(c) for c in reads], "partial": ev.partial},
        ))

    if v.answer is not None:
        wrong = wrong_answer(v.answer)
        with fresh(env, initial_db) as run:
            play(run, ref_calls, changes=False)
            ev = evaluate(v, run.inst.conn, initial=run.initial, answer=wrong, infos=run.infos,
                          written=run.written)
        results.append(ProofResult(name="wrong_answer", ok=not ev.passed,
                                   detail=(f"wrong answer {wrong!r} " + ("passes" if ev.passed else "fails"))))

    with fresh(env, initial_db) as run:
        broad = broad_calls(env, run, ref_calls)
    trajectories: list[tuple[ProofName, list[ToolCall]]] = [("destructive", broad),
                                                            ("destructive_after_reference", ref_calls + broad)]
    for name, calls in trajectories:
        with fresh(env, initial_db) as run:
            play(run, calls, stop_on_error=False, changes=False)
            final = run.final()
            ev = evaluate(v, run.inst.conn, initial=run.initial, answer=given, infos=run.infos,
                          written=run.written)
            landed = sum(1 for r in run.records[len(calls) - len(broad):] if r.ok)
        baseline = ref_final if name == "destructive_after_reference" else run.initial
        extra = diff(baseline, final)
        evidence = {"broad_calls": len(broad), "succeeded": landed, "extra_changes": len(extra)}
        if not extra:
            results.append(ProofResult(name=name, ok=True, evidence=evidence,
                                       detail="vacuous: no broad write changed the state"))
        else:
            results.append(ProofResult(
                name=name, ok=not ev.passed, evidence=evidence,
                detail=(f"{landed} broad writes changed {len(extra)} rows and the verifier still passes"
                        if ev.passed else f"{landed} broad writes changed {len(extra)} rows; verifier fails"),
            ))
    if task.metadata.get("rules"):
        results += rule_panel(env, task, initial_db=initial_db)
    return ProofReport(ok=all(r.ok for r in results), results=results)


# ---------------------------------------------------------------- the rules' adversaries


def forbidden_writes(task: Task) -> list[ToolCall]:
    """The writes a rule-bound task's rules forbid (``metadata.rules``), once each, in order."""
    return forbidden_calls(task.metadata.get("rules") or [])


def _variants(tool: Any, known: dict[str, Any]) -> list[dict[str, Any]]:
    """Argument sets of ``tool`` from the values a request names (``known``): all of them as named, then each
    parameter in turn set to another value (another enum value, the number plus one, the text with a suffix).
    Empty when a required parameter has no known value and no enum."""
    base: dict[str, Any] = {}
    for p in tool.params:
        if p.name in known:
            value, err = engine.check_value(p.model_dump(mode="json"), known[p.name])
            if err is None:
                base[p.name] = value
                continue
        if p.enum:
            base[p.name] = p.enum[0]
        elif p.required:
            return []
    out = [base]
    for p in tool.params:
        if p.name not in base:
            continue
        v = base[p.name]
        if p.enum:
            other = [e for e in p.enum if e != v][:1]
        elif isinstance(v, bool):
            other = [not v]
        elif isinstance(v, (int, float)):
            other = [v + 1]
        elif isinstance(v, str) and not _DATE.match(v):
            other = [v + " II"]
        else:
            other = []
        for o in other:
            value, err = engine.check_value(p.model_dump(mode="json"), o)
            if err is None:
                out.append({**base, p.name: value})
    return out


def _known(run: Run) -> dict[str, Any]:
    """The values a trajectory named or read: its arguments, then the fields of the rows it got back (first seen
    wins)."""
    known: dict[str, Any] = {}
    for rec in run.records:
        for k, v in rec.call.arguments.items():
            known.setdefault(k, v)
    for rec in run.records:
        result = rec.response.get("result")
        for row in (result if isinstance(result, list) else [result])[:1]:
            if isinstance(row, dict):
                for k, v in row.items():
                    if not isinstance(v, (dict, list)):
                        known.setdefault(k, v)
    return known


def overreach_calls(env: Environment, task: Task, *,
                    initial_db: str | Path | None = None) -> tuple[list[ToolCall], list[ToolCall]]:
    """The reference as it replays (concrete arguments), and what an agent that does everything adds to it: the
    writes the task's rules forbid, then every write tool of the environment called on the values the request
    names (its arguments and the fields of the rows it read), each with the first of its argument sets
    (:func:`_variants`) that changes the state where it is called (a tool none of whose sets does is left out)."""
    concrete, extra, _ = _overreach(env, task, initial_db)
    return concrete, extra


def _overreach(env: Environment, task: Task,
               initial_db: str | Path | None) -> tuple[list[ToolCall], list[ToolCall], Snapshot]:
    """:func:`overreach_calls`, and the state the reference leaves."""
    forbidden = forbidden_writes(task)
    extra: list[ToolCall] = list(forbidden)
    with fresh(env, initial_db) as run:
        play(run, list(task.reference_solution), changes=False)
        concrete = [r.call for r in run.records]
        known = _known(run)
        ref_final = run.final()
        play(run, forbidden, stop_on_error=False, changes=False)
        for tool in sorted((t for t in env.tools if t.kind == "write"), key=lambda t: t.name):
            for args in _variants(tool, known):
                call = ToolCall(tool=tool.name, arguments=args)
                if call in concrete or call in extra:
                    continue
                before = run.final()
                if call_once(run, call, changes=False).ok and diff(before, run.final()):
                    extra.append(call)
                    break
    return concrete, extra, ref_final


def blind_calls(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> list[ToolCall]:
    """What an agent that does everything the request asks without reading anything calls: the reference's writes
    (with the values the request names) and the writes the rules forbid."""
    with fresh(env, initial_db) as run:
        play(run, list(task.reference_solution), changes=False)
        concrete = [r.call for r in run.records]
    return _blind(env, task, concrete)


def _blind(env: Environment, task: Task, concrete: list[ToolCall]) -> list[ToolCall]:
    return [c for c in concrete if _kind(env, c.tool) == "write"] + forbidden_writes(task)


def rule_panel(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> list[ProofResult]:
    """``overreach`` and (with a forbidden write) ``blind`` for a rule-bound task: each must fail the verifier. An
    overreach whose extra writes change nothing passes, and so fails the proof: an agent that does everything
    would earn the task's reward."""
    v = task.verifier
    given = render_answer(v.answer) if v.answer is not None else None
    concrete, extra, ref_final = _overreach(env, task, initial_db)
    panel: list[tuple[ProofName, list[ToolCall], int]] = [("overreach", concrete + extra, len(concrete))]
    forbidden = forbidden_writes(task)
    if forbidden:
        blind = _blind(env, task, concrete)
        panel.append(("blind", blind, len(blind) - len(forbidden)))
    out: list[ProofResult] = []
    for name, calls, n_base in panel:
        with fresh(env, initial_db) as run:
            play(run, calls, stop_on_error=False, changes=False)
            landed = sum(1 for r in run.records[n_base:] if r.ok)
            ev = evaluate(v, run.inst.conn, initial=run.initial, answer=given, infos=run.infos,
                          written=run.written)
            changed = diff(ref_final, run.final())
        more = calls[n_base:]
        evidence = {"calls": [describe_call(c) for c in more], "succeeded": landed, "extra_changes": len(changed)}
        what = ("the reference, the forbidden writes and every write tool on the request's values" if name ==
                "overreach" else "the writes asked for, forbidden ones included, with no read")
        out.append(ProofResult(name=name, ok=not ev.passed, evidence=evidence,
                               detail=f"{what} ({landed} of {len(more)} extra calls succeeded) "
                                      + ("still passes the verifier" if ev.passed else "fails the verifier")))
    return out


def _kind(env: Environment, tool: str) -> str:
    try:
        return env.tool(tool).kind
    except KeyError:
        return "unknown"


def _grounded(answer: Any, run: Run, metadata: TaskMetadata) -> bool:
    """A looked-up answer appears in what the reference read; a computed one (count, sum: the planner
    computed it from these very results) is checked by the verifier alone."""
    spec = reward.expected_answer(answer)
    if metadata.get("shape", "lookup") != "lookup" or metadata.get("answer_field") == COUNT:
        return True
    values = spec["value"] if spec["type"] == "list" else [spec["value"]]
    text = json.dumps([r.response.get("result") for r in run.records], ensure_ascii=False)
    return all(json.dumps(v, ensure_ascii=False).strip('"') in text for v in values if not isinstance(v, bool))


def wrong_answer(answer: Any) -> str:
    """A plausible but wrong answer: the number shifted, yes/no flipped, another candidate named."""
    spec = reward.expected_answer(answer)
    value = spec.get("value")
    if spec["type"] == "boolean":
        return "no" if value else "yes"
    if spec["type"] == "number":
        return str(float(value or 0) + 1).removesuffix(".0")
    if spec["type"] == "date":
        return "1999-12-31"
    others = spec.get("others") or []
    return str(others[0]) if others else "unknown"


# ---------------------------------------------------------------- destructive trajectories


def _column_values(run: Run, table: str, column: str, limit: int = 8) -> list[Any]:
    col = "rowid" if column == "rowid" else qi(column)
    rows = run.inst.conn.execute(
        f"SELECT DISTINCT {col} FROM {qi(table)} WHERE {col} IS NOT NULL ORDER BY {col} LIMIT {limit}"
    ).fetchall()
    return [r[0] for r in rows]


def _candidates(env: Environment, run: Run, tool_name: str, param: dict[str, Any], ref_values: list[Any]) -> list[Any]:
    infos: dict[str, TableInfo] = run.infos
    name = param["name"]
    values: list[Any] = list(param.get("enum") or [])
    if not values:
        used = tables_used(env, [tool_name]) or sorted(infos)
        for table in used:
            info = infos.get(table)
            if info is None:
                continue
            if name in info.columns and name != "id":
                values += _column_values(run, table, name)
            if id_table({table: info}, name) == table:
                values += _column_values(run, table, info.key[0])
        values = sorted(set(values), key=sort_key)
    values = values or list(ref_values)
    if param["type"] == "string" and not param.get("enum") and values and isinstance(values[0], str):
        values.append(values[0] + "-x")  # a fresh value, so unique columns can still change
    if not values and param.get("required", True):
        defaults: dict[str, list[Any]] = {"integer": [1, 2, 3], "number": [1.0, 2.0], "boolean": [True, False],
                                          "string": ["x"]}
        values = defaults[param["type"]]
    checked = []
    for val in values:
        ok, err = engine.check_value(param, val)
        if err is None and ok not in checked:
            checked.append(ok)
    return checked


def broad_calls(env: Environment, run: Run, reference: list[ToolCall]) -> list[ToolCall]:
    """Broad writes through the tools: every write tool on up to 6 argument sets drawn from real rows (fewer
    each when there are many write tools, never fewer than 2: every write tool is tried)."""
    out: list[ToolCall] = []
    writers = sorted((t for t in env.tools if t.kind == "write"), key=lambda t: t.name)
    per_tool = max(2, min(CALLS_PER_TOOL, MAX_BROAD_CALLS // max(1, len(writers))))  # every write tool is tried
    for tool in writers:
        spec = tool.model_dump(mode="json")
        ref_args = [c.arguments for c in reference if c.tool == tool.name]
        cands = {}
        for p in spec["params"]:
            c = _candidates(env, run, tool.name, p, [a[p["name"]] for a in ref_args if p["name"] in a])
            if c:
                cands[p["name"]] = c
        if any(p.get("required", True) and p["name"] not in cands for p in spec["params"]):
            continue
        n = min(per_tool, max((len(c) for c in cands.values()), default=1))
        for i in range(n):
            args = {k: c[(i + j) % len(c)] for j, (k, c) in enumerate(cands.items())}
            out.append(ToolCall(tool=tool.name, arguments=args))
    return out
