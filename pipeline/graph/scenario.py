"""The one orchestration path: a LangGraph behind ``envfoundry run``, ``build`` and ``verify``.

::

    START --a scenario---> intents -> schema -> seed_data -> tools --build only--> END
      |                                                        \\--> write_env --> tasks
      \\--an environment (envfoundry verify) ---------------------------------------> tasks
    tasks -> verify_task -> verify_task -> ... (one step per task) -> finish -> END

A task whose fix repaired the environment leaves it with its rules checked again
(:func:`pipeline.stages.policy.house_rules.recheck_policy`: a rule that no longer holds is dropped with a rejection), and a
rule-bound task that exercises a dropped rule is not emitted (:func:`pipeline.stages.tasks.finish.rederived`).

Nodes are thin adapters around the stage entry points (``pipeline/stages``) and the per-task subgraph
(:mod:`pipeline.graph.task`, with the fix loop as edges). The state holds only JSON-able records, so it
checkpoints (langgraph-checkpoint-sqlite) after every node: a killed run resumes from the last finished
node, and every task already verified keeps its outcome, because each task is a step of its own. A stage
that gives up routes to END with status ``rejected``.

Three entries, one graph: ``run`` starts from a scenario and writes the environment directory under
``GraphDeps.envs_dir`` before its tasks are verified (their proofs replay on its ``initial.db``); ``build``
starts from a scenario and stops after the tools (``verify=None``); ``verify`` starts from an environment
(its fields in the state, see :func:`environment_state`). What the graph made comes back as a
:class:`~pipeline.graph.results.ScenarioResult` (:func:`run_scenario`); its caller writes the results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from pipeline import ir
from pipeline.catalog import write_env_dir
from pipeline.graph.ahead import Ahead
from pipeline.graph.report import build_report
from pipeline.graph.results import (
    ScenarioResult,
    finished_state,
    rejections_of,
    scenario_result,
    state_environment,
    task_outcomes,
)
from pipeline.graph.task import EnvFixer, TaskOutcome, VerifyDeps, build_verify_graph, verify_task
from pipeline.hashing import content_hash
from pipeline.ir import Intent
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import BuildSettings, VerifySettings
from pipeline.stages.base import StageResult
from pipeline.stages.policy import house_rules as st_policy
from pipeline.stages.rows import populate as st_seed
from pipeline.stages.rows.repair import repair_data
from pipeline.stages.schema import intents as st_intents
from pipeline.stages.schema import tables as st_schema
from pipeline.stages.tasks.bank import generate_tasks, rederive_task, revise_task
from pipeline.stages.tasks.finish import finish_tasks, rederived
from pipeline.stages.tasks.templates import phrase_environment
from pipeline.stages.tools import toolset as st_tools
from pipeline.stages.tools.repair import repair_tool

DONE = ("verified", "rejected")


class ScenarioState(TypedDict, total=False):
    scenario: dict[str, Any]
    intents: list[dict[str, Any]]
    clock: str
    tables: list[dict[str, Any]]
    seed: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    ir_version: int
    rules: list[dict[str, Any]]
    """The policy (``[stages.build] policy``); absent without it."""
    env_id: str
    env_dir: str
    initial_db: str | None
    """The initial database file of the environment as written (None: build it from the IR)."""
    data_key: str
    """Hash of the tables and seed ``initial_db`` holds: after a data repair it no longer applies."""
    given_tasks: list[dict[str, Any]] | None
    """Tasks to verify instead of generating them (``envfoundry verify --reuse-tasks``)."""
    queue: list[dict[str, Any]]
    planned: int
    cursor: int
    """How many tasks of ``queue`` are done."""
    outcomes: list[dict[str, Any]]
    """The finished tasks' :class:`TaskOutcome` (without the environment, which ``env`` fields hold)."""
    verify_rejections: list[dict[str, Any]]
    env_changed: bool
    kept: list[dict[str, Any]]
    report: dict[str, Any]
    templates: dict[str, Any]
    status: str  # building | verified | rejected
    stage: str
    """The stage that rejected the environment."""
    reason: str
    rejections: list[dict[str, Any]]
    """The build stages' rejections (the verification's are ``verify_rejections``)."""
    timings: dict[str, float]


