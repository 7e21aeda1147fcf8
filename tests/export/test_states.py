"""Fresh states shipped (issue 41): ``export --sample-per-level N --perturb`` samples each round on a perturbed
copy of initial.db and ships those databases once each, named by their SHA-256 (``data/states/``); each pool task
names its state (``pool.json`` info ``state``) and plays on it: the vendored runtime replays its reference there to
reward 1, the OpenEnv server (real openenv, its trainer venv) plays every pool task to reward 1 by its reference, and
verifiers' rollouts (real verifiers) do too. The README gives the bundle's size per level."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import reference_reply
from pipeline.export.pools import EnvPools, sample_pools
from tests.export.conftest import EXAMPLE, trainer_python
from tests.export.test_formats import import_exported
from tests.export.test_trainers import TRAINER_DIR, run_report

N = 2


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory) -> tuple[Path, EnvPools]:
    """The example's smallest environment and its perturbed pools (sampled once for the module)."""
    envs = sorted((EXAMPLE / "envs").iterdir(), key=lambda d: (d / "initial.db").stat().st_size)
    root = tmp_path_factory.mktemp("perturbed")
    shutil.copytree(envs[0], root / "envs" / envs[0].name)
    pools = sample_pools(load_catalog(root), N, seed=0, perturb=True)
    return root, pools[envs[0].name]


@pytest.fixture(scope="module")
def exports(perturbed, tmp_path_factory) -> dict[str, Path]:
    root, pools = perturbed
    out = tmp_path_factory.mktemp("exports")
    return {f: export_catalog(root, f, out / f, pools={pools.env_id: pools}).paths[0]
            for f in ("openenv", "verifiers", "verl")}


def pool_tasks(pools: EnvPools) -> list:
    return [t for _, p in sorted(pools.levels.items()) for t in p.tasks]


def test_states_are_shipped_once_by_content_hash_and_each_task_names_its_own(perturbed, exports):
    root, pools = perturbed
    tasks = pool_tasks(pools)
    assert tasks and pools.perturbed and set(pools.states) == {t.task_id for t in tasks}
    initial = (root / "envs" / pools.env_id / "initial.db").read_bytes()
    for fmt, data in (("openenv", exports["openenv"] / "data"),
                      ("verifiers", exports["verifiers"] / exports["verifiers"].name / "data"),
                      ("verl", exports["verl"] / exports["verl"].name / "data" / pools.env_id)):
        manifest = json.loads((data / "pool.json").read_text())
        files = sorted((data / "states").iterdir())
        assert files, fmt
        for f in files:  # named by its content, stored once, not initial.db
            body = f.read_bytes()
            assert f.name == hashlib.sha256(body).hexdigest() + ".db" and body != initial, (fmt, f.name)
        named = {manifest["info"][t.task_id]["state"] for t in tasks}
        assert named == {f"states/{f.name}" for f in files}, fmt  # every shipped state is some task's
        for t in tasks:  # the sampler's record of the state agrees with the shipped file
            state = manifest["info"][t.task_id]["state"]
            assert state == f"states/{t.metadata['perturb']['sha256']}.db", (fmt, t.task_id)
        sizes = manifest["states"]
        for level, lp in pools.levels.items():
            assert sizes[str(level)]["tasks"] == len(lp.tasks)
            assert sizes[str(level)]["state_bytes"] >= (1 if lp.tasks else 0)
        readme = (exports[fmt] / "README.md").read_text()
        assert "Fresh states (`--perturb`)" in readme and "KiB" in readme, fmt
        audit = json.loads((data / "audit.json").read_text())
        assert audit["ok"] and all(audit["tasks"][t.task_id]["state"] == manifest["info"][t.task_id]["state"]
                                   for t in tasks)
        assert set(audit["states"]) == named and all(s["ok"] for s in audit["states"].values())
    # the vendored runtime: every pool task's reference scores 1 on its own state
    tools = import_exported(exports["verl"], exports["verl"].name)
    bundle = tools.bundle(pools.env_id)
    on_initial = []
    for t in tasks:
        assert bundle.state_of(t.task_id).startswith("states/")
        assert bundle.check_reference(t.task_id).passed, t.task_id
        conn, _ = bundle.replay(bundle.task(t.task_id)["reference_solution"], None)  # the same calls on initial.db
        try:
            on_initial.append(tools.taskrt.reward.score(
                bundle.task(t.task_id)["verifier"], conn, initial=bundle.initial_snapshot(None),
                answer=bundle.task_info(t.task_id).get("reference_reply")).passed)
        finally:
            conn.close()
    # the states matter: some pool tasks' references fail on initial.db (5 of 8 when measured), so a runtime that
    # played them there would score them 0
    assert not all(on_initial), on_initial
    assert bundle.state_of(next(iter(bundle.tasks))) is None  # the bank's tasks stay on initial.db


def test_openenv_plays_every_pool_task_on_its_own_state(perturbed, exports, tmp_path):
    _, pools = perturbed
    tasks = pool_tasks(pools)
    script = tmp_path / "pool_script.json"
    script.write_text(json.dumps({t.task_id: {
        "calls": [c.model_dump(mode="json") for c in t.reference_solution],
        "reply": reference_reply(t.verifier.model_dump(mode="json")), "submit": "submit"} for t in tasks}))
    report = run_report(trainer_python("openenv"), "run_openenv_many.py",
                        [str(exports["openenv"]), str(2 * len(tasks)), str(script)], [TRAINER_DIR], cwd=tmp_path,
                        timeout=1500)
    many = report["many"]
    assert many["errors"] == [] and len(many["rewards"]) == 2 * len(tasks), many["errors"][:3]
    assert {task_id for task_id, _ in many["rewards"]} == {t.task_id for t in tasks}
    assert all(reward == 1.0 for _, reward in many["rewards"]), many["rewards"]


def test_verifiers_plays_every_pool_task_on_its_own_state(perturbed, exports, tmp_path):
    """Each level's environment (``load_environment(level=...)``) played with its tasks' references, every level in
    one verifiers process (run_verifiers.py's list of runs: the library's import is paid once, not per level)."""
    _, pools = perturbed
    package = exports["verifiers"]
    levels = [(level, lp) for level, lp in sorted(pools.levels.items()) if lp.tasks]
    assert levels
    runs = []
    for level, lp in levels:
        path = tmp_path / f"script{level}.json"
        path.write_text(json.dumps({t.task_id: {
            "calls": [c.model_dump(mode="json") for c in t.reference_solution],
            "reply": reference_reply(t.verifier.model_dump(mode="json")), "prompt": t.instruction} for t in lp.tasks}))
        runs.append({"script": str(path), "env": {"level": level}, "modes": ["reference"]})
    report = run_report(trainer_python("verifiers"), "run_verifiers.py",
                        [package.name, runs[0]["script"], json.dumps(runs)], [package, TRAINER_DIR], cwd=tmp_path)
    assert {r["run"] for r in report["rollouts"]} <= set(range(len(levels)))
    for run, (level, lp) in enumerate(levels):
        rollouts = [r for r in report["rollouts"] if r["run"] == run]
        assert sorted(r["task_id"] for r in rollouts) == sorted(t.task_id for t in lp.tasks), level
        for r in rollouts:
            assert r["ok"] and r["reward"] == 1.0, (level, r["task_id"], r["errors"], r["info"].get("verifier_failures"))
