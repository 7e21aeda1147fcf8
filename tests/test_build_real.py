"""One real build with the embedded model: a fixed simple scenario, lean settings, every kept tool run."""

from __future__ import annotations

import time

import pytest

from pipeline import ir
from pipeline.build import BuildSettings, build_environment
from pipeline.runtime import EnvInstance
from pipeline.stages.tools import Sampler, exercise

SCENARIO = ir.Scenario(name="Public library", description="A small public library lends books to members.")
# Lean on purpose: a 1.5B model on 2 cores reads ~68 prompt tokens/s and writes ~11 tokens/s.
SETTINGS = BuildSettings(max_attempts=2, intents_min=4, intents_max=5, tables_min=2, tables_max=3,
                         rows_per_table=6, rows_per_call=6, rows_min=3, tools_min=3, tools_max=4, sample_calls=3)


@pytest.mark.real_llm
def test_real_model_builds_an_environment_whose_tools_run(real_llm) -> None:
    t0 = time.perf_counter()
    res = build_environment(SCENARIO, real_llm, SETTINGS)
    wall = time.perf_counter() - t0
    s = res.summary()
    print(f"\nreal build: {wall:.1f}s wall, timings {res.timings}")
    print(f"usage: {res.usage}")
    print(f"tables {s['tables']} rows {s['rows']} tools {s['tools']}")
    for r in res.rejections:
        print(f"rejection [{r.stage}] {r.item}: {r.reason[:200]}")
    assert res.ok, [r.reason for r in res.rejections]
    env = res.env
    assert len(env.tools) >= SETTINGS.tools_min
    assert {t.kind for t in env.tools} == {"read", "write"}
    with EnvInstance(env) as seeded:
        sampler = Sampler(seeded.conn, tuple(env.tables), env.clock)
        for tool in env.tools:
            calls, error = exercise(env, tool, sampler.arguments(tool, SETTINGS.sample_calls))
            assert error is None, (tool.name, error)
            kinds = [c[1].get("kind", "ok") for c in calls]
            print(f"  {tool.name} ({tool.kind}): {kinds}")
            assert all(k in ("ok", "guard", "not_found") or c[1].get("error", "").startswith("rejected by the database")
                       for k, c in zip(kinds, calls, strict=True)), (tool.name, calls)
            assert any(k in ("ok", "guard", "not_found") for k in kinds), (tool.name, calls)
