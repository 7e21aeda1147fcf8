"""SIGKILL a real `envfoundry run` at several points, rerun it, and get exactly the catalog of an uninterrupted run.

The LLM is a scripted fake endpoint over real HTTP on loopback that answers each request with the reply the
committed example's run got for the same messages and sampling (``generated/quickstart/llm_cache.sqlite``; the
seed file and stage settings are those its catalog.db recorded): every stage of the pipeline runs for real,
deterministically, without model time. When a prompt changes, the example must be regenerated (as for
``test_resume.py``); the test then fails naming the first request it cannot answer. One run goes through uninterrupted; another
output directory is killed (``tests/run/kill_driver.py``: the real CLI, killed by a real SIGKILL of its own
process) at each point below in turn — each rerun reaching the next point — and then run to the end:

* during expansion (the expansion request about to be sent) and during dedup (index saved, catalog not written);
* mid-build (a tools reply cached, the node not checkpointed) and mid-verify (a tester request about to be sent);
* during emission: a temporary file complete but not renamed, the catalog about to record the tasks, the task
  bank's JSONL replaced but not its Parquet file.

Then: the environment files, the task bank (both files) and the dedup index are byte for byte those of the
uninterrupted run, with no stray temporary file; catalog.db has the same rows and no duplicate; and the endpoint
was asked exactly the requests of the uninterrupted run, each as often (nothing finished was redone).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipeline.hashing import canonical_json
from pipeline.llm.client import completion_json
from tests.executor.example_run import embedded_budget, toml_value

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"
DRIVER = Path(__file__).with_name("kill_driver.py")

KILL_POINTS = [
    "llm:expand:1:before",
    "dedup:save:after",
    "llm:tools:5:after",
    "llm:tester:8:before",
    "write:trajectories.jsonl:1:before",
    "catalog:set_tasks:before",
    "write:task_bank.jsonl:1:after",
]
# Files that record how a run went rather than what it made (the LLM cache, graph checkpoints).
NOT_OUTPUTS = ("catalog.db", "llm_cache.sqlite", "checkpoints.sqlite")
# Per-invocation accounting in catalog.db: how long and how many tokens *this* invocation spent.
ACCOUNTING = {"seconds", "prompt_tokens", "completion_tokens"}
KEYS = {"seeds": "seed_id", "scenarios": "scenario_id", "rejections": "rejection_id",
        "environments": "scenario_id", "tasks": "task_id"}


SAMPLING = ("messages", "max_tokens", "seed", "temperature", "top_p")


def request_key(request: dict[str, Any]) -> str:
    """What picks a reply: the messages and the sampling (retries are seeded samples of the same messages), not
    the model name or the structured-output format, which differ between the example's embedded model and here."""
    return canonical_json({k: request.get(k) for k in SAMPLING})


class RecordedLLM:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 replaying recorded replies by request."""

    def __init__(self, cache: Path):
        con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT request, content, usage FROM responses").fetchall()
        finally:
            con.close()
        self.replies: dict[str, tuple[str, dict[str, Any]]] = {}
        for request, content, usage in rows:
            key = request_key(json.loads(request))
            assert self.replies.get(key, (content,))[0] == content, "two recorded replies to the same request"
            self.replies[key] = (content, json.loads(usage))
        self.asked: list[str] = []
        self.unknown: list[str] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = request_key(body)
                with outer.lock:
                    outer.asked.append(key)
                    hit = outer.replies.get(key)
                    if hit is None:
                        outer.unknown.append(body["messages"][-1]["content"][:300])
                if hit is None:
                    status, payload = 400, {"error": {"message": "no recorded reply to these messages"}}
                else:
                    content, usage = hit
                    status, payload = 200, completion_json(content, int(usage.get("prompt_tokens", 10)),
                                                           int(usage.get("completion_tokens", 10)))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self) -> list[str]:
        """The requests asked since the last call (and no request may have gone unanswered)."""
        with self.lock:
            asked, self.asked = self.asked, []
            unknown, self.unknown = self.unknown, []
        assert not unknown, (
            f"{len(unknown)} request(s) with no recorded reply: the example catalog {EXAMPLE} (its llm_cache.sqlite) "
            "predates a change of the prompts or the pipeline; regenerate it with the README's command "
            f"(tests/run/test_resume.py replays it too). First: {unknown[0]!r}")
        return asked

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def llm() -> Iterator[RecordedLLM]:
    if not (EXAMPLE / "llm_cache.sqlite").is_file():
        pytest.fail(f"the example catalog's LLM cache {EXAMPLE / 'llm_cache.sqlite'} is missing")
    server = RecordedLLM(EXAMPLE / "llm_cache.sqlite")
    yield server
    server.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The seed file and config of the example's run, as its catalog.db recorded them (so the recorded replies
    fit even when seeds/quickstart.* have moved on since the example was made)."""
    d = tmp_path_factory.mktemp("inputs")
    con = sqlite3.connect(f"file:{EXAMPLE / 'catalog.db'}?mode=ro", uri=True)
    try:
        seeds = con.execute("SELECT name, description FROM seeds ORDER BY source, line").fetchall()
        (config,) = con.execute("SELECT config FROM runs ORDER BY started LIMIT 1").fetchone()
    finally:
        con.close()
    seed_file = d / "seeds.txt"
    seed_file.write_text("".join(f"{n}: {desc}\n" if desc else f"{n}\n" for n, desc in seeds))
    cfg = json.loads(config)
    lines = ["[llm]"] + [f"{k} = {toml_value(cfg['llm'][k])}" for k in SAMPLING[2:] + ("validation_retries",)]
    lines.append("prefetch = false")  # every request made must be a recorded one (no speculative ones)
    for stage, values in sorted(embedded_budget(cfg["stages"]).items()):
        lines += [f"[stages.{stage}]"] + [f"{k} = {toml_value(v)}" for k, v in sorted(values.items())]
    config_file = d / "config.toml"
    config_file.write_text("\n".join(lines) + "\n")
    return seed_file, config_file


