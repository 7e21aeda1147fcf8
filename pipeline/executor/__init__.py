"""Executors: where the per-scenario unit of work runs. ``run(items, fn)`` yields ``(item, fn(item))`` as
results arrive, with a bounded number of items in flight.

* :class:`LocalExecutor`: a thread pool in this process (the default).
* :class:`ProcessExecutor`: worker processes of this machine (a remote endpoint and many scenarios at once:
  their local work is not serialised by one GIL).
* :class:`RayExecutor`: Ray tasks on a local Ray instance or an existing cluster (``ray`` is imported only
  here, and only when used). ``fn`` is shipped once (``ray.put``); only Ray-side failures (a lost worker)
  are retried, never an exception of our own code.

:class:`~pipeline.executor.scenario.ScenarioWork` is the unit ``envfoundry run`` hands them: one scenario's
graph, with what a remote worker needs to write nothing itself (its LLM cache goes through the driver's
node; the driver writes the environment directory from the typed result it returns).
"""

from __future__ import annotations

from typing import Any

from pipeline.executor.base import Executor, ExecutorError
from pipeline.executor.local import LocalExecutor
from pipeline.executor.process import ProcessExecutor
from pipeline.executor.scenario import ScenarioOutcome, ScenarioWork

__all__ = ["Executor", "ExecutorError", "LocalExecutor", "ProcessExecutor", "RayExecutor", "ScenarioOutcome", "ScenarioWork",
           "make_executor"]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # keep `import ray` out of every other command's start-up
        from pipeline.executor.ray import RayExecutor

        return RayExecutor
    raise AttributeError(name)


def make_executor(kind: str, *, workers: int, address: str | None = None) -> Executor:
    """``local``, ``process`` or ``ray`` (``address``: an existing cluster, e.g. ``ray://head:10001`` or
    ``auto``)."""
    if kind in ("local", "process") and address:
        raise ExecutorError("--ray-address is only meaningful with --executor ray")
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "ray":
        from pipeline.executor.ray import RayExecutor

        return RayExecutor(workers, address=address)
    raise ExecutorError(f"unknown executor {kind!r}; choose local, process or ray")