@dataclass(frozen=True)
class GraphDeps:
    """What the nodes need: the LLM client, settings, where environments go, how faults are repaired."""

    client: LLMClientProtocol
    build: BuildSettings
    verify: VerifySettings | None = None
    """None: build only (the graph ends after the tools)."""
    envs_dir: Path | None = None
    """``run``: environment directories are written here, and follow their env id after a repair."""
    n_tasks: int | None = None
    progress: Callable[[str], None] | None = None
    repairs: bool = True
    """Repair a blamed tool or table with the build stages (``pipeline.stages.tools.repair``)."""
    fix_tool: EnvFixer | None = None
    """Instead of the stages' tool repair (tests)."""
    fix_data: EnvFixer | None = None


def _dump(items: Any) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in items]


def environment_state(env: ir.Environment) -> ScenarioState:
    """The state fields that hold ``env`` (the entry of ``envfoundry verify``)."""
    return {**env.model_dump(mode="json"), "env_id": env.env_id}  # type: ignore[typeddict-item]


def data_key(env: ir.Environment) -> str:
    return content_hash({"tables": [t.model_dump(mode="json") for t in env.tables],
                         "seed": [s.model_dump(mode="json") for s in env.seed]})


def _rejections(state: ScenarioState, res: StageResult[Any]) -> list[dict[str, Any]]:
    return list(state.get("rejections", [])) + _dump(res.rejections)


def _stage_node(name: str, run: Callable[[ScenarioState], StageResult[Any]], key: str | None) -> Callable[..., Any]:
    """A node around a stage; its value goes to ``key``, or (``key=None``) is the whole environment: the tools
    stage may amend the schema and the rows."""
    def node(state: ScenarioState) -> ScenarioState:
        t0 = time.perf_counter()
        res = run(state)
        out: ScenarioState = {"rejections": _rejections(state, res),
                              "timings": {**state.get("timings", {}), name: round(time.perf_counter() - t0, 3)}}
        if not res.ok:
            reasons = "; ".join(r.reason for r in res.rejections[-3:]) or "gave up"
            out["status"], out["stage"], out["reason"] = "rejected", name, f"{name}: {reasons}"
        elif key is None:
            env = res.value
            assert env is not None
            out["tables"], out["seed"], out["tools"] = _dump(env.tables), _dump(env.seed), _dump(env.tools)
            if env.rules:
                out["rules"] = _dump(env.rules)
        else:
            out[key] = _dump(res.value)  # type: ignore[literal-required]
        return out

    node.__name__ = name
    return node


def run_graph(graph: Any, inputs: ScenarioState, config: dict[str, Any]) -> ScenarioState:
    """Run ``graph`` on ``inputs``; with a checkpointed thread, resume it where it stopped instead, or return
    its final state when it already finished."""
    if graph.checkpointer is not None and config.get("configurable", {}).get("thread_id"):
        state = graph.get_state(config)
        if state.next:
            return graph.invoke(None, config)  # type: ignore[no-any-return]
        if state.values.get("status") in DONE:
            return state.values  # type: ignore[no-any-return]
    return graph.invoke(inputs, config)  # type: ignore[no-any-return]


def run_scenario(scenario: ir.Scenario, deps: GraphDeps, *, checkpointer: Any = None,
                 thread_id: str | None = None) -> ScenarioResult:
    """One scenario through the whole graph (``envfoundry run``'s unit of work), or resumed from the last
    checkpoint of ``thread_id``."""
    config: dict[str, Any] = {"recursion_limit": 10_000}  # one step per stage and per task: the queue bounds it
    if thread_id is not None:
        config["configurable"] = {"thread_id": thread_id}
    ahead = verify_ahead(deps)
    graph = build_scenario_graph(deps, checkpointer=checkpointer, ahead=ahead)
    try:
        final = run_graph(graph, {"scenario": scenario.model_dump(mode="json"), "status": "building",
                                  "rejections": []}, config)
    finally:
        ahead.close()  # also when a step raised: nothing is verified ahead for a scenario that stopped
    return scenario_result(final, deps.build.clock)


def verify_ahead(deps: GraphDeps) -> Ahead:
    """Tasks verified ahead of their turn (a remote endpoint; see :mod:`pipeline.graph.ahead`)."""
    return Ahead(deps.client, per_task_requests=(deps.verify or VerifySettings()).tester.attempts)


