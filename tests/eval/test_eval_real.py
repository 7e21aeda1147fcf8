"""``envfoundry eval`` against the embedded model (Qwen2.5-Coder on llama.cpp) on the committed example: the
model's calls reach the environment (through the JSON-action protocol ``auto`` picks for the embedded server,
see ``verify.agent.EMBEDDED_PROTOCOL``), every attempt is scored, nothing is lost to the endpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"


@pytest.mark.real_llm
def test_eval_runs_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # the two tasks whose reference makes the fewest calls (one, in the examples so far): this checks the wiring
    # (calls reach the environment, results reach the model), which the 1.5B model's skill on deeper tasks would
    # make a matter of luck (the example of 2026-11-29 has no tier-1 task; its first tier-2 tasks failed every call)
    bank = [json.loads(x) for x in (EXAMPLE / "task_bank.jsonl").read_text().splitlines()]
    short = sorted(bank, key=lambda t: (len(t["reference_solution"]), t["task_id"]))[:2]
    cmd = [sys.executable, "-m", "pipeline.cli", "eval", str(EXAMPLE), "--out", str(out),
           "--tasks", ",".join(t["task_id"] for t in short),
           "--attempts", "1", "--max-turns", "3", "--max-tokens", "160", "--cache-path", str(tmp_path / "cache.sqlite"),
           "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["tasks"] == 2 and summary["attempts"] == 2 and summary["errors"] == 0
    assert summary["protocol"] == "json_action" and summary["model"].startswith("embedded:qwen2.5-coder-1.5b")
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    trajectories = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["turns"] >= 1 and not r["endpoint_error"] for r in rows)
    # the model called the environment's tools and saw their results
    assert sum(r["tool_calls"] for r in rows) >= 1
    calls = [s for t in trajectories for s in t["steps"]]
    assert any(s["response"]["ok"] for s in calls)
    assert any(m["content"].startswith("Result of ") for t in trajectories for m in t["messages"])
    print("\nreal-model eval:", json.dumps({k: summary[k] for k in ("pass_rate", "mean_reward", "seconds")}),
          [(r["task_id"], r["passed"], r["tool_calls"], r["final_answer"]) for r in rows])
