"""Build one environment from a scenario: intents -> schema -> seed data -> tools (``envfoundry build``).

``build_environment(scenario, client, settings)`` runs the four LLM-driven stages (each validated for
real and fed its own errors back, see ``pipeline/stages/``) through the scenario graph
(:mod:`pipeline.graph.scenario`, build only: the path ``envfoundry run`` takes too) and returns a
:class:`BuildResult` made from the graph's :class:`~pipeline.graph.ScenarioResult`: the
:class:`pipeline.ir.Environment` or None, every rejection recorded on the way, LLM usage per stage and wall
time per stage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pipeline import ir
from pipeline.graph import GraphDeps, run_scenario
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import BuildSettings as BuildSettings


@dataclass(frozen=True)
class BuildResult:
    """``env`` is None when a stage gave up; ``rejections`` say what was dropped and why."""

    env: ir.Environment | None
    rejections: tuple[ir.Rejection, ...] = ()
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    """LLM calls, tokens and seconds per stage (from the client's ledger, this build only)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Wall seconds per stage and in total."""
    intents: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        return self.env is not None

    def summary(self) -> dict[str, Any]:
        env = self.env
        tot = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        for s in self.usage.values():
            for k in tot:
                tot[k] += int(s.get(k, 0))
        return {
            "ok": self.ok,
            "env_id": env.env_id if env else None,
            "tables": [t.name for t in env.tables] if env else [],
            "rows": {s.table: len(s.rows) for s in env.seed} if env else {},
            "tools": [t.name for t in env.tools] if env else [],
            "rejections": [r.model_dump(mode="json", exclude={"evidence"}) for r in self.rejections],
            "llm": tot,
            "seconds": self.timings.get("total", 0.0),
        }


def _usage_delta(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict:
    out: dict[str, dict[str, float]] = {}
    for stage, s in after.items():
        b = before.get(stage, {})
        d = {k: round(v - b.get(k, 0), 3) for k, v in s.items()}
        if d.get("calls"):
            out[stage] = d
    return out


def build_environment(scenario: ir.Scenario, client: LLMClientProtocol, settings: BuildSettings | None = None) -> BuildResult:
    """Run intents -> schema -> seed -> tools for ``scenario`` (the scenario graph, build only); stop at the
    first stage that gives up."""
    settings = settings or BuildSettings()
    usage0 = client.usage.by_stage()
    t_start = time.perf_counter()
    res = run_scenario(scenario, GraphDeps(client=client, build=settings))
    timings = {**res.timings, "total": round(time.perf_counter() - t_start, 3)}
    return BuildResult(res.env if res.status == "built" else None, res.build_rejections,
                       _usage_delta(usage0, client.usage.by_stage()), timings, res.intents)
