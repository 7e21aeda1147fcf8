"""The Ray executor: each item is one Ray task, on a local Ray instance or an existing cluster.

As in datatrove's ``executor/ray.py``: the function goes to the object store once (``ray.put``), at most
``workers`` tasks are in flight, and only Ray-side failures (a worker process or node lost) are retried by
Ray (``max_retries``); an exception of our own code is never retried, it propagates to the driver.

A local instance (no address) is started with this machine's cores and shut down when the run ends; an
address (``auto``, ``HOST:6379`` or ``ray://HOST:10001``) joins an existing cluster, whose nodes must have
envfoundry's dependencies installed: the project's own code (``pipeline/``, ``verify/``, ``prompts/``) is
shipped to them as the job's working directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from pipeline.executor.base import Executor, ExecutorError, run_in_flight

X = TypeVar("X")
R = TypeVar("R")

ROOT = Path(__file__).resolve().parents[2]
#: what a cluster's workers do not need of the project directory
_EXCLUDES = [".git", ".venv", ".venv-trainers", "generated", "tests", "benchmarks", "**/__pycache__",
             "*.sqlite", "*.db", "*.parquet", "*.gguf"]


def ray_module() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ExecutorError(f"the Ray executor needs the ray package ({e}); run scripts/setup.sh") from None
    return ray


def _call(fn: Callable[[Any], Any], item: Any) -> Any:
    return fn(item)


class _Gate:
    """A counting semaphore as a Ray actor: the requests in flight allowed at one endpoint for a whole run."""

    def __init__(self, limit: int):
        import asyncio

        self.sem = asyncio.Semaphore(limit)

    async def acquire(self) -> None:
        await self.sem.acquire()

    async def release(self) -> None:
        self.sem.release()


class RayGate:
    """``acquire()``/``release()`` of a :class:`_Gate` actor: what a worker's router takes a slot of for each
    request to the endpoint (``pipeline.llm.endpoints.share_limits``), so the workers of a cluster together
    keep to ``[llm] concurrency``. Pickles as its actor handle."""

    def __init__(self, actor: Any):
        self.actor = actor

    def acquire(self) -> None:
        ray_module().get(self.actor.acquire.remote())

    def release(self) -> None:
        ray_module().get(self.actor.release.remote())


def stop_gates(gates: dict[str, Any]) -> None:
    ray = ray_module()
    for gate in gates.values():
        if isinstance(gate, RayGate):
            ray.kill(gate.actor)


class RayExecutor(Executor):
    """``RayExecutor(workers, address=None)``; ``cpus_per_task`` is what Ray reserves for each task."""

    name = "ray"

    def __init__(self, workers: int, *, address: str | None = None, cpus_per_task: float = 1.0,
                 max_retries: int = 3, num_cpus: int | None = None):
        super().__init__(workers)
        self.address = address
        self.cpus_per_task = cpus_per_task
        self.max_retries = max_retries
        self.num_cpus = num_cpus
        self._started_here = False

    def describe(self) -> str:
        where = f"cluster {self.address}" if self.address else "a local Ray instance"
        return f"ray on {where} ({self.workers} tasks in flight)"

    def _init(self) -> Any:
        ray = ray_module()
        if ray.is_initialized():
            return ray
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
        if self.address:
            runtime_env = {"working_dir": str(ROOT), "excludes": _EXCLUDES}
            try:
                ray.init(address=self.address, runtime_env=runtime_env, **kwargs)
            except Exception as e:  # noqa: BLE001 - Ray raises several types for an unreachable cluster
                raise ExecutorError(f"cannot join the Ray cluster at {self.address}: {e}") from None
        else:  # same machine: same files and packages; the workers import this tree
            path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
            ray.init(num_cpus=self.num_cpus, include_dashboard=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}}, **kwargs)
        self._started_here = True
        return ray

    def make_gates(self, limits: dict[str, int]) -> dict[str, RayGate]:
        """One :class:`_Gate` actor per endpoint URL, on the driver's node (called by the work before shipping)."""
        ray = self._init()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        gate = ray.remote(_Gate).options(num_cpus=0, max_concurrency=10_000,
                                         scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False))
        return {url: RayGate(gate.remote(n)) for url, n in limits.items()}

    def close(self) -> None:
        """Stop the Ray instance if this executor started (or joined) it."""
        if self._started_here:
            ray_module().shutdown()
            self._started_here = False

    def run(self, items: Iterable[X], fn: Callable[[X], R]) -> Iterator[tuple[X, R]]:
        ray = self._init()
        from ray.exceptions import RayTaskError

        task = ray.remote(_call).options(num_cpus=self.cpus_per_task, max_retries=self.max_retries,
                                         retry_exceptions=False)

        def collect(ref: Any, x: X) -> R:
            try:
                result: R = ray.get(ref)
            except RayTaskError as e:  # our own code raised: no retry, the original exception
                raise e.as_instanceof_cause() from None
            except ray.exceptions.RayError as e:  # lost worker/node, after Ray's own retries
                raise ExecutorError(f"Ray could not run {x!r} ({self.max_retries} retries): "
                                    f"{type(e).__name__}: {str(e).splitlines()[0][:300]}") from None
            return result

        def abandon(refs: list[Any]) -> None:
            for ref in refs:
                ray.cancel(ref, force=True)

        with self.shipping(fn) as shipped:
            fn_ref = ray.put(shipped)  # once, not once per task
            yield from run_in_flight(items, self.workers, lambda x: task.remote(fn_ref, x),
                                     lambda refs: ray.wait(refs, num_returns=1)[0], collect, abandon)
