"""The README's quickstart run on a local Ray instance writes what the local executor writes: the same
environment files and task bank (the committed example's), the same catalog rows, every LLM reply in the
driver's cache. The endpoint is real HTTP on loopback, replaying the example's recorded replies."""

from __future__ import annotations

from pipeline.llm.simulated import CacheReplay, SimulatedEndpoint
from pipeline.run import run_catalog
from tests.executor.example_run import (
    EXAMPLE,
    cache_rows,
    catalog_rows,
    example_inputs,
    files,
    no_misses,
    plan,
)


def test_ray_executor_writes_what_the_local_executor_writes(tmp_path, ray_local, example_run):
    """Against the session's uninterrupted run of the example (``envfoundry run``, the local executor)."""
    from pipeline.executor import RayExecutor

    replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
    local, local_out = example_run, example_run.out
    with SimulatedEndpoint(replay) as ep:
        ray_out = tmp_path / "ray"
        on_ray = run_catalog(local.seeds, ray_out, plan(ep.url, ray_out / "llm_cache.sqlite", local.stages),
                             executor=RayExecutor(2))
        n_ray = ep.stats()["requests"]
    assert local.counts == on_ray.counts
    assert [f["scenario"] for f in local.failed] == [f["scenario"] for f in on_ray.failed]
    assert files(ray_out) == files(local_out)
    assert catalog_rows(ray_out) == catalog_rows(local_out)
    # the workers' replies went into the driver's cache file, as locally
    assert n_ray == len(local.asked)
    assert cache_rows(ray_out / "llm_cache.sqlite") == cache_rows(local_out / "llm_cache.sqlite")
    # usage is accounted from the workers' clients too
    def calls(usage):
        return {st: {k: v for k, v in u.items() if k != "seconds"} for st, u in usage.items()}

    assert calls(on_ray.usage) == calls(local.usage)
    # nothing of the workers' temporary directories is left in the catalog
    assert not [p for p in (ray_out / "envs").iterdir() if p.name.startswith(".")]
    # and both are the committed example, when its recorded replies still answer every request
    local.no_misses()
    no_misses(replay)
    assert on_ray.counts["environments_verified"] >= 1 and not on_ray.failed
    assert files(ray_out) == files(EXAMPLE)
    assert n_ray == len(cache_rows(ray_out / "llm_cache.sqlite"))  # one entry per request
    assert sum(u["calls"] - u["cached"] for u in on_ray.usage.values()) == n_ray


def test_ray_workers_keep_the_endpoint_limit_of_the_whole_run(tmp_path, ray_local):
    """Two Ray workers, each sending requests ahead: ``[llm] concurrency`` (1) holds for both together (a gate
    actor per endpoint), and the output is still the example's."""
    from pipeline.executor import RayExecutor

    replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
    seeds, stages = example_inputs(tmp_path / "inputs")
    out = tmp_path / "ray"
    with SimulatedEndpoint(replay, latency=0.05) as ep:
        result = run_catalog(seeds, out, plan(ep.url, out / "llm_cache.sqlite", stages, concurrency=1,
                                              prefetch=True, max_retries=0), executor=RayExecutor(2))
        stats = ep.stats()
    assert not result.failed, result.failed
    assert stats["peak_in_flight"] == 1, stats
    assert files(out) == files(EXAMPLE)
