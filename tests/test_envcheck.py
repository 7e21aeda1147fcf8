"""``envfoundry check`` on hand-broken copies of the committed example environment (real SQLite, real proofs).

While the example catalog is being regenerated (it may be absent from the tree), the library fixture of
``tests/fixtures/library.py`` written as an environment directory stands in for it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.dbmodel.arguments import Sampler
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.envcheck import check_env_dir
from pipeline.envdir import create_initial_db, write_env_dir
from pipeline.ir import Environment, Task
from pipeline.runtime import EnvInstance
from pipeline.server import render_server
from tests.fixtures.library import library_env
from verify.derive import derive_verifier

EXAMPLES = Path(__file__).parent.parent / "generated" / "quickstart" / "envs"


def _env(d: Path) -> dict:
    return json.loads((d / "env.json").read_text(encoding="utf-8"))


def _write_env(d: Path, data: dict, *, render: bool = True) -> None:
    (d / "env.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    if render:
        (d / "server.py").write_text(render_server(Environment.model_validate(data)), encoding="utf-8")


def _write_call(env: Environment) -> list:
    """One call of a write tool, with arguments drawn from the seeded rows, that succeeds and changes the state."""
    from pipeline.ir import ToolCall
    from pipeline.runtime.state import diff, snapshot, table_infos

    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, tuple(env.tables), env.clock)
        for tool in (t for t in env.tools if t.kind == "write"):
            for args in sampler.arguments(tool, 3):
                inst.reset()
                infos = table_infos(inst.conn)
                before = snapshot(inst.conn, infos)
                if inst.call(tool.name, args).get("ok") and diff(before, snapshot(inst.conn, infos)):
                    return [ToolCall(tool=tool.name, arguments=args)]
    raise AssertionError("no write tool of the example changes anything")


@pytest.fixture(scope="module")
def clean_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed example (or the library fixture), rendered afresh, with one task derived here (so
    the baseline is clean whatever the committed catalog's age): one write, replayed and proven."""
    example = next(iter(sorted(EXAMPLES.iterdir())), None) if EXAMPLES.is_dir() else None
    if example is not None:
        d = tmp_path_factory.mktemp("template") / example.name
        shutil.copytree(example, d)
        env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
    else:
        env = library_env()
        d = write_env_dir(env, tmp_path_factory.mktemp("template") / env.env_id)
    (d / "server.py").write_text(render_server(env), encoding="utf-8")
    create_initial_db(env, d / "initial.db")
    calls = _write_call(env)
    derived = derive_verifier(env, calls, initial_db=d / "initial.db")
    assert derived.verifier is not None, derived.error
    instruction = f"Please do this: {calls[0].tool} {calls[0].arguments}."
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
    env = Environment.model_validate_json((copy / "env.json").read_text(encoding="utf-8"))
    rows = sum(len(s.rows) for s in env.seed)
    code_json, out_json = run(copy, "--json")
    data = json.loads(out_json)
    assert code_json == 0 and data["ok"] and data["envs"][0]["problems"] == [] and data["unusable"] == []
    # semantic findings (values that contradict their column's examples) are listed, one line each, and do not
    # fail the check
    findings = data["envs"][0]["findings"]
    assert all(set(f) == {"table", "column", "value", "contradicts"} for f in findings)
    lines = out.strip().splitlines()
    said = f", {len(findings)} semantic finding(s)" if findings else ""
    assert lines[-1] == (f"{copy}: ok{said} ({len(env.tables)} tables, {rows} seed rows, {len(env.tools)} tools, "
                         f"1 tasks checked)")
    assert len(lines) - 1 == len(findings)
    assert all(line.startswith(f"{copy}: finding: {f['table']}.{f['column']} = ") for line, f in zip(lines, findings, strict=False))


def test_a_bad_env_json_is_named_by_its_key(copy: Path) -> None:
    data = _env(copy)
    data["tools"][0]["kind"] = "maybe"
    _write_env(copy, data, render=False)
    code, out = run(copy)
    assert code == 1
    assert f"{copy}: env.json: invalid environment IR: 'tools.0.kind': Input should be 'read' or 'write'" in out
    (copy / "env.json").write_text("{not json", encoding="utf-8")
    code, out = run(copy)
    assert code == 1 and "env.json: invalid environment IR" in out


def test_a_bad_tool_is_named_by_the_tool(copy: Path) -> None:
    data = _env(copy)
    tool = next(t for t in data["tools"] if t["kind"] == "write")
    write = next(s for s in tool["steps"] if s["kind"] == "write")
    write["sql"] = f"UPDATE {data['tables'][0]['name']} SET no_such_column = 1"
    _write_env(copy, data)
    report = check_env_dir(copy)
    tool_problems = [p for p in report.problems if p.where == f"tool {tool['name']}"]
    assert len(tool_problems) == 1 and "no such column: no_such_column" in tool_problems[0].message
    assert {p.where for p in report.problems} <= {f"tool {tool['name']}"} | {f"task {t}" for t in _task_ids(copy)}
    code, out = run(copy)
    assert code == 1 and f"{copy}: tool {tool['name']}:" in out


def test_a_stale_server_py_is_reported(copy: Path) -> None:
    data = _env(copy)
    data["tools"][0]["description"] += " (edited by hand)"
    _write_env(copy, data, render=False)  # env.json edited by hand, server.py not rendered again
    code, out = run(copy)
    assert code == 1
    assert out.splitlines()[0] == (f"{copy}: server.py: is not a fresh render of env.json "
                                   "(run `envfoundry render` on the directory)")
    assert CliRunner().invoke(main, ["render", str(copy)]).exit_code == 0
    assert run(copy)[0] == 0  # after `envfoundry render` it matches


def test_a_task_whose_verifier_no_longer_holds_is_named_by_its_id(copy: Path) -> None:
    task = json.loads((copy / "tasks.jsonl").read_text(encoding="utf-8"))
    goal = task["verifier"]["assertions"][0]  # a goal: what the task asks for
    goal["expect"] = "a value the reference never produces"
    (copy / "tasks.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    report = check_env_dir(copy)
    assert [p.where for p in report.problems] == [f"task {task['task_id']}"]
    assert report.problems[0].message.startswith("reference: reference replay fails")
    # a seeded row the schema refuses: the table and row are named, and nothing later is run on it
    data = _env(copy)
    seed = next(s for s in data["seed"] if s["rows"])
    env = Environment.model_validate(data)
    table = next(t for t in env.tables if t.name == seed["table"])
    pk = next(c.name for c in table_columns(scratch_db(env.tables), table) if c.pk)
    seed["rows"][0][pk] = "not a number"  # a STRICT INTEGER PRIMARY KEY refuses it
    _write_env(copy, data)
    report = check_env_dir(copy)
    assert [p.where for p in report.problems] == [f"table {seed['table']}"]
    assert "row 0" in report.problems[0].message


def test_unusable_input_exits_2(copy: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = run(copy, empty)
    assert code == 2 and f"error: {empty}: not an environment directory (no env.json)" in out
    code, out = run(tmp_path / "missing", "--json")
    assert code == 2 and json.loads(out)["unusable"] == [f"{tmp_path / 'missing'}: not a directory"]


def _task_ids(d: Path) -> list[str]:
    return [json.loads(line)["task_id"] for line in (d / "tasks.jsonl").read_text(encoding="utf-8").splitlines()]
