"""``envfoundry eval`` against a scripted OpenAI-compatible server on loopback that answers with native tool
calls: a policy replaying every reference solution passes every task, one doing nothing scores 0, one pasting
every tool result as its answer fails every question; results, resume, endpoint faults and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.config import LLMSettings
from pipeline.eval import EvalError, EvalSettings, load_items, run_eval
from pipeline.llm import LLMClient
from tests.eval import fixtures
from tests.eval.scripted_server import Paste, Replay, noop, serve

EXAMPLE = Path(__file__).resolve().parents[2] / "generated" / "quickstart"

SETTINGS = EvalSettings(max_turns=8, attempts=1, concurrency=2)  # the example holds 6-call tasks (+ the answer)


def client_for(url: str) -> LLMClient:
    s = LLMSettings(base_url=url, model="scripted", cache=False, max_retries=1, timeout_s=30)
    return LLMClient(s, base_url=url, model="scripted")


def example_items() -> list:
    if not (EXAMPLE / "task_bank.jsonl").is_file():
        pytest.fail(f"the example catalog {EXAMPLE} is missing")
    return load_items(EXAMPLE)


def task_set(name: str, tmp_path: Path) -> list:
    return example_items() if name == "example" else fixtures.items(tmp_path)


SETS = ["fixtures", "example"]


@pytest.mark.parametrize("name", SETS)
def test_replaying_every_reference_solution_passes_every_task(tmp_path: Path, name: str) -> None:
    items = task_set(name, tmp_path)
    if name == "fixtures":
        assert len(items) == 13 and {it.env.scenario.name for it in items} == {"City library lending", "Tiny shop"}
    with serve(Replay([it.task for it in items])) as server:
        run = run_eval(client_for(server.base_url), items, tmp_path / "out", SETTINGS)
    failed = [(r["task_id"], r["failures"]) for r in run.rows if not r["passed"]]
    assert not failed
    assert run.summary["pass_rate"] == 1.0 and run.summary["mean_reward"] == 1.0 and run.summary["errors"] == 0
    assert all(r["reward"] == 1.0 and r["tool_calls"] >= 1 for r in run.rows)
    # native tool calls: every request carried the tools, and results went back as tool messages
    assert all(b["tools"] for b in server.requests)
    assert any(m["role"] == "tool" for b in server.requests for m in b["messages"])


@pytest.mark.parametrize("name", SETS)
def test_doing_nothing_scores_zero(tmp_path: Path, name: str) -> None:
    items = task_set(name, tmp_path)
    with serve(noop) as server:
        run = run_eval(client_for(server.base_url), items, tmp_path / "out", SETTINGS)
    assert len(run.rows) == len(items)
    assert all(r["reward"] == 0.0 and not r["passed"] and r["tool_calls"] == 0 and r["turns"] == 1 for r in run.rows)
    assert run.summary["pass_rate"] == 0.0 and run.summary["pass_at_k"] == 0.0


def _paste(items: list, tmp_path: Path) -> list[dict]:
    with serve(Paste([it.task for it in items])) as server:
        run = run_eval(client_for(server.base_url), items, tmp_path / "out", SETTINGS)
    assert all(r["tool_calls"] >= 1 and r["final_answer"].startswith('{"ok"') for r in run.rows)
    return run.rows


def test_pasting_every_tool_result_fails_every_typed_question(tmp_path: Path) -> None:
    """Numbers, dates, several rows naming sibling values, one row naming only the expected value, and a yes
    question whose pasted result's own {"ok": true} would read as yes: all fail."""
    items = [it for it in fixtures.items(tmp_path) if isinstance(it.task.verifier.answer, dict)]
    assert {it.task.verifier.answer["type"] for it in items} == {"number", "text", "date", "boolean", "enum"}
    assert not [r["task_id"] for r in _paste(items, tmp_path) if r["passed"]]


def test_pasting_fails_every_question_of_the_example(tmp_path: Path) -> None:
    items = [it for it in example_items() if it.task.verifier.answer is not None]
    assert not [r for r in _paste(items, tmp_path) if r["passed"]]


def test_results_resume_and_refuse_changed_tasks(tmp_path: Path) -> None:
    items = fixtures.items(tmp_path)[:4]
    out = tmp_path / "out"
    settings = SETTINGS.model_copy(update={"attempts": 2})
    with serve(Replay([it.task for it in items])) as server:
        client = client_for(server.base_url)
        first = run_eval(client, items, out, settings)
        assert first.ran == 8 and first.skipped == 0
        rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
        assert {"task_id", "attempt", "reward", "passed", "turns", "tool_calls", "error"} <= set(rows[0])
        assert sorted((r["task_id"], r["attempt"]) for r in rows) == sorted((it.task.task_id, k) for it in items
                                                                           for k in (1, 2))
        trajectories = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
        assert len(trajectories) == 8 and all(t["messages"][0]["role"] == "system" for t in trajectories)
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["protocol"] == "native" and cfg["tasks"] == 4 and "the last assistant message" in cfg["final_answer"]
        asked = len(server.requests)
        again = run_eval(client, items, out, settings)
        assert again.ran == 0 and again.skipped == 8 and len(server.requests) == asked
        assert again.summary["attempts"] == 8
        more = run_eval(client, items, out, settings.model_copy(update={"attempts": 3}))
        assert more.ran == 4 and more.summary["k"] == 3
        changed = [items[0].__class__(items[0].env, items[0].env_dir,
                                      items[0].task.model_copy(update={"instruction": "Something else."}),
                                      "changed")] + items[1:]
        with pytest.raises(EvalError, match="another task set"):
            run_eval(client, changed, out, settings)
        with pytest.raises(EvalError, match="max_turns"):
            run_eval(client, items, out, settings.model_copy(update={"max_turns": 3}))


