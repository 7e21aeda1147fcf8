"""``envfoundry check`` on hand-broken copies of the committed example environment (real SQLite, real proofs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.check import check_env_dir
from pipeline.cli import main
from pipeline.envdir import create_initial_db
from pipeline.ir import Environment, Task, ToolCall
from pipeline.render import render_server
from verify.derive import derive_verifier

EXAMPLE = next((Path(__file__).parent.parent / "generated" / "quickstart" / "envs").iterdir())


def _env(d: Path) -> dict:
    return json.loads((d / "env.json").read_text(encoding="utf-8"))


def _write_env(d: Path, data: dict, *, render: bool = True) -> None:
    (d / "env.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    if render:
        (d / "server.py").write_text(render_server(Environment.model_validate(data)), encoding="utf-8")


@pytest.fixture(scope="module")
def clean_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed example, rendered afresh, with one task derived here (so the baseline is clean
    whatever the committed catalog's age): close an open loan, replayed and proven."""
    d = tmp_path_factory.mktemp("template") / EXAMPLE.name
    shutil.copytree(EXAMPLE, d)
    env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
    (d / "server.py").write_text(render_server(env), encoding="utf-8")
    create_initial_db(env, d / "initial.db")
    loan = next(r for s in env.seed if s.table == "loans" for r in s.rows if r["status"] == "open")
    calls = [ToolCall(tool="cancel_loan", arguments={"loan_id": loan["loan_id"]})]
    derived = derive_verifier(env, calls, initial_db=d / "initial.db")
    assert derived.verifier is not None, derived.error
    instruction = f"Please close loan {loan['loan_id']}."
    task = Task(task_id=Task.make_id(env.env_id, instruction, calls, derived.verifier), env_id=env.env_id,
                instruction=instruction, tools=[t.openai_schema() for t in env.tools], reference_solution=calls,
                verifier=derived.verifier, kind="update")
    (d / "tasks.jsonl").write_text(task.model_dump_json() + "\n", encoding="utf-8")
    report = check_env_dir(d)
    assert report.ok, report.problems
    return d


@pytest.fixture
def copy(clean_template: Path, tmp_path: Path) -> Path:
    d = tmp_path / clean_template.name
    shutil.copytree(clean_template, d)
    return d


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["check", *map(str, args)])
    return res.exit_code, res.output


def test_a_clean_environment_passes(copy: Path) -> None:
    code, out = run(copy)
    assert code == 0, out
    assert out.strip() == f"{copy}: ok (5 tables, 50 seed rows, 5 tools, 1 tasks checked)"
    code, out = run(copy, "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["envs"][0]["problems"] == [] and data["unusable"] == []


def test_a_bad_env_json_is_named_by_its_key(copy: Path) -> None:
    data = _env(copy)
    data["tools"][2]["kind"] = "maybe"
    _write_env(copy, data, render=False)
    code, out = run(copy)
    assert code == 1
    assert f"{copy}: env.json: invalid environment IR: 'tools.2.kind': Input should be 'read' or 'write'" in out
    (copy / "env.json").write_text("{not json", encoding="utf-8")
    code, out = run(copy)
    assert code == 1 and "env.json: invalid environment IR" in out


def test_a_bad_tool_is_named_by_the_tool(copy: Path) -> None:
    data = _env(copy)
    cancel = next(t for t in data["tools"] if t["name"] == "cancel_loan")
    cancel["steps"][-1]["sql"] = "UPDATE loans SET state = 'closed' WHERE loan_id = :loan_id"
    _write_env(copy, data)
    report = check_env_dir(copy)
    tool_problems = [p for p in report.problems if p.where == "tool cancel_loan"]
    assert len(tool_problems) == 1 and "no such column: state" in tool_problems[0].message
    assert {p.where for p in report.problems} <= {"tool cancel_loan"} | {f"task {t}" for t in _task_ids(copy)}
    code, out = run(copy)
    assert code == 1 and f"{copy}: tool cancel_loan:" in out


def test_a_stale_server_py_is_reported(copy: Path) -> None:
    data = _env(copy)
    data["tools"][0]["description"] = "Find a book by its title or its author."
    _write_env(copy, data, render=False)  # env.json edited by hand, server.py not rendered again
    code, out = run(copy)
    assert code == 1
    assert out.splitlines()[0] == (f"{copy}: server.py: is not a fresh render of env.json "
                                   "(run `envfoundry render` on the directory)")
    assert CliRunner().invoke(main, ["render", str(copy)]).exit_code == 0
    assert run(copy)[0] == 0  # after `envfoundry render` it matches


def test_a_task_whose_verifier_no_longer_holds_is_named_by_its_id(copy: Path) -> None:
    task = json.loads((copy / "tasks.jsonl").read_text(encoding="utf-8"))
    goal = next(a for a in task["verifier"]["assertions"] if a.get("name") != "gate")
    goal["expect"] = "a value the reference never produces"
    (copy / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    report = check_env_dir(copy)
    assert [p.where for p in report.problems] == [f"task {task['task_id']}"]
    assert report.problems[0].message.startswith("reference: reference replay fails")
    # a seeded row the schema refuses: the table and row are named, and nothing later is run on it
    data = _env(copy)
    next(s for s in data["seed"] if s["table"] == "books")["rows"][0]["title"] = None  # NOT NULL
    _write_env(copy, data)
    report = check_env_dir(copy)
    assert [p.where for p in report.problems] == ["table books"]
    assert "row 0" in report.problems[0].message and "NOT NULL constraint failed" in report.problems[0].message


def test_unusable_input_exits_2(copy: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = run(copy, empty)
    assert code == 2 and f"error: {empty}: not an environment directory (no env.json)" in out
    code, out = run(tmp_path / "missing", "--json")
    assert code == 2 and json.loads(out)["unusable"] == [f"{tmp_path / 'missing'}: not a directory"]


def _task_ids(d: Path) -> list[str]:
    return [json.loads(line)["task_id"] for line in (d / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
