"""The per-scenario unit of work of ``envfoundry run``, runnable in this process, in a worker process of this
machine (``--executor process``) or on a Ray worker.

``ScenarioWork(scenario) -> ScenarioOutcome`` runs (or resumes) one scenario's graph
(:func:`invoke_scenario_graph`, over :func:`pipeline.graph.run_scenario`). Whatever it cannot do turns into an outcome with an
``error`` (an LLM endpoint that died, a bug in one item): the run records it and goes on.

Locally it is what the run always did: the driver's checkpoints, clients and environment directory.

In a worker process or on a Ray worker it writes nothing of the catalog's:

* LLM replies are read from and written to the driver's cache file: on this machine the worker opens the
  file itself (SQLite, WAL), on Ray through a :class:`CacheService` actor pinned to the driver's node (one
  SQLite transaction per reply, as locally; the key is the same, so a remote run and a local one share their
  cache entries);
* the graph checkpoints in memory and verifies against an environment directory in a temporary directory;
  its :class:`~pipeline.graph.ScenarioResult` comes back in the outcome (a typed record that pickles) and the
  driver writes the environment directory from it (``pipeline.catalog.write_environment``: complete, then
  renamed into place) and then the catalog rows. A killed driver leaves at most a scenario that is not
  marked done: the rerun does it again, its replies already in the cache.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.graph import GraphDeps, ScenarioResult, run_scenario
from pipeline.ir import Scenario
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import LLMSettings, RunPlan


@dataclass
class ScenarioOutcome:
    """What became of one scenario: the graph's result or the error, its LLM usage and time."""

    scenario_id: str
    result: ScenarioResult | None = None
    error: str = ""
    error_type: str = ""
    """The type name of the exception behind ``error``."""
    seconds: float = 0.0
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    """LLM usage by stage of this scenario's client."""
    remote: bool = False
    """Computed in another process: its usage is not in any of the driver's clients."""

    def usage_total(self) -> dict[str, float]:
        tot = {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        for s in self.usage.values():
            for k in tot:
                tot[k] += s.get(k, 0)
        return tot


def invoke_scenario_graph(scn: Scenario, client: LLMClientProtocol, plan: RunPlan, envs_dir: Path, thread_id: str,
                          checkpointer: Any, progress: Callable[[str], None] | None = None) -> ScenarioResult:
    """The per-scenario unit of work: run the scenario's graph, or resume it from its last checkpoint."""
    deps = GraphDeps(client=client, build=plan.build, verify=plan.verify, envs_dir=envs_dir,
                     n_tasks=plan.run.tasks_per_env, progress=progress)
    return run_scenario(scn, deps, checkpointer=checkpointer, thread_id=thread_id)


def endpoint_limits(llm: LLMSettings) -> dict[str, int]:
    """``{url: [llm] concurrency}`` for the endpoint and the extra ``[llm] endpoints`` of ``llm``."""
    if not llm.base_url:
        from pipeline.executor.base import ExecutorError

        raise ExecutorError("the process executor is for a remote endpoint (llm.base_url): the embedded model "
                            "answers one request at a time for the whole machine; use --executor local")
    return {u.rstrip("/"): int(llm.concurrency) for u in [llm.base_url, *(llm.endpoints or [])]}


def _failed(scenario: Scenario, e: BaseException, t: float, client: LLMClientProtocol, *, remote: bool) -> ScenarioOutcome:
    return ScenarioOutcome(scenario.scenario_id, error=f"{type(e).__name__}: {e}".splitlines()[0][:500],
                           error_type=type(e).__name__, seconds=time.perf_counter() - t,
                           usage=client.usage.by_stage(), remote=remote)


class ScenarioWork:
    """Callable ``(Scenario) -> ScenarioOutcome``; pickles without its local parts (clients, checkpointer)."""

    def __init__(self, plan: RunPlan, llm: LLMSettings, fingerprint: str, envs_dir: Path, *,
                 make_client: Callable[[], LLMClientProtocol] | None = None, checkpointer: Any = None,
                 progress: Callable[[str], None] | None = None):
        self.plan = plan
        self.llm = llm
        self.fingerprint = fingerprint
        self.envs_dir = Path(envs_dir)
        self._local: dict[str, Any] | None = {"make_client": make_client, "checkpointer": checkpointer,
                                               "progress": progress}
        self.cache_service: Any = None
        self.gates: dict[str, Any] = {}
        """URL -> the run-wide slot holder of that endpoint, for workers of a cluster (see ``for_remote``)."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_local"] = None
        return state

    def thread_id(self, scenario: Scenario) -> str:
        return f"{self.fingerprint}:{scenario.scenario_id}"

    def __call__(self, scenario: Scenario) -> ScenarioOutcome:
        if self._local is not None:
            return self._run_here(scenario)
        return self._run_remote(scenario)

    # ---------------------------------------------------------------- in the driver's process

    def _run_here(self, scenario: Scenario) -> ScenarioOutcome:
        assert self._local is not None
        t = time.perf_counter()
        client = self._local["make_client"]()
        try:
            result = invoke_scenario_graph(scenario, client, self.plan, self.envs_dir, self.thread_id(scenario),
                                           self._local["checkpointer"], self._local["progress"])
        except Exception as e:  # noqa: BLE001 - one item's failure is recorded, the run goes on
            return _failed(scenario, e, t, client, remote=False)
        return ScenarioOutcome(scenario.scenario_id, result=result, seconds=time.perf_counter() - t,
                               usage=client.usage.by_stage())

    # ---------------------------------------------------------------- on a Ray worker

    def for_remote(self, executor: Any) -> ScenarioWork:
        """A copy to ship to workers, with the driver's LLM cache served from this node."""
        import copy

        shipped = copy.copy(self)
        shipped._local = None
        if self.llm.cache and not getattr(executor, "shares_files", False):
            shipped.cache_service = CacheService.start(self.llm.resolved_cache_path())
        make_gates = getattr(executor, "make_gates", None)
        if make_gates is not None and self.llm.base_url:  # the endpoint's limit, for the whole run
            shipped.gates = make_gates(endpoint_limits(self.llm))
        return shipped

    def endpoint_limits(self) -> dict[str, int]:
        """Requests in flight allowed per endpoint URL for the whole run (``[llm] concurrency`` each)."""
        return endpoint_limits(self.llm)

    def remote_done(self) -> None:
        if self.cache_service is not None:
            CacheService.stop(self.cache_service)
            self.cache_service = None
        if self.gates:
            from pipeline.executor.ray import stop_gates

            stop_gates(self.gates)
            self.gates = {}

    def _run_remote(self, scenario: Scenario) -> ScenarioOutcome:
        from langgraph.checkpoint.memory import InMemorySaver

        from pipeline.llm import client_from_settings
        t = time.perf_counter()
        if self.gates:
            from pipeline.llm.endpoints import share_limits

            share_limits(self.gates)
        cache = RemoteCache(self.cache_service) if self.cache_service is not None else None
        client = client_from_settings(self.llm, cache=cache)  # no service: the cache file itself (same machine)
        work = Path(tempfile.mkdtemp(prefix="envfoundry-scenario-"))  # the directory verification replays on
        try:
            try:
                result = invoke_scenario_graph(scenario, client, self.plan, work, self.thread_id(scenario),
                                               InMemorySaver(), None)
            except Exception as e:  # noqa: BLE001 - recorded by the driver as this scenario's failure
                return _failed(scenario, e, t, client, remote=True)
            return ScenarioOutcome(scenario.scenario_id, result=result, seconds=time.perf_counter() - t,
                                   usage=client.usage.by_stage(), remote=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if cache is None and client.cache is not None:
                client.cache.close()


# ---------------------------------------------------------------- the driver's LLM cache, served to workers


class CacheService:
    """The driver's :class:`~pipeline.llm.cache.ResponseCache`, as a Ray actor on the driver's node."""

    def __init__(self, path: str):
        from pipeline.llm.cache import ResponseCache

        self.cache = ResponseCache(path)

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        return self.cache.get(key)

    def put(self, key: str, request: dict[str, Any], content: str, usage: dict[str, Any]) -> None:
        self.cache.put(key, request, content, usage)

    def record_error(self, key: str, error: str) -> None:
        self.cache.record_error(key, error)

    def errors(self, key: str) -> list[str]:
        return self.cache.errors(key)

    def size(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()

    @classmethod
    def start(cls, path: Path) -> Any:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()  # the file is on the driver's disk
        actor = ray.remote(cls).options(
            num_cpus=0, max_concurrency=16,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=here, soft=False),
        ).remote(str(path))
        ray.get(actor.size.remote())  # type: ignore[attr-defined]  # fails here if the file cannot be opened
        return actor

    @staticmethod
    def stop(actor: Any) -> None:
        import ray

        try:
            ray.get(actor.close.remote(), timeout=60)
        finally:
            ray.kill(actor)


class RemoteCache:
    """A worker's view of the driver's cache: the :class:`ResponseCache` methods the LLM client uses."""

    def __init__(self, actor: Any):
        self.actor = actor

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        import ray

        return ray.get(self.actor.get.remote(key))

    def put(self, key: str, request: dict[str, Any], content: str, usage: dict[str, Any]) -> None:
        import ray

        ray.get(self.actor.put.remote(key, request, content, usage))

    def record_error(self, key: str, error: str) -> None:
        import ray

        ray.get(self.actor.record_error.remote(key, error))

    def errors(self, key: str) -> list[str]:
        import ray

        return ray.get(self.actor.errors.remote(key))

    def __len__(self) -> int:
        import ray

        return ray.get(self.actor.size.remote())

    def close(self) -> None:
        """The driver's actor owns the file; nothing to close here."""
