"""Stage 4, tools: typed tools whose implementation is a declarative SQL program (``pipeline.ir.Tool``).

``generate_tools(scenario, intents, tables, seed, client, settings) -> StageResult[ir.Environment]``: the
environment with its tools, and with the schema and seeded rows as the tools needed them (see below).

First the declared natural keys are checked against the seeded rows (``dbmodel.keys.settle_natural_keys``). Then the
tools are planned (name, read/write, purpose, the tables each uses, the goals each serves) over the schema and
its natural keys: read tools that find a row by what users know and give its id, read tools that list the rows
of another row, write tools that take ids. With many tools asked for (``tools_max`` above ``PLAN_CHUNK``) the
plan is asked table by table. With ``goal_coverage``, the scenario's goals that no planned write tool serves (MiniLM
similarity of the goal with the tool's name and purpose, one goal per tool: ``pipeline.meaning.goals``) are named to
the planner once, in one more plan call for their write tools (:func:`plan_goal_tools`), and the goals the working
tools still do not serve are recorded at the end (:func:`goal_notes`). Each tool is then written in its own call (the DDL is in every prompt; the
prompt's fixed part comes first so the server's prompt cache reuses it). A reply maps onto ``ir.Tool`` (``pipeline.stages.tools.replies``); slips
are repaired by reading the SQL with a parser, not names: a placeholder that is no parameter becomes one typed
like the column it meets, and a parameter written into or compared with a ``CHECK (c IN (...))`` column gets
that enum.

Each tool is then checked for real: ``checks.check_tool`` (every statement prepared under SQLite's authorizer
against the schema; non-deterministic SQL and arithmetic on dates (the clock, columns whose seeded values are dates)
refused), then execution on the seeded rows
(``pipeline.stages.tools.exercise``: a write must store its arguments as given). A create tool's conflict guard is
tried alone on inputs made from the rows (``pipeline.stages.tools.guards``): one that refuses every input it should
let through (an OR where AND was meant) or lets through every copy of an existing row is told to the LLM once, the
tool kept without it meanwhile and, when the next reply is no better, kept so with a note naming the guard and the
inputs tried; a parameter whose value reaches no write or result is told and noted the same way (the tool is kept
with it). Once every tool is written, each guard of a create tool is replayed on the calls the seeded rows of its
table were made by (``pipeline.stages.tools.seeded_calls``): one refusing most of them contradicts the state and is
dropped with a note; a column the amendments added is also returned by the read tools that list every other
column of its table (``amend_schema.shown``); a write that draws an amount down gets a guard holding it to the
amount (``pipeline.stages.tools.amount_guards``), and a ``:last_id`` that names an earlier INSERT's row (a child
written after a second INSERT) is pinned to that row (``pipeline.stages.tools.last_ids``). When the tool needs something the
schema lacks (a value its CHECK list does not allow, a column), the schema is amended (``pipeline.stages.tools.amend_schema``),
the scratch database rebuilt and the seeded rows inserted again, instead of retrying the tool; a column added gets
values in the seeded rows from what the tools say about it (``pipeline.stages.tools.added_values``: the values they
write, the states their guards let through and refuse, its DEFAULT), drawn again once every tool is written, with a
note per column (or NULL and a note saying nothing tells a value). Other failures go
back to the LLM (bounded by ``max_attempts``); a tool that never passes is dropped with a Rejection, and so is a
write tool that does what one written before it does (the same tables written the same way, the same parameters:
``pipeline.stages.tools.duplicates``), its goals then served by the one kept. The
environment is kept with at least one working read and one working write tool and either ``tools_min`` working
tools or working tools that still serve every goal the plan assigned.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pipeline import ir
from pipeline.dbmodel.arguments import Sampler
from pipeline.dbmodel.ddl import rows_of, scratch_db
from pipeline.dbmodel.keys import settle_natural_keys
from pipeline.envdir import EnvDirError, build_database
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import goals
from pipeline.runtime import EnvInstance, engine
from pipeline.runtime import static_checks as checks
from pipeline.runtime.state import qi, table_infos
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_min, ask_with_feedback, budget, render_section, user
from pipeline.stages.tools import added_values, amount_guards, duplicates, guards, last_ids, seeded_calls
from pipeline.stages.tools import amend_schema as amend
from pipeline.stages.tools import finder_gaps as coverage
from pipeline.stages.tools import write_gaps as covering
from pipeline.stages.tools.exercise import exercise, unreached, written_columns
from pipeline.stages.tools.replies import (
    GuardSpec,
    ParamSpec,
    ReadToolReply,
    ReturnsSpec,
    ToolPlanItem,
    WriteToolReply,
    plan_model,
    to_tool,
)

if TYPE_CHECKING:
    from pipeline.ir import Intent
    from pipeline.settings import BuildSettings

__all__ = ["GuardSpec", "ParamSpec", "ReadToolReply", "ReturnsSpec", "Sampler", "ToolPlanItem", "WriteToolReply",
           "exercise", "generate_tools", "plan_model", "to_tool"]

STAGE = "tools"
PLAN_CHUNK = 10
MAX_AMENDMENTS = 6


# ------------------------------------------------------------------ the workspace: schema, rows, checks


class Workspace:
    """The schema and seeded rows the tools are written against (amended as tools need), the tools accepted so
    far, and the connections they are checked on. Close it (or use it as a context manager)."""

    def __init__(self, scenario: ir.Scenario, tables: Sequence[ir.Table], seed: Sequence[ir.SeedRows], clock: str,
                 tools: Sequence[ir.Tool] = (), amendments: Sequence[amend.Amendment] = ()) -> None:
        self.scenario, self.clock = scenario, clock
        self.tables, self.seed = tuple(tables), tuple(seed)
        self.tools = list(tools)
        self.amendments = list(amendments)
        self.env = ir.Environment(scenario=scenario, clock=clock, tables=list(tables), seed=list(seed))
        self._inst = EnvInstance(self.env)
        self.schema_conn = scratch_db(self.tables)
        self.sampler = Sampler(self._inst.conn, self.tables, clock)
        self.dated = checks.dated_columns(self._inst.conn)  # columns whose seeded values are dates: no arithmetic on them

    @property
    def instance_conn(self) -> sqlite3.Connection:
        """The workspace's database with the seeded rows."""
        return self._inst.conn

    def close(self) -> None:
        self._inst.close()
        self.schema_conn.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def environment(self) -> ir.Environment:
        return self.env.model_copy(update={"tools": list(self.tools)})

    def problems(self, tool: ir.Tool, sample_calls: int) -> str | None:
        """Why ``tool`` does not work here (static checks, then execution on the seeded rows), or None."""
        found = checks.check_tool(self.schema_conn, tool.model_dump(mode="json"), self.dated)
        if found:
            return "\n".join(f"- {p}" for p in found)
        env = self.env.model_copy(update={"tools": [tool]})
        written = written_columns(tool, self.sampler.uses(tool))
        sets = self.sampler.arguments(tool, sample_calls)
        calls, error = exercise(env, tool, sets, self.sampler.grounded(tool), written,
                                [self.sampler.held(tool, a) for a in sets])
        if error is not None and calls and all(res.get("kind") == "guard" for _, res, _ in calls):
            if found := guards.wrong_guards(self.instance_conn, tool):  # fed back, then dropped: write_tool's settle
                return self.problems(guards.without(tool, found), sample_calls)
            # an existing row's own values are what a conflict guard refuses: the tool is also called with inputs
            # its conflict guards let through (``guards.free_inputs``), each completed by a sampled set
            sets = [*sets, *({**sets[i % len(sets)], **free}
                             for i, free in enumerate(guards.free_inputs(self.instance_conn, tool)))]
            calls, error = exercise(env, tool, sets, self.sampler.grounded(tool), written,
                                    [self.sampler.held(tool, a) for a in sets])
        if error is None and tool.kind == "write":
            pool = [*sets, *self.sampler.arguments(tool, 3 * sample_calls)]
            error = unreached(env, tool, self.sampler.reach(tool, pool), calls)
        return error

    def gap_problems(self, tool: ir.Tool) -> str | None:
        """Why a code-written finder or lister does not work here: its SQL is checked like any tool's, then it
        must find the rows of real argument values (every parameter is a column of one table: the values of
        the first seeded row that has them all)."""
        found = checks.check_tool(self.schema_conn, tool.model_dump(mode="json"), self.dated)
        if found:
            return "; ".join(found)
        assert tool.returns is not None
        table = tool.returns.sql.split(" FROM ", 1)[1].split()[0].strip('"')
        cols = [p.name for p in tool.params]
        where = " AND ".join(f"{qi(c)} IS NOT NULL" for c in cols)
        row = self._inst.conn.execute(f"SELECT {', '.join(qi(c) for c in cols)} FROM {qi(table)} WHERE {where} "
                                      "ORDER BY rowid LIMIT 1").fetchone()
        if row is None:
            return f"no seeded {table} row has values for {', '.join(cols)}"
        env = self.env.model_copy(update={"tools": [tool]})
        with EnvInstance(env) as inst:
            out = inst.call(tool.name, dict(zip(cols, row, strict=True)))
        if not out.get("ok") or not out.get("result"):
            return f"called with the values of a seeded {table} row it found nothing: {out}"
        return None

    def _reseeded(self, tables: Sequence[ir.Table], columns: Sequence[tuple[str, str]], tools: Sequence[ir.Tool],
                  clear: bool = False) -> tuple[list[ir.SeedRows], list[ir.Rejection]]:
        """The seeded rows inserted into ``tables``, with the added ``columns`` filled from what ``tools`` say about
        them (``pipeline.stages.tools.added_values``; ``clear``: their values are first set to NULL, to be filled
        again), and the notes of the filling. Raises ``EnvDirError``/``sqlite3.Error`` when a row does not fit."""
        env = self.env.model_copy(update={"tables": list(tables)})
        conn = engine.connect()
        try:
            build_database(env, conn)
            if clear:
                for table, column in columns:
                    conn.execute(f"UPDATE {qi(table)} SET {qi(column)} = NULL")
            notes = added_values.fill(conn, tables, columns, tools, STAGE)
            plans = {s.table: s.plan for s in self.seed}  # the row generators' choice is kept
            return [rows_of(conn, t, plans.get(t.name)) for t in tables], notes
        finally:
            conn.close()

    def added_columns(self) -> list[tuple[str, str]]:
        """The (table, column) pairs the amendments added."""
        return list(dict.fromkeys((a.table, a.column) for a in self.amendments if a.kind == "add_column"))

    def amended(self, amendments: Sequence[amend.Amendment], tool: ir.Tool | None = None) -> Workspace | str:
        """A new workspace with ``amendments`` made and the seeded rows inserted again, or why not (the schema
        does not build, a row no longer fits, a tool accepted earlier no longer passes its static checks). A
        column added gets values in the seeded rows from what the tools so far and ``tool`` (the one that needs
        the amendment) say about it."""
        if len(self.amendments) + len(amendments) > MAX_AMENDMENTS:
            return f"at most {MAX_AMENDMENTS} schema amendments per environment"
        tables = amend.apply(self.tables, amendments)
        if isinstance(tables, str):
            return tables
        added = [(a.table, a.column) for a in amendments if a.kind == "add_column"]
        try:
            seed, _ = self._reseeded(tables, added, [*self.tools, *([tool] if tool is not None else [])])
        except (EnvDirError, sqlite3.Error) as e:
            return f"the seeded rows do not fit the amended schema: {e}"
        ws = Workspace(self.scenario, tables, seed, self.clock, self.tools, [*self.amendments, *amendments])
        broken = checks.check_tools(ws.schema_conn, [t.model_dump(mode="json") for t in self.tools], self.dated)
        if broken:
            ws.close()
            return f"the amended schema breaks the tools {sorted(broken)}"
        return ws

    def refilled(self) -> tuple[Workspace, list[ir.Rejection]]:
        """The workspace with the seeded values of every column the amendments added drawn again from what all
        its tools say about it (tools written after the amendment may guard it), and a note per column (the
        values given, or why it stays NULL). Returns this workspace and no note when no column was added."""
        added = self.added_columns()
        if not added:
            return self, []
        seed, notes = self._reseeded(self.tables, added, self.tools, clear=True)
        return Workspace(self.scenario, self.tables, seed, self.clock, self.tools, self.amendments), notes


