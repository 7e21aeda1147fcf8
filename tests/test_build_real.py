"""Real builds with the embedded model on two unrelated domains, neither about lending or booking: a brewery's
batches and kegs, and a city permit office (the second only when the first is not built). Lean settings (a 1.5B
model on 2 cores reads ~68 prompt tokens/s and writes ~11 tokens/s); every kept tool is run again on the seeded
rows."""

from __future__ import annotations

import os
import time

import pytest

from pipeline import ir
from pipeline.build import BuildSettings, build_environment
from pipeline.dbmodel.arguments import Sampler
from pipeline.dbmodel.keys import is_unique, natural_keys
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import table_infos
from pipeline.stages.tools.exercise import written_columns
from pipeline.stages.tools.toolset import exercise

SCENARIOS = {
    "brewery": ir.Scenario(name="Craft brewery production",
                           description="A craft brewery records the batches it brews (beer, brew date, volume, "
                                       "status) and the kegs it fills from each batch and sends to bars."),
    "permits": ir.Scenario(name="City permit office",
                           description="A city office issues parking permits to residents for their vehicles "
                                       "(plate number, zone, start and end date) and handles renewals and "
                                       "revocations."),
}
# Rows by the LLM only: the generator choice of row_generators has its own real-model test on two other domains
# (tests/stages/test_rowgen_real.py); leaving it out here keeps CI's real-model time within its budget.
SETTINGS = BuildSettings(max_attempts=2, intents_min=4, intents_max=5, tables_min=2, tables_max=3,
                         rows_per_table=6, rows_per_call=6, rows_min=3, tools_min=4, tools_max=5, sample_calls=3,
                         row_generators=False)


def _check_built(env: ir.Environment) -> None:
    """What must hold for any environment the build keeps, whatever the small model wrote."""
    assert len(env.tools) >= 2 and {t.kind for t in env.tools} == {"read", "write"}
    with EnvInstance(env) as seeded:
        conn = seeded.conn
        strict = dict(conn.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main'").fetchall())
        assert all(strict[t.name] for t in env.tables), strict
        infos = table_infos(conn)
        keys = natural_keys(env, conn, infos)
        print("natural keys:", {t: (k.columns, "declared" if k.declared else "found") for t, k in keys.items()})
        for t in env.tables:
            if t.name in keys:  # a key, declared or found, is unique in the rows and never the surrogate id
                assert is_unique(conn, t.name, keys[t.name].columns), t.name
                assert infos[t.name].key[0] not in keys[t.name].columns or not infos[t.name].int_pk
            if t.natural_key:  # a declared key that survived the seed stage is unique in the rows
                assert keys[t.name].declared and keys[t.name].columns == tuple(t.natural_key)
        sampler = Sampler(conn, tuple(env.tables), env.clock)
        for tool in env.tools:
            calls, error = exercise(env, tool, sampler.arguments(tool, SETTINGS.sample_calls),
                                    sampler.grounded(tool), written_columns(tool, sampler.uses(tool)))
            kinds = [c[1].get("kind", "ok") for c in calls]
            print(f"  {tool.name} ({tool.kind}): {kinds}")
            assert error is None, (tool.name, error)


@pytest.mark.real_llm
def test_real_model_builds_environments_for_domains_far_from_lending(real_llm) -> None:
    """The domains are tried in turn until one is built: the capability under test is that the embedded model
    yields a working environment for at least one of them (the kept one is checked in full; a rejected one names
    its stage and reason). The brewery took 450 s on 2 cores; building the permit office after it as well took
    over 12 min more and passed the 20-minute timeout (2026-11-26), so the second domain runs only when the first
    fails (``ENVFOUNDRY_TEST_ALL_DOMAINS=1`` builds both)."""
    built: list[str] = []
    for domain in sorted(SCENARIOS):
        if built and not os.environ.get("ENVFOUNDRY_TEST_ALL_DOMAINS"):
            break
        t0 = time.perf_counter()
        res = build_environment(SCENARIOS[domain], real_llm, SETTINGS)
        s = res.summary()
        print(f"\n{domain}: {time.perf_counter() - t0:.1f}s wall, timings {res.timings}")
        print(f"tables {s['tables']} rows {s['rows']} tools {s['tools']}")
        for r in res.rejections:
            print(f"rejection [{r.stage}] {r.item}: {r.reason[:200]}")
            assert r.stage and r.reason
        if res.ok:
            assert res.env is not None
            _check_built(res.env)
            built.append(domain)
    assert built, "the embedded model built no environment for either domain"
