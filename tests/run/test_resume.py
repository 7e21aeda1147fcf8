"""Kill a real `envfoundry run` mid-way (SIGKILL) and rerun it: it continues, redoes no finished work, writes no
duplicates, and ends with exactly the committed example catalog. The LLM answers come from the example's own
cache (copied in), so this exercises the real pipeline, checkpoints and catalog without model time; "redoes no
finished work" is measured as LLM calls: the resumed run asks fewer than the example's run did."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"
CLI = [sys.executable, "-m", "pipeline.cli"]
KILL_AFTER = 5  # checkpoints: the graph's input, intents, schema, seed data (the rest happens after the kill)


def _cmd(out: Path) -> list[str]:
    return CLI + ["run", "--seeds", str(ROOT / "seeds" / "quickstart.txt"), "--out", str(out),
                  "--config", str(ROOT / "seeds" / "quickstart.toml"), "--json"]


def _checkpoints(out: Path) -> int:
    db = out / "checkpoints.sqlite"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _llm_calls(catalog: Path) -> list[int]:
    con = sqlite3.connect(f"file:{catalog / 'catalog.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT usage FROM runs ORDER BY started").fetchall()
    finally:
        con.close()
    return [sum(int(s.get("calls", 0)) for s in json.loads(u).values()) for (u,) in rows]


def _files(out: Path) -> dict[str, bytes]:
    keep = {"env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl"}
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "envs").rglob("*")) if p.name in keep}
    files["task_bank.jsonl"] = (out / "task_bank.jsonl").read_bytes()
    return files


@pytest.fixture()
def fresh_out(tmp_path):
    if not (EXAMPLE / "llm_cache.sqlite").is_file():
        pytest.fail("the example catalog generated/quickstart (with its llm_cache.sqlite) is missing")
    out = tmp_path / "catalog"
    out.mkdir()
    shutil.copy(EXAMPLE / "llm_cache.sqlite", out / "llm_cache.sqlite")
    return out


def test_kill_and_resume_matches_the_example(fresh_out):
    out = fresh_out
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(_cmd(out), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and _checkpoints(out) < KILL_AFTER:
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed: " + proc.stderr.read().decode()[-500:]
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    killed_at = _checkpoints(out)
    assert killed_at >= KILL_AFTER

    done = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["counts"]["environments_verified"] >= 1
    # every LLM answer of the resumed run came from the cache: nothing was asked twice
    calls = sum(s["calls"] for s in summary["usage"].values())
    cached = sum(s["cached"] for s in summary["usage"].values())
    assert calls == cached
    (example_calls,) = _llm_calls(EXAMPLE)
    assert 0 < calls < example_calls, "the resumed run redid finished work"
    assert _files(out) == _files(EXAMPLE)

    con = sqlite3.connect(out / "catalog.db")
    for table, key in (("scenarios", "scenario_id"), ("environments", "scenario_id"), ("tasks", "task_id"),
                       ("rejections", "rejection_id")):
        n, distinct = con.execute(f"SELECT COUNT(*), COUNT(DISTINCT {key}) FROM {table}").fetchone()
        assert n == distinct
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2

    # a third run finds everything done and skips it
    again = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    s3 = json.loads(again.stdout)
    assert s3["counts"]["skipped_done"] == s3["counts"]["environments_verified"] + s3["counts"]["environments_rejected"]
    assert _files(out) == _files(EXAMPLE)
