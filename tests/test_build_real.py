"""Real builds with the embedded model on two unrelated domains, neither about lending or booking: a brewery's
batches and kegs, and a city permit office (the second only when the first is not built). Lean settings (a 1.5B
model on 2 cores reads ~68 prompt tokens/s and writes ~11 tokens/s), rows at scale on (the generator choice);
every kept tool is run again on the seeded rows.

The builds are made once per session (fixture ``real_build`` in tests/conftest.py, :func:`build_domains`): this
test checks the environment, tests/stages/test_rowgen_real.py checks its rows at scale (one build of model time
for both)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from pipeline import ir
from pipeline.build import BuildResult, BuildSettings, build_environment
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
# Rows at scale (row_generators): the LLM's example rows, then code's rows from the generators it picks, which
# tests/stages/test_rowgen_real.py checks on the environment built here. The seed stage's model calls are capped
# (CI's real-model time, issue 42). Per table at most: the example rows 2 (max_attempts), placeholder rows named 2
# per placeholder column (NAME_TRIES), the generator choice 2, the columns continued together 4 (list_rounds_unique;
# 3 without a UNIQUE one), their rows' numbers and CHECK values asked again 4 (complete_rows_max), each other list
# 4 (UNIQUE) or 2. The product's defaults (12 and 40) allow 12 + 40 calls a table for one tuple alone. Every one of
# these capabilities still runs with the real model, on fewer rows (a UNIQUE list ends shorter: a short_list
# rejection, which test_rowgen_real reads).
# Two tables and three LLM-written tools (issue 42: CI under 45 min). The stages ask for one item more than
# they need (``ask_min``) and the 1.5B model writes what is asked: two tables instead of three (the brewery's
# description names two: batches and kegs), three tools instead of five. Of the brewery's 1,024 s of model
# time the tools stage took 544 s and the seed stage 369 s (benchmarks/results/ci.md, 2026-11-29): a third
# table's example rows and generator choice ~90-125 s, one tool written ~42 s, and the retries of failing
# tools grow with the tools written. Each capability still runs once: the schema, example rows, generator
# choice and list continuation on two tables, a plan of at least one read and one write tool, each tool
# written by the model and retried with its error when it fails. ``tools_min=2``: code's finders, listers and
# covering writes count towards it, as before.
SETTINGS = BuildSettings(max_attempts=2, intents_min=4, intents_max=5, tables_min=2, tables_max=2,
                         rows_per_table=6, rows_per_call=6, rows_min=3, tools_min=2, tools_max=3, sample_calls=3,
                         row_generators=True, list_rounds_unique=4, complete_rows_max=4)
# The build (brewery 450 s on 2 cores with LLM rows only, 2026-11-26) is in the setup of the first test asking
# for it, and runs 2-4x slower while the other xdist worker runs tests.
TIMEOUT = 2400


def build_domains(client: Any) -> list[tuple[str, BuildResult, float]]:
    """The domains in turn until one is built (every domain with ``ENVFOUNDRY_TEST_ALL_DOMAINS=1``): each one's
    result and wall seconds."""
    done: list[tuple[str, BuildResult, float]] = []
    for domain in sorted(SCENARIOS):
        if any(res.ok for _, res, _ in done) and not os.environ.get("ENVFOUNDRY_TEST_ALL_DOMAINS"):
            break
        t0 = time.perf_counter()
        res = build_environment(SCENARIOS[domain], client, SETTINGS)
        done.append((domain, res, time.perf_counter() - t0))
    return done


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
@pytest.mark.timeout(TIMEOUT)
def test_real_model_builds_environments_for_domains_far_from_lending(real_build) -> None:
    """The domains are tried in turn until one is built: the capability under test is that the embedded model
    yields a working environment for at least one of them (the kept one is checked in full; a rejected one names
    its stage and reason). The brewery took 450 s on 2 cores; building the permit office after it as well took
    over 12 min more and passed the 20-minute timeout (2026-11-26), so the second domain runs only when the first
    fails (``ENVFOUNDRY_TEST_ALL_DOMAINS=1`` builds both)."""
    built: list[str] = []
    for domain, res, seconds in real_build:
        s = res.summary()
        print(f"\n{domain}: {seconds:.1f}s wall, timings {res.timings}")
        print(f"tables {s['tables']} rows {s['rows']} tools {s['tools']}")
        for r in res.rejections:
            print(f"rejection [{r.stage}] {r.item}: {r.reason[:200]}")
            assert r.stage and r.reason
        if res.ok:
            assert res.env is not None
            _check_built(res.env)
            built.append(domain)
    assert built, "the embedded model built no environment for either domain"
