"""A training step's sessions (issue 41): the exported OpenEnv server, served as its README says with its defaults
(no ENVFOUNDRY_* variable), holds 200 concurrent WebSocket sessions (OpenEnv's own client, real uvicorn, in the
OpenEnv trainer venv): each replays its task's reference while all are open, and every one is rewarded 1. It prints
its cap and the memory one session measured at start-up; a session refused at the cap is told how to raise it."""

from __future__ import annotations

import re

from pipeline.export import export_catalog, load_catalog
from tests.export.conftest import EXAMPLE, trainer_python
from tests.export.test_trainers import TRAINER_DIR, run_report, script_file

SESSIONS = 200


def test_200_concurrent_sessions_with_the_exported_defaults(tmp_path):
    cat = load_catalog(EXAMPLE)
    env_id = sorted(cat.envs)[0]
    paths = export_catalog(cat, "openenv", tmp_path / "export").paths
    root = next(p for p in paths if p.name.endswith(env_id))
    script, expected = script_file(EXAMPLE, tmp_path, submit="submit", env_id=env_id)
    report = run_report(trainer_python("openenv"), "run_openenv_many.py", [str(root), str(SESSIONS), str(script)],
                        [TRAINER_DIR], cwd=tmp_path, timeout=1500)
    many = report["many"]
    assert many["errors"] == [] and len(many["rewards"]) == SESSIONS, many["errors"][:3]
    assert all(reward == 1.0 for _, reward in many["rewards"]), [r for r in many["rewards"] if r[1] != 1.0][:5]
    assert {task_id for task_id, _ in many["rewards"]} == set(expected)
    found = re.search(r"up to (\d+) concurrent sessions \(ENVFOUNDRY_MAX_SESSIONS, default 1024\); one session "
                      r"measured (\d+) KiB at start-up", report["startup"])
    # the measure is a real database copy, not a zero: the example's smallest environment (360 rows since the
    # 2026-11-28 regeneration) copies 68 KiB; the previous example's 100+
    assert found and int(found.group(1)) == 1024 and int(found.group(2)) >= 32, report["startup"][-2000:]
    assert "up to 2 concurrent sessions" in report["cap_startup"], report["cap_startup"][-2000:]
    refused = report["cap"]["refused"]
    assert refused, report["cap"]
    assert "2/2 sessions active" in refused and "ENVFOUNDRY_MAX_SESSIONS=N (now 2" in refused, refused
    assert re.search(r"each session takes about \d+ KiB", refused), refused
