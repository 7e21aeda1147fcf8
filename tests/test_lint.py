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


DEAD_CODE_SCAN = ("pipeline", "verify", "tests", "benchmarks")  # tests and benchmarks count as users
DEAD_CODE_REPORT = ("pipeline", "verify")
DEAD_CODE_SKIP = ["pipeline/export/templates", "tests/export/trainer"]  # run inside trainer libraries


def dead_code(root: Path = ROOT, scan: tuple[str, ...] = DEAD_CODE_SCAN,
              report: tuple[str, ...] = DEAD_CODE_REPORT) -> list[str]:
    """vulture's findings in the ``report`` folders (``make deadcode`` runs this test). Names that only a
    framework calls by name are listed in tests/vulture_whitelist.py (scanned with tests/)."""
    import vulture

    v = vulture.Vulture()
    v.scavenge([str(root / p) for p in scan], exclude=DEAD_CODE_SKIP)
    return [item.get_report().replace(f"{root}/", "") for item in v.get_unused_code()
            if Path(item.filename).resolve().relative_to(root).parts[0] in report]


def test_no_dead_code() -> None:
    found = dead_code()
    assert not found, "\n".join(found)


def test_dead_code_check_finds_dead_code(tmp_path: Path) -> None:
    """Control: the same check reports a function nothing calls, and not one only a test calls."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "lib" / "mod.py").write_text("def used():\n    return 1\n\n\ndef by_tests():\n    return used()\n\n\n"
                                            "def unused():\n    return used()\n")
    (tmp_path / "tests" / "test_mod.py").write_text("from lib.mod import by_tests\n\n\ndef test_it():\n"
                                                   "    assert by_tests()\n")
    found = dead_code(tmp_path, ("lib", "tests"), ("lib",))
    assert [f.split(": ", 1)[1] for f in found] == ["unused function 'unused' (60% confidence)"], found


def test_committed_servers_are_rendered() -> None:
    env_dirs = sorted(str(d.relative_to(ROOT)) for d in ROOT.glob("generated/*/envs/*") if d.is_dir())
    assert env_dirs, "no committed environment under generated/*/envs/"
    r = _run(sys.executable, "-m", "pipeline.cli", "render", "--check", *env_dirs)
    assert r.returncode == 0, r.stdout + r.stderr