def test_endpoint_faults_are_recorded_and_retried_on_resume(tmp_path: Path) -> None:
    items = fixtures.items(tmp_path)[:3]
    replay = Replay([it.task for it in items])
    broken = items[1].task.instruction
    out = tmp_path / "out"

    def flaky(body: dict) -> object:
        return 503 if body["messages"][1]["content"] == broken else replay(body)

    with serve(flaky) as server:
        run = run_eval(client_for(server.base_url), items, out, SETTINGS)
        assert sum(1 for b in server.requests if b["messages"][1]["content"] == broken) == 2  # retried once
    bad = [r for r in run.rows if r["error"]]
    assert len(bad) == 1 and bad[0]["task_id"] == items[1].task.task_id and "503" in bad[0]["error"]
    assert bad[0]["endpoint_error"] and run.summary["errors"] == 1 and run.summary["attempts"] == 2
    assert run.summary["pass_rate"] == 1.0  # a fault is not a failure of the model
    with serve(replay) as server:
        again = run_eval(client_for(server.base_url), items, out, SETTINGS)
    assert again.ran == 1 and again.summary["errors"] == 0 and again.summary["pass_rate"] == 1.0


def test_cli_prints_a_table_and_json(tmp_path: Path) -> None:
    catalog = fixtures.write_catalog(tmp_path / "catalog")
    tasks = [it.task for it in load_items(catalog)]
    out = tmp_path / "out"
    with serve(Replay(tasks)) as server:
        args = ["eval", str(catalog), "--base-url", server.base_url, "--model", "scripted", "--api-key", "sk-test",
                "--attempts", "2", "--concurrency", "3", "--no-cache", "--out", str(out)]
        res = CliRunner().invoke(main, args + ["--json"])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        assert summary["tasks"] == len(tasks) and summary["attempts"] == 2 * len(tasks)
        assert summary["pass_rate"] == 1.0 and summary["mean_reward"] == 1.0 and summary["pass_at_k"] == 1.0
        assert set(summary["by_kind"]) >= {"create", "lookup"} and set(summary["by_tier"]) == {"-", "1", "2"}
        assert "sk-test" not in (out / "config.json").read_text()
        res = CliRunner().invoke(main, args + ["--tasks", "kind:lookup"])
        assert res.exit_code == 2 and "another task set" in res.output
        one = tmp_path / "one"
        res = CliRunner().invoke(main, ["eval", str(catalog / "envs" / "shop"), "--base-url", server.base_url,
                                        "--model", "scripted", "--no-cache", "--out", str(one), "--tasks", "1"])
        assert res.exit_code == 0, res.output
        assert "pass@1" in res.stdout and "env tiny_shop" in res.stdout
        assert len((one / "results.jsonl").read_text().splitlines()) == 1


def test_task_filters_and_bad_sources(tmp_path: Path) -> None:
    items = example_items()
    from pipeline.eval import select

    assert {it.task.kind for it in select(items, "kind:lookup")} == {"lookup"}
    assert len(select(items, "2")) == 2 and len(select(items, "kind:lookup,1")) == 1
    assert select(items, items[0].task.task_id[:6] + "*")[0].task.task_id == items[0].task.task_id
    with pytest.raises(EvalError, match="no task"):
        load_items(EXAMPLE, "kind:nothing")
    with pytest.raises(EvalError, match="neither"):
        load_items(tmp_path)
    bank_only = tmp_path / "cat"
    shutil.copytree(EXAMPLE / "envs", bank_only / "envs")
    (bank_only / "task_bank.jsonl").write_text(
        (EXAMPLE / "task_bank.jsonl").read_text().replace('"env_id":"book_lending', '"env_id":"other_lending', 1))
    with pytest.raises(EvalError, match="other_lending"):
        load_items(bank_only)


def test_a_task_deeper_than_the_turn_budget_gets_a_turn_per_reference_call_and_one_to_answer(tmp_path: Path) -> None:
    """The example's deepest task is 8 calls; with the default budget of 8 turns an agent replaying its reference
    exactly ran out of turns before the last write (the regenerated library's compound task)."""
    from pipeline.eval import turns_for

    items = example_items()
    deepest = max(items, key=lambda it: len(it.task.reference_solution))
    n = len(deepest.task.reference_solution)
    tight = EvalSettings(max_turns=n - 1, attempts=1, concurrency=1)
    assert turns_for(deepest.task, tight).max_turns == n + 1
    assert turns_for(deepest.task, SETTINGS.model_copy(update={"max_turns": 30})).max_turns == 30
    with serve(Replay([deepest.task])) as server:
        run = run_eval(client_for(server.base_url), [deepest], tmp_path / "out", tight)
    assert run.rows[0]["passed"], run.rows[0]["failures"]
