"""A small catalog for the export tests: the hand-written library environment with three tasks
(two from the fixture, one question whose verifier needs the agent's answer), each with a measured
difficulty (as the tester records it) and no ``metadata.tier`` (the exports derive it)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.envdir import write_env_dir
from pipeline.ir import Assertion, Difficulty, Task, ToolCall, Verifier
from tests.fixtures.library import library_env, library_tasks

REPO = Path(__file__).resolve().parents[2]
TRAINER_VENVS = REPO / ".venv-trainers"


def question_task(env) -> Task:
    instruction = "How many books does Carla Diaz currently have on loan? Answer with the number."
    solution = [
        ToolCall(tool="find_member_by_name", arguments={"name": "Carla"}),
        ToolCall(tool="list_loans_for_member", arguments={"member_id": 3, "status": "open"}),
    ]
    verifier = Verifier(
        assertions=[
            Assertion(sql="SELECT COUNT(*) FROM loans WHERE member_id = 3 AND returned_at IS NULL", expect=2)
        ],
        mutable_tables=[],
        answer={"type": "number", "value": 2},
    )
    return Task(
        task_id=Task.make_id(env.env_id, instruction, solution, verifier),
        env_id=env.env_id,
        instruction=instruction,
        tools=[t.openai_schema() for t in env.tools],
        reference_solution=solution,
        verifier=verifier,
        kind="lookup",
        provenance={"source": "tests/export/conftest.py"},
    )


def town_library_env():
    """A second environment with the same tools as the library (their names clash across the catalog)."""
    env = library_env()
    return env.model_copy(update={"scenario": env.scenario.model_copy(update={"name": "Town library lending"})})


def build_catalog(root: Path, n_envs: int = 1) -> Path:
    """The library environment with three tasks; with ``n_envs=2`` also the town library (same
    tools, its own tasks), for exports over several environments."""
    for env in [library_env(), town_library_env()][:n_envs]:
        tasks = [t.model_copy(update={"difficulty": Difficulty(attempts=4, passes=i + 1)})
                 for i, t in enumerate([*library_tasks(env), question_task(env)])]
        write_env_dir(env, root / "envs" / env.env_id, tasks=tasks, report={"source": "tests/export"})
    return root


@pytest.fixture(scope="session")
def catalog_dir(tmp_path_factory) -> Path:
    return build_catalog(tmp_path_factory.mktemp("catalog"))


@pytest.fixture(scope="session")
def multi_catalog_dir(tmp_path_factory) -> Path:
    return build_catalog(tmp_path_factory.mktemp("multi"), n_envs=2)


EXAMPLE = REPO / "generated" / "quickstart"


@pytest.fixture(scope="session", params=["fixture", "example"])
def any_catalog(request, catalog_dir) -> Path:
    """The hand-written catalog, then the committed example catalog the embedded model produced."""
    if request.param == "fixture":
        return catalog_dir
    if not (EXAMPLE / "catalog.db").is_file():
        pytest.fail(f"the example catalog {EXAMPLE} is missing (README: Quickstart and example)")
    return EXAMPLE


def trainer_python(name: str) -> Path:
    """The python of a trainer venv made by scripts/setup_trainers.sh (fails loudly when missing)."""
    py = TRAINER_VENVS / name / "bin" / "python"
    if not py.exists():
        pytest.fail(f"{py} is missing: run scripts/setup_trainers.sh (the project's set-up runs it)")
    return py


def subprocess_env(extra_path: list[Path] | None = None) -> dict[str, str]:
    """An environment for a trainer-venv subprocess: nothing of envfoundry's venv leaks in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in extra_path)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


#: per trainer python and package content (this process: one xdist worker), the directory it was installed into
_INSTALLED: dict[tuple[str, str], Path] = {}


def _tree_digest(project: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(project.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(project)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def install(python: Path, project: Path, target: Path) -> None:
    """``pip install <export>`` into a target directory of the trainer venv (no index round-trip). An export the
    same to the byte was installed by an earlier test of this worker (the same catalog exported in the same
    format): its installed files are copied instead (pip's ~2 s of CPU and ~12 s at load 10 per install)."""
    key = (str(python), _tree_digest(project))
    done = _INSTALLED.get(key)
    if done is not None and done.is_dir():
        shutil.copytree(done, target, dirs_exist_ok=True)
        return
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--target", str(target), str(project)],
        capture_output=True, text=True, timeout=300, env=subprocess_env(), cwd=target.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    _INSTALLED[key] = target
