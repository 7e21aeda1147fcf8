"""The local executor: a thread pool in this process, ``workers`` items in flight."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from pipeline.executor.base import Executor

X = TypeVar("X")
R = TypeVar("R")


class LocalExecutor(Executor):
    name = "local"

    def run(self, items: Iterable[X], fn: Callable[[X], R]) -> Iterator[tuple[X, R]]:
        it = iter(items)
        pending: dict[Future[R], X] = {}
        with ThreadPoolExecutor(self.workers, thread_name_prefix="scenario") as pool:
            try:
                while True:
                    while len(pending) < self.workers:  # pull the next item only when a slot is free
                        try:
                            x = next(it)
                        except StopIteration:
                            break
                        pending[pool.submit(fn, x)] = x
                    if not pending:
                        return
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in sorted(done, key=lambda f: list(pending).index(f)):  # submission order
                        x = pending.pop(fut)
                        yield x, fut.result()  # fn's own exception propagates as is
            finally:
                for fut in pending:
                    fut.cancel()
