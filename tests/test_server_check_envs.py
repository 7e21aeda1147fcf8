"""The independent contract checker (../shared/tools/check_envs.py) passes on an env dir we write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.envdir import write_env_dir
from tests.fixtures.library import library_env, library_tasks

CHECKER = Path(os.environ.get("ENVFOUNDRY_CHECK_ENVS", Path(__file__).resolve().parents[2] / "shared" / "tools" / "check_envs.py"))


def test_check_envs_reports_no_problems(tmp_path):
    assert CHECKER.is_file(), f"checker not found at {CHECKER} (set ENVFOUNDRY_CHECK_ENVS)"
    env = library_env()
    env_dir = write_env_dir(env, tmp_path / "library", library_tasks(env))
    env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(CHECKER), sys.executable, str(env_dir)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env_vars)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["problems"] == []
    assert summary == {"envs": 1, "tools": len(env.tools), "tasks": 2, "ref_pass": 2, "neg_ok": 2, "server_errors": 0,
                       "bad_probe_5xx": 0, "problems": []}
