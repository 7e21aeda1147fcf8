"""The executor interface (after datatrove's ``executor/base.py``): run a function over items, a bounded
number in flight, results yielded as they finish."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

X = TypeVar("X")
R = TypeVar("R")


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

    def warm_up(self, llm: Any, *, wait: bool = False) -> None:
        """Start what takes time (worker processes) before the first item comes, in the background unless
        ``wait``; ``llm``: the run's :class:`~pipeline.config.LLMSettings`. Optional: ``run`` starts whatever
        is not started yet."""
        return None

    def describe(self) -> str:
        return f"{self.name} ({self.workers} in flight)"

    def close(self) -> None:
        """Release what the executor started (a local Ray instance); idempotent."""
        return None
