"""The process executor: scenarios in worker processes of this machine, for a remote endpoint.

Threads of one process are enough while a run waits on the endpoint; they stop being enough when many
scenarios do local work at once (replaying tasks on fresh SQLite copies, proving and scoring them): every
SQLite step releases and takes back the GIL, and with dozens of threads that hand-over, not the work,
sets the pace. Here each scenario runs in a process of a :class:`~concurrent.futures.ProcessPoolExecutor`
(``workers`` processes; started from a ``forkserver`` that has imported the pipeline once, so a worker
starts in milliseconds), and the operating system spreads them over the cores.

What a worker shares with the driver, and how:

* the LLM cache: the catalog's cache file itself (SQLite in WAL mode: one writer at a time, readers
  never blocked), so replies are keyed and stored exactly as in a threaded run;
* the endpoint's limit: ``[llm] concurrency`` requests in flight per endpoint for the whole run, not per
  process: the driver makes one semaphore per endpoint URL and every worker's router takes a slot of it for
  each request (:func:`pipeline.llm.endpoints.share_limits`). A 429's cool-down stays in the process that
  received it;
* the result: as on Ray (:meth:`~pipeline.executor.scenario.ScenarioWork.for_remote`), a worker writes
  nothing of the catalog: the scenario's typed record (:class:`~pipeline.graph.ScenarioResult`) comes back
  with the outcome, and the driver writes the environment directory from it
  (:func:`pipeline.catalog.write_environment`) and the catalog rows. Checkpoints live in the worker's memory:
  a killed driver reruns the scenarios that were in flight, from the cache.

Not for the embedded model (it decodes one request at a time, for the whole machine): that raises
:class:`ExecutorError`.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.executor.base import Executor, ExecutorError, run_in_flight
from pipeline.executor.local import cancel_futures, wait_futures

if TYPE_CHECKING:
    from pipeline.settings import LLMSettings

X = TypeVar("X")
R = TypeVar("R")

#: imported once by the fork server, so that each worker starts with them
PRELOAD = ["pipeline.executor.scenario", "pipeline.graph", "pipeline.llm", "langgraph.checkpoint.memory"]


def _init_worker(gates: dict[str, Any]) -> None:
    from pipeline.llm.endpoints import share_limits

    share_limits(gates)


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


def _ready() -> int:
    import os

    return os.getpid()


class ProcessExecutor(Executor):
    """``ProcessExecutor(workers, limits={url: n})``: ``workers`` processes, each running one item at a time;
    ``limits`` are the requests in flight allowed per endpoint URL across all of them (default: from the run's
    LLM settings given to :meth:`warm_up`, or what ``fn.endpoint_limits()`` says, as
    :class:`~pipeline.executor.scenario.ScenarioWork` does)."""

    name = "process"
    shares_files = True
    """Workers see the driver's files (same machine): the LLM cache is opened, not served."""

    def __init__(self, workers: int, *, limits: dict[str, int] | None = None):
        super().__init__(workers)
        self.limits = dict(limits or {})
        self._pool: ProcessPoolExecutor | None = None
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None

    def describe(self) -> str:
        return f"process ({self.workers} worker processes)"

    def warm_up(self, llm: LLMSettings, *, wait: bool = False) -> None:
        """Start the worker processes now, in the background (they boot while the driver expands the seeds),
        or, with ``wait``, before returning."""
        if self._pool is not None or self._starting is not None:
            if wait:
                self._started()
            return
        from pipeline.executor.scenario import endpoint_limits

        limits = self.limits or endpoint_limits(llm)

        def start() -> None:
            try:
                self._start(limits)
            except BaseException as e:  # noqa: BLE001 - reported by run()
                self._start_error = e

        self._starting = threading.Thread(target=start, name="process-executor-start", daemon=True)
        self._starting.start()
        if wait:
            self._started()

    def _started(self) -> ProcessPoolExecutor | None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
            if self._start_error is not None:
                raise ExecutorError(f"cannot start the worker processes: {self._start_error}") from None
        return self._pool

    def _start(self, limits: dict[str, int]) -> ProcessPoolExecutor:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        gates = {url.rstrip("/"): ctx.BoundedSemaphore(n) for url, n in limits.items()}
        self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker, initargs=(gates,))
        ready = [self._pool.submit(_ready) for _ in range(self.workers)]  # the pool starts a process per job
        wait(ready)
        return self._pool

    def close(self) -> None:
        try:
            self._started()
        except ExecutorError:
            return
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def run(self, items: Iterable[X], fn: Callable[[X], R]) -> Iterator[tuple[X, R]]:
        pool = self._started()
        if pool is None:
            limits = self.limits
            if not limits and hasattr(fn, "endpoint_limits"):  # a ScenarioWork: its LLM settings say
                limits = fn.endpoint_limits()
            pool = self._start(limits)
        submit = pool.submit

        def collect(fut: Future[R], x: X) -> R:
            try:
                return fut.result()  # fn's own exception propagates as is
            except BrokenProcessPool as e:
                self._pool = None
                raise ExecutorError(f"a worker process died while running {x!r}: {e}") from None

        def abandon(futures: list[Future[R]]) -> None:  # stopped early: running items are abandoned
            cancel_futures(futures)
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

        with self.shipping(fn) as shipped:
            yield from run_in_flight(items, self.workers, lambda x: submit(_call, shipped, x), wait_futures,
                                     collect, abandon)
