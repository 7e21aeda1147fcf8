"""Tasks verified ahead of their turn, for an endpoint that takes many requests at once.

The scenario graph verifies its tasks one checkpointed step at a time, in order: a task's fix may repair the
environment, and the tasks after it are then verified on the repaired one. Each step is a pure function of
its inputs (environment, task, initial database) and the LLM's replies (:func:`pipeline.graph.task.verify_task`).
So while task *i* is verified, the tasks after it can be verified too, on the environment as it is now: when
the graph reaches task *j* with the same inputs, it takes that result instead of computing it again; when an
earlier task changed the environment, the inputs differ, the result ahead is dropped and task *j* is verified
then, as in a serial run. The graph still decides everything in its own order, so it writes what a serial run
writes from the same replies (``tests/executor/test_prefetch_run.py``).

Only for a client that sends requests ahead (``LLMClient.prefetches``: cached, remote, concurrency > 1); the
embedded model and the scripted fake client verify one task at a time. An exception of a task verified ahead
is raised when the graph reaches that task, as the serial step would raise it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from pipeline.hashing import content_hash
from pipeline.ir import Environment, Task
from pipeline.llm.protocol import LLMClientProtocol

R = TypeVar("R")


def inputs_key(env: Environment, task: Task, initial_db: str | None) -> str:
    """What a task's verification is a function of (besides the LLM's replies)."""
    return content_hash({"env": env.env_id, "task": task.model_dump(mode="json"), "db": initial_db})


class Ahead:
    """``start(env, db, tasks, fn)`` verifies ``tasks`` in the background; ``take(env, db, task, fn)`` returns
    ``fn(task)``, from the background when it was started with the same inputs. ``close()`` cancels the rest."""

    def __init__(self, client: LLMClientProtocol, *, per_task_requests: int = 1):
        self.enabled = bool(getattr(client, "prefetches", False))
        parallelism = int(getattr(client, "parallelism", 1) or 1)
        self.workers = max(1, parallelism // max(1, per_task_requests))
        self._futures: dict[str, tuple[str, Future[Any]]] = {}  # key -> (env id, future)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self, env: Environment, initial_db: str | None, tasks: list[Task], fn: Callable[[Task], R]) -> None:
        if not self.enabled or not tasks:
            return
        with self._lock:
            for key, (env_id, fut) in list(self._futures.items()):
                if env_id != env.env_id and fut.cancel():  # started on an environment since repaired
                    del self._futures[key]
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="verify-ahead")
            for task in tasks:
                key = inputs_key(env, task, initial_db)
                if key not in self._futures:
                    self._futures[key] = (env.env_id, self._pool.submit(fn, task))

    def take(self, env: Environment, initial_db: str | None, task: Task, fn: Callable[[Task], R]) -> R:
        if self.enabled:
            with self._lock:
                hit = self._futures.pop(inputs_key(env, task, initial_db), None)
            if hit is not None and not hit[1].cancelled():
                return hit[1].result()  # type: ignore[no-any-return]
        return fn(task)

    def close(self) -> None:
        with self._lock:
            for _, fut in self._futures.values():
                fut.cancel()
            self._futures.clear()
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
