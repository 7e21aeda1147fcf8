"""Limits of the generated server.py over real HTTP on loopback: SQLite runs off the event loop, a call
has a time limit, values a size limit, results a row limit, and a lock held elsewhere is waited on and
then reported as a retriable 503 (never as a tool definition error)."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time

import pytest

from pipeline.envdir import write_env_dir
from pipeline.ir import Param, Returns, Tool
from pipeline.runtime import engine
from tests.fixtures.library import library_env
from tests.fixtures.server import http, request, running_server

BASE = library_env()
COUNT = Tool(name="count_to", description="Count to n the slow way.", kind="read",
             params=[Param(name="n", type="integer", minimum=1)],
             returns=Returns(sql="WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n) "
                                 "SELECT COUNT(*) AS n FROM c", mode="one"))
PAD = Tool(name="pad", description="A line of n copies of a character.", kind="read",
           params=[Param(name="n", type="integer"), Param(name="ch", type="string", max_length=1)],
           returns=Returns(sql="SELECT printf('%.*c', :n, :ch) AS line", mode="one"))
BLOB = Tool(name="blob", description="n zero bytes.", kind="read", params=[Param(name="n", type="integer")],
            returns=Returns(sql="SELECT length(zeroblob(:n)) AS n", mode="one"))
NUMBERS = Tool(name="numbers", description="The numbers 1..n.", kind="read", params=[Param(name="n", type="integer")],
               returns=Returns(sql="WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n) "
                                   "SELECT i FROM c", mode="all"))
ENV = BASE.model_copy(update={"tools": [*BASE.tools, COUNT, PAD, BLOB, NUMBERS]})
CALL_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("limits")
    env_dir = write_env_dir(ENV, root / "env")
    db = root / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db, args=("--call-timeout", str(CALL_TIMEOUT), "--busy-timeout", "0.5")) as base:
        yield base, db


def test_health_answers_promptly_while_a_slow_call_runs(served):
    base, _ = served
    slow: dict = {}

    def call() -> None:
        started = time.monotonic()
        slow["out"] = http("POST", base + "/tools/count_to", {"n": 10**12}, timeout=30)
        slow["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=call)
    thread.start()
    latencies = []
    deadline = time.monotonic() + CALL_TIMEOUT * 0.6
    while time.monotonic() < deadline:
        started = time.monotonic()
        assert http("GET", base + "/health", timeout=5)[0] == 200
        latencies.append(time.monotonic() - started)
    assert thread.is_alive()  # every health check above overlapped the slow call
    thread.join(30)
    status, body = slow["out"]
    assert status == 400 and body["kind"] == "sql" and "took too long" in body["error"], body
    assert CALL_TIMEOUT <= slow["seconds"] < CALL_TIMEOUT + 3
    assert len(latencies) >= 5 and max(latencies) < 0.5, latencies


def test_huge_printf_fails_fast_with_a_clear_tool_error(served):
    base, _ = served
    started = time.monotonic()
    status, body = http("POST", base + "/tools/pad", {"n": 2_000_000_000, "ch": "x"})
    assert time.monotonic() - started < 1.5
    assert status == 400 and body["kind"] == "sql", body
    assert body["error"] == (f"rejected by the database: printf() width or precision 2000000000 is over the limit of "
                             f"{engine.MAX_VALUE_BYTES} characters")
    assert http("POST", base + "/tools/pad", {"n": 3, "ch": "x"}) == (200, {"ok": True, "result": {"line": "xxx"}})


def test_value_and_row_limits(served):
    base, _ = served
    status, body = http("POST", base + "/tools/blob", {"n": 2_000_000_000})
    assert status == 400 and "string or blob too big" in body["error"] and body["error"].startswith("rejected by the database")
    assert http("POST", base + "/tools/blob", {"n": 1000}) == (200, {"ok": True, "result": {"n": 1000}})
    status, body = http("POST", base + "/tools/numbers", {"n": engine.MAX_ROWS})
    assert status == 200 and len(body["result"]) == engine.MAX_ROWS
    status, body = http("POST", base + "/tools/numbers", {"n": engine.MAX_ROWS + 1})
    assert status == 400 and f"more than {engine.MAX_ROWS} rows" in body["error"]


def test_a_lock_held_elsewhere_is_waited_on_then_reported_as_retriable(served):
    base, db = served
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE members SET name = name")
        started = time.monotonic()
        status, body, headers = request("POST", base + "/tools/update_member_email", {"member_id": 4, "email": "dan@new.example"})
        waited = time.monotonic() - started
        assert status == 503 and body["kind"] == "busy" and "retry" in body["error"], body
        assert headers["retry-after"] == "1"
        assert "tool definition" not in body["error"]
        assert 0.4 <= waited < 5
        assert http("POST", base + "/tools/get_book", {"book_id": 1})[0] == 200  # reads are not blocked
        release = threading.Timer(0.2, lambda: other.execute("COMMIT"))
        release.start()
        status, body = http("POST", base + "/tools/update_member_email", {"member_id": 4, "email": "dan@new.example"})
        release.join()
        assert status == 200 and body["result"]["email"] == "dan@new.example", body  # waited for the lock, then ran
    finally:
        other.close()


def test_a_slow_call_does_not_stall_other_sessions(tmp_path_factory):
    """Two workers: session A's slow call holds one, A's next call waits for it on the event loop (not in the
    other worker), and sessions B to E keep calling tools meanwhile."""
    root = tmp_path_factory.mktemp("workers")
    env_dir = write_env_dir(ENV, root / "env")
    db = root / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db, args=("--call-timeout", str(CALL_TIMEOUT), "--workers", "2")) as base:
        slow: dict = {}

        def call_a(which: str, n: int) -> None:
            started = time.monotonic()
            slow[which] = http("POST", base + "/tools/count_to", {"n": n}, headers={"X-Session-Id": "a"}, timeout=30)
            slow[which + "_done"] = time.monotonic() - started

        first = threading.Thread(target=call_a, args=("first", 10**12))
        first.start()
        deadline = time.monotonic() + 10
        while http("GET", base + "/health")[1]["sessions"] < 1:  # session A exists once its call is running
            assert time.monotonic() < deadline
        second = threading.Thread(target=call_a, args=("second", 3))
        second.start()
        latencies = []
        deadline = time.monotonic() + CALL_TIMEOUT * 0.6
        while time.monotonic() < deadline:
            for session in "bcde":
                started = time.monotonic()
                status, body = http("POST", base + "/tools/count_to", {"n": 1000}, headers={"X-Session-Id": session})
                assert status == 200 and body["result"] == {"n": 1000}, body
                latencies.append(time.monotonic() - started)
        assert first.is_alive() and second.is_alive()  # every call above overlapped A's slow call
        first.join(30)
        second.join(30)
        assert slow["first"][0] == 400 and "took too long" in slow["first"][1]["error"], slow
        assert slow["second"] == (200, {"ok": True, "result": {"n": 3}}) and slow["second_done"] >= CALL_TIMEOUT - 0.5
        assert len(latencies) >= 20 and max(latencies) < 0.5, latencies