# ------------------------------------------------------------------ the plan


def ddl_text(tables: Sequence[ir.Table]) -> str:
    return "\n".join(f"{t.ddl.strip()};" for t in tables)


def keys_text(tables: Sequence[ir.Table]) -> str:
    named = [f"{t.name} by {' + '.join(t.natural_key)}" for t in tables if t.natural_key]
    return "; ".join(named) if named else "(not declared)"


def intents_text(intents: Sequence[Intent]) -> str:
    return "\n".join(f"{i}. {it.goal} ({it.kind})" for i, it in enumerate(intents, 1))


def _items(reply: Any, taken: set[str]) -> list[ToolPlanItem]:
    items: list[ToolPlanItem] = []
    for it in reply.tools:
        if it.name in taken or it.name in {x.name for x in items}:
            continue
        items.append(ToolPlanItem(name=it.name, kind=it.kind, purpose=it.purpose, tables=list(it.tables),
                                  goals=list(getattr(it, "goals", []) or [])))
    return items


def _plan_call(scenario: ir.Scenario, intents: Sequence[Intent], tables: Sequence[ir.Table], client: LLMClientProtocol,
               settings: BuildSettings, lo: int, hi: int, focus: str,
               check: Any) -> Any:
    prompt = render_section("tools", "plan", name=scenario.name, description=scenario.description,
                            ddl=ddl_text(tables), keys=keys_text(tables), intents=intents_text(intents),
                            min=lo, max=hi, focus=focus)
    model = plan_model(lo, hi, [t.name for t in tables], len(intents))
    return ask_with_feedback(
        client, model, user(prompt), check, stage=STAGE, max_attempts=settings.max_attempts,
        retry_temperature=settings.retry_temperature, max_tokens=budget(settings.max_tokens_tool_plan, 70, hi),
        feedback=lambda e: render_section("tools", "plan_feedback", error=e),
    )