def run(llm: RecordedLLM, inputs: tuple[Path, Path], out: Path, point: str = "none") -> subprocess.CompletedProcess[str]:
    seeds, config = inputs
    args = ["run", "--seeds", str(seeds), "--out", str(out), "--config", str(config), "--base-url", llm.url,
            "--model", "recorded", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    for var in ("OPENAI_BASE_URL", "ENVFOUNDRY_MODEL"):
        env.pop(var, None)
    return subprocess.run([sys.executable, str(DRIVER), point, "--", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def outputs(out: Path) -> dict[str, bytes]:
    """Every file the run made but its records of how it went (temporary files included: none may be left)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and not p.name.startswith(NOT_OUTPUTS)}


def catalog_rows(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = sqlite3.connect(f"file:{out / 'catalog.db'}?mode=ro", uri=True)
    try:
        rows = {}
        for table, key in KEYS.items():
            n, distinct = con.execute(f"SELECT COUNT(*), COUNT(DISTINCT {key}) FROM {table}").fetchone()
            assert n == distinct, f"catalog.db: duplicate rows in {table}"
            cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})") if c[1] not in ACCOUNTING]
            rows[table] = sorted(con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)
        return rows
    finally:
        con.close()


@pytest.fixture(scope="module")
def reference(llm: RecordedLLM, inputs: tuple[Path, Path],
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], int]:
    """The uninterrupted run: its output directory, the requests it asked, the environments it finished."""
    out = tmp_path_factory.mktemp("uninterrupted") / "catalog"
    done = run(llm, inputs, out)
    asked = llm.take()
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout)["counts"]
    assert counts["environments_verified"] >= 1 and counts["tasks"] >= 1, counts
    return out, asked, counts["environments_verified"] + counts["environments_rejected"]


def test_killed_at_every_stage_then_rerun_gives_the_uninterrupted_catalog(llm: RecordedLLM, inputs: Any,
                                                                          reference: Any, tmp_path: Path) -> None:
    ref_out, ref_asked, finished = reference
    out = tmp_path / "catalog"
    asked: list[str] = []
    for point in KILL_POINTS:
        r = run(llm, inputs, out, point)
        asked += llm.take()
        assert r.returncode == -signal.SIGKILL, (
            f"kill point {point} was never reached (exit {r.returncode}): {r.stderr[-2000:]}")
        assert f"SIGKILL at {point}" in r.stderr
        if point == "dedup:save:after":  # the index has the scenario, catalog.db does not yet
            assert (out / "dedup").is_dir() and catalog_rows(out)["scenarios"] == []
    done = run(llm, inputs, out)
    asked += llm.take()
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["failed"] == [] and summary["counts"]["skipped_done"] == finished  # the last kill came after

    ref_files, files = outputs(ref_out), outputs(out)
    assert sorted(files) == sorted(ref_files), "files differ (a stray temporary file, or one missing)"
    for name in ref_files:
        assert files[name] == ref_files[name], f"{name} differs from the uninterrupted run's"
    assert {"task_bank.jsonl", "task_bank.parquet"} <= set(files)
    assert any(n.endswith("/tasks.jsonl") for n in files) and any(n.startswith("dedup/") for n in files)

    assert catalog_rows(out) == catalog_rows(ref_out)
    con = sqlite3.connect(f"file:{out / 'catalog.db'}?mode=ro", uri=True)
    statuses = [r[0] for r in con.execute("SELECT status FROM runs ORDER BY started, rowid")]
    con.close()
    assert len(statuses) == len(KILL_POINTS) + 1 and statuses.count("done") == 1

    # every request of the uninterrupted run was asked, and none more often: no finished work was redone
    assert Counter(asked) == Counter(ref_asked)
