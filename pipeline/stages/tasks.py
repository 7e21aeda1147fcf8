"""The task-generation agent: the LLM proposes a small structured thing, code derives the rest.

For each planned task, code picks the kind and the tools (a mix of lookups, creates, updates,
deletes and multi-step chains) and shows the real rows those tools touch. The LLM fills in the
arguments (a schema built from the tool specs, ids limited to existing rows) and writes the request
as a user would. Code then replays the calls on a fresh instance, derives the verifier from the
state diff (``verify.derive``), lints the wording and runs the proofs (``verify.proofs``). Any
failure goes back to the LLM with the evidence, a bounded number of times; then the plan is
rejected with the reason.

Entry points: :func:`generate_tasks` (an environment -> tasks + rejections), :func:`revise_task`
(a task the tester/checker found badly worded -> a reworded task) and :func:`rederive_task` (a task
on a repaired environment -> its verifier derived again).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Rejection, Task, ToolCall
from pipeline.llm.sampling import Escalating
from pipeline.prompts import prompt_hashes
from pipeline.runtime import engine
from pipeline.settings import TaskSettings as TaskSettings
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, render_section
from verify.derive import Derivation, derive_verifier, tables_used
from verify.evaluate import answer_items
from verify.models import args_model, catalog, clean_args
from verify.proofs import prove
from verify.replay import describe_call, fresh
from verify.rows import Lookup, answer_columns, plan_lookup, row_labels, shown_rows
from verify.state import Change, TableInfo, id_table, qi, singular_forms

STAGE = "tasks"
Kind = Literal["lookup", "create", "update", "delete", "multi_step"]
KIND_CYCLE: tuple[Kind, ...] = ("lookup", "update", "create", "multi_step", "delete")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_NUM = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Plan:
    index: int
    kind: Kind
    tools: tuple[str, ...]

    def label(self) -> str:
        return f"task {self.index} ({self.kind}: {', '.join(self.tools)})"


# ---------------------------------------------------------------- planning


def tool_op(env: Environment, name: str) -> str:
    """``read``, ``create``, ``update`` or ``delete``: what a tool's first write does."""
    tool = env.tool(name)
    if tool.kind == "read":
        return "read"
    for step in tool.steps:
        if step.kind == "write":
            verb = engine.leading_keyword(step.sql)
            if verb == "WITH":
                m = re.search(r"\b(INSERT|REPLACE|UPDATE|DELETE)\b", step.sql, re.I)
                verb = m.group(1).upper() if m else verb
            return {"INSERT": "create", "REPLACE": "create", "UPDATE": "update", "DELETE": "delete"}.get(verb, "update")
    return "update"


