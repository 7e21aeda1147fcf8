"""The exported OpenEnv server runs every session's work on one small shared pool: a call that runs into
its time limit holds one worker, and the other sessions' episodes go on meanwhile (real uvicorn, OpenEnv's
own WebSocket client, in the OpenEnv trainer venv)."""

from __future__ import annotations

import json

from pipeline.envdir import write_env_dir
from pipeline.export import export_catalog
from pipeline.ir import Param, Returns, Tool
from tests.export.conftest import trainer_python
from tests.export.test_trainers import run_report
from tests.fixtures.library import library_env, library_tasks

COUNT = Tool(name="count_to", description="Count to n the slow way.", kind="read",
             params=[Param(name="n", type="integer", minimum=1)],
             returns=Returns(sql="WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n) "
                                 "SELECT COUNT(*) AS n FROM c", mode="one"))


def test_a_slow_call_does_not_stall_other_sessions(tmp_path):
    base = library_env()
    env = base.model_copy(update={"tools": [*base.tools, COUNT]})
    tasks = library_tasks(env)
    write_env_dir(env, tmp_path / "catalog" / "envs" / env.env_id, tasks=tasks, report={"source": "tests/export"})
    (root,) = export_catalog(tmp_path / "catalog", "openenv", tmp_path / "export").paths
    fast = tasks[0].reference_solution[0]
    report = run_report(trainer_python("openenv"), "run_openenv_slow.py", [
        str(root), tasks[0].task_id, json.dumps({"tool_name": fast.tool, "arguments": fast.arguments}),
        json.dumps({"tool_name": "count_to", "arguments": {"n": 10**12}})], [], cwd=tmp_path)
    slow = report["slow"]
    assert slow["ok"] is False and "took too long" in slow["result"], slow  # stopped at its 2 s limit
    assert 2.0 <= slow["seconds"] < 5.0, slow
    during = [e for e in report["episodes"] if e["during_slow_call"]]
    assert len(during) >= 8 and all(e["done"] for e in during), report["episodes"]  # whole episodes meanwhile
    assert max(max(e["latencies"]) for e in during) < 0.5, during


def test_reset_observations_share_the_tools_dumps(tmp_path):
    """Every session's reset observation lists the same tools: OpenEnv's server serializes them as the same
    dicts (models.share_tools) instead of a new copy of every schema per reset, byte for byte the JSON pydantic
    writes; a client's copy parsed from it is equal and dumps its own dicts (issue 32: the copies OpenEnv keeps
    until each session's next message left ~26 KiB of free blocks per open session)."""
    env = library_env()
    write_env_dir(env, tmp_path / "catalog" / "envs" / env.env_id, tasks=library_tasks(env),
                  report={"source": "tests/export"})
    (root,) = export_catalog(tmp_path / "catalog", "openenv", tmp_path / "export").paths
    report = run_report(trainer_python("openenv"), "run_openenv_dumps.py", [str(root)], [], cwd=tmp_path)
    assert report["tasks"] and report["conversation_tools_same"], report
    for task in report["tasks"]:
        assert task["tools"] > 1 and all(v is True for k, v in task.items() if k not in ("task_id", "tools")), task
