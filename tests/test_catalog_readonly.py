"""`catalog list` and `catalog show` only read catalog.db: no WAL switch, no tables created, nothing rewritten.

An empty, corrupt or foreign catalog.db is refused with one line naming the file (exit 2) and left byte for byte
as it was; a catalog in a read-only directory (a read-only bind mount when running as root, where chmod does
not bind) is listed and shown by the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.catalog import CATALOG_DB, Catalog, CatalogError
from pipeline.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "generated" / "quickstart"
ENV_NAME = "Book Lending System"


def cli(*args: object) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], env={"COLUMNS": "200"})


def snapshot(d: Path) -> dict[str, bytes]:
    """Every file of a directory with its bytes (so "nothing changed" includes "nothing created")."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture()
def example(tmp_path: Path) -> Path:
    """A copy of the committed example catalog (its catalog.db and environment directory)."""
    if not (EXAMPLE / CATALOG_DB).is_file():
        pytest.fail(f"the example catalog {EXAMPLE} is missing")
    out = tmp_path / "catalog"
    out.mkdir()
    shutil.copy(EXAMPLE / CATALOG_DB, out / CATALOG_DB)
    shutil.copytree(EXAMPLE / "envs", out / "envs")
    return out


def journal_mode_byte(db: Path) -> int:
    """Header byte 18: 1 = rollback journal, 2 = WAL (what `PRAGMA journal_mode=WAL` writes)."""
    return db.read_bytes()[18]


# ---------------------------------------------------------------- a good catalog is only read


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_list_and_show_read_without_changing_a_byte(example: Path, journal: str) -> None:
    with sqlite3.connect(example / CATALOG_DB) as con:  # a catalog in rollback-journal mode must stay so
        con.execute(f"PRAGMA journal_mode={journal}")
    mode = journal_mode_byte(example / CATALOG_DB)
    assert mode == {"wal": 2, "delete": 1}[journal]
    before = snapshot(example)
    r = cli("catalog", "list", example)
    assert r.exit_code == 0, r.output
    assert ENV_NAME in r.output and "verified" in r.output
    r = cli("catalog", "show", example, ENV_NAME)
    assert r.exit_code == 0, r.output
    n_tasks = sum(1 for d in (example / "envs").iterdir() if d.name.startswith("book_lending")
                  for _ in (d / "tasks.jsonl").read_text().splitlines())
    assert f"tasks ({n_tasks})" in r.output and "find_book" in r.output
    r = cli("catalog", "list", example, "--json")
    assert r.exit_code == 0 and '"status": "verified"' in r.output
    assert snapshot(example) == before  # same bytes, no -wal/-shm made, no WAL switch
    assert journal_mode_byte(example / CATALOG_DB) == mode


def test_list_sees_what_a_running_writer_committed(example: Path) -> None:
    writer = Catalog(example)  # a run in progress: its connection is open, its -wal exists
    writer.set_environment("s-new", name="Zoo ticketing", status="building", reason="")
    try:
        assert (example / f"{CATALOG_DB}-wal").is_file()
        r = cli("catalog", "list", example, "--json")
        assert r.exit_code == 0, r.output
        names = [e["name"] for e in json.loads(r.output)]
        assert ENV_NAME in names and names[-1] == "Zoo ticketing", names
    finally:
        writer.close()


def test_a_writer_still_switches_to_wal_and_a_reader_cannot_write(example: Path) -> None:
    cat = Catalog.open_readonly(example)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        cat.db.execute("DELETE FROM tasks")
    cat.close()
    Catalog(example).close()
    assert journal_mode_byte(example / CATALOG_DB) == 2


# ---------------------------------------------------------------- bad catalog.db: named, exit 2, untouched


