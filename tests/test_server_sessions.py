"""Sessions of server.py over real HTTP on loopback: each MCP session (real mcp SDK client) and each
X-Session-Id has its own copy of the initial database; reset and close; a session limit answered 429;
idle sessions expire; the default session stays the --db file."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pipeline.envdir import write_env_dir
from tests.fixtures.library import library_env
from tests.fixtures.server import http, request, running_server

ENV = library_env()
SESSIONS = 100
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory):
    return write_env_dir(ENV, tmp_path_factory.mktemp("sessions") / "library")


def serve(env_dir, tmp_path, *args: str):
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    return running_server(env_dir, db, args=args), db


def wait_for(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)  # polling interval, not a fixed wait


def add_book(title: str) -> dict:
    return {"title": title, "author": "Test Author", "genre": "science", "year": 2001, "replacement_cost": 5}


def test_100_concurrent_mcp_sessions_each_see_only_their_own_writes(env_dir, tmp_path):
    server, db = serve(env_dir, tmp_path)  # the default cap (1,024) holds them

    async def rollout(i: int) -> tuple[list[str], bool]:
        async with streamable_http_client(base + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                added = await session.call_tool("add_book", add_book(f"Rollout {i:03d} notes"))
                again = await session.call_tool("add_book", add_book(f"Rollout {i:03d} appendix"))
                found = await session.call_tool("search_books", {"query": "Rollout", "limit": 50})
                ok = not added.is_error and not again.is_error and added.structured_content["result"]["id"] == 7
                return [r["title"] for r in found.structured_content["result"]], ok

    async def all_rollouts():
        return await asyncio.gather(*(rollout(i) for i in range(SESSIONS)))

    with server as base:
        started = time.monotonic()
        outcomes = asyncio.run(asyncio.wait_for(all_rollouts(), timeout=240))
        elapsed = time.monotonic() - started
        for i, (titles, ok) in enumerate(outcomes):
            assert ok, i  # every session starts from the initial state: its first new book gets id 7
            assert titles == [f"Rollout {i:03d} notes", f"Rollout {i:03d} appendix"], (i, titles)
        # the clients ended their sessions (DELETE): every session database is freed
        wait_for(lambda: http("GET", base + "/health")[1]["sessions"] == 0)
        assert http("POST", base + "/tools/search_books", {"query": "Rollout"}) == (200, {"ok": True, "result": []})
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM books").fetchone()[0] == 6  # the --db file (default session) untouched
    print(f"{SESSIONS} MCP sessions, 3 calls each: {elapsed:.1f} s")


def test_x_session_id_isolates_http_callers_with_reset_and_close(env_dir, tmp_path):
    server, db = serve(env_dir, tmp_path)
    with server as base:
        def call(sid, name, args):
            return http("POST", f"{base}/tools/{name}", args, headers={"X-Session-Id": sid} if sid else None)

        assert call("alice", "add_book", add_book("Alice's book"))[1]["result"]["id"] == 7
        assert call("bob", "add_book", add_book("Bob's book"))[1]["result"]["id"] == 7
        assert call(None, "add_book", add_book("Shared book"))[1]["result"]["id"] == 7
        for sid, title in (("alice", "Alice's book"), ("bob", "Bob's book"), (None, "Shared book")):
            found = call(sid, "search_books", {"query": "book"})[1]["result"]
            assert [b["title"] for b in found] == [title], sid
        with sqlite3.connect(db) as c:
            assert [r[0] for r in c.execute("SELECT title FROM books WHERE id = 7")] == ["Shared book"]
        assert http("GET", base + "/health")[1]["sessions"] == 2
        assert http("POST", base + "/reset", headers={"X-Session-Id": "alice"}) == (200, {"ok": True})
        assert call("alice", "search_books", {"query": "book"})[1]["result"] == []
        assert [b["title"] for b in call("bob", "search_books", {"query": "book"})[1]["result"]] == ["Bob's book"]
        assert http("POST", base + "/close", headers={"X-Session-Id": "bob"}) == (200, {"ok": True, "closed": True})
        assert http("POST", base + "/close", headers={"X-Session-Id": "bob"}) == (200, {"ok": True, "closed": False})
        assert call("bob", "search_books", {"query": "book"})[1]["result"] == []  # a new, fresh session
        status, body = http("POST", base + "/close")
        assert status == 400 and "default session cannot be closed" in body["error"]
        for bad in ("", "a b", "x" * 129, "é"):
            status, body = http("POST", base + "/tools/get_book", {"book_id": 1}, headers={"X-Session-Id": bad})
            assert status == 400 and body["kind"] == "request", (bad, status, body)


def test_session_limit_is_429_and_idle_sessions_expire(env_dir, tmp_path):
    server, _ = serve(env_dir, tmp_path, "--max-sessions", "2", "--idle-timeout", "1")
    with server as base:
        for sid in ("a", "b"):
            assert http("POST", base + "/tools/get_book", {"book_id": 1}, headers={"X-Session-Id": sid})[0] == 200
        status, body, headers = request("POST", base + "/tools/get_book", {"book_id": 1}, headers={"X-Session-Id": "c"})
        assert status == 429 and body["kind"] == "session" and "all 2 sessions are in use" in body["error"]
        assert "--max-sessions N or ENVFOUNDRY_MAX_SESSIONS=N" in body["error"], body  # how to raise the cap
        assert re.search(r"each takes about \d+ KiB", body["error"]), body
        assert headers["retry-after"] == "1"
        assert http("POST", base + "/tools/get_book", {"book_id": 1})[0] == 200  # the default session always works
        # idle sessions are closed after --idle-timeout; then there is room again
        wait_for(lambda: http("GET", base + "/health")[1]["sessions"] == 0, timeout=15)
        assert http("POST", base + "/tools/get_book", {"book_id": 1}, headers={"X-Session-Id": "c"})[0] == 200


def test_mcp_sessions_over_the_limit_get_429(env_dir, tmp_path):
    server, _ = serve(env_dir, tmp_path, "--max-sessions", "2")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    with server as base:
        opened = [request("POST", base + "/mcp", init, headers=MCP_HEADERS) for _ in range(2)]
        assert [o[0] for o in opened] == [200, 200]
        status, body, headers = request("POST", base + "/mcp", init, headers=MCP_HEADERS)
        assert status == 429 and headers["retry-after"] == "1" and "Too many open sessions" in json.dumps(body)
        assert body["kind"] == "session" and "--max-sessions N or ENVFOUNDRY_MAX_SESSIONS=N" in body["error"], body
        sid = opened[0][2]["mcp-session-id"]
        assert request("DELETE", base + "/mcp", headers={"Mcp-Session-Id": sid, **MCP_HEADERS})[0] == 200
        assert request("POST", base + "/mcp", init, headers=MCP_HEADERS)[0] == 200  # room again


def sse_result(body) -> dict:
    if isinstance(body, dict):
        return body
    for line in body.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError(body)


def test_http_reaches_an_mcp_sessions_database_with_its_header(env_dir, tmp_path):
    server, _ = serve(env_dir, tmp_path)
    with server as base:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        _, _, headers = request("POST", base + "/mcp", init, headers=MCP_HEADERS)
        mcp = {**MCP_HEADERS, "Mcp-Session-Id": headers["mcp-session-id"]}
        request("POST", base + "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=mcp)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add_book", "arguments": add_book("Via MCP")}}
        status, body, _ = request("POST", base + "/mcp", call, headers=mcp)
        assert status == 200 and sse_result(body)["result"]["structuredContent"]["result"]["id"] == 7
        found = http("POST", base + "/tools/search_books", {"query": "Via"}, headers={"Mcp-Session-Id": mcp["Mcp-Session-Id"]})
        assert [b["title"] for b in found[1]["result"]] == ["Via MCP"]
        assert http("POST", base + "/tools/search_books", {"query": "Via"})[1]["result"] == []
        assert http("POST", base + "/reset", headers={"Mcp-Session-Id": mcp["Mcp-Session-Id"]})[0] == 200
        status, body, _ = request("POST", base + "/mcp", {**call, "id": 3}, headers=mcp)
        assert sse_result(body)["result"]["structuredContent"]["result"]["id"] == 7  # reset: the first new id again


def start_up_lines(env_dir, db, environ: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """Start server.py on any free port with ``environ`` set; its stderr up to its sessions line."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **environ}
    proc = subprocess.Popen([sys.executable, str(env_dir / "server.py"), "--db", str(db), "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=db.parent)
    read = ""
    while "sessions:" not in read:
        line = proc.stderr.readline()
        if not line:
            break
        read += line
    return proc, read


def test_start_up_says_the_cap_and_what_a_session_costs(env_dir, tmp_path):
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with sqlite3.connect(db) as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    for environ, cap in (({}, 1024), ({"ENVFOUNDRY_MAX_SESSIONS": "3"}, 3)):
        proc, read = start_up_lines(env_dir, db, environ)
        try:
            found = re.search(r"sessions: up to (\d+) at once \(--max-sessions or ENVFOUNDRY_MAX_SESSIONS\); one session "
                              r"measured (\d+) KiB at start-up \(its database copy\), about (\d+) MiB at the cap", read)
            assert found, read
            assert int(found.group(1)) == cap
            assert int(found.group(2)) >= pages // 1024  # at least the database's own pages
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stderr.close()
    bad = subprocess.run([sys.executable, str(env_dir / "server.py"), "--db", str(db), "--port", "0"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "ENVFOUNDRY_MAX_SESSIONS": "lots"})
    assert bad.returncode == 2 and "ENVFOUNDRY_MAX_SESSIONS='lots' is not a positive integer" in bad.stderr
    assert "Traceback" not in bad.stderr
