"""The orchestration layer: one LangGraph behind ``envfoundry run``, ``build`` and ``verify``.

* :mod:`pipeline.graph.scenario` — the graph: build stages, then one checkpointed step per task, then the
  last stage (``pipeline.stages.tasks.finish``: rederivation, the difficulty policy) and the report
  (``build_scenario_graph``, ``GraphDeps``, ``run_graph``, ``run_scenario``);
* :mod:`pipeline.graph.results` — what the graph hands back (``ScenarioResult``, a typed record that pickles;
  a run writes the environment directory from it with ``pipeline.catalog.write_environment``);
* :mod:`pipeline.graph.task` — the per-task subgraph: proofs, tester, checker and the fix loop as edges
  (``build_verify_graph``, ``verify_task``, ``TaskOutcome``, ``VerifyDeps``);
* :mod:`pipeline.graph.verification` — ``verify_env``: the graph entered with an environment;
* :mod:`pipeline.graph.report` — the ``verify`` section of ``report.json`` and the trajectories.

Layers point down: ``pipeline.cli`` -> ``pipeline.run`` / ``pipeline.build`` -> ``pipeline.graph`` ->
``pipeline.stages`` -> ``verify`` -> ``pipeline.runtime`` -> ``pipeline.ir`` / ``llm`` / ``settings``.
"""

from pipeline.graph.results import ScenarioResult
from pipeline.graph.scenario import (
    GraphDeps,
    ScenarioState,
    build_scenario_graph,
    environment_state,
    run_graph,
    run_scenario,
)
from pipeline.graph.task import TaskOutcome, VerifyDeps, build_verify_graph, verify_task
from pipeline.graph.verification import EnvVerification, verification_of, verify_env

__all__ = [
    "EnvVerification", "GraphDeps", "ScenarioResult", "ScenarioState", "TaskOutcome", "VerifyDeps",
    "build_scenario_graph", "build_verify_graph", "environment_state", "run_graph", "run_scenario", "verification_of",
    "verify_env", "verify_task",
]
