"""What the scenario graph hands back: a typed :class:`ScenarioResult` made from its final state.

The record is what ``envfoundry run`` needs of a scenario (the environment as it ended, the kept tasks, every
rejection with its stage, the ``verify`` report, the tester trajectories, where it stopped); it pickles, so a
worker process or a Ray worker sends it back as it is, and the driver writes the files
(:func:`pipeline.catalog.write_environment`), the catalog rows and the task bank from it without reading back
anything it wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pipeline.graph.report import trajectories
from pipeline.graph.task import TaskOutcome
from pipeline.ir import Environment, Intent, Rejection, Scenario, Task

ENV_FIELDS = ("scenario", "clock", "tables", "seed", "tools", "ir_version", "rules")


class ScenarioResult(BaseModel):
    """One scenario through the graph: how far it got, and what it made."""

    model_config = ConfigDict(frozen=True)

    scenario: Scenario
    status: Literal["built", "verified", "rejected"]
    """``built``: a build-only graph (``envfoundry build``) finished its tools."""
    stage: str = ""
    """The stage that rejected the environment (``intents`` ... ``tools``, ``verify``); empty otherwise."""
    reason: str = ""
    intents: tuple[Intent, ...] = ()
    env: Environment | None = None
    """The environment as it ended (repairs included); None when a build stage gave up before the tools."""
    tables: int = 0
    rows: int = 0
    tools: int = 0
    """How much was built (also when a later stage gave up)."""
    env_dir: str | None = None
    """Where the graph wrote the environment directory it verified against (``GraphDeps.envs_dir`` or the
    directory ``envfoundry verify`` was given); None: nowhere."""
    tasks: tuple[Task, ...] = ()
    """The kept tasks, in order."""
    build_rejections: tuple[Rejection, ...] = ()
    verify_rejections: tuple[Rejection, ...] = ()
    report: dict[str, Any] = {}
    """The ``verify`` section of ``report.json`` (empty before verification)."""
    trajectories: tuple[dict[str, Any], ...] = ()
    timings: dict[str, float] = {}
    """Wall seconds per build stage."""
    templates: dict[str, Any] = {}
    """``templates.json``: the LLM's request templates for the sampler (:mod:`pipeline.stages.tasks.templates`)."""

    @property
    def rejections(self) -> tuple[Rejection, ...]:
        return (*self.build_rejections, *self.verify_rejections)

    @property
    def env_id(self) -> str | None:
        """The id of the environment directory a run keeps (None: the scenario has none)."""
        return self.env.env_id if self.env is not None and self.env_dir is not None else None


def state_environment(state: Mapping[str, Any], clock: str) -> Environment:
    """The environment the state holds (``clock``: when the state has none yet)."""
    return Environment.model_validate({"clock": clock, **{k: state[k] for k in ENV_FIELDS if k in state}})


def task_outcomes(state: Mapping[str, Any], env: Environment) -> list[TaskOutcome]:
    """The finished tasks' outcomes, each with ``env`` (the state keeps them without it)."""
    env_json = env.model_dump(mode="json")
    return [TaskOutcome.model_validate({**o, "env": env_json}) for o in state.get("outcomes", [])]


def rejections_of(items: Any) -> tuple[Rejection, ...]:
    return tuple(Rejection.model_validate(r) for r in items or ())


def finished_state(kept: tuple[Task, ...], rejections: list[Rejection], report: dict[str, Any]) -> dict[str, Any]:
    """The state fields of a finished verification: verified when a task was kept."""
    verdict = ("verified", "", "") if kept else ("rejected", "verify", "verify: no task survived its proofs and review")
    return {"kept": [t.model_dump(mode="json") for t in kept],
            "verify_rejections": [r.model_dump(mode="json") for r in rejections], "report": report,
            "status": verdict[0], "stage": verdict[1], "reason": verdict[2]}


def scenario_result(state: Mapping[str, Any], clock: str) -> ScenarioResult:
    """The record of the graph's final ``state`` (``clock``: the build settings' clock)."""
    env = state_environment(state, clock) if "tools" in state else None
    status = state.get("status", "building")
    return ScenarioResult(
        scenario=Scenario.model_validate(state["scenario"]),
        status="built" if status == "building" else status,
        stage=state.get("stage", ""), reason=state.get("reason", ""),
        intents=tuple(Intent.model_validate(i) for i in state.get("intents", [])),
        env=env, tables=len(state.get("tables", [])), rows=sum(len(r["rows"]) for r in state.get("seed", [])),
        tools=len(state.get("tools", [])), env_dir=state.get("env_dir"),
        tasks=tuple(Task.model_validate(t) for t in state.get("kept", [])),
        build_rejections=rejections_of(state.get("rejections")),
        verify_rejections=rejections_of(state.get("verify_rejections")),
        report=dict(state.get("report", {})),
        trajectories=tuple(trajectories(task_outcomes(state, env))) if env is not None else (),
        timings=dict(state.get("timings", {})),
        templates=dict(state.get("templates", {})),
    )
