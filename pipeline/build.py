"""Build one environment from a scenario: intents -> schema -> seed data -> tools.

``build_environment(scenario, client, settings)`` runs the four LLM-driven stages (each validated for
real and fed its own errors back, see ``pipeline/stages/``) and returns a :class:`BuildResult`: the
:class:`pipeline.ir.Environment` or None, every rejection recorded on the way, LLM usage per stage and
wall time per stage. It holds no graph logic; the LangGraph wiring wraps the stages one by one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pipeline import ir
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


def build_environment(scenario: ir.Scenario, client: Any, settings: BuildSettings | None = None) -> BuildResult:
    """Run intents -> schema -> seed -> tools for ``scenario``; stop at the first stage that gives up."""
    from pipeline.stages import intents as st_intents
    from pipeline.stages import schema as st_schema
    from pipeline.stages import seed_data as st_seed
    from pipeline.stages import tools as st_tools

    settings = settings or BuildSettings()
    usage0 = client.usage.by_stage()
    rejections: list[ir.Rejection] = []
    timings: dict[str, float] = {}
    t_start = time.perf_counter()

    def finish(env: ir.Environment | None, intents: tuple = ()) -> BuildResult:
        timings["total"] = round(time.perf_counter() - t_start, 3)
        return BuildResult(env, tuple(rejections), _usage_delta(usage0, client.usage.by_stage()), dict(timings),
                           intents)

    def run(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        res = fn(*args, client, settings)
        timings[name] = round(time.perf_counter() - t0, 3)
        rejections.extend(res.rejections)
        return res

    r_int = run("intents", st_intents.generate_intents, scenario)
    if not r_int.ok:
        return finish(None)
    intents = r_int.value
    r_schema = run("schema", st_schema.generate_schema, scenario, intents)
    if not r_schema.ok:
        return finish(None, intents)
    tables = r_schema.value
    r_seed = run("seed_data", st_seed.generate_seed, scenario, tables)
    if not r_seed.ok:
        return finish(None, intents)
    seed = r_seed.value
    r_tools = run("tools", st_tools.generate_tools, scenario, intents, tables, seed)
    if not r_tools.ok:
        return finish(None, intents)
    return finish(r_tools.value, intents)  # the tools stage may amend the schema (and re-insert the rows)
