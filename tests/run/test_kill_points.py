"""SIGKILL a real `envfoundry run` at several points, rerun it, and get exactly the catalog of an uninterrupted run.

The LLM is a scripted fake endpoint over real HTTP on loopback that answers each request with the reply the
committed example's run got for the same messages and sampling (``generated/quickstart/llm_cache.sqlite``; the
seed file and stage settings are those its catalog.db recorded): every stage of the pipeline runs for real,
deterministically, without model time. When a prompt changes, the example must be regenerated (as for
``test_resume.py``); the test then fails naming the first request it cannot answer. One run goes through uninterrupted (the
session's ``example_run`` of tests/conftest.py, which the executor tests compare with too); another
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
import signal
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.executor.example_run import ExampleRun, Recorder, cli_run

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


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[str, Recorder]]:
    """An OpenAI-compatible endpoint on 127.0.0.1 answering with the example's recorded replies."""
    from pipeline.llm.simulated import SimulatedEndpoint

    answers = Recorder()
    with SimulatedEndpoint(answers) as ep:
        yield ep.url, answers


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


def test_killed_at_every_stage_then_rerun_gives_the_uninterrupted_catalog(llm: tuple[str, Recorder],
                                                                          example_run: ExampleRun,
                                                                          tmp_path: Path) -> None:
    """Against the session's uninterrupted run of the same inputs (``envfoundry run``, tests/conftest.py)."""
    example_run.ok()
    counts = example_run.counts
    assert counts["environments_verified"] >= 1 and counts["tasks"] >= 1, counts
    ref_out, ref_asked = example_run.out, example_run.asked
    finished = counts["environments_verified"] + counts["environments_rejected"]
    url, answers = llm
    out = tmp_path / "catalog"
    asked: list[str] = []
    for point in KILL_POINTS:
        r = cli_run(url, example_run.seeds, example_run.config, out, point)
        asked += answers.take()
        assert r.returncode == -signal.SIGKILL, (
            f"kill point {point} was never reached (exit {r.returncode}): {r.stderr[-2000:]}")
        assert f"SIGKILL at {point}" in r.stderr
        if point == "dedup:save:after":  # the index has the scenario, catalog.db does not yet
            assert (out / "dedup").is_dir() and catalog_rows(out)["scenarios"] == []
    done = cli_run(url, example_run.seeds, example_run.config, out)
    asked += answers.take()
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
