"""The executors: items in flight are bounded and pulled lazily, results come back with their item, our own
errors propagate unretried; on a local Ray instance, a lost worker is retried and the function shipped once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pipeline.executor import ExecutorError, LocalExecutor, make_executor
from pipeline.executor.base import run_in_flight


class Handles:
    """A scripted backend for :func:`run_in_flight`: handles are ints, ``wait_any`` says every pending handle
    is done, most recent first; what was submitted, waited on and abandoned is recorded."""

    def __init__(self, fail_on: int | None = None):
        self.fail_on = fail_on
        self.submitted: list[int] = []
        self.waits: list[list[int]] = []
        self.abandoned: list[int] = []

    def submit(self, x: int) -> int:
        self.submitted.append(x)
        return 100 + x

    def wait_any(self, handles: list[int]) -> list[int]:
        self.waits.append(list(handles))
        return list(reversed(handles))

    def collect(self, handle: int, x: int) -> int:
        if x == self.fail_on:
            raise KeyError(f"item {x} is broken")
        return handle

    def abandon(self, handles: list[int]) -> None:
        self.abandoned += handles

    def run(self, items, limit: int):
        return run_in_flight(items, limit, self.submit, self.wait_any, self.collect, self.abandon)


def test_run_in_flight_keeps_the_limit_and_yields_in_submission_order():
    h = Handles()
    assert list(h.run(range(5), 2)) == [(0, 100), (1, 101), (2, 102), (3, 103), (4, 104)]
    assert h.waits == [[100, 101], [102, 103], [104]] and h.abandoned == []


def test_run_in_flight_abandons_what_is_in_flight_when_stopped_or_failed():
    h = Handles()
    run = h.run(range(9), 3)
    assert next(run) == (0, 100)
    run.close()  # the consumer stops: the two others of that wait are still pending
    assert h.submitted == [0, 1, 2] and sorted(h.abandoned) == [101, 102]
    h = Handles(fail_on=1)
    with pytest.raises(KeyError, match="item 1"):
        list(h.run(range(9), 3))
    assert h.submitted == [0, 1, 2] and sorted(h.abandoned) == [102]


def test_local_executor_bounds_what_is_in_flight_and_pulls_lazily():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0, "pulled": 0}
    gate = threading.Barrier(3, timeout=10)  # three items must be in flight at once to pass

    def items():
        for i in range(9):
            with lock:
                state["pulled"] += 1
            yield i

    def fn(i: int) -> int:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        if i < 3:
            gate.wait()
        with lock:
            state["now"] -= 1
        return i * i

    seen = []
    for item, result in LocalExecutor(3).run(items(), fn):
        assert result == item * item
        with lock:
            assert state["pulled"] <= len(seen) + 1 + 3  # never more than the slots ahead of the results
        seen.append(item)
    assert sorted(seen) == list(range(9)) and state["peak"] == 3


def test_local_executor_lets_our_errors_through():
    def fn(i: int) -> int:
        if i == 2:
            raise KeyError("item 2 is broken")
        return i

    with pytest.raises(KeyError, match="item 2"):
        list(LocalExecutor(2).run(range(5), fn))


def test_make_executor_names_bad_choices():
    assert make_executor("local", workers=2).describe() == "local (2 in flight)"
    with pytest.raises(ExecutorError, match="unknown executor 'dask'"):
        make_executor("dask", workers=2)
    with pytest.raises(ExecutorError, match="only meaningful with --executor ray"):
        make_executor("local", workers=2, address="auto")
    with pytest.raises(ExecutorError, match="workers must be >= 1"):
        LocalExecutor(0)


# ---------------------------------------------------------------- Ray (a local instance, 2 CPUs)


class Square:
    """A picklable function with a counter of how often it was shipped (pickled)."""

    pickled = 0

    def __reduce__(self):
        Square.pickled += 1
        return (Square, ())

    def __call__(self, i: int) -> tuple[int, int]:
        return i, i * i


def test_ray_results_match_local_and_the_function_is_shipped_once(ray_local):
    from pipeline.executor import RayExecutor

    Square.pickled = 0
    ex = RayExecutor(2)
    got = dict(ex.run(range(6), Square()))
    assert got == dict(LocalExecutor(2).run(range(6), Square()))
    assert Square.pickled == 1  # one ray.put, not one copy per task
    assert ex.describe() == "ray on a local Ray instance (2 tasks in flight)"


class Flaky:
    """Dies (the whole worker process) the first time it sees item 1; raises our own error on item 3.
    Attempts are counted in files: the workers are other processes."""

    def __init__(self, d: Path):
        self.d = d

    def __call__(self, i: int) -> int:
        marker = self.d / f"attempt-{i}"
        n = len(marker.read_text()) if marker.exists() else 0
        marker.write_text("x" * (n + 1))
        if i == 1 and n == 0:
            os._exit(1)  # a lost worker: Ray's business, retried
        if i == 3:
            raise ValueError("our own bug on item 3")  # ours: never retried
        return i


def test_ray_retries_a_lost_worker_but_never_our_own_error(ray_local, tmp_path):
    from pipeline.executor import RayExecutor

    ok = dict(RayExecutor(2).run([0, 1, 2], Flaky(tmp_path)))
    assert ok == {0: 0, 1: 1, 2: 2}
    assert (tmp_path / "attempt-1").read_text() == "xx"  # died once, retried once
    with pytest.raises(ValueError, match="our own bug on item 3"):
        list(RayExecutor(2).run([3], Flaky(tmp_path)))
    assert (tmp_path / "attempt-3").read_text() == "x"  # exactly one attempt
