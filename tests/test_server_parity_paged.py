"""Parity for the code-written tools of ``paged_listers`` and ``covering_writes``: the same calls through
EnvInstance and through the rendered server.py over HTTP give the same results and the same final database."""

from __future__ import annotations

import shutil
import sqlite3

from pipeline.dbmodel.paging import page_of
from pipeline.envdir import write_env_dir
from pipeline.runtime import EnvInstance
from pipeline.server import check_server
from pipeline.settings import BuildSettings
from pipeline.stages.tools.toolset import Workspace
from pipeline.stages.tools.write_gaps import cover
from tests.fixtures.server import http, running_server
from tests.stages.test_coverage import PERMIT_SCENARIO, PERMIT_SEED, PERMIT_TABLES, SUBMIT

CALLS = [
    ("list_applicants", {}),
    ("list_permits", {"status": "approved", "limit": 1}),
    ("list_permits", {"status": "approved", "limit": 1, "offset": 1}),
    ("list_permits", {"offset": 10}),
    ("list_permits", {"limit": 51}),
    ("list_inspections_by_permit_id", {"permit_id": 2, "inspected_on_from": "2026-01-01"}),
    ("create_inspections", {"permit_id": 1, "inspected_on": "2026-01-14", "result": "fail", "score": 12}),
    ("create_inspections", {"permit_id": 1, "inspected_on": "2026-01-14", "result": "pass"}),
    ("update_permits_status", {"permit_id": 1, "status": "rejected"}),
    ("update_permits_status", {"permit_id": 77, "status": "rejected"}),
    ("update_inspections_score", {"inspection_id": 3, "score": 30}),
    ("list_inspections_by_permit_id", {"permit_id": 1}),
]


def test_paged_listers_and_covering_writes_agree_over_http(tmp_path) -> None:
    settings = BuildSettings(paged_listers=True, covering_writes=True, gap_tools_max=8)
    with Workspace(PERMIT_SCENARIO, PERMIT_TABLES, PERMIT_SEED, "2026-01-15T09:00:00", [SUBMIT]) as ws:
        cover(ws, settings)
        env = ws.environment()
    names = {t.name for t in env.tools}
    assert {c[0] for c in CALLS} <= names
    assert page_of(env.tool("list_permits")) is not None
    env_dir = write_env_dir(env, tmp_path / "permits")
    assert check_server(env_dir)
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    inst = EnvInstance(env, env_dir / "initial.db")
    outcomes = set()
    with running_server(env_dir, db) as base:
        for name, args in CALLS:
            expected = inst.call(name, args)
            outcomes.add("ok" if expected["ok"] else expected["kind"])
            status, body = http("POST", f"{base}/tools/{name}", args)
            assert body == expected, (name, args)
            assert (status == 200) == expected["ok"]
    assert outcomes == {"ok", "validation", "guard", "sql"}
    with sqlite3.connect(db) as served:
        assert list(served.iterdump()) == list(inst.conn.iterdump())
    inst.close()