def uncovered_tables(items: Sequence[ToolPlanItem], tables: Sequence[ir.Table]) -> list[str]:
    """Tables that no planned tool says it uses."""
    used = {t for it in items for t in it.tables}
    return [t.name for t in tables if t.name not in used]


def plan_tools(scenario: ir.Scenario, intents: Sequence[Intent], tables: Sequence[ir.Table], client: LLMClientProtocol,
               settings: BuildSettings) -> tuple[list[ToolPlanItem] | None, str | None, int]:
    """The tool plan: (items or None, the last problem, LLM replies)."""
    if settings.tools_max <= PLAN_CHUNK:
        def check(reply: Any) -> tuple[list[ToolPlanItem] | None, str | None]:
            items = _items(reply, set())
            kinds = {it.kind for it in items}
            problems = [f"no {k} tool" for k in ("read", "write") if k not in kinds]
            if len(items) < settings.tools_min:
                problems.append(f"only {len(items)} distinct tool names, at least {settings.tools_min} needed")
            if problems:
                return None, "; ".join(problems) + "."
            missing = uncovered_tables(items, tables)
            if missing:  # coverage is asked for, not required: this plan is kept if no better one comes
                return items, f"no tool uses the table(s) {', '.join(missing)}; replace a tool to cover them."
            return items, None

        out = _plan_call(scenario, intents, tables, client, settings,
                         ask_min(settings.tools_min, settings.tools_max), settings.tools_max, "", check)
        return out.value, out.error, out.attempts
    # many tools: table by table, each call seeing what is planned already; a failed call loses its table only
    per = max(2, -(-settings.tools_max // len(tables)))
    planned: list[ToolPlanItem] = []
    attempts, error = 0, None
    for table in tables:
        room = settings.tools_max - len(planned)
        if room < 1:
            break
        hi = min(per, room)
        focus = "\n\n" + render_section("tools", "plan_focus", table=table.name,
                               planned=", ".join(it.name for it in planned) or "(none)")
        taken = {it.name for it in planned}

        def check_chunk(reply: Any, taken: set[str] = taken) -> tuple[list[ToolPlanItem] | None, str | None]:
            items = _items(reply, taken)
            return (items, None) if items else (None, "every tool in the reply is already planned; plan new ones.")

        out = _plan_call(scenario, intents, tables, client, settings, 1, hi, focus, check_chunk)
        attempts += out.attempts
        if out.value is None:
            error = out.error
            continue
        planned += out.value
    writes = [it.goal for it in intents if it.kind == "write"]
    if planned and writes and not any(it.kind == "write" for it in planned):
        # every table's call planned reads only (seen: a clinical trial's participants and visits): the write goals
        # named once, as for goals no write tool serves (:func:`plan_goal_tools`), before the plan is given up
        taken_all = {it.name for it in planned}
        focus = "\n\n" + render_section("tools", "plan_goals", goals="\n".join(f"- {g}" for g in writes),
                                         planned=", ".join(sorted(taken_all)))

        def check_writes(reply: Any) -> tuple[list[ToolPlanItem] | None, str | None]:
            items = [it for it in _items(reply, taken_all) if it.kind == "write"]
            return (items, None) if items else (None, "the reply has no new write tool; plan a write tool for each "
                                                      "goal named.")

        out = _plan_call(scenario, intents, tables, client, settings, 1, min(len(writes), settings.tools_max),
                         focus, check_writes)
        attempts += out.attempts
        if out.value is None:
            error = out.error
        else:
            planned += out.value
    kinds = {it.kind for it in planned}
    missing = [f"no {k} tool" for k in ("read", "write") if k not in kinds]
    if missing or len(planned) < 2:
        return None, "; ".join(missing) or error or "too few tools planned", attempts
    return planned, None, attempts


def table_words(tables: Sequence[ir.Table]) -> list[tuple[str, list[str]]]:
    """Each table's name and column names (as the schema has them), for :func:`pipeline.meaning.goals.match_goals`."""
    conn = scratch_db(tables)
    try:
        return [(t.name, [r[1] for r in conn.execute(f"PRAGMA table_info({qi(t.name)})")]) for t in tables]
    finally:
        conn.close()


def plan_goal_tools(scenario: ir.Scenario, intents: Sequence[Intent], tables: Sequence[ir.Table],
                    plan: list[ToolPlanItem], client: LLMClientProtocol, settings: BuildSettings,
                    encode: goals.Encode = goals.default_encode) -> tuple[list[ToolPlanItem], int]:
    """The scenario's goals that no planned write tool serves (``pipeline.meaning.goals``: MiniLM similarity of the
    goal with the write tool's name and purpose, one goal per tool) named to the planner once, in one more plan call
    asking for their write tools; the new tools (names not planned yet, at least one write) are added to the plan.
    Returns (the plan, LLM replies). Nothing is asked when every goal is served or the scenario states none."""
    if not settings.goal_coverage or not scenario.goals:
        return plan, 0
    matches = goals.match_goals(scenario.goals, [(it.name, it.purpose) for it in plan if it.kind == "write"],
                                table_words(tables), encode)
    missing = [m.goal for m in matches if not m.covered]
    if not missing:
        return plan, 0
    taken = {it.name for it in plan}
    focus = "\n\n" + render_section("tools", "plan_goals", goals="\n".join(f"- {g}" for g in missing),
                                     planned=", ".join(it.name for it in plan) or "(none)")

    def check(reply: Any) -> tuple[list[ToolPlanItem] | None, str | None]:
        items = _items(reply, taken)
        if not any(it.kind == "write" for it in items):
            return None, "the reply has no new write tool; plan a write tool for each goal named."
        return items, None

    out = _plan_call(scenario, intents, tables, client, settings, 1, len(missing), focus, check)
    return plan + (out.value or []), out.attempts


def goal_notes(env: ir.Environment, encode: goals.Encode = goals.default_encode) -> list[ir.Rejection]:
    """A note for each of the scenario's goals that no working write tool serves (``pipeline.meaning.goals``), with
    the nearest write tool and table and their similarities; when no table resembles the goal, the note says the
    schema may lack what records it."""
    if not env.scenario.goals:
        return []
    matches = goals.match_goals(env.scenario.goals, [(t.name, t.description) for t in env.tools if t.kind == "write"],
                                table_words(env.tables), encode)
    notes = []
    for m in matches:
        if m.covered:
            continue
        reason = f"no write tool serves the scenario's goal {m.goal!r}"
        if not m.resembles_a_table:
            reason += " and no table resembles it: the schema may lack the records it needs"
        notes.append(ir.Rejection(stage=STAGE, item=m.goal, reason=reason, evidence={
            "nearest_tool": m.nearest, "tool_similarity": m.score, "needed": goals.COVER,
            "nearest_table": m.table, "table_similarity": m.table_score, "table_needed": goals.RESEMBLE}))
    return notes


# ------------------------------------------------------------------ writing one tool

_NOT_NULL = re.compile(r"NOT NULL constraint failed: (\w+)\.(\w+)")


def _column_hint(error: str, ws: Workspace) -> str:
    """After an unknown column, the columns that do exist (the model tends to invent one); after a NOT NULL
    failure, what to do about it (the model tends to leave a required column out of its INSERT)."""
    hints = []
    if "no such column" in error or "no such table" in error:
        listing = "; ".join(f"{t}({', '.join(cols)})" for t, cols in ws.sampler.table_cols.items())
        hints.append(f"The tables have only these columns: {listing}")
    for table, col in dict.fromkeys(_NOT_NULL.findall(error)):
        hints.append(f"{table}.{col} is required: an INSERT INTO {table} must list {col} and give it a value "
                     f"(a parameter :{col}, or a fixed value), and an UPDATE must not set it to NULL")
    return "".join(f"\n{h}" for h in hints)


def tool_prompt(plan: ToolPlanItem, ws: Workspace) -> str:
    return render_section(
        "tools", "tool", name=ws.scenario.name, description=ws.scenario.description, ddl=ddl_text(ws.tables),
        keys=keys_text(ws.tables), kind=plan.kind, tool=plan.name, purpose=plan.purpose,
        kind_rule=render_section("tools", f"{plan.kind}_rule"),
    )


def prefetch_tools(plan: Sequence[ToolPlanItem], ws: Workspace, client: LLMClientProtocol, settings: BuildSettings) -> None:
    """The first request of every planned tool, sent ahead (``LLMClient.prefetch``): the tools are then
    written one by one as before, each finding its first reply ready unless an amendment changed its prompt."""
    if not getattr(client, "prefetches", False):
        return
    client.prefetch([  # the prompts as they are now: the workspace changes while the tools are written
        functools.partial(client.structured_reply, ReadToolReply if item.kind == "read" else WriteToolReply,
                          user(tool_prompt(item, ws)), stage=STAGE, max_tokens=settings.max_tokens_tool)
        for item in plan])


def write_tool(plan: ToolPlanItem, ws: Workspace, client: LLMClientProtocol, settings: BuildSettings,
               tried: list[ir.Tool] | None = None, notes: list[ir.Rejection] | None = None) -> Any:
    """Ask for one tool until it works: an Outcome whose value is ``(tool, amended workspace or None)``. Each
    reply that maps onto a tool is appended to ``tried`` (whether it works or not).

    A working write tool whose conflict guard is wrong on the seeded rows (``pipeline.stages.tools.guards``:
    it refuses every input it should allow, or allows every one it should refuse) or that takes a parameter its
    value reaches nothing with is told so once; the tool without that guard is kept meanwhile, and kept when the
    next reply is no better, with a note in ``notes`` naming the tool, the guard and the inputs tried (or the
    parameters)."""
    prompt = tool_prompt(plan, ws)
    told: list[str] = []  # the guard findings fed back (once)
    kept_notes: list[tuple[ir.Tool, list[ir.Rejection]]] = []  # a tool kept with its findings -> their notes
    opened: list[Workspace] = []  # amended workspaces of tools kept while a better reply was asked for

    def settle(tool: ir.Tool, w: Workspace, amended: Workspace | None
               ) -> tuple[tuple[ir.Tool, Workspace | None] | None, str | None]:
        found = guards.wrong_guards(w.instance_conn, tool)
        unused = guards.unused_params(tool)
        if not found and not unused:
            return (tool, amended), None
        kept = guards.without(tool, found)
        why = "\n".join([f.describe() for f in found] + ([guards.unused_note(tool, unused)] if unused else []))
        if found and (still := w.problems(kept, settings.sample_calls)) is not None:
            return None, f"{why}\n{still}"
        kept_notes.append((kept, [
            *(ir.Rejection(stage=STAGE, item=tool.name, reason=f"guard dropped: {f.describe()}", evidence={
                "tool": tool.name, **f.evidence()}) for f in found),
            *([ir.Rejection(stage=STAGE, item=tool.name, reason=f"kept with unused parameters: "
                            f"{guards.unused_note(tool, unused)}", evidence={"tool": tool.name, "params": unused})]
              if unused else [])]))
        if amended is not None:
            opened.append(amended)
        if told:
            return (kept, amended), None
        told.append(why)
        return (kept, amended), why  # acceptable; asked once more for a better one

    def check(reply: Any) -> tuple[tuple[ir.Tool, Workspace | None] | None, str | None]:
        try:
            tool = to_tool(plan, reply, ws.schema_conn)
        except ValidationError as e:
            return None, "; ".join(err["msg"] for err in e.errors())
        if tried is not None:
            tried.append(tool)
        error = ws.problems(tool, settings.sample_calls)
        proposed = amend.propose(tool, ws.tables, ws.schema_conn)
        if proposed and (error is not None or any(a.kind == "allow_value" for a in proposed)):
            trial = ws.amended(proposed, tool)
            if isinstance(trial, Workspace):
                again = to_tool(plan, reply, trial.schema_conn)
                still = trial.problems(again, settings.sample_calls)
                if still is None:
                    settled = settle(again, trial, trial)
                    if settled[0] is not None:
                        return settled
                    still = settled[1]
                trial.close()
                if error is not None:  # what is still wrong once the schema has what the tool needs
                    return None, f"{still}\n(checked with the schema amended: {'; '.join(a.describe() for a in proposed)})"
            elif error is not None:
                return None, f"{error}\n(the schema could not be amended for it: {trial})"
        return settle(tool, ws, None) if error is None else (None, error)

    model = ReadToolReply if plan.kind == "read" else WriteToolReply
    out = ask_with_feedback(
        client, model, user(prompt), check, stage=STAGE, max_attempts=settings.max_attempts,
        retry_temperature=settings.retry_temperature, max_tokens=settings.max_tokens_tool,
        feedback=lambda e: render_section("tools", "feedback", tool=plan.name, error=e + _column_hint(e, ws)),
    )
    chosen = out.value or (None, None)
    for w in opened:
        if w is not chosen[1]:
            w.close()
    if notes is not None:
        notes += [n for t, ns in kept_notes if t is chosen[0] for n in ns]
    return out


# ------------------------------------------------------------------ the stage


def fill_gaps(ws: Workspace, settings: BuildSettings, rounds: int = 3) -> list[ir.Rejection]:
    """Add the finders and listers the working tools lack (``pipeline.stages.tools.finder_gaps``), at most
    ``gap_tools_max``; each is checked on the seeded rows and recorded. A finder over references may need the
    parents' finders, so the gaps are looked for again after each round."""
    notes: list[ir.Rejection] = []
    total = 0
    for _ in range(rounds):
        room = settings.gap_tools_max - total
        if room < 1:
            break
        env = ws.environment()
        infos = table_infos(ws.instance_conn)
        added = 0
        for tool, gap in coverage.gap_tools(coverage.gaps(env, ws.instance_conn, infos), ws.tables, infos,
                                            {t.name for t in ws.tools}):
            if added >= room:
                break
            error = ws.gap_problems(tool)
            if error is not None:
                notes.append(ir.Rejection(stage=STAGE, item=tool.name, reason=f"gap tool not added: {error}",
                                          evidence={"gap": gap.kind, "table": gap.table}))
                continue
            ws.tools.append(tool)
            added += 1
            total += 1
            notes.append(ir.Rejection(stage=STAGE, item=tool.name,
                                      reason=f"tool added by code ({gap.kind}): {gap.why}",
                                      evidence={"gap": gap.kind, "table": gap.table, "columns": list(gap.columns)}))
        if not added:
            break
    return notes


def drop_contradicted(ws: Workspace, settings: BuildSettings) -> list[ir.Rejection]:
    """Drop from ``ws.tools`` the guards that refuse most of the calls the seeded rows of the table their tool inserts
    into were made by (``pipeline.stages.tools.seeded_calls``), with a note per guard; a tool that no longer works
    without them (checked like any tool) keeps them, with a note saying so."""
    notes: list[ir.Rejection] = []
    tools: list[ir.Tool] = []
    for tool in ws.tools:
        found = seeded_calls.judge(ws.instance_conn, ws.tools, tool, ws.clock)
        if found:
            kept = seeded_calls.without(tool, found)
            if (still := ws.problems(kept, settings.sample_calls)) is None:
                notes += [seeded_calls.rejection(f, STAGE) for f in found]
                tool = kept
            else:
                notes += [ir.Rejection(stage=STAGE, item=tool.name, reason=f"guard kept: {f.describe()}; without it "
                                       f"the tool fails: {still}", evidence=f.evidence()) for f in found]
        tools.append(tool)
    ws.tools = tools
    return notes


def _covered(tools: Sequence[ir.Tool], plan: Sequence[ToolPlanItem], same: dict[str, str] | None = None) -> bool:
    """Whether the working tools still serve every goal some planned tool was to serve (``same``: a tool dropped
    as a duplicate -> the tool kept, which serves its goals)."""
    claimed = {g for it in plan for g in it.goals}
    working = {t.name for t in tools}
    working |= {dropped for dropped, kept in (same or {}).items() if kept in working}
    served = {g for it in plan if it.name in working for g in it.goals}
    return bool(claimed) and claimed <= served


def generate_tools(
    scenario: ir.Scenario, intents: tuple[Intent, ...], tables: tuple[ir.Table, ...],
    seed: tuple[ir.SeedRows, ...], client: LLMClientProtocol, settings: BuildSettings,
) -> StageResult[ir.Environment]:
    tables, key_rejections = settle_natural_keys(tables, seed)
    rejections: list[ir.Rejection] = list(key_rejections)
    plan, plan_error, attempts = plan_tools(scenario, intents, tables, client, settings)
    if plan is None:
        rejections.append(ir.Rejection(stage=STAGE, item=scenario.name, reason=f"no usable tool plan: {plan_error}"))
        return StageResult(None, tuple(rejections), attempts)
    plan, more = plan_goal_tools(scenario, intents, tables, plan, client, settings)
    attempts += more

    ws = Workspace(scenario, tables, seed, settings.clock)
    same: dict[str, str] = {}  # a tool dropped as a duplicate -> the tool kept
    failed: set[str] = set()  # the tables the failed write tools' attempts write: users change them all the same
    try:
        prefetch_tools(plan, ws, client, settings)
        for item in plan:
            tried: list[ir.Tool] = []
            guard_notes: list[ir.Rejection] = []
            out = write_tool(item, ws, client, settings, tried, guard_notes)
            attempts += out.attempts
            rejections += guard_notes
            if out.value is None:
                if item.kind == "write":
                    failed |= {table for t in tried for _, table in covering.tool_targets(t)}
                rejections.append(ir.Rejection(stage=STAGE, item=item.name, reason=out.error or "failed",
                                               evidence={"kind": item.kind, "purpose": item.purpose,
                                                         "attempts": out.attempts}))
                continue
            tool, amended = out.value
            if (kept := duplicates.duplicate_of(tool, ws.tools)) is not None:
                if amended is not None:
                    amended.close()
                rejections.append(duplicates.rejection(tool, kept, STAGE))
                same[tool.name] = kept.name
                continue
            if amended is not None:
                for a in amended.amendments[len(ws.amendments):]:
                    rejections.append(ir.Rejection(
                        stage=STAGE, item=a.table, reason=f"schema amended for tool {tool.name}: {a.describe()}",
                        evidence={"tool": tool.name, "ddl": next(t.ddl for t in amended.tables if t.name == a.table)}))
                ws.close()
                ws = amended
            ws.tools.append(tool)
        rejections += covering.cover(ws, settings, sorted(failed))
        ws.tools, notes, renamed_same = duplicates.drop(ws.tools, STAGE)  # renamed parameters can make two one
        rejections += notes
        same.update(renamed_same)
        rejections += fill_gaps(ws, settings)
        refilled, notes = ws.refilled()  # the added columns' seeded values, from every tool now written
        if refilled is not ws:
            ws.close()
            ws = refilled
        rejections += notes
        rejections += drop_contradicted(ws, settings)  # guards the seeded rows' own calls contradict
        ws.tools, notes = amend.shown(ws.tools, {t: i.columns for t, i in table_infos(ws.instance_conn).items()},
                                      ws.added_columns(), STAGE)  # the finders written before a column was added
        rejections += notes
        ws.tools, notes = amount_guards.add(ws.tools, STAGE)  # a write drawing an amount down holds to the amount
        rejections += notes
        ws.tools, notes = last_ids.pin(ws.tools, table_infos(ws.instance_conn), STAGE)  # :last_id of an earlier row
        rejections += notes
        env = ws.environment()
        if settings.goal_coverage:
            rejections += goal_notes(env)
    finally:
        ws.close()

    tools = env.tools
    kinds = {t.kind for t in tools}
    problems = [f"no working {k} tool" for k in ("read", "write") if k not in kinds]
    if len(tools) < settings.tools_min and not problems:
        if _covered(tools, plan, same):
            rejections.append(ir.Rejection(
                stage=STAGE, item=scenario.name,
                reason=f"kept with {len(tools)} working tools (fewer than {settings.tools_min}): they still serve "
                       "every goal the plan assigned", evidence={"working": [t.name for t in tools]}))
        else:
            problems.append(f"only {len(tools)} working tools, at least {settings.tools_min} needed "
                            "(or tools serving every planned goal)")
    if problems:
        rejections.append(ir.Rejection(stage=STAGE, item=scenario.name, reason="; ".join(problems),
                                       evidence={"working": [t.name for t in tools]}))
        return StageResult(None, tuple(rejections), attempts)
    return StageResult(env, tuple(rejections), attempts)
