"""The machine-wide turn to generate with the embedded model, and what a process waiting for it is told.

Several llama.cpp servers decoding at once on a few cores thrash, so every process that uses the embedded model
takes one ``flock`` (``$ENVFOUNDRY_HOME/embedded-generation.lock``) around each request. The holder writes who
it is beside the lock (``embedded-generation.holder``: process id, command, since when); a process that finds
the lock taken says so at once on stderr, naming the holder, and again every ``REPEAT_S`` while it waits, so a
wait never looks like a hang. ``flock`` is not fair: a process asking back to back would keep the turn for as long
as it has requests. So a waiter leaves its process id in ``embedded-waiters/`` and a holder that lets go while
another process waits pauses until that one has the turn (``YIELD_S`` at most) before asking again: processes
take turns request by request.

A process asked to stop (SIGTERM or Ctrl-C: :func:`stop`, from the signal handlers of ``pipeline.llm.embedded``)
stops waiting at once: the wait raises :class:`StoppedWaiting` (a ``SystemExit``, so no stage's ``except Exception``
retries it) in the thread that waits. Before this, a run killed while one of its worker threads waited for the turn
kept waiting: the interpreter, exiting, joins those threads (seen 2026-11-30: a regeneration outlived its SIGTERM).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from pipeline.config import default_home

#: seconds between two "still waiting" lines
REPEAT_S = 30.0
#: seconds a holder that lets go waits before asking again when another process waits (waiters look every POLL_S)
YIELD_S = 0.5
POLL_S = 0.05

_first_turn: float | None = None  # when this process first generated (the holder's "since")
_first_turn_lock = threading.Lock()
_in_process = threading.Lock()  # this process's threads queue here: only other processes are worth a word
_stopping = threading.Event()


class StoppedWaiting(SystemExit):
    """The process was asked to stop while a thread of it waited for the embedded model's turn."""


def stop() -> None:
    """Stop every wait of this process for the turn, now and from now on (the process is ending)."""
    _stopping.set()


def _check_stopping() -> None:
    if _stopping.is_set():
        raise StoppedWaiting("envfoundry: stopped while waiting for the embedded model")


def lock_path() -> Path:
    return default_home() / "embedded-generation.lock"


def holder_path() -> Path:
    return default_home() / "embedded-generation.holder"


def waiters_dir() -> Path:
    return default_home() / "embedded-waiters"


def others_waiting() -> bool:
    """Does a live process other than this one wait for the turn?"""
    try:
        names = [p.name for p in waiters_dir().iterdir()]
    except OSError:
        return False
    return any(n.isdigit() and int(n) != os.getpid() and _alive(int(n)) for n in names)


def _command() -> str:
    try:
        raw = Path("/proc/self/cmdline").read_bytes().split(b"\0")
        argv = [a.decode(errors="replace") for a in raw if a]
    except OSError:
        argv = list(sys.argv)
    if len(argv) > 1 and os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]  # "python -m pytest ..." reads better without the interpreter's path
    argv[0] = os.path.basename(argv[0])
    text = shlex.join(argv)
    return text if len(text) <= 160 else text[:157] + "..."


def _write_holder() -> None:
    global _first_turn
    with _first_turn_lock:
        if _first_turn is None:
            _first_turn = time.time()
        since = _first_turn
    record = {"pid": os.getpid(), "command": _command(), "since": since, "turn": time.time()}
    path = holder_path()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)
    except OSError:  # who holds the lock is information for others, never a reason to fail
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_holder() -> dict[str, object] | None:
    """The last holder's record, or None if there is none or it is unreadable."""
    try:
        record = json.loads(holder_path().read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def describe_holder(record: dict[str, object] | None, now: float | None = None) -> str:
    if not record:
        return "another process (it left no record of itself)"
    now = time.time() if now is None else now
    pid = record.get("pid")
    alive = isinstance(pid, int) and _alive(pid)
    since = record.get("since")
    when = ""
    if isinstance(since, (int, float)):
        stamp = time.strftime("%H:%M:%S", time.localtime(since))
        when = f", generating since {stamp} ({_duration(now - since)} ago)"
        turn = record.get("turn")
        if isinstance(turn, (int, float)) and turn - since >= 1:  # a long run takes turns request by request
            when = (f", taking turns since {stamp} ({_duration(now - since)} ago), generating this request for "
                    f"{_duration(now - turn)}")
    who = f"`{record.get('command', '?')}` (pid {pid}{'' if alive else ', now gone'})"
    return who + when


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _say(text: str) -> None:
    print(f"envfoundry: {text}", file=sys.stderr, flush=True)


def _wait(f: IO[str], say: Callable[[str], None], repeat_s: float) -> None:
    start = time.monotonic()
    say(f"waiting for the embedded model: {describe_holder(read_holder())} is using it; this process starts "
        f"its own model server only when it may generate (lock: {lock_path()})")
    next_say = start + repeat_s
    mark = waiters_dir() / str(os.getpid())
    with contextlib.suppress(OSError):
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()
    try:
        while True:
            _check_stopping()
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            now = time.monotonic()
            if now >= next_say:
                say(f"still waiting for the embedded model ({_duration(now - start)} so far): "
                    f"{describe_holder(read_holder())} is using it")
                next_say = now + repeat_s
            time.sleep(POLL_S)
    finally:
        with contextlib.suppress(OSError):
            mark.unlink()
    say(f"the embedded model is free after {_duration(time.monotonic() - start)} of waiting; generating")


@contextlib.contextmanager
def generation_turn(say: Callable[[str], None] = _say, repeat_s: float = REPEAT_S) -> Iterator[None]:
    """Hold the machine's embedded-model turn for one request. Waiting is said at once and every ``repeat_s``;
    an uncontended turn says nothing."""
    path = lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    _check_stopping()
    while not _in_process.acquire(timeout=POLL_S * 10):  # a thread of this process has the turn
        _check_stopping()
    try:
        with open(path, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _wait(f, say, repeat_s)
            try:
                _write_holder()
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
    finally:
        _in_process.release()
    # flock is not fair: let a waiting process have the next turn (until it has it, YIELD_S at most) before
    # this one asks again
    deadline = time.monotonic() + YIELD_S
    while others_waiting() and time.monotonic() < deadline:
        time.sleep(POLL_S / 2)
