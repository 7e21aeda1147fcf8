"""A process waiting for the embedded model's turn says so at once and while it waits, naming who holds it; a
client with the embedded model starts no server of its own before it has the turn."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.config import LLMSettings
from pipeline.llm import machine_lock
from pipeline.llm.client import LLMClient, LLMUnavailable
from pipeline.llm.machine_lock import describe_holder, generation_turn, read_holder

HOLD = """
import sys, time
from pipeline.llm.machine_lock import generation_turn
with generation_turn():
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
    if len(sys.argv) > 2:
        open(sys.argv[2], "w").write(repr(time.time()))  # when it lets go (just after this)
"""


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVFOUNDRY_HOME", str(tmp_path))
    return tmp_path


def _holder(seconds: float, released: Path | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", HOLD, str(seconds)] + ([str(released)] if released else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_an_uncontended_turn_says_nothing_and_records_its_holder(home: Path) -> None:
    said: list[str] = []
    with generation_turn(said.append):
        record = read_holder()
    assert said == []
    assert record is not None and record["pid"] == os.getpid()
    assert record["command"] == machine_lock._command() and record["command"]


def test_a_waiting_process_names_the_holder_at_once_and_again_while_it_waits(home: Path) -> None:
    proc = _holder(1.5)
    said: list[str] = []
    t0 = time.monotonic()
    try:
        with generation_turn(said.append, repeat_s=0.5):
            waited = time.monotonic() - t0
    finally:
        proc.wait(10)
    assert waited >= 1.0
    first = said[0]
    assert first.startswith("waiting for the embedded model") and f"pid {proc.pid}" in first
    assert "-c" in first and "generating since" in first
    assert any(line.startswith("still waiting") and f"pid {proc.pid}" in line for line in said[1:-1])
    assert said[-1].startswith("the embedded model is free after")


def test_threads_of_one_process_queue_without_a_word(home: Path) -> None:
    said: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with generation_turn(said.append):
            inside.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(5)
    threading.Timer(0.3, release.set).start()
    with generation_turn(said.append, repeat_s=0.1):
        pass
    t.join()
    assert said == []


def test_a_gone_holder_is_described_as_gone() -> None:
    text = describe_holder({"pid": 2 ** 22 + 12345, "command": "envfoundry run seeds/x.txt", "since": 0.0},
                           now=90.0)
    assert "envfoundry run seeds/x.txt" in text and "now gone" in text and "1 min 30 s ago" in text
    assert describe_holder(None).startswith("another process")
    # a run that has taken turns for a while (a whole build) says so, and how long its current request has run
    long = describe_holder({"pid": os.getpid(), "command": "envfoundry run", "since": 0.0, "turn": 1000.0}, now=1030.0)
    assert "taking turns since" in long and "generating this request for 30 s" in long, long


def test_the_embedded_server_starts_only_once_the_turn_is_had(home: Path) -> None:
    released = home / "released"
    proc = _holder(1.0, released)
    started: list[float] = []
    settings = LLMSettings(cache=False, max_retries=0)  # type: ignore[call-arg]
    client = LLMClient(settings, base_url="http://127.0.0.1:9/v1", model="m", embedded=True,
                       on_first_request=lambda: started.append(time.time()))
    try:
        with pytest.raises(LLMUnavailable):  # nothing listens on port 9: the request itself fails
            client.complete([{"role": "user", "content": "hi"}], stage="test")
    finally:
        proc.wait(10)
    assert started and started[0] >= float(released.read_text())  # after the other process let go, not before


def test_a_process_that_lets_go_lets_a_waiting_process_have_the_next_turn(home: Path) -> None:
    """Two processes asking back to back take turns, request by request (flock alone would let one keep it)."""
    script = """
import os, sys, time
from pipeline.llm.machine_lock import generation_turn
while not os.path.exists(sys.argv[2]):  # both start together
    time.sleep(0.01)
for i in range(4):
    with generation_turn(lambda text: None):
        print(sys.argv[1], flush=True)
        time.sleep(0.2)
"""
    log, go = home / "turns.log", home / "go"
    with open(log, "w") as out:
        procs = [subprocess.Popen([sys.executable, "-c", script, name, str(go)], stdout=out, env={**os.environ})
                 for name in ("a", "b")]
        time.sleep(3.0)  # both imported and looking for the go file
        go.touch()
        for proc in procs:
            proc.wait(30)
    turns = log.read_text().split()
    assert sorted(turns) == ["a"] * 4 + ["b"] * 4
    switches = sum(1 for x, y in zip(turns, turns[1:], strict=False) if x != y)
    assert switches >= 5, turns  # interleaved, not aaaabbbb


def test_a_thread_waiting_for_the_turn_stops_when_the_process_is_told_to(home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM or Ctrl-C (``pipeline.llm.embedded``'s handlers call :func:`machine_lock.stop`) while a run's worker
    thread waits for another process's turn: the wait ends. Before, the main thread's SystemExit left the worker
    waiting and the exiting interpreter joined it (a regeneration outlived its SIGTERM, 2026-11-30)."""
    monkeypatch.setattr(machine_lock, "_stopping", threading.Event())
    holder = _holder(600.0)
    said: list[str] = []
    ended: list[BaseException] = []

    def ask() -> None:
        try:
            with generation_turn(said.append, repeat_s=60):
                said.append("generating")
        except BaseException as e:  # noqa: BLE001 - the test reads what ended the wait
            ended.append(e)

    worker = threading.Thread(target=ask, daemon=True)
    try:
        worker.start()
        while not said:
            time.sleep(0.05)
        assert said[0].startswith("waiting for the embedded model")
        machine_lock.stop()
        worker.join(60)
        assert not worker.is_alive() and "generating" not in said
        assert len(ended) == 1 and isinstance(ended[0], machine_lock.StoppedWaiting)
    finally:
        holder.kill()
        holder.wait(10)


def test_a_stopped_process_waits_no_more(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine_lock, "_stopping", threading.Event())
    machine_lock.stop()
    with pytest.raises(machine_lock.StoppedWaiting), generation_turn(lambda text: None):
        pass
