"""The committed example catalog (generated/quickstart, built by the embedded model) holds what the README says:
each verified environment's server.py, copied alone next to a copy of its initial.db, lists its tools over MCP
(the real mcp SDK client) and runs every tool on arguments drawn from the seeded state without a server error;
and the independent contract checker passes every task."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pipeline.dbmodel.arguments import Sampler
from pipeline.envdir import load_env_dir
from pipeline.runtime import EnvInstance
from pipeline.runtime.schemas import tool_schemas
from tests.fixtures.server import running_server
from tests.test_server_check_envs import CHECKER

EXAMPLE = Path(__file__).resolve().parents[1] / "generated" / "quickstart"
TOOL_ERROR_KINDS = {"validation", "guard", "not_found"}


def verified_dirs() -> list[Path]:
    if not (EXAMPLE / "catalog.db").is_file():
        pytest.fail(f"the example catalog {EXAMPLE} is missing (README: Quickstart and example)")
    con = sqlite3.connect(f"file:{EXAMPLE / 'catalog.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT dir FROM environments WHERE status = 'verified' ORDER BY dir").fetchall()
    finally:
        con.close()
    return [EXAMPLE / d for (d,) in rows]


def test_the_example_has_a_verified_environment_with_three_tasks():
    dirs = verified_dirs()
    assert dirs
    assert max(len((d / "tasks.jsonl").read_text().splitlines()) for d in dirs) >= 3


def server_error(out: dict) -> bool:
    """A failure that is not the tool telling the agent something (a guard, a bad argument, a missing row, a
    constraint the database enforces) but the tool's own SQL breaking."""
    if out.get("ok"):
        return False
    if out.get("kind") in TOOL_ERROR_KINDS:
        return False
    return not (out.get("kind") == "sql" and str(out.get("error", "")).startswith("rejected by the database"))


@pytest.mark.parametrize("env_dir", verified_dirs(), ids=lambda p: p.name)
def test_server_py_alone_serves_and_runs_every_tool_over_mcp(env_dir, tmp_path):
    env, _, _ = load_env_dir(env_dir)
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(env_dir / "server.py", alone / "server.py")
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with EnvInstance(env) as seeded:
        sampler = Sampler(seeded.conn, tuple(env.tables), env.clock)
        calls = [(t.name, args) for t in env.tools for args in sampler.arguments(t, 3)]

    async def work(base: str):
        # each tool's calls in a session of its own (its own copy of the database): two tools that add the same
        # kind of row (the pharmacy's add_medicine and add_medication) would otherwise meet the other's new row
        # under a UNIQUE name, and every call of the second would be refused
        listed, results = [], []
        for tool in env.tools:
            async with streamable_http_client(base + "/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = listed or (await session.list_tools()).tools
                    results += [await session.call_tool(name, args) for name, args in calls if name == tool.name]
        return listed, results

    with running_server(alone, db) as base:
        listed, results = asyncio.run(asyncio.wait_for(work(base), timeout=120))
    assert [t.name for t in listed] == [t.name for t in env.tools]
    assert {t.name: t.input_schema for t in listed} == tool_schemas(env)
    ran: dict[str, int] = {}
    for (name, args), res in zip(calls, results, strict=True):
        out = {"ok": True} if not res.is_error else res.structured_content
        assert not server_error(out), (name, args, out)
        # a rule's refusal and a finder's "no matching record" (draws of two keys that no row pairs, in tables of
        # hundreds of rows) are programs that ran to their end; a bad argument or a database error is not
        ran[name] = ran.get(name, 0) + (not res.is_error or out.get("kind") in ("guard", "not_found"))
    assert all(ran[t.name] for t in env.tools), ran


def test_the_independent_checker_passes_every_task_of_the_example(tmp_path):
    """../shared/tools/check_envs.py: reference replay over HTTP holds, the initial state fails, no 5xx."""
    dirs = verified_dirs()
    assert CHECKER.is_file(), f"checker not found at {CHECKER} (set ENVFOUNDRY_CHECK_ENVS)"
    env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(CHECKER), sys.executable, *map(str, dirs)], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path, env=env_vars)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    n_tasks = sum(len((d / "tasks.jsonl").read_text().splitlines()) for d in dirs)
    assert summary["problems"] == []
    assert (summary["envs"], summary["tasks"], summary["ref_pass"], summary["neg_ok"]) == (len(dirs), n_tasks,
                                                                                          n_tasks, n_tasks)
    assert summary["server_errors"] == 0 and summary["bad_probe_5xx"] == 0