def build_scenario_graph(deps: GraphDeps, checkpointer: Any = None, ahead: Ahead | None = None) -> Any:
    """The compiled graph; ``ahead``: where tasks verified ahead of their turn come from (closed by the caller
    when the run ends; default: one closed when the graph finishes)."""
    c, bs = deps.client, deps.build
    vs = deps.verify or VerifySettings()
    say0 = deps.progress or (lambda _m: None)
    ahead = ahead or verify_ahead(deps)

    def scenario(s: ScenarioState) -> ir.Scenario:
        return ir.Scenario.model_validate(s["scenario"])

    def say(s: ScenarioState, msg: str) -> None:
        say0(f"{s['scenario']['name']}: {msg}")

    def intents(s: ScenarioState) -> tuple[Intent, ...]:
        return tuple(Intent.model_validate(i) for i in s["intents"])

    def tables(s: ScenarioState) -> tuple[ir.Table, ...]:
        return tuple(ir.Table.model_validate(t) for t in s["tables"])

    def seed(s: ScenarioState) -> tuple[ir.SeedRows, ...]:
        return tuple(ir.SeedRows.model_validate(r) for r in s["seed"])

    def environment(s: ScenarioState) -> ir.Environment:
        return state_environment(s, bs.clock)

    # ---------------------------------------------------------------- build

    def n_intents(s: ScenarioState) -> StageResult[Any]:
        say(s, "intents")
        return st_intents.generate_intents(scenario(s), c, bs)

    def n_schema(s: ScenarioState) -> StageResult[Any]:
        say(s, "schema")
        return st_schema.generate_schema(scenario(s), intents(s), c, bs)

    def n_seed(s: ScenarioState) -> StageResult[Any]:
        say(s, "seed data")
        return st_seed.generate_seed(scenario(s), tables(s), c, bs)

    def n_tools(s: ScenarioState) -> StageResult[Any]:
        say(s, "tools")
        res = st_tools.generate_tools(scenario(s), intents(s), tables(s), seed(s), c, bs)
        if bs.policy and res.value is not None:  # the rules of the house, over the tools and rows just made
            say(s, "policy")
            ruled = st_policy.make_policy(res.value, c, bs, (deps.verify or VerifySettings()).tasks.template_language)
            res = StageResult(ruled.value, (*res.rejections, *ruled.rejections), res.attempts)
        return res

    def n_write(s: ScenarioState) -> ScenarioState:
        env = environment(s)
        assert deps.envs_dir is not None
        d = deps.envs_dir / env.env_id
        write_env_dir(env, d, (), {"build": {"rejections": s.get("rejections", [])}})
        return {"env_id": env.env_id, "env_dir": str(d), "initial_db": str(d / "initial.db"), "clock": env.clock}

    # ---------------------------------------------------------------- verify

    def db_for(s: ScenarioState, env: ir.Environment) -> str | None:
        db = s.get("initial_db")
        return db if db is not None and data_key(env) == s.get("data_key") else None

    def verify_deps(s: ScenarioState) -> VerifyDeps:
        def fix_task(e: ir.Environment, t: ir.Task, problem: str) -> tuple[ir.Task | None, str | None]:
            return revise_task(e, t, problem, c, initial_db=db_for(s, e), settings=vs.tasks)

        fix_tool, fix_data = deps.fix_tool, deps.fix_data
        if deps.repairs:
            fix_tool = fix_tool or (lambda e, fault: repair_tool(e, fault, c, bs))
            fix_data = fix_data or (lambda e, fault: repair_data(e, fault, c, bs))
        return VerifyDeps(client=c, tester=vs.tester, checker=vs.checker, fix_rounds=vs.fix_rounds, user=vs.user,
                          fix_task=fix_task, fix_tool=fix_tool, fix_data=fix_data,
                          rederive=lambda e, t: rederive_task(e, t, initial_db=db_for(s, e)))

    def n_tasks(s: ScenarioState) -> ScenarioState:
        env = environment(s)
        base: ScenarioState = {**s, "data_key": data_key(env)}
        say(s, "tasks and verification")
        rejections: list[ir.Rejection] = []
        given = s.get("given_tasks")
        if given is None:
            say(s, f"generating tasks for {env.env_id}")
            res = generate_tasks(env, c, n=deps.n_tasks, initial_db=db_for(base, env), settings=vs.tasks)
            queue = list(res.value or [])
            rejections += res.rejections
            planned = len(queue) + len(res.rejections)
        else:
            queue = [ir.Task.model_validate(t) for t in given]
            planned = len(queue)
        return {"data_key": base["data_key"], "queue": _dump(queue), "planned": planned, "cursor": 0,
                "outcomes": [], "verify_rejections": _dump(rejections), "env_changed": False}

    def n_verify_task(s: ScenarioState) -> ScenarioState:
        env, i, queue = environment(s), s["cursor"], s["queue"]
        rejections = list(s.get("verify_rejections", []))
        out: ScenarioState = {"cursor": i + 1, "verify_rejections": rejections}
        task = rederived(env, ir.Task.model_validate(queue[i]), initial_db=db_for(s, env))  # an earlier fix
        if isinstance(task, ir.Rejection):  # repaired the environment, and the task no longer holds on it
            rejections.append(task.model_dump(mode="json"))
            return out
        say(s, f"task {i + 1}/{len(queue)}: {task.kind}: {task.instruction[:70]}")
        vdeps = verify_deps(s)
        db = db_for(s, env)

        def verify(t: ir.Task) -> TaskOutcome:
            return verify_task(env, t, vdeps, initial_db=db, graph=build_verify_graph(vdeps, checkpointer=False))

        later = [ir.Task.model_validate(q) for q in queue[i + 1:]]
        ahead.start(env, db, [t for t in later if t.env_id == env.env_id], verify)
        o = ahead.take(env, db, task, verify)
        out["outcomes"] = [*s.get("outcomes", []), o.model_dump(mode="json", exclude={"env"})]
        if o.env_changed:  # a repair: the rules of the house checked again on its tools and rows
            checked = st_policy.recheck_policy(o.env)
            fixed = checked.value or o.env
            rejections += _dump(checked.rejections)
            new = fixed.model_dump(mode="json")
            out |= {"env_changed": True, "tables": new["tables"], "seed": new["seed"], "tools": new["tools"],  # type: ignore[typeddict-item]
                    "rules": _dump(fixed.rules)}
        if o.status == "rejected":
            rejections.append(ir.Rejection(stage="verify", item=o.task.task_id, reason=o.reason,
                                           evidence={"instruction": o.task.instruction}).model_dump(mode="json"))
        return out

    def n_finish(s: ScenarioState) -> ScenarioState:
        ahead.close()
        env = environment(s)
        outcomes = task_outcomes(s, env)
        done = finish_tasks(env, [o.task for o in outcomes if o.status == "accepted"], vs.difficulty,
                            initial_db=db_for(s, env))
        rejections = [*rejections_of(s.get("verify_rejections")), *done.rejections]
        kept = done.value or ()
        report = build_report(env, c, vs, s.get("planned", 0), outcomes, list(kept), rejections,
                              env_changed=s.get("env_changed", False))
        if kept and vs.tasks.sample_templates:  # the LLM's request templates for the sampler
            say(s, "request templates")
            templates, report["templates"] = phrase_environment(
                env, c, db_for(s, env), limit=vs.tasks.sample_templates, language=vs.tasks.template_language)
            return {**finished_state(kept, rejections, report), "templates": templates}  # type: ignore[typeddict-item]
        return finished_state(kept, rejections, report)  # type: ignore[return-value]

    # ---------------------------------------------------------------- edges

    def start(s: ScenarioState) -> str:
        return "tasks" if "tools" in s and "intents" not in s else "intents"

    def route(next_node: str) -> Callable[[ScenarioState], str]:
        def r(s: ScenarioState) -> str:
            return END if s.get("status") == "rejected" else next_node

        return r

    def after_tools(s: ScenarioState) -> str:
        return END if s.get("status") == "rejected" or deps.verify is None else "write_env"

    def next_task(s: ScenarioState) -> str:
        return "verify_task" if s["cursor"] < len(s["queue"]) else "finish"

    g: Any = StateGraph(ScenarioState)  # nodes read and write parts of the state: typed by ScenarioState
    g.add_node("intents", _stage_node("intents", n_intents, "intents"))
    g.add_node("schema", _stage_node("schema", n_schema, "tables"))
    g.add_node("seed_data", _stage_node("seed_data", n_seed, "seed"))
    g.add_node("tools", _stage_node("tools", n_tools, None))
    g.add_node("write_env", n_write)
    g.add_node("tasks", n_tasks)
    g.add_node("verify_task", n_verify_task)
    g.add_node("finish", n_finish)
    g.add_conditional_edges(START, start, ["intents", "tasks"])
    g.add_conditional_edges("intents", route("schema"), ["schema", END])
    g.add_conditional_edges("schema", route("seed_data"), ["seed_data", END])
    g.add_conditional_edges("seed_data", route("tools"), ["tools", END])
    g.add_conditional_edges("tools", after_tools, ["write_env", END])
    g.add_edge("write_env", "tasks")
    g.add_conditional_edges("tasks", next_task, ["verify_task", "finish"])
    g.add_conditional_edges("verify_task", next_task, ["verify_task", "finish"])
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)
