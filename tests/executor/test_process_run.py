"""The README's quickstart with ``--executor process`` (scenarios in worker processes, a remote endpoint) writes
the committed example's files, with the endpoint's limit kept across the processes together, every reply in
the catalog's one cache file and the workers' usage accounted. Real HTTP on loopback, replaying the example's
recorded replies."""

from __future__ import annotations

import threading

import pytest

from pipeline.llm.simulated import CacheReplay, SimulatedEndpoint
from pipeline.run import run_catalog
from tests.executor.example_run import (
    EXAMPLE,
    cache_rows,
    catalog_rows,
    files,
    plan,
)


def test_process_executor_writes_the_example_and_keeps_the_endpoint_limit(tmp_path, example_run):
    """Against the session's uninterrupted run of the example (``envfoundry run``, the local executor)."""
    from pipeline.executor import ProcessExecutor

    replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
    local, local_out = example_run, example_run.out
    local.no_misses()
    with SimulatedEndpoint(replay, latency=0.05) as ep:
        proc_out = tmp_path / "process"
        # two worker processes, each sending requests ahead (several in flight each): the limit of 2 is the run's
        executor = ProcessExecutor(2)
        try:
            in_procs = run_catalog(local.seeds, proc_out, plan(ep.url, proc_out / "llm_cache.sqlite", local.stages,
                                                               concurrency=2, prefetch=True, max_retries=0),
                                   executor=executor)
        finally:
            executor.close()
        stats = ep.stats()
    assert not in_procs.failed, in_procs.failed
    assert local.counts == in_procs.counts
    assert files(proc_out) == files(local_out)
    assert catalog_rows(proc_out) == catalog_rows(local_out)
    assert stats["requests"] >= len(local.asked)  # and requests sent ahead that a step then did not need
    assert stats["peak_in_flight"] <= 2, stats  # both processes together
    # every reply the run used is in the catalog's one cache file (the workers wrote it)
    assert set(cache_rows(local_out / "llm_cache.sqlite")) <= set(cache_rows(proc_out / "llm_cache.sqlite"))

    def calls(usage):
        return {st: {k: v for k, v in u.items() if k != "seconds"} for st, u in usage.items()}

    assert calls(in_procs.usage) == calls(local.usage)
    assert not [p for p in (proc_out / "envs").iterdir() if p.name.startswith(".")]
    assert files(proc_out) == files(EXAMPLE)


def test_process_executor_refuses_the_embedded_model(tmp_path):
    from pipeline.config import LLMSettings
    from pipeline.executor import ExecutorError, ProcessExecutor

    with pytest.raises(ExecutorError, match="remote endpoint.*--executor local"):
        ProcessExecutor(2).warm_up(LLMSettings(), wait=True)


def test_a_shared_gate_bounds_requests_of_every_router_of_a_process():
    """``share_limits``: a request takes a slot of the run-wide semaphore of its endpoint as well."""
    from pipeline.llm.endpoints import Router, share_limits

    gate = threading.BoundedSemaphore(1)
    share_limits({"http://shared.test/v1/": gate})
    try:
        router = Router(["http://shared.test/v1"], 8)  # this process alone would allow 8
        with router.slot():
            assert not gate.acquire(blocking=False)  # the one run-wide slot is taken
            other = threading.Event()

            def second() -> None:
                with router.slot():
                    other.set()

            t = threading.Thread(target=second)
            t.start()
            assert not other.wait(0.2)  # waits for the run-wide slot, not for this process's 8
        t.join(5)
        assert other.is_set()
    finally:
        share_limits({})
