"""Exported artefacts loaded the way trainers load them: installed into the trainer's own venv
(.venv-trainers/, made by scripts/setup_trainers.sh; no envfoundry there) and driven by the real
library. Two rollouts per task without an LLM: the reference solution scores 1, doing nothing 0."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.export import export_catalog, load_catalog
from tests.export.conftest import subprocess_env, trainer_python

TRAINER_DIR = Path(__file__).parent / "trainer"


def install(python: Path, project: Path, target: Path) -> None:
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(project),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=subprocess_env(),
        cwd=target.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def run_report(python: Path, script: str, args: list[str], path: list[Path], timeout: int = 600) -> dict:
    env = subprocess_env(path)
    env["EF_SCRIPTED_KEY"] = "scripted"
    proc = subprocess.run(
        [str(python), str(TRAINER_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=path[0],
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return json.loads(lines[-1][len("REPORT ") :])


def script_file(catalog_dir: Path, out: Path, submit: str | None = None) -> tuple[Path, dict]:
    cat = load_catalog(catalog_dir)
    script = {
        t.task_id: {
            "calls": [c.model_dump(mode="json") for c in t.reference_solution],
            "reply": t.verifier.answer,
            "prompt": t.instruction,
            "submit": submit,
        }
        for t in cat.tasks
    }
    path = out / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path, script


def test_verifiers_package_scores_reference_1_and_noop_0(any_catalog, tmp_path):
    python = trainer_python("verifiers")
    (result,) = export_catalog(any_catalog, "verifiers", tmp_path / "export").paths
    target = tmp_path / "site"
    install(python, result, target)
    script, expected = script_file(any_catalog, tmp_path)
    report = run_report(python, "run_verifiers.py", [result.name, str(script)], [target, TRAINER_DIR])

    assert report["verifiers"] == "0.4.0"
    assert report["env_class"] == "SingleAgentEnv"
    assert report["default_harness"] == result.name  # the package's own tool-calling chat loop
    rollouts = report["rollouts"]
    assert len(rollouts) == 2 * len(expected)
    env = next(iter(load_catalog(any_catalog).envs.values())).env
    tool_names = sorted(t.name for t in env.tools)
    for r in rollouts:
        assert r["ok"], r["errors"]
        assert r["key"] == r["task_id"] and r["prompt"] == expected[r["task_id"]]["prompt"]
        if r["mode"] == "reference":
            assert r["reward"] == 1.0, r["info"].get("verifier_failures")
            assert r["state_calls"] == len(expected[r["task_id"]]["calls"])
            assert r["info"]["listed_tools"] == tool_names
            assert not any(x["is_error"] for x in r["info"]["tool_results"])
        else:
            assert r["reward"] == 0.0 and r["state_calls"] == 0
            assert r["info"]["verifier_failures"]
    # The advertised schemas are the IR's own (enums, bounds, required, no extra arguments).
    ref = next(r for r in rollouts if r["mode"] == "reference")
    assert ref["info"]["tool_schemas"] == {t.name: t.input_schema() for t in env.tools}


def test_openenv_server_scores_reference_1_and_noop_0(any_catalog, tmp_path):
    python = trainer_python("openenv")
    (result,) = export_catalog(any_catalog, "openenv", tmp_path / "export").paths
    assert (result / "openenv.yaml").read_text().startswith("spec_version: 1\n")
    target = tmp_path / "site"
    install(python, result, target)
    script, expected = script_file(any_catalog, tmp_path, submit="submit")
    report = run_report(python, "run_openenv.py", [result.name, str(script)], [target])

    assert report["validation"] == {"passed": True, "failed": []}  # openenv's own runtime validator
    env = next(iter(load_catalog(any_catalog).envs.values())).env
    assert report["listed_tools"] == sorted([t.name for t in env.tools] + ["submit"])
    assert len(report["episodes"]) == 2 * len(expected)
    for e in report["episodes"]:
        assert e["reset_task_id"] == e["task_id"] and e["instruction"] == expected[e["task_id"]]["prompt"]
        assert e["done"] is True and e["n_tools"] == len(env.tools) + 1
        assert "ended" in e["after_end_error"]
        assert e["state"]["task_id"] == e["task_id"] and e["state"]["done"] is True
        if e["mode"] == "reference":
            assert e["reward"] == 1.0
            assert all(not r["result"].startswith("Error:") for r in e["results"])
            assert e["state"]["step_count"] == len(expected[e["task_id"]]["calls"]) + 1
        else:
            assert e["reward"] == 0.0 and e["state"]["step_count"] == 1


@pytest.mark.parametrize("venv", ["verifiers", "openenv"])
def test_trainer_venvs_do_not_have_envfoundry(venv, tmp_path):
    proc = subprocess.run(
        [str(trainer_python(venv)), "-c", "import pipeline.export"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        cwd=tmp_path,
    )
    assert proc.returncode != 0 and "No module named 'pipeline'" in proc.stderr
