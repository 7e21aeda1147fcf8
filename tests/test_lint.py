"""ruff and mypy are clean, and every committed server.py is the render of its env.json: the checks of
``make check``, run by the README's test command so CI runs them too (ruff and mypy are pinned in the dev
extra, so a new release cannot turn a clean tree red)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_is_clean() -> None:
    r = _run(sys.executable, "-m", "ruff", "check", "--no-cache", "pipeline", "verify", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean() -> None:
    r = _run(sys.executable, "-m", "mypy", "pipeline", "verify")
    assert r.returncode == 0, r.stdout + r.stderr


def test_committed_servers_are_rendered() -> None:
    env_dirs = sorted(str(d.relative_to(ROOT)) for d in ROOT.glob("generated/*/envs/*") if d.is_dir())
    assert env_dirs, "no committed environment under generated/*/envs/"
    r = _run(sys.executable, "-m", "pipeline.cli", "render", "--check", *env_dirs)
    assert r.returncode == 0, r.stdout + r.stderr
