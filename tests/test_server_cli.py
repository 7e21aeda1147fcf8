"""``envfoundry serve``: serves an env dir's own server.py, on a temporary copy or on --db."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

from pipeline.envdir import write_env_dir
from tests.fixtures.library import library_env
from tests.fixtures.server import free_port, http, wait_ready

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "import sys, click; from pipeline.cli.envs import register; g = click.Group(); register(g); g(sys.argv[1:])"


def serve(args: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "serve", *args, "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc)
    except RuntimeError:
        proc.kill()
        raise RuntimeError(proc.communicate()[1][-2000:]) from None
    return proc, base


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    return proc.returncode, err


def test_serve_uses_a_temporary_copy_and_removes_it(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    before = hashlib.sha256((env_dir / "initial.db").read_bytes()).hexdigest()
    proc, base = serve([str(env_dir)])
    try:
        status, body = http("POST", base + "/tools/borrow_book", {"member_id": 4, "book_id": 2})
        assert status == 200 and body["ok"]
    finally:
        code, err = stop(proc)
    assert code == 0, err
    assert hashlib.sha256((env_dir / "initial.db").read_bytes()).hexdigest() == before
    copy = Path(re.search(r"database: (\S+)\)", err).group(1))
    assert copy.name == "env.db" and not copy.exists() and not copy.parent.exists()


def test_serve_writes_to_the_given_db(tmp_path):
    import sqlite3

    env_dir = write_env_dir(library_env(), tmp_path / "library")
    db = tmp_path / "episode.db"
    proc, base = serve([str(env_dir), "--db", str(db)])
    try:
        assert http("POST", base + "/tools/return_book", {"book_id": 3})[0] == 200
    finally:
        code, err = stop(proc)
    assert code == 0, err
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT returned_at FROM loans WHERE id = 2").fetchone()[0] == "2026-01-15T09:00:00"


def test_serve_refuses_a_directory_without_server(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, "serve", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "not an environment directory" in out.stderr


def test_server_py_refuses_a_missing_or_corrupt_database(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    server = str(env_dir / "server.py")
    missing = subprocess.run([sys.executable, server, "--db", str(tmp_path / "nope.db"), "--port", "1"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    junk = tmp_path / "junk.db"
    junk.write_text("this is not a database" * 100)
    corrupt = subprocess.run([sys.executable, server, "--db", str(junk), "--port", "1"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert corrupt.returncode == 2 and "cannot open" in corrupt.stderr and "Traceback" not in corrupt.stderr
