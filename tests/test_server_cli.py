"""``envfoundry serve``: serves an env dir's own server.py, on a temporary copy or on --db."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def serve_until_serving(args: list[str], timeout: float = 60) -> tuple[subprocess.Popen, str, str]:
    """Start ``serve`` and read stderr until it says where it serves; returns (process, base URL, text read)."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "serve", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    read = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        read += line
        found = re.search(r"serving \S+ at (http://127\.0\.0\.1:(\d+))", line)
        if found:
            return proc, found.group(1), read
    proc.kill()
    raise AssertionError(f"serve did not report its address: {read}{proc.communicate()[1]}")


def test_serve_port_0_prints_the_bound_port(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    proc, base, _ = serve_until_serving([str(env_dir), "--port", "0"])
    try:
        assert not base.endswith(":0")
        assert http("GET", base + "/health")[0] == 200
    finally:
        code, err = stop(proc)
    assert code == 0, err


def test_a_taken_port_is_a_clear_error_before_serving(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-c", SCRIPT, "serve", str(env_dir), "--port", str(port)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        direct = subprocess.run([sys.executable, str(env_dir / "server.py"), "--db", str(env_dir / "initial.db"),
                                 "--port", str(port)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    for result in (out, direct):
        assert result.returncode == 2, result.stderr
        assert f"cannot listen on http://127.0.0.1:{port}: the port is already in use" in result.stderr
        assert "serving" not in result.stderr and "Traceback" not in result.stderr


def test_server_py_with_mcp_1_says_it_needs_mcp_2(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    fake = tmp_path / "site"
    (fake / "mcp").mkdir(parents=True)
    (fake / "mcp" / "__init__.py").write_text("raise ImportError('this is mcp 1.x')\n")
    (fake / "mcp-1.26.0.dist-info").mkdir()
    (fake / "mcp-1.26.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: mcp\nVersion: 1.26.0\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(env_dir / "server.py"), "--db", str(env_dir / "initial.db"), "--port", "0"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**env, "PYTHONPATH": str(fake)})
    assert out.returncode == 1
    assert out.stderr.strip() == ("error: server.py needs mcp >= 2 (installed: 1.26.0); "
                                  "run: pip install 'mcp>=2' fastapi uvicorn")


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "not a valid environment: (top level): Invalid JSON"),
    ('{"scenario": {"name": "x", "description": "y"}, "tables": [], "tools": [{"name": "bad name"}]}',
     "not a valid environment: tools.0.name"),
    ("", "not a valid environment"),
])
def test_serve_and_render_name_a_bad_env_json(tmp_path, content, problem):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    (env_dir / "env.json").write_text(content)
    for command in (["serve", str(env_dir)], ["render", str(env_dir)], ["render", "--check", str(env_dir)]):
        out = subprocess.run([sys.executable, "-c", SCRIPT, *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, (command, out.stderr)
        assert f"error: {env_dir / 'env.json'}: " in out.stderr and problem in out.stderr, (command, out.stderr)
        assert "Traceback" not in out.stderr


def test_serve_refuses_a_modified_server_py_unless_allowed(tmp_path):
    env_dir = write_env_dir(library_env(), tmp_path / "library")
    server = env_dir / "server.py"
    server.write_text(server.read_text().replace("MAX_BODY_BYTES = 1 << 20", "MAX_BODY_BYTES = 1 << 21"))
    refused = subprocess.run([sys.executable, "-c", SCRIPT, "serve", str(env_dir), "--port", "0"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "no longer matches" in refused.stderr and "--allow-modified" in refused.stderr
    assert "serving" not in refused.stderr
    proc, base, read = serve_until_serving([str(env_dir), "--port", "0", "--allow-modified"])
    try:
        assert "warning: serving" in read and http("GET", base + "/health")[0] == 200
    finally:
        stop(proc)
