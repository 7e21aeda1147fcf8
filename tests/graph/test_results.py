"""The scenario graph's typed result: it pickles (remote executors send it back as it is), and the environment
directory a run writes from it alone is the one the graph's own files plus the results would make."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from pipeline.catalog import write_env_dir, write_environment
from pipeline.executor import ScenarioOutcome
from pipeline.graph import ScenarioResult, run_scenario
from pipeline.graph.scenario import GraphDeps
from pipeline.ir import Environment, Rejection
from pipeline.llm import fake_client
from pipeline.settings import BuildSettings
from tests.fixtures.library import library_env, library_tasks

BUILD_REJECTIONS = (Rejection(stage="tools", item="lend_book", reason="gap tool not added: no such column"),)


def _result(env: Environment, env_dir: Path | None, **kw: Any) -> ScenarioResult:
    tasks = tuple(t.model_copy(update={"env_id": env.env_id}) for t in library_tasks(library_env()))
    fields = dict(scenario=env.scenario, status="verified", env=env, tables=len(env.tables), tools=len(env.tools),
                  rows=sum(len(s.rows) for s in env.seed), env_dir=None if env_dir is None else str(env_dir),
                  tasks=tasks, build_rejections=BUILD_REJECTIONS,
                  verify_rejections=(Rejection(stage="difficulty", item="t1", reason="pass rate 1.0 outside"),),
                  report={"env_id": env.env_id, "summary": {"kept": 2}}, trajectories=({"task_id": "t0", "n": 1},))
    return ScenarioResult(**(fields | kw))


def _reference(result: ScenarioResult, d: Path) -> dict[str, bytes]:
    """What the graph's directory plus the results make (``write_env_dir`` with the merged report)."""
    assert result.env is not None
    write_env_dir(result.env, d, result.tasks,
                  {"build": {"rejections": [r.model_dump(mode="json") for r in result.build_rejections]},
                   "verify": result.report})
    (d / "trajectories.jsonl").write_text('{"n":1,"task_id":"t0"}\n')
    return _files(d)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_the_result_pickles_alone_and_in_an_outcome() -> None:
    res = _result(library_env(), Path("/tmp/worker/x"))
    assert pickle.loads(pickle.dumps(res)) == res
    assert res.rejections == (*res.build_rejections, *res.verify_rejections)
    out = pickle.loads(pickle.dumps(ScenarioOutcome(res.scenario.scenario_id, result=res, remote=True)))
    assert out.result == res


def test_where_the_graph_wrote_the_directory_only_the_results_are_written(tmp_path: Path) -> None:
    env = library_env()
    envs = tmp_path / "envs"
    d = write_env_dir(env, envs / env.env_id, (), {"build": {"rejections": "whatever the graph wrote"}})
    inodes = {n: (d / n).stat().st_ino for n in ("env.json", "schema.sql", "initial.db", "server.py")}
    res = _result(env, d)
    assert write_environment(res, envs) == d
    assert {n: (d / n).stat().st_ino for n in inodes} == inodes  # not rewritten
    assert _files(d) == _reference(res, tmp_path / "ref")
    assert sorted(p.name for p in envs.iterdir()) == [env.env_id]


def test_a_repaired_environment_replaces_the_directory_of_its_old_id(tmp_path: Path) -> None:
    env = library_env()
    envs = tmp_path / "envs"
    old = write_env_dir(env, envs / env.env_id)
    repaired = env.model_copy(update={"tools": env.tools[:-1]})
    assert repaired.env_id != env.env_id
    res = _result(repaired, old)
    assert res.env_id == repaired.env_id
    d = write_environment(res, envs)
    assert d == envs / repaired.env_id and _files(d) == _reference(res, tmp_path / "ref")
    assert sorted(p.name for p in envs.iterdir()) == [repaired.env_id]  # the old one gone, nothing stray


def test_a_directory_built_elsewhere_is_written_whole_over_a_stale_one(tmp_path: Path) -> None:
    env = library_env()
    envs = tmp_path / "envs"
    worker = write_env_dir(env, tmp_path / "worker" / env.env_id)
    stale = envs / env.env_id
    stale.mkdir(parents=True)
    (stale / "leftover.txt").write_text("from a killed attempt")
    (envs / f".{env.env_id}.tmp").mkdir()  # a killed write's temporary directory
    res = _result(env, worker)
    d = write_environment(res, envs)
    assert _files(d) == _reference(res, tmp_path / "ref")
    assert sorted(p.name for p in envs.iterdir()) == [env.env_id]
    assert worker.is_dir()  # not the run's to remove


def test_no_directory_without_an_environment_or_a_place_the_graph_wrote_it(tmp_path: Path) -> None:
    env = library_env()
    assert write_environment(_result(env, None), tmp_path) is None  # build only, envfoundry verify
    gave_up = _result(env, tmp_path / "x").model_copy(update={"env": None, "status": "rejected", "stage": "tools"})
    assert write_environment(gave_up, tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_a_build_stage_that_gives_up_ends_the_graph_with_its_stage_as_data() -> None:
    env = library_env()
    client = fake_client([{"intents": []}] * 10)  # no usable intents, every retry
    res = run_scenario(env.scenario, GraphDeps(client=client, build=BuildSettings()))
    assert res.status == "rejected" and res.stage == "intents" and res.env is None and res.env_id is None
    assert res.reason.startswith("intents: ") and res.build_rejections
    assert all(r.stage == "intents" for r in res.rejections)
