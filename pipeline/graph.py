"""The per-scenario LangGraph: intents -> schema -> seed data -> tools -> write env -> verify -> done.

Nodes are thin adapters around the stage entry points (``pipeline/stages``, ``verify.run``); the state holds
only JSON-able records so it checkpoints (langgraph-checkpoint-sqlite) and a killed run resumes from the last
finished node. The fix loops live as edges in the verify subgraph (``verify.graph``) and as the stages'
own bounded feedback loops; a stage that gives up routes to ``reject``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from pipeline import ir
from pipeline.build import BuildSettings
from pipeline.stages.base import StageResult


class ScenarioState(TypedDict, total=False):
    scenario: dict[str, Any]
    intents: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    seed: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    env_id: str
    env_dir: str
    tasks: int
    status: str  # building | verified | rejected
    reason: str
    rejections: list[dict[str, Any]]


@dataclass(frozen=True)
class GraphDeps:
    """What the nodes need: an LLM client per scenario, settings, where environments go."""

    client: Any
    build: BuildSettings
    verify: Any  # verify.run.VerifySettings
    envs_dir: Path
    n_tasks: int | None = None
    progress: Callable[[str], None] | None = None


def _dump(items: Any) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in items]


def _rejections(state: ScenarioState, res: StageResult[Any]) -> list[dict[str, Any]]:
    return list(state.get("rejections", [])) + _dump(res.rejections)


def _stage_node(name: str, run: Callable[[ScenarioState], StageResult[Any]], key: str) -> Callable[..., Any]:
    def node(state: ScenarioState) -> ScenarioState:
        res = run(state)
        out: ScenarioState = {"rejections": _rejections(state, res)}
        if not res.ok:
            reasons = "; ".join(r.reason for r in res.rejections[-3:]) or "gave up"
            out["status"], out["reason"] = "rejected", f"{name}: {reasons}"
        else:
            out[key] = _dump(res.value)  # type: ignore[literal-required]
        return out

    node.__name__ = name
    return node


def _env_node(name: str, run: Callable[[ScenarioState], StageResult[Any]]) -> Callable[..., Any]:
    """A node whose stage returns the whole environment (the tools stage may amend the schema and rows)."""
    def node(state: ScenarioState) -> ScenarioState:
        res = run(state)
        out: ScenarioState = {"rejections": _rejections(state, res)}
        if not res.ok:
            reasons = "; ".join(r.reason for r in res.rejections[-3:]) or "gave up"
            out["status"], out["reason"] = "rejected", f"{name}: {reasons}"
        else:
            env = res.value
            out["tables"], out["seed"], out["tools"] = _dump(env.tables), _dump(env.seed), _dump(env.tools)
        return out

    node.__name__ = name
    return node


def build_scenario_graph(deps: GraphDeps, checkpointer: Any = None) -> Any:
    from pipeline.envdir import write_env_dir
    from pipeline.stages import intents as st_intents
    from pipeline.stages import schema as st_schema
    from pipeline.stages import seed_data as st_seed
    from pipeline.stages import tools as st_tools
    from pipeline.stages.intents import Intent
    from pipeline.stages.repair import repair_data, repair_tool
    from verify.emit import write_env_results
    from verify.run import verify_env

    c, bs = deps.client, deps.build
    say = deps.progress or (lambda _m: None)

    def scenario(s: ScenarioState) -> ir.Scenario:
        return ir.Scenario.model_validate(s["scenario"])

    def intents(s: ScenarioState) -> tuple[Intent, ...]:
        return tuple(Intent.model_validate(i) for i in s["intents"])

    def tables(s: ScenarioState) -> tuple[ir.Table, ...]:
        return tuple(ir.Table.model_validate(t) for t in s["tables"])

    def seed(s: ScenarioState) -> tuple[ir.SeedRows, ...]:
        return tuple(ir.SeedRows.model_validate(r) for r in s["seed"])

    def environment(s: ScenarioState) -> ir.Environment:
        return ir.Environment(scenario=scenario(s), clock=bs.clock, tables=list(tables(s)), seed=list(seed(s)),
                              tools=[ir.Tool.model_validate(t) for t in s["tools"]])

    def n_intents(s: ScenarioState) -> StageResult[Any]:
        say(f"{s['scenario']['name']}: intents")
        return st_intents.generate_intents(scenario(s), c, bs)

    def n_schema(s: ScenarioState) -> StageResult[Any]:
        say(f"{s['scenario']['name']}: schema")
        return st_schema.generate_schema(scenario(s), intents(s), c, bs)

    def n_seed(s: ScenarioState) -> StageResult[Any]:
        say(f"{s['scenario']['name']}: seed data")
        return st_seed.generate_seed(scenario(s), tables(s), c, bs)

    def n_tools(s: ScenarioState) -> StageResult[Any]:
        say(f"{s['scenario']['name']}: tools")
        return st_tools.generate_tools(scenario(s), intents(s), tables(s), seed(s), c, bs)

    def n_write(s: ScenarioState) -> ScenarioState:
        env = environment(s)
        d = deps.envs_dir / env.env_id
        write_env_dir(env, d, (), {"build": {"rejections": s.get("rejections", [])}})
        return {"env_id": env.env_id, "env_dir": str(d)}

    def n_verify(s: ScenarioState) -> ScenarioState:
        env = environment(s)
        d = Path(s["env_dir"])
        say(f"{env.scenario.name}: tasks and verification")
        res = verify_env(env, c, initial_db=d / "initial.db", n_tasks=deps.n_tasks, settings=deps.verify,
                         fix_tool=lambda e, fault: repair_tool(e, fault, c, bs),
                         fix_data=lambda e, fault: repair_data(e, fault, c, bs),
                         progress=lambda m: say(f"{env.scenario.name}: {m}"))
        write_env_results(d, res.env, res.tasks, res.report, res.trajectories)
        out: ScenarioState = {"rejections": list(s.get("rejections", [])) + _dump(res.rejections),
                              "tasks": len(res.tasks)}
        if res.env.env_id != env.env_id:  # a tool or the data was repaired: the directory follows the new id
            new = deps.envs_dir / res.env.env_id
            if new.exists():
                shutil.rmtree(new)
            d.rename(new)
            out["env_id"], out["env_dir"] = res.env.env_id, str(new)
            out["tools"], out["seed"], out["tables"] = _dump(res.env.tools), _dump(res.env.seed), _dump(res.env.tables)
        if res.tasks:
            out["status"], out["reason"] = "verified", ""
        else:
            out["status"], out["reason"] = "rejected", "verify: no task survived its proofs and review"
        return out

    def route(next_node: str) -> Callable[[ScenarioState], str]:
        def r(s: ScenarioState) -> str:
            return END if s.get("status") == "rejected" else next_node

        return r

    g = StateGraph(ScenarioState)
    g.add_node("intents", _stage_node("intents", n_intents, "intents"))
    g.add_node("schema", _stage_node("schema", n_schema, "tables"))
    g.add_node("seed_data", _stage_node("seed_data", n_seed, "seed"))
    g.add_node("tools", _env_node("tools", n_tools))
    g.add_node("write_env", n_write)
    g.add_node("verify", n_verify)
    g.add_edge(START, "intents")
    g.add_conditional_edges("intents", route("schema"), ["schema", END])
    g.add_conditional_edges("schema", route("seed_data"), ["seed_data", END])
    g.add_conditional_edges("seed_data", route("tools"), ["tools", END])
    g.add_conditional_edges("tools", route("write_env"), ["write_env", END])
    g.add_edge("write_env", "verify")
    g.add_edge("verify", END)
    return g.compile(checkpointer=checkpointer)
