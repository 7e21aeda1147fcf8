"""The benchmarks say so and exit non-zero when their runs fail; bench_throughput builds verified copies of the example.

bench_throughput runs for real here (the simulated endpoint replaying a recorded cache, the pipeline building the
example's scenarios); the other benchmarks' failure rules are tested on the figures their runs report.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "generated" / "quickstart"


def bench(name: str) -> ModuleType:
    """A benchmark script as a module (importable by name: bench_throughput's endpoint process, spawned, imports
    it again)."""
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.append(str(ROOT / "benchmarks"))
    return importlib.import_module(name)


def test_throughput_fails_loudly_when_the_recorded_replies_do_not_build(tmp_path, capsys):
    """A recorded catalog whose cache holds only the seeds' expansions: every scenario fails at its first stage,
    and the benchmark says which, reports ok false and returns 1 (before issue 42 it printed its figures and
    exited 0)."""
    rec = tmp_path / "recorded"
    rec.mkdir()
    shutil.copyfile(EXAMPLE / "catalog.db", rec / "catalog.db")
    src, dst = sqlite3.connect(f"file:{EXAMPLE / 'llm_cache.sqlite'}?mode=ro", uri=True), sqlite3.connect(
        rec / "llm_cache.sqlite")
    src.backup(dst)
    src.close()
    dst.execute("DELETE FROM responses WHERE request NOT LIKE '%Domain seed:%'")
    dst.commit()
    assert dst.execute("SELECT COUNT(*) FROM responses").fetchone()[0] > 0
    dst.close()
    code = bench("bench_throughput").main(["--catalog", str(rec), "--copies", "1", "--concurrency", "2",
                                           "--latency", "0", "--executor", "local", "--json"])
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 1
    assert result["ok"] is False and result["verified"] == 0 and result["misses"] > 0
    assert "FAILED: concurrent run, copy 1: scenario" in err and "HTTP 400" in err
    assert "bench_throughput: FAILED" in err


def test_throughput_builds_and_verifies_every_copy_of_the_example(capsys):
    """Two copies of the example at once against the replaying endpoint, on the process executor: every scenario
    verified, each copy's environments and task bank the example's bytes, the limit kept (replays the example's
    cache: misses until the example is regenerated after a prompt change, as tests/executor do)."""
    code = bench("bench_throughput").main(["--copies", "2", "--concurrency", "4", "--workers", "2",
                                           "--latency", "0.01", "--json"])
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0, err[-3000:]
    seeds = result["scenarios"] // 2
    assert seeds >= 1 and result["verified"] == result["scenarios"] == 2 * seeds, result
    assert result["identical_to_recorded"] == 2 and result["failed"] == 0 and result["ok"], result
    assert 2 <= result["peak_in_flight"] <= 4, result


def test_rollouts_fail_on_errors_unfinished_or_unrewarded_episodes():
    problems_of = bench("bench_rollouts").problems_of
    good = {"errors": 0, "finished": 10, "rewarded": 10}
    assert problems_of({"export": [good], "baseline": [good]}, 10) == []
    bad = problems_of({"export": [{"errors": 2, "first_error": "ConnectionClosed", "finished": 8, "rewarded": 7}]}, 10)
    assert len(bad) == 3 and "ConnectionClosed" in bad[0] and "8 of 10" in bad[1] and "1 finished" in bad[2]


def test_server_fails_on_non_200_answers_or_no_answer():
    problems_of = bench("bench_server").problems_of
    assert problems_of({"server.py": [{"ok": 50, "errors": 0}], "bare": [{"ok": 90, "errors": 0}]}) == []
    bad = problems_of({"server.py": [{"ok": 50, "errors": 3}], "bare": [{"ok": 0, "errors": 0}]})
    assert bad == ["server.py run 1: 3 call(s) answered other than HTTP 200", "bare run 1: no call answered"]


def test_seeds_fails_unless_the_check_reports_its_duplicates():
    problem = bench("bench_seeds").problem
    assert problem({"exit": 1, "output_lines": 2, "stderr": ""}) is None
    assert "exit 0" in problem({"exit": 0, "output_lines": 2, "stderr": ""})
    assert "exit 2" in problem({"exit": 2, "output_lines": 0, "stderr": "seeds.txt:3: bad line"})
    crash = problem({"exit": 1, "output_lines": 0, "stderr": "Traceback (most recent call last):\nKeyError: 'x'"})
    assert crash == "the command crashed: KeyError: 'x'"


def test_user_sim_fails_when_an_endpoint_or_the_scripted_agent_stops_a_conversation(tmp_path):
    problems_of = bench("bench_user_sim").problems_of
    rows = [{"task_id": "t1", "stop": "answer"}, {"task_id": "t2", "stop": "user_stop"}]
    assert problems_of(rows, tmp_path) == []
    bad = problems_of(rows + [{"task_id": "t3", "stop": "endpoint_error"}], tmp_path)
    assert len(bad) == 1 and bad[0].startswith("t3: ")
    assert problems_of([], tmp_path) == [f"{tmp_path}: no task to play"]