def plan_tasks(env: Environment, n: int) -> list[Plan]:
    """``n`` plans cycling through the kinds this environment's tools support."""
    by_op: dict[str, list[str]] = {}
    for t in sorted(env.tools, key=lambda t: t.name):
        by_op.setdefault(tool_op(env, t.name), []).append(t.name)
    writes = sorted(name for op, names in by_op.items() if op != "read" for name in names)
    reads = by_op.get("read", [])
    counters: dict[str, int] = {}
    plans: list[Plan] = []
    i = 0
    while len(plans) < n and i < n * len(KIND_CYCLE):
        kind = KIND_CYCLE[i % len(KIND_CYCLE)]
        i += 1
        c = counters.get(kind, 0)
        tools: tuple[str, ...] | None = None
        if kind == "lookup" and reads:
            tools = (reads[c % len(reads)],)
        elif kind in ("create", "update", "delete") and by_op.get(kind):
            names = by_op[kind]
            tools = (names[c % len(names)],)
        elif kind == "multi_step" and len(writes) >= 2:
            a = writes[c % len(writes)]
            b = writes[(c + 1 + c // len(writes)) % len(writes)]
            tools = (a, b) if a != b else (a, writes[(writes.index(a) + 1) % len(writes)])
        elif kind == "multi_step" and writes and reads:
            tools = (reads[c % len(reads)], writes[c % len(writes)])
        if tools is None:
            continue
        counters[kind] = c + 1
        plans.append(Plan(len(plans) + 1, kind, tools))
    return plans


# ---------------------------------------------------------------- prompt and reply model


Refs = dict[tuple[str, str], dict[str, Any]]


def _id_choices(env: Environment, tool_name: str, conn: Any, infos: dict[str, TableInfo],
                refs: Refs, notes: list[str]) -> dict[str, list[Any]]:
    """Allowed values of id parameters: the rows' labels when they have unique ones (mapped back to ids
    by code, so the model picks rows by the names it then writes), else the existing ids."""
    out: dict[str, list[Any]] = {}
    for p in env.tool(tool_name).params:
        t = id_table(infos, p.name)
        if not t or p.type != "integer":
            continue
        labelled = row_labels(conn, infos[t])
        if labelled is not None:
            col, mapping = labelled
            refs[(tool_name, p.name)] = mapping
            out[p.name] = list(mapping)
            note = f"{p.name}: give the {col} of the {t} row (code turns it into the id)"
            if note not in notes:
                notes.append(note)
            continue
        key = infos[t].key[0]
        vals = [r[0] for r in conn.execute(f"SELECT {qi(key)} FROM {qi(t)} ORDER BY 1 LIMIT 200")]
        if vals and all(isinstance(v, int) for v in vals):
            out[p.name] = vals
    tool = env.tool(tool_name)
    if tool.kind == "read":  # a lookup's text arguments are real values of the column they are named after
        for p in tool.params:
            if p.type != "string" or p.enum or p.name in out:
                continue
            for t in tables_used(env, [tool_name]):
                if p.name in infos[t].columns:
                    vals = [r[0] for r in conn.execute(
                        f"SELECT DISTINCT {qi(p.name)} FROM {qi(t)} WHERE typeof({qi(p.name)}) = 'text' ORDER BY 1 LIMIT 201")]
                    if 0 < len(vals) <= 200:
                        out[p.name] = vals
                    break
    return out


def proposal_model(env: Environment, plan: Plan, conn: Any, infos: dict[str, TableInfo]) -> tuple[type[BaseModel], Refs, list[str]]:
    """The reply schema for ``plan``, the label -> id maps of its id parameters, and notes for the prompt."""
    refs: Refs = {}
    notes: list[str] = []
    # the calls first, then the user's words: having just picked 'Matilda', the model names it
    fields: dict[str, Any] = {}
    for name in plan.tools:
        fields[name] = (args_model(env.tool(name), _id_choices(env, name, conn, infos, refs, notes)), ...)
    if all(tool_op(env, n) == "read" for n in plan.tools):
        last = env.tool(plan.tools[-1])
        searched = {p.name for p in last.params}
        cols = answer_columns(engine.result_columns(conn, last.returns.sql), searched) if last.returns else []
        fields["answer_field"] = (Literal[tuple(cols)] if cols else str, ...)  # type: ignore[valid-type]
    fields["user_request"] = (str, Field(..., min_length=15, max_length=400))
    model = create_model("TaskProposal", __config__=ConfigDict(extra="forbid"), **fields)  # type: ignore[call-overload]
    return model, refs, notes


def reply_calls(reply: BaseModel, plan: Plan, refs: Refs) -> list[ToolCall]:
    """The tool calls a proposal stands for (row labels turned back into ids)."""
    calls = []
    for t in plan.tools:
        args = clean_args(getattr(reply, t))
        for (tool, param), mapping in refs.items():
            if tool == t and param in args:
                args[param] = mapping[args[param]]
        calls.append(ToolCall(tool=t, arguments=args))
    return calls


def proposal_messages(env: Environment, plan: Plan, conn: Any, infos: dict[str, TableInfo], settings: TaskSettings,
                      notes: list[str] | None = None) -> list[dict[str, Any]]:
    user = render_section(
        "tasks", "propose",
        scenario=f"{env.scenario.name}: {env.scenario.description}",
        tools=catalog(env, list(plan.tools)) if len(plan.tools) == 1 else
        "\n".join(f"{i}. {catalog(env, [t])[2:]}" for i, t in enumerate(plan.tools, 1)),
        rows=shown_rows(env, list(plan.tools), plan.index, conn, infos, settings.rows_per_table),
        refs=("Arguments that name a row:\n" + "\n".join(f"- {n}" for n in notes)) if notes else "",
        kind_hint=render_section("tasks", f"hint_{plan.kind}"),
    )
    return [{"role": "system", "content": render_section("tasks", "system")}, {"role": "user", "content": user}]


# ---------------------------------------------------------------- checks on a proposal


def _row_names(conn: Any, info: TableInfo, key: Any) -> list[str]:
    row = conn.execute(f"SELECT * FROM {qi(info.name)} WHERE {qi(info.key[0])} = ?", (key,)).fetchone()
    if row is None:
        return []
    return [v for v in row if isinstance(v, str) and len(v) >= 3 and not _DATE.match(v) and "@" not in v] or \
        [v for v in row if isinstance(v, str) and len(v) >= 3]


def _mentions(text: str, value: str) -> bool:
    norm = lambda s: re.sub(r"\s+", " ", re.sub(r"[\"'`\u2018\u2019\u201c\u201d]", "", s.casefold())).strip()  # noqa: E731
    return norm(value) in norm(text)


def lint_instruction(env: Environment, calls: list[ToolCall], instruction: str, answer: str | None, conn: Any,
                     infos: dict[str, TableInfo]) -> str | None:
    """Wording problems a user request must not have (``conn`` holds the initial state)."""
    numbers = {float(n) for n in _NUM.findall(instruction.replace(",", ""))}
    for t in env.tools:
        if _mentions(instruction, t.description) or _mentions(t.description, instruction):
            return f"the request repeats the description of tool {t.name}; write what this user wants about these rows"
    for table, info in infos.items():
        labelled = row_labels(conn, info) if info.int_pk else None
        if labelled is None:
            continue
        by_key = {v: k for k, v in labelled[1].items()}
        for noun in sorted(singular_forms(table)):
            for m in re.finditer(rf"\b{re.escape(noun)}\s+(?:id\s*|#\s*|number\s+|no\.?\s*)?(\d+)\b", instruction, re.I):
                if int(m.group(1)) in by_key:
                    return (f"the request says {m.group(0)!r}, an id users do not know; name the {noun} instead "
                            f"(for example {by_key[int(m.group(1))]!r})")
    question = all(env.tool(c.tool).kind == "read" for c in calls)
    for call in calls:
        write = env.tool(call.tool).kind == "write"
        params = {p.name: p for p in env.tool(call.tool).params}
        for k, v in call.arguments.items():
            ref = id_table(infos, k)
            if ref and isinstance(v, int):
                if re.search(rf"(\bids?\b|#|\bnumber\b|\bno\.)\s*:?\s*{v}\b", instruction, re.I):
                    return f"the request mentions {k} {v} as an id; users do not know ids, name the {ref} row instead"
                names = _row_names(conn, infos[ref], v)
                if names and not any(_mentions(instruction, n) for n in names):
                    return (f"the request must name the {ref} row with {k}={v} by its name or title "
                            f"(for example {names[0]!r}), not by its id")
            elif (write or question) and isinstance(v, str) and not _mentions(instruction, v) \
                    and not (params.get(k) and params[k].enum and not write):
                return f"the request must state the {k} {v!r} (the assistant cannot guess it)"
            elif write and isinstance(v, int | float) and not isinstance(v, bool) and float(v) not in numbers \
                    and not (params.get(k) and params[k].enum):
                return f"the request must state the {k} {v} (the assistant cannot guess it)"
    if answer is not None:
        items = answer_items(answer)
        if items and all(_mentions(instruction, i) for i in items if i not in ("yes", "no")) and \
                any(i not in ("yes", "no") for i in items):
            return (f"the question gives its answer away ({answer!r}); ask about another field of the row "
                    f"than the one that names it")
    return None


def classify(env: Environment, calls: list[ToolCall], changes: tuple[Change, ...]) -> Kind:
    if len(calls) > 1:
        return "multi_step"
    if not changes:
        return "lookup"
    ops = {c.op for c in changes}
    if ops == {"insert"}:
        return "create"
    if ops == {"delete"}:
        return "delete"
    if ops == {"update"}:
        return "update"
    op = tool_op(env, calls[0].tool)
    return op if op in ("create", "update", "delete") else "multi_step"  # type: ignore[return-value]


def make_task(env: Environment, d: Derivation, instruction: str, *, answer_field: str | None,
              provenance: dict[str, Any], plan: Plan | None = None) -> Task:
    assert d.verifier is not None
    calls = list(d.calls)
    tools_used = list(dict.fromkeys(c.tool for c in calls))
    metadata: dict[str, Any] = {"tools_used": tools_used, "steps": len(calls),
                                "tables_changed": d.verifier.mutable_tables}
    if answer_field:
        metadata["answer_field"] = answer_field
    if d.notes:
        metadata["derivation_notes"] = list(d.notes)
    if plan is not None:
        metadata["plan"] = plan.index
    return Task(
        task_id=Task.make_id(env.env_id, instruction, calls, d.verifier),
        env_id=env.env_id,
        instruction=instruction,
        tools=[t.openai_schema() for t in env.tools],
        reference_solution=calls,
        verifier=d.verifier,
        kind=classify(env, calls, d.changes),
        metadata=metadata,
        provenance=provenance,
    )


def _provenance(client: Any, replies: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"stage": STAGE, "model": getattr(client, "model", "?"), "prompt_sha": prompt_hashes().get("tasks"),
            "llm_replies": replies, **(extra or {})}


def _call_key(calls: Any) -> str:
    return "calls:" + canonical_json([c.model_dump(mode="json") for c in calls])


def _effect_key(verifier: Any, calls: Any) -> str:
    """Duplicates in effect: the same end state, or the same answer read by the same last call."""
    if verifier.answer is not None:
        return "answer:" + canonical_json([calls[-1].model_dump(mode="json"), verifier.answer])
    return "state:" + canonical_json(verifier)


def build_and_prove(env: Environment, calls: list[ToolCall], instruction: str, *, answer_field: str | None,
                    initial_db: str | Path | None, provenance: dict[str, Any], plan: Plan | None = None,
                    seen: set[str] | None = None) -> tuple[Task | None, str | None]:
    """Replay, derive, lint and prove one proposal: the task, or the problem to feed back."""
    d = derive_verifier(env, calls, initial_db=initial_db, answer_field=answer_field)
    if d.error or d.verifier is None:
        hint = "; choose a new value that differs from the current one" if "changed nothing" in (d.error or "") else \
            "; choose other values from the data"
        return None, f"replaying the calls failed: {d.error}{hint}"
    if seen is not None and (_call_key(d.calls) in seen or _effect_key(d.verifier, d.calls) in seen):
        return None, "another task already does exactly this; choose different rows or values"
    with fresh(env, initial_db) as run:
        problem = lint_instruction(env, list(d.calls), instruction, d.verifier.answer, run.inst.conn, run.infos)
    if problem:
        return None, problem
    task = make_task(env, d, instruction, answer_field=answer_field, provenance=provenance, plan=plan)
    report = prove(env, task, initial_db=initial_db)
    if not report.ok:
        return None, "the task fails a check: " + report.reason()
    return task, None


class Revision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_request: str = Field(..., min_length=15, max_length=400)


def lookup_messages(env: Environment, lookup: Lookup) -> list[dict[str, Any]]:
    scenario, tool = f"{env.scenario.name}: {env.scenario.description}", catalog(env, [lookup.call.tool])
    if lookup.counts:
        what = env.tool(lookup.call.tool).description.rstrip(".")
        what += f" (for {lookup.subject})" if lookup.subject else ""
        user = render_section("tasks", "phrase_count", scenario=scenario, tool=tool, what=what)
    else:
        user = render_section("tasks", "phrase_lookup", scenario=scenario, tool=tool,
                              field=lookup.answer_field.replace("_", " "), subject=lookup.subject)
    return [{"role": "system", "content": render_section("tasks", "system")}, {"role": "user", "content": user}]


# ---------------------------------------------------------------- entry points


def _checker(env: Environment, plan: Plan, initial_db: str | Path | None, prov: dict[str, Any], seen: set[str], *,
             lookup: Lookup | None = None, refs: Refs | None = None) -> Callable[[Any], tuple[Task | None, str | None]]:
    def check(reply: Any) -> tuple[Task | None, str | None]:
        field: str | None
        if lookup is not None:
            calls, field = [lookup.call], lookup.answer_field
        else:
            calls, field = reply_calls(reply, plan, refs or {}), getattr(reply, "answer_field", None)
        return build_and_prove(env, calls, reply.user_request, answer_field=field, initial_db=initial_db,
                               provenance=prov, plan=plan, seen=seen)
    return check


def generate_tasks(
    env: Environment,
    client: Any,
    *,
    n: int | None = None,
    initial_db: str | Path | None = None,
    settings: TaskSettings | None = None,
) -> StageResult[list[Task]]:
    """Plan ``n`` tasks, ask the LLM for each, keep those that replay, lint and prove."""
    settings = settings or TaskSettings()
    plans = plan_tasks(env, n or settings.n_tasks)
    tasks: list[Task] = []
    rejections: list[Rejection] = []
    seen: set[str] = set()
    replies = 0
    if not plans:
        return StageResult([], (Rejection(stage=STAGE, item=env.env_id, reason="the environment has no tools to build tasks on"),))
    with fresh(env, initial_db) as run:
        conn, infos = run.inst.conn, run.infos
        for plan in plans:
            prov = _provenance(client, 0, {"plan": plan.label()})
            lookup = plan_lookup(env, plan.tools[0], plan.index, run) if plan.kind == "lookup" else None
            if lookup is not None:  # code chose the row and the field; the model phrases the question
                model: type[BaseModel] = Revision
                messages = lookup_messages(env, lookup)
                check = _checker(env, plan, initial_db, prov, seen, lookup=lookup)
            else:
                model, refs, notes = proposal_model(env, plan, conn, infos)
                messages = proposal_messages(env, plan, conn, infos, settings, notes)
                check = _checker(env, plan, initial_db, prov, seen, refs=refs)

            out = ask_with_feedback(
                Escalating(client, settings.retry_temperature), model, messages, check, stage=STAGE,
                max_attempts=settings.max_attempts, max_tokens=settings.max_tokens,
                feedback=lambda e: render_section("tasks", "feedback", error=e),
            )
            replies += out.attempts
            if out.value is None:
                rejections.append(Rejection(stage=STAGE, item=plan.label(), reason=out.error or "no task",
                                            evidence={"replies": out.attempts, "last_reply": _last_reply(out.messages)}))
                continue
            task = out.value.model_copy(update={"provenance": {**out.value.provenance, "llm_replies": out.attempts}})
            seen |= {_call_key(task.reference_solution), _effect_key(task.verifier, task.reference_solution)}
            tasks.append(task)
    return StageResult(tasks, tuple(rejections), attempts=replies)


def _last_reply(messages: tuple[dict[str, Any], ...]) -> str:
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return str(m.get("content"))[:1000]
    return ""


def revise_task(
    env: Environment,
    task: Task,
    problem: str,
    client: Any,
    *,
    initial_db: str | Path | None = None,
    settings: TaskSettings | None = None,
) -> tuple[Task | None, str | None]:
    """Reword ``task`` after the checker blamed its wording (same calls; verifier derived again)."""
    settings = settings or TaskSettings()
    answer_field = task.metadata.get("answer_field")
    calls = "; ".join(describe_call(c) for c in task.reference_solution)
    messages = [
        {"role": "system", "content": render_section("tasks", "system")},
        {"role": "user", "content": render_section(
            "tasks", "revise", scenario=f"{env.scenario.name}: {env.scenario.description}",
            instruction=task.instruction, calls=calls, problem=problem)},
    ]

    def check(reply: Revision) -> tuple[Task | None, str | None]:
        if reply.user_request.strip() == task.instruction.strip():
            return None, "the request is unchanged; reword it"
        prov = {**task.provenance, "revised": task.provenance.get("revised", 0) + 1, "revised_because": problem[:300]}
        return build_and_prove(env, list(task.reference_solution), reply.user_request, answer_field=answer_field,
                               initial_db=initial_db, provenance=prov)

    out = ask_with_feedback(Escalating(client, settings.retry_temperature), Revision, messages, check, stage=STAGE, max_attempts=settings.max_attempts,
                            max_tokens=settings.max_tokens,
                            feedback=lambda e: render_section("tasks", "feedback", error=e))
    if out.value is not None and "plan" in task.metadata:
        out_task = out.value.model_copy(update={"metadata": {**out.value.metadata, "plan": task.metadata["plan"]}})
        return out_task, None
    return out.value, out.error


def rederive_task(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> tuple[Task | None, str | None]:
    """The same request and calls on a changed environment: derive the verifier again and prove it."""
    task2, err = build_and_prove(env, list(task.reference_solution), task.instruction,
                                 answer_field=task.metadata.get("answer_field"), initial_db=initial_db,
                                 provenance={**task.provenance, "rederived": True})
    if task2 is not None:
        task2 = task2.model_copy(update={"metadata": {**task.metadata, **task2.metadata}, "difficulty": task.difficulty})
    return task2, err
