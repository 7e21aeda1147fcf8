"""The local executor: a thread pool in this process, ``workers`` items in flight."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from pipeline.executor.base import Executor, run_in_flight

X = TypeVar("X")
R = TypeVar("R")


def wait_futures(futures: list[Future[R]]) -> set[Future[R]]:
    """The futures of ``futures`` that are done, once one is."""
    return wait(futures, return_when=FIRST_COMPLETED).done


def cancel_futures(futures: list[Future[R]]) -> None:
    for fut in futures:
        fut.cancel()


class LocalExecutor(Executor):
    name = "local"

    def run(self, items: Iterable[X], fn: Callable[[X], R]) -> Iterator[tuple[X, R]]:
        with ThreadPoolExecutor(self.workers, thread_name_prefix="scenario") as pool:
            yield from run_in_flight(items, self.workers, lambda x: pool.submit(fn, x), wait_futures,
                                     lambda fut, _x: fut.result(),  # fn's own exception propagates as is
                                     cancel_futures)
