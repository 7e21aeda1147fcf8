"""ruff and mypy are clean, no dead code, and every committed server.py is the render of its env.json: the
checks of ``make check``, run by the README's test command so CI runs them too (ruff, mypy and vulture are
pinned in the dev extra, so a new release cannot turn a clean tree red)."""

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


def test_no_dead_code() -> None:
    """vulture as ``make deadcode`` runs it: tests and benchmarks count as users of the code."""
    r = _run(sys.executable, "-m", "vulture", "pipeline", "verify", "tests", "benchmarks",
             "--exclude", "pipeline/export/templates,tests/export/trainer")
    assert r.returncode == 0, r.stdout + r.stderr


def test_dead_code_check_finds_dead_code(tmp_path: Path) -> None:
    """Control: the same check reports a function nothing calls."""
    (tmp_path / "mod.py").write_text("def used():\n    return 1\n\n\ndef unused():\n    return used()\n")
    r = subprocess.run([sys.executable, "-m", "vulture", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unused function 'unused'" in r.stdout


def test_committed_servers_are_rendered() -> None:
    env_dirs = sorted(str(d.relative_to(ROOT)) for d in ROOT.glob("generated/*/envs/*") if d.is_dir())
    assert env_dirs, "no committed environment under generated/*/envs/"
    r = _run(sys.executable, "-m", "pipeline.cli", "render", "--check", *env_dirs)
    assert r.returncode == 0, r.stdout + r.stderr
