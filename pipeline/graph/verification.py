"""Verifying one environment: the scenario graph entered at ``tasks`` (generate tasks or take given ones,
one checkpointed step per task through the per-task subgraph, then the difficulty policy and the report).

``verify_env`` is what ``envfoundry verify ENV_DIR`` calls; with ``env_dir`` it writes ``tasks.jsonl``,
``report.json`` and ``trajectories.jsonl`` there once the graph has finished (``pipeline.catalog``; the other
sections of ``report.json`` are kept), and with a ``checkpointer`` and a ``thread_id`` a killed verification
resumes with every finished task kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.catalog import write_env_results
from pipeline.graph.results import ScenarioResult, scenario_result, task_outcomes
from pipeline.graph.scenario import (
    GraphDeps,
    ScenarioState,
    build_scenario_graph,
    environment_state,
    run_graph,
    verify_ahead,
)
from pipeline.graph.task import EnvFixer, TaskOutcome
from pipeline.ir import Environment, Rejection, Task
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import BuildSettings, VerifySettings


@dataclass(frozen=True)
class EnvVerification:
    """A finished verification: the environment as it ended, the kept tasks, what was rejected and why, every
    task's outcome, the ``verify`` report and the tester trajectories."""

    env: Environment
    tasks: list[Task]
    rejections: list[Rejection]
    outcomes: list[TaskOutcome]
    report: dict[str, Any]
    env_changed: bool = False
    trajectories: list[dict[str, Any]] = field(default_factory=list)
    templates: dict[str, Any] = field(default_factory=dict)
    """``templates.json`` (:mod:`pipeline.stages.tasks.templates`; empty: none)."""


def verify_env(
    env: Environment,
    client: LLMClientProtocol,
    *,
    initial_db: str | Path | None = None,
    tasks: list[Task] | None = None,
    n_tasks: int | None = None,
    settings: VerifySettings | None = None,
    build: BuildSettings | None = None,
    repairs: bool = False,
    fix_tool: EnvFixer | None = None,
    fix_data: EnvFixer | None = None,
    progress: Callable[[str], None] | None = None,
    env_dir: str | Path | None = None,
    checkpointer: Any = None,
    thread_id: str | None = None,
) -> EnvVerification:
    """Generate (when ``tasks`` is None) and verify the tasks of ``env``.

    ``repairs``: repair blamed tools and tables with the build stages (``build`` settings); ``fix_tool`` /
    ``fix_data`` replace those repairs. ``env_dir``: write the results there.
    """
    s = settings or VerifySettings()
    deps = GraphDeps(client=client, build=build or BuildSettings(), verify=s, n_tasks=n_tasks, progress=progress,
                     repairs=repairs, fix_tool=fix_tool, fix_data=fix_data)
    ahead = verify_ahead(deps)
    graph = build_scenario_graph(deps, checkpointer=checkpointer, ahead=ahead)
    inputs: ScenarioState = {**environment_state(env), "status": "building", "rejections": [],
                             "initial_db": None if initial_db is None else str(initial_db),
                             "given_tasks": None if tasks is None else [t.model_dump(mode="json") for t in tasks]}
    if env_dir is not None:
        inputs["env_dir"] = str(env_dir)
    config: dict[str, Any] = {"recursion_limit": 10_000}  # one step per task; the task queue bounds the loop
    if thread_id is not None:
        config["configurable"] = {"thread_id": thread_id}
    try:
        final = run_graph(graph, inputs, config)
    finally:
        ahead.close()
    result = verification_of(final)
    if env_dir is not None:
        write_env_results(env_dir, result.env, result.tasks, result.report, result.trajectories,
                          result.templates)
    return result


def verification_of(state: ScenarioState) -> EnvVerification:
    """The result of a finished verification, from the graph's final state."""
    res: ScenarioResult = scenario_result(state, BuildSettings().clock)  # the verify entry's state has a clock
    assert res.env is not None, "a verification starts from an environment"
    return EnvVerification(
        env=res.env, tasks=list(res.tasks), rejections=list(res.verify_rejections),
        outcomes=task_outcomes(state, res.env), report=res.report, env_changed=bool(state.get("env_changed")),
        trajectories=list(res.trajectories), templates=res.templates,
    )
