"""Kill `envfoundry run --executor ray` (SIGKILL to the driver) while its Ray workers are asking the endpoint,
and rerun it: the replies the workers got before the kill are in the cache whole (nothing half-written), the
rerun asks only for the rest, and the catalog is the committed example's, with no duplicates."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pipeline.llm.simulated import CacheReplay, SimulatedEndpoint
from tests.executor.example_run import (
    EXAMPLE,
    MODEL,
    ROOT,
    cache_rows,
    config_file,
    example_inputs,
    files,
    no_misses,
)

KILL_AFTER = 12  # requests served: the expansion, then part of the scenario (the example asks 62 in all)


def _cmd(out, url: str, seeds, config) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "run", "--seeds", str(seeds), "--out", str(out),
            "--config", str(config), "--base-url", url, "--model", MODEL, "--executor", "ray", "--json"]


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries `mark`: the driver's, and every Ray process it started, since Ray's
    raylet and workers inherit the driver's environment but leave its process group."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if mark.encode() in (d / "environ").read_bytes().split(b"\0"):
                pids.append(int(d.name))
        except OSError:  # gone, or not ours to read
            pass
    return pids


def _kill_all(proc: subprocess.Popen, mark: str) -> None:
    """SIGKILL the driver's process group, then every process of the run that outlived it, and wait until none is
    left: a Ray worker that outlives the driver by a moment would otherwise finish its request and cache the reply
    after the test has counted the cache (the rerun then finds one more row than the kill left)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    deadline = time.monotonic() + 60
    while (left := _marked(mark)) and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    assert not left, f"processes of the killed run still alive after 60 s: {left}"


def test_killed_ray_driver_resumes_from_what_the_workers_cached(tmp_path):
    replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
    seeds, stages = example_inputs(tmp_path / "inputs")
    config = config_file(tmp_path / "inputs", stages)
    out = tmp_path / "catalog"
    token = uuid.uuid4().hex
    mark = f"ENVFOUNDRY_TEST_RUN={token}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ENVFOUNDRY_TEST_RUN": token}
    with SimulatedEndpoint(replay) as ep:
        proc = subprocess.Popen(_cmd(out, ep.url, seeds, config), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None and ep.stats()["requests"] < KILL_AFTER:
                time.sleep(0.02)
            assert proc.poll() is None, "the run ended before the kill: " + proc.stderr.read().decode()[-800:]
            served = ep.stats()["requests"]
            assert served >= KILL_AFTER
        finally:
            _kill_all(proc, mark)
        con = sqlite3.connect(out / "catalog.db")
        (status,) = con.execute("SELECT status FROM environments").fetchone()
        con.close()
        assert status == "building"  # killed mid-scenario
        cached = cache_rows(out / "llm_cache.sqlite")  # integrity_check ok
        recorded = dict(replay.replies.items())
        assert 2 <= len(cached) <= served
        assert all(content in recorded.values() for _, content in cached)  # whole replies only

        ep.reset_stats()
        misses_before = len(replay.misses)
        done = subprocess.run(_cmd(out, ep.url, seeds, config), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                              start_new_session=True)
        assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a scenario failed (see below)
        asked_again = ep.stats()["requests"] - (len(replay.misses) - misses_before)  # unanswered: not calls
    summary = json.loads(done.stdout)
    calls = sum(s["calls"] for s in summary["usage"].values())
    from_cache = sum(s["cached"] for s in summary["usage"].values())
    assert from_cache >= len(cached) and calls - from_cache == asked_again  # the rest, and only the rest
    con = sqlite3.connect(out / "catalog.db")
    for table, key in (("scenarios", "scenario_id"), ("environments", "scenario_id"), ("tasks", "task_id"),
                       ("rejections", "rejection_id")):
        n, distinct = con.execute(f"SELECT COUNT(*), COUNT(DISTINCT {key}) FROM {table}").fetchone()
        assert n == distinct
    con.close()
    assert not [p for p in (out / "envs").iterdir() if p.name.startswith(".")]  # no temporary directory left
    # the catalog is the committed example's, when its recorded replies still answer every request
    no_misses(replay)
    assert done.returncode == 0 and summary["counts"]["environments_verified"] >= 1 and summary["failed"] == []
    assert files(out) == files(EXAMPLE)
    assert len(cache_rows(out / "llm_cache.sqlite")) == len(cached) + asked_again
