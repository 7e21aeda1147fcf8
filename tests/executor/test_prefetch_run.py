"""Sending requests ahead (``[llm] prefetch``) changes when requests are made, never what a run writes: the
README's quickstart against a remote endpoint (real HTTP on loopback, replaying the example's recorded replies
after a fixed latency) writes the committed example's files byte for byte, with several requests in flight."""

from __future__ import annotations

from pipeline.llm.simulated import CacheReplay, SimulatedEndpoint
from pipeline.run import run_catalog
from tests.executor.example_run import EXAMPLE, example_inputs, files, plan


def test_prefetch_overlaps_requests_and_writes_the_serial_bytes(tmp_path):
    replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")  # a speculative request it has no reply for gets HTTP 400
    seeds, stages = example_inputs(tmp_path / "inputs")
    out = tmp_path / "catalog"
    with SimulatedEndpoint(replay, latency=0.05) as ep:
        result = run_catalog(seeds, out, plan(ep.url, out / "llm_cache.sqlite", stages, concurrency=8,
                                              prefetch=True, max_retries=0))
        stats = ep.stats()
    assert not result.failed, result.failed
    assert files(out) == files(EXAMPLE)
    assert stats["peak_in_flight"] > 2, stats  # tool prompts, task wordings and tester attempts overlapped