def _truncated_catalog(d: Path) -> None:
    data = (EXAMPLE / CATALOG_DB).read_bytes()
    (d / CATALOG_DB).write_bytes(data[: len(data) // 3])  # a valid header, pages missing


def _foreign_db(d: Path) -> None:
    with sqlite3.connect(d / CATALOG_DB) as con:
        con.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda d: (d / CATALOG_DB).write_bytes(b""), "empty file (0 bytes)"),
    (lambda d: (d / CATALOG_DB).write_bytes(b"this is not a database at all\n" * 200), "file is not a database"),
    (_truncated_catalog, "malformed"),
    (_foreign_db, "not a catalog database (no table 'meta'; it has photos)"),
], ids=["zero-bytes", "garbage", "truncated", "foreign-sqlite"])
@pytest.mark.parametrize("command", [("list",), ("show", ENV_NAME)], ids=["list", "show"])
def test_bad_catalog_db_is_named_and_left_alone(tmp_path: Path, make, fragment: str, command: tuple[str, ...]) -> None:
    d = tmp_path / "cat"
    d.mkdir()
    make(d)
    before = snapshot(d)
    r = cli("catalog", command[0], d, *command[1:])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {d / CATALOG_DB}: ") and fragment in r.output, r.output
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)
    assert snapshot(d) == before


def test_run_refuses_a_corrupt_catalog_without_touching_it(tmp_path: Path) -> None:
    out = tmp_path / "cat"
    out.mkdir()
    (out / CATALOG_DB).write_bytes(b"garbage" * 1000)
    seeds = tmp_path / "s.txt"
    seeds.write_text("hotel booking\n")
    before = snapshot(out)
    r = cli("run", "--seeds", seeds, "--out", out, "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert r.exit_code == 2, r.output
    assert f"error: {out / CATALOG_DB}: cannot be opened: file is not a database" in r.output
    assert snapshot(out) == before


def test_a_writer_takes_an_empty_file_as_a_new_catalog(tmp_path: Path) -> None:
    (tmp_path / CATALOG_DB).write_bytes(b"")  # what a kill right after SQLite created the file leaves
    cat = Catalog(tmp_path)
    cat.claim("abc", allow_other=False)
    cat.close()
    assert Catalog.open_readonly(tmp_path).fingerprint() == "abc"


def test_a_writer_completes_tables_missing_after_a_kill(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / CATALOG_DB) as con:  # killed after the first tables were created
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY)")
    with pytest.raises(CatalogError, match="no table 'seeds'"):
        Catalog.open_readonly(tmp_path)
    Catalog(tmp_path).close()
    assert Catalog.open_readonly(tmp_path).environments() == []


def test_missing_catalog_db() -> None:
    r = cli("catalog", "list", ROOT / "seeds")
    assert r.exit_code == 2 and "is not a catalog (no catalog.db)" in r.output


# ---------------------------------------------------------------- a read-only directory


def _read_only_prefix(d: Path) -> list[str]:
    """What to run a command under so that ``d`` is read-only for it: nothing for a normal user (the test
    chmods ``d``); as root, who ignores modes, a private mount namespace where ``d`` is bind-mounted read-only."""
    if os.geteuid() != 0:
        return []
    prefix = ["unshare", "-m", "sh", "-c", f"mount --bind -o ro '{d}' '{d}' && exec \"$@\"", "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"running as root without the right to mount ({probe.stderr.strip()}): cannot make a "
                    "read-only directory here")
    return prefix


def test_list_and_show_work_in_a_read_only_directory(example: Path) -> None:
    assert journal_mode_byte(example / CATALOG_DB) == 2  # WAL: the hard case (a reader needs -shm)
    before = snapshot(example)
    modes = {p: p.stat().st_mode for p in [example, *example.rglob("*")]}
    for p in sorted(modes, key=lambda p: -len(p.parts)):
        p.chmod(0o555 if p.is_dir() else 0o444)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    try:
        prefix = _read_only_prefix(example)
        touch = subprocess.run([*prefix, "touch", str(example / "probe")], capture_output=True)
        assert touch.returncode != 0, "the directory is not read-only for the command"
        for args in (["list", str(example)], ["show", str(example), ENV_NAME]):
            cmd = [*prefix, sys.executable, "-m", "pipeline.cli", "catalog", *args]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
            assert r.returncode == 0, r.stderr[-2000:]
            assert ENV_NAME in r.stdout
    finally:
        for p, mode in modes.items():
            p.chmod(mode)
    assert snapshot(example) == before
