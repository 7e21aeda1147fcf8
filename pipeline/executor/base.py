"""The executor interface (after datatrove's ``executor/base.py``): run a function over items, a bounded
number in flight, results yielded as they finish; :func:`run_in_flight` is the one loop that keeps them in
flight, whatever runs them (threads, processes, Ray tasks)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pipeline.settings import LLMSettings

X = TypeVar("X")
R = TypeVar("R")
H = TypeVar("H", bound=Hashable)


def run_in_flight(items: Iterable[X], limit: int, submit: Callable[[X], H],
                  wait_any: Callable[[list[H]], Collection[H]], collect: Callable[[H, X], R],
                  abandon: Callable[[list[H]], None]) -> Iterator[tuple[X, R]]:
    """Yield ``(item, result)`` with at most ``limit`` items in flight, pulling an item only when a slot is free.

    ``submit(item)`` starts one and returns its handle (a future, a Ray object ref); ``wait_any(handles)``
    blocks until one or more are done and returns those; ``collect(handle, item)`` gives the result or raises
    (the executor turns its own failures into :class:`ExecutorError`, ``fn``'s errors pass unchanged).
    Items done in one wait come back in submission order. When the consumer stops early or an error ends the
    run, ``abandon(handles)`` gets the ones still in flight.
    """
    it = iter(items)
    pending: dict[H, X] = {}
    try:
        while True:
            while len(pending) < limit:
                try:
                    x = next(it)
                except StopIteration:
                    break
                pending[submit(x)] = x
            if not pending:
                return
            done = set(wait_any(list(pending)))
            for handle in [h for h in pending if h in done]:
                x = pending.pop(handle)
                yield x, collect(handle, x)
    finally:
        if pending:
            abandon(list(pending))


class ExecutorError(RuntimeError):
    """The executor itself failed (cannot start, lost a worker for good); says which item and why."""


class Executor(ABC):
    """``run(items, fn)`` yields ``(item, fn(item))`` in completion order, at most ``workers`` in flight.

    Items are pulled from ``items`` only when a slot is free, so a generator can record "started" as it
    hands each one out. An exception raised by ``fn`` is ours: it propagates unchanged and is never
    retried (``fn`` should turn expected failures into results).

    ``fn`` may define ``for_remote(executor) -> fn`` (called once before shipping it to other processes)
    and ``remote_done()`` (called once after the last result): :class:`ScenarioWork` uses them to open and
    close the driver-side LLM cache service.
    """

    name = "executor"

    def __init__(self, workers: int):
        if workers < 1:
            raise ExecutorError(f"workers must be >= 1 (got {workers})")
        self.workers = workers

    @abstractmethod
    def run(self, items: Iterable[X], fn: Callable[[X], R]) -> Iterator[tuple[X, R]]:
        """Yield ``(item, fn(item))`` for every item, as each finishes."""

    def warm_up(self, llm: LLMSettings, *, wait: bool = False) -> None:
        """Start what takes time (worker processes) before the first item comes, in the background unless
        ``wait``; ``llm``: the run's :class:`~pipeline.config.LLMSettings`. Optional: ``run`` starts whatever
        is not started yet."""
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.workers} in flight)"

    @contextmanager
    def shipping(self, fn: Callable[[X], R]) -> Iterator[Callable[[X], R]]:
        """``fn`` as it goes to other processes (``fn.for_remote(self)`` if it has one); ``fn.remote_done()``
        runs when the block ends, however it ends."""
        prepare = getattr(fn, "for_remote", None)
        shipped = prepare(self) if prepare is not None else fn
        try:
            yield shipped
        finally:
            done_hook = getattr(shipped, "remote_done", None)
            if done_hook is not None:
                done_hook()

    def close(self) -> None:
        """Release what the executor started (a local Ray instance); idempotent."""
        return None
