"""End to end with a scripted LLM: ``verify_env`` on a real environment directory, emission, the
task bank, the CLI, and an independent check of every emitted task through ``server.py`` over HTTP
(reference replayed with ``POST /tools/<name>``, assertions evaluated with plain sqlite3)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import click
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.catalog import read_task_bank, write_env_results, write_task_bank
from pipeline.envdir import load_env_dir, write_env_dir
from pipeline.graph import verify_env
from pipeline.llm import fake_client
from pipeline.settings import TaskSettings, VerifySettings
from tests.fixtures.library import library_env
from tests.fixtures.server import http, running_server
from tests.verify.test_call_review import all_pass
from tests.verify.test_tester import call, finish
from verify import tester
from verify.difficulty import DifficultyPolicy

REPLIES = [
    # the planner's first two chains: how many loans Carla Diaz has (tier 3), Bob Stone borrows Emma (tier 2; the
    # planner's rows are drawn through the whole table since a38e3df)
    {"user_request": "How many books does Carla Diaz have on loan from us?"},
    {"user_request": "Bob Stone would like to borrow Emma for 7 days."},
    call("find_member_by_name", name="Carla Diaz"), call("list_loans_for_member", member_id=3),
    finish("Carla Diaz has 2 loans."), all_pass(2),
    call("find_member_by_name", name="Bob Stone"), finish("Done."),  # stops before borrowing the book
    all_pass(1, "agent", "none", "", "never called borrow_book"),
]
# The planner's plain order (a question, then a write): the spread bank's order has its own tests (test_bank)
SETTINGS = VerifySettings(tester=tester.TesterSettings(attempts=1), tasks=TaskSettings(spread_bank=False))


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    return write_env_dir(library_env(), tmp_path / "library", report={"build": {"note": "kept"}})


def _verify(env_dir: Path, settings: VerifySettings = SETTINGS):
    env, _, _ = load_env_dir(env_dir)
    client = fake_client(list(REPLIES))
    result = verify_env(env, client, initial_db=env_dir / "initial.db", n_tasks=2, settings=settings)
    assert client.remaining == []
    return result


def _scalar(rows):
    return rows[0][0] if len(rows) == 1 and len(rows[0]) == 1 else [list(r) for r in rows]


def _assertions_hold(db: Path, verifier: dict) -> list[bool]:
    con = sqlite3.connect(db)
    try:
        out = []
        for a in verifier["assertions"]:
            assert set(a) <= {"sql", "expect", "description", "name"}
            out.append(_scalar(con.execute(a["sql"]).fetchall()) == a["expect"])
        return out
    finally:
        con.close()


def test_verify_env_writes_tasks_that_hold_over_http(env_dir: Path, tmp_path: Path) -> None:
    result = _verify(env_dir)
    assert [t.kind for t in result.tasks] == ["lookup", "create"]
    lookup, update = result.tasks
    assert lookup.difficulty.model_dump() == {"attempts": 1, "passes": 1}
    assert update.difficulty.model_dump() == {"attempts": 1, "passes": 0}
    assert lookup.metadata["difficulty_tag"] == "easy" and update.metadata["difficulty_tag"] == "hard_pool"
    assert update.metadata["hard_pool"] is True and lookup.metadata["hard_pool"] is False  # kept, not reworded
    summary = result.report["summary"]
    assert summary["kept"] == 2 and summary["pass_rate_histogram"]["0"] == 1 and summary["hard_pool"] == 1
    assert summary["pass_rate_histogram"]["(0.75,1]"] == 1 and summary["blame"] == {"agent": 1, "none": 1}
    entry = result.report["tasks"][1]
    assert {p["name"] for p in entry["proofs"]} >= {"reference", "initial_state", "no_op", "destructive"}
    assert entry["attempts"][0]["verdicts"][0]["verdict"] == "pass"

    write_env_results(env_dir, result.env, result.tasks, result.report, result.trajectories)
    _, tasks, report = load_env_dir(env_dir)
    assert tasks == result.tasks and report["build"] == {"note": "kept"} and report["verify"] == result.report
    lines = (env_dir / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["review"]["blame"] == "agent"

    # independently, as a trainer meets it: server.py alone, over HTTP, assertions in plain sqlite3
    for task in (json.loads(line) for line in (env_dir / "tasks.jsonl").read_text().splitlines()):
        db = tmp_path / f"{task['task_id']}.db"
        shutil.copy(env_dir / "initial.db", db)
        with running_server(env_dir, db) as base:
            for c in task["reference_solution"]:
                status, body = http("POST", f"{base}/tools/{c['tool']}", c["arguments"])
                assert status == 200 and body["ok"], body
        assert all(_assertions_hold(db, task["verifier"]))
        initial = _assertions_hold(env_dir / "initial.db", task["verifier"])
        assert task["verifier"]["answer"] is not None or not all(initial)


def test_reports_are_deterministic_and_the_band_policy_drops_with_reasons(env_dir: Path) -> None:
    a, b = _verify(env_dir), _verify(env_dir)
    assert json.dumps(a.report, sort_keys=True) == json.dumps(b.report, sort_keys=True)
    assert a.tasks == b.tasks
    band = SETTINGS.model_copy(update={"difficulty": DifficultyPolicy(mode="band", min_pass_rate=0.5, max_pass_rate=1.0,
                                                                            keep_hard_pool=False)})
    c = _verify(env_dir, band)
    assert [t.kind for t in c.tasks] == ["lookup"]
    dropped = [r for r in c.rejections if r.stage == "difficulty"]
    assert len(dropped) == 1 and "pass rate 0.0" in dropped[0].reason


def test_task_bank_jsonl_and_parquet(env_dir: Path, tmp_path: Path) -> None:
    tasks = _verify(env_dir).tasks
    paths = write_task_bank(list(reversed(tasks)), tmp_path / "bank")
    first = paths["parquet"].read_bytes(), paths["jsonl"].read_bytes()
    write_task_bank(tasks, tmp_path / "bank")
    assert (paths["parquet"].read_bytes(), paths["jsonl"].read_bytes()) == first  # same tasks, same bytes
    assert read_task_bank(tmp_path / "bank") == sorted(tasks, key=lambda t: t.task_id)
    table = pq.read_table(paths["parquet"])
    assert table.num_rows == 2
    row = table.to_pylist()[0]
    assert json.loads(row["verifier"])["assertions"] and row["difficulty_attempts"] == 1
    assert isinstance(row["mutable_tables"], list) and row["num_steps"] >= 2 and row["tier"] >= 2
    with pytest.raises(ValueError, match="duplicate task ids"):
        write_task_bank(tasks + tasks[:1], tmp_path / "dup")


def test_cli_verify_and_task_bank(env_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.cli import verify as cli

    client = fake_client(list(REPLIES))
    monkeypatch.setattr(cli, "client_from_config", lambda config: client)
    group = click.Group()
    cli.register(group)
    runner = CliRunner()
    config = tmp_path / "envfoundry.toml"
    config.write_text("[stages.tasks]\nspread_bank = false\n")  # the order REPLIES follow (see SETTINGS)
    res = runner.invoke(group, ["verify", str(env_dir), "--tasks", "2", "--attempts", "1", "--json", "--config",
                                str(config)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["kept"] == 2 and out["usage"]["tasks"]["calls"] == 2
    assert len(load_env_dir(env_dir)[1]) == 2
    res = runner.invoke(group, ["task-bank", str(env_dir), "--out", str(tmp_path / "bank")])
    assert res.exit_code == 0 and "2 tasks from 1 environments" in res.output
    res = runner.invoke(group, ["verify", str(env_dir), "--min-pass-rate", "0.9", "--max-pass-rate", "0.1"])
    assert res.exit_code == 2 and "min_pass_rate" in res.output
    res = runner.invoke(group, ["verify", "--help"])
    assert res.exit_code == 0 and "--attempts" in res.output
