"""Sampled tasks by level in the exports (issue 29, second half): ``export --sample-per-level N`` runs the sampler
at export time and ships each level's proved tasks; OpenEnv serves them by seed and level and moves an adaptive
level with a sliding window of rewards (the real openenv library, in its trainer venv), verifiers builds its dataset
from a level (the real verifiers library), veRL gets one parquet file per level. The pools are sampled once, three
tasks per level, from the committed example's smallest environment."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import TEMPLATES, reference_reply
from pipeline.export.pools import EnvPools, sample_pools
from pipeline.stages.tasks.bank import _call_key
from tests.export.conftest import EXAMPLE, trainer_python
from tests.export.test_formats import AgentData, import_exported
from tests.export.test_trainers import TRAINER_DIR, run_report

N = 3


@pytest.fixture(scope="module")
def sampled(tmp_path_factory) -> tuple[Path, EnvPools]:
    """A catalog of the example's smallest environment and its pools (sampled once for the module)."""
    envs = sorted((EXAMPLE / "envs").iterdir(), key=lambda d: (d / "initial.db").stat().st_size)
    if not envs:
        pytest.fail(f"the example catalog {EXAMPLE} has no environment")
    root = tmp_path_factory.mktemp("sampled")
    shutil.copytree(envs[0], root / "envs" / envs[0].name)
    pools = sample_pools(load_catalog(root), N, seed=0)
    return root, pools[envs[0].name]


@pytest.fixture(scope="module")
def exports(sampled, tmp_path_factory) -> dict[str, Path]:
    root, pools = sampled
    out = tmp_path_factory.mktemp("exports")
    return {f: export_catalog(root, f, out / f, pools={pools.env_id: pools}).paths[0]
            for f in ("openenv", "verifiers", "verl")}


def levels_with_tasks(pools: EnvPools) -> list[int]:
    return [lvl for lvl, p in sorted(pools.levels.items()) if p.tasks]


def missing_level(pools: EnvPools) -> int:
    """A level without sampled tasks (level 6 when every level has some)."""
    return next((lvl for lvl, p in sorted(pools.levels.items()) if not p.tasks), 6)


def script(pools: EnvPools, out: Path) -> Path:
    """Each sampled task's reference calls and reply (what the succeeding agent plays)."""
    body = {t.task_id: {"calls": [c.model_dump(mode="json") for c in t.reference_solution],
                        "reply": reference_reply(t.verifier.model_dump(mode="json")), "submit": "submit"}
            for p in pools.levels.values() for t in p.tasks}
    path = out / "pool_script.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def test_pools_hold_proved_tasks_by_level_and_say_how_many(sampled, exports):
    root, pools = sampled
    bank = load_catalog(root).envs[pools.env_id].tasks
    assert len(levels_with_tasks(pools)) >= 3, pools.describe()  # a pool to climb
    seen: set[str] = set()
    bank_calls = {_call_key(t.reference_solution) for t in bank}
    for level, lp in pools.levels.items():
        assert len(lp.tasks) <= N and (len(lp.tasks) == N or lp.exhausted), lp.summary
        for t in lp.tasks:
            assert t.metadata["level"] == level and t.metadata["worded_by"] in ("template", "llm_template")
            assert _call_key(t.reference_solution) not in bank_calls  # never a task of the bank
            assert t.task_id not in seen  # never in two levels
            seen.add(t.task_id)
    assert not seen & {t.task_id for t in bank}
    # the example's templates.json words some of them (the LLM's template of their kind, filled by code)
    assert any(t.metadata["worded_by"] == "llm_template" for lp in pools.levels.values() for t in lp.tasks)
    # Every format's bundle records how many each level holds, and the sampler's own line when fewer than N.
    for fmt, data in (("openenv", exports["openenv"] / "data"),
                      ("verifiers", exports["verifiers"] / exports["verifiers"].name / "data"),
                      ("verl", exports["verl"] / exports["verl"].name / "data" / pools.env_id)):
        manifest = json.loads((data / "pool.json").read_text())
        assert manifest["n_per_level"] == N and manifest["seed"] == 0, fmt
        for level, lp in pools.levels.items():
            entry = manifest["levels"][str(level)]
            assert entry["found"] == len(lp.tasks) and entry["task_ids"] == [t.task_id for t in lp.tasks], fmt
            assert entry["summary"] == lp.summary and ("holds only" in lp.summary) == (lp.exhausted and
                                                                                       len(lp.tasks) < N)
        records = [json.loads(x) for x in (data / "pool.jsonl").read_text().splitlines()]
        assert [r["task_id"] for r in records] == [t.task_id for _, p in sorted(pools.levels.items()) for t in p.tasks]
        assert all(r["conversation"]["opening"] for r in records)  # the conversational form, as tasks.jsonl's
        readme = (exports[fmt] / "README.md").read_text()
        row = f"| `{pools.env_id}` | " + " | ".join(
            f"{len(p.tasks)}" + ("*" if p.exhausted and len(p.tasks) < N else "")
            for _, p in sorted(pools.levels.items())) + " |"
        assert "## Sampled tasks by level" in readme and row in readme, fmt


def test_no_pools_by_default(catalog_dir, tmp_path):
    (root,) = export_catalog(catalog_dir, "openenv", tmp_path / "o").paths
    assert not (root / "data" / "pool.json").exists() and "Sampled tasks" not in (root / "README.md").read_text()
    (root,) = export_catalog(catalog_dir, "verl", tmp_path / "v").paths
    assert not list(root.glob("train_level*.parquet"))


def test_cli_samples_once_for_every_format(sampled, tmp_path, monkeypatch):
    """``--sample-per-level`` reaches the sampler once for ``--format all`` and every format ships the pools."""
    from pipeline.cli import main

    root, pools = sampled
    calls = []

    def fake(cat, n, seed, perturb=False):
        calls.append((n, seed))
        return {pools.env_id: pools}

    monkeypatch.setattr("pipeline.export.sample_pools", fake)
    result = CliRunner().invoke(main, ["export", str(root), "--format", "all", "--out", str(tmp_path / "x"),
                                       "--sample-per-level", str(N), "--sample-seed", "4"])
    assert result.exit_code == 0, result.output
    assert calls == [(N, 4)]
    assert f"sampled {pools.describe()}" in result.output
    assert len(list((tmp_path / "x").rglob("pool.json"))) == 3  # openenv, verifiers, veRL (jsonl: the bank only)


def test_openenv_serves_by_seed_and_level_and_moves_the_adaptive_level(sampled, exports, tmp_path):
    _, pools = sampled
    levels = levels_with_tasks(pools)
    missing = missing_level(pools)
    every = [t.name for t in load_catalog(sampled[0]).envs[pools.env_id].env.tools]
    report = run_report(trainer_python("openenv"), "run_openenv_sampled.py",
                        [str(exports["openenv"]), str(script(pools, tmp_path)), json.dumps(levels), str(missing),
                         json.dumps(every)], [], cwd=tmp_path)
    by_level = report["by_level"]
    refused = by_level["not_offered"]  # a tool of the environment the sampled task does not offer: not run
    assert f"tool {refused['tool']!r} is not offered in this task" in json.dumps(refused["error"]), refused
    for level in levels:
        ids = [t.task_id for t in pools.levels[level].tasks]
        assert by_level["draws"][str(level)] == [ids[s % len(ids)] for s in range(4)]  # seed -> task, in order
        assert by_level["again"][str(level)] == by_level["draws"][str(level)][1]  # same seed, same task
        seen = by_level["observed"][str(level)]
        task = pools.levels[level].tasks[0]
        assert seen["level"] == level
        assert seen["tools"] == sorted([t["function"]["name"] for t in task.tools] + ["submit"])
    assert f"level {missing} has no sampled tasks" in by_level["missing"], by_level["missing"]
    assert f"levels with tasks: {', '.join(map(str, levels))}" in by_level["missing"]

    assert report["state_before"]["adaptive"] is None  # no adaptive episode yet
    up = report["succeeding"]
    assert all(e["reward"] == 1.0 for e in up), up  # the reference calls of whatever task it is given
    # three successes (the window) at each level, then the next level up; at the top it stays
    assert [e["played_level"] for e in up] == [lvl for lvl in levels for _ in range(3)]
    assert [e["adaptive_after"]["level"] for e in up] == [levels[min((i + 1) // 3, len(levels) - 1)]
                                                          for i in range(len(up))]  # as /state reports it
    assert [e["move"]["to"] for e in up if e["move"]] == levels[1:]
    assert up[-1]["adaptive_after"]["level"] == levels[-1]
    down = report["failing"]
    assert all(e["reward"] == 0.0 for e in down), down
    assert [e["played_level"] for e in down] == [lvl for lvl in reversed(levels) for _ in range(3)]
    assert [e["move"]["to"] for e in down if e["move"]] == list(reversed(levels))[1:]
    after = report["state_after"]["adaptive"]  # GET /state, the server's level
    assert after["level"] == levels[0] and after["levels"] == levels
    assert (after["window"], after["up"], after["down"]) == (3, 0.7, 0.2)
    assert after["episodes"] == len(up) + len(down)
    assert [m["to"] for m in after["moves"]] == levels[1:] + list(reversed(levels))[1:]
    assert all(m["mean"] == 1.0 for m in after["moves"][: len(levels) - 1])
    assert all(m["mean"] == 0.0 for m in after["moves"][len(levels) - 1:])


def test_verifiers_builds_its_dataset_from_a_level(sampled, exports, tmp_path):
    _, pools = sampled
    level = max(levels_with_tasks(pools), key=lambda lvl: len(pools.levels[lvl].tasks))
    ids = [t.task_id for t in pools.levels[level].tasks]
    package = exports["verifiers"]
    report = run_report(trainer_python("verifiers"), "run_verifiers_sampled.py",
                        [package.name, str(level), "2", str(missing_level(pools))], [package], cwd=tmp_path)
    assert report["first"] == report["again"] == ids[:2]
    assert report["whole"] == ids and report["levels"] == [level] * len(ids)
    assert report["prompts"] == [t.instruction for t in pools.levels[level].tasks]
    assert report["valid"] == [True] * len(ids)  # each sampled task's reference passes in the exported runtime
    bank = [json.loads(x)["task_id"] for x in (package / package.name / "data" / "tasks.jsonl").read_text().splitlines()]
    assert report["bank"] == bank[:2] and report["bank_levels"] == [None, None]
    assert f"level {missing_level(pools)} has no sampled tasks" in report["missing_level"]
    assert f"n={len(ids) + 1} tasks asked of level {level}'s pool, which holds {len(ids)}" in report["too_many"]


def test_verifiers_offers_a_sampled_task_only_its_tools(sampled, exports, tmp_path):
    """A sampled task's rollout with the real verifiers library (its MCP tool server, launched per rollout): a level-1
    task (the one tool it needs, no distractor) lists only its own tools; a call to another tool of the environment is
    refused with an error naming them, never reaching the database, and the rollout goes on to score 1."""
    root, pools = sampled
    assert pools.levels[1].tasks, pools.describe()
    task = pools.levels[1].tasks[0]
    offered = [t["function"]["name"] for t in task.tools]
    every = [t.name for t in load_catalog(root).envs[pools.env_id].env.tools]
    other = next(name for name in every if name not in offered)
    path = tmp_path / "script.json"
    path.write_text(json.dumps({task.task_id: {
        "calls": [{"tool": other, "arguments": {}}, *(c.model_dump(mode="json") for c in task.reference_solution)],
        "reply": reference_reply(task.verifier.model_dump(mode="json")), "prompt": task.instruction}}))
    package = exports["verifiers"]
    options = {"env": {"level": 1, "n": 1}, "modes": ["reference"]}
    report = run_report(trainer_python("verifiers"), "run_verifiers.py", [package.name, str(path), json.dumps(options)],
                        [package, TRAINER_DIR], cwd=tmp_path)
    (r,) = report["rollouts"]
    assert r["ok"], r["errors"]
    assert len(offered) == len({c.tool for c in task.reference_solution}) < len(every)  # level 1: no distractor
    assert r["info"]["listed_tools"] == sorted(offered)
    assert (r["task_id"], r["level"], r["tools"]) == (task.task_id, 1, offered)
    assert set(r["info"]["tool_schemas"]) == set(offered)
    refused, *played = r["info"]["tool_results"]
    assert refused == {"tool": other, "is_error": True,
                       "text": f"tool {other!r} is not offered in this task (its tools: {', '.join(offered)})"}
    assert len(played) == len(task.reference_solution) and not any(x["is_error"] for x in played), played
    assert r["state_calls"] == len(task.reference_solution)  # the refused call never ran
    assert r["reward"] == 1.0, r["info"].get("verifier_failures")


def test_verl_gets_a_training_file_per_level(sampled, exports):
    _, pools = sampled
    root = exports["verl"]
    tools = import_exported(root, root.name)
    by_name = {e["tool_schema"]["function"]["name"]: tools.EnvFoundryTool(e["config"], e["tool_schema"])
               for e in yaml.safe_load((root / "tool_config.yaml").read_text())["tools"]}
    files = sorted(p.name for p in root.glob("train_level*.parquet"))
    assert files == [f"train_level{lvl}.parquet" for lvl in levels_with_tasks(pools)]

    async def play(task, row):
        agent = AgentData("det-0", list(row["prompt"]))
        for c in task.reference_solution:
            assert c.tool in row["extra_info"]["tool_selection"]  # the row shows the tools its task needs
            tool = by_name[c.tool]
            iid, _ = await tool.create(create_kwargs=row["extra_info"]["tools_kwargs"][c.tool]["create_kwargs"])
            await tool.execute(iid, c.arguments, agent_data=agent)
            await tool.release(iid)
        agent.messages.append({"role": "assistant",
                               "content": reference_reply(task.verifier.model_dump(mode="json")) or "Done."})
        return agent

    for level in levels_with_tasks(pools):
        rows = pq.read_table(root / f"train_level{level}.parquet").to_pylist()
        tasks = pools.levels[level].tasks
        assert [r["extra_info"]["task_id"] for r in rows] == [t.task_id for t in tasks]
        for row, task in zip(rows, tasks, strict=True):
            extra = row["extra_info"]
            assert extra["level"] == level and extra["split"] == "train" and row["agent_name"] == "tool_agent"
            assert sorted(extra["tool_selection"]) == sorted(t["function"]["name"] for t in task.tools)
            assert row["prompt"][1]["content"] == task.instruction
            agent = asyncio.run(play(task, row))
            got = tools.compute_score(row["data_source"], "", row["reward_model"]["ground_truth"],
                                      {**extra, **agent.extra_fields})
            assert got["score"] == 1.0, (task.task_id, got)
            assert tools.compute_score(row["data_source"], "I cannot help.", row["reward_model"]["ground_truth"],
                                       dict(extra))["score"] == 0.0


def load_curriculum():
    spec = importlib.util.spec_from_file_location("ef_curriculum", TEMPLATES / "curriculum.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_curriculum_window_thresholds_and_settings():
    """The adaptive level's rule on its own: the window must be full; the mean reaching ``up`` moves up, under
    ``down`` moves down, in between it stays; a reward of another level moves nothing; bad settings are named."""
    cur = load_curriculum()
    c = cur.Curriculum([2, 3, 5], window=4)
    assert c.level == 2
    for reward in (1, 1, 0):
        assert c.record(2, reward) is None  # 3 of 4: the window is not full
    assert c.record(2, 0.8) == {"from": 2, "to": 3, "mean": 0.7, "episode": 4}  # 2.8 / 4 = 0.7 reaches up
    assert c.windows[2] == c.windows[3] == type(c.windows[2])(maxlen=4)  # both windows start again
    for reward in (1, 0, 0, 0):
        assert c.record(3, reward) is None  # 0.25: between the thresholds
    assert c.record(2, 0) is None and c.level == 3  # an episode started at level 2 before the move
    assert c.record(3, 0)["to"] == 2  # (0, 0, 0, 0): mean 0 < 0.2
    report = c.report()
    assert report["level"] == 2 and report["windows"]["2"] == [] and report["means"]["3"] is None
    assert [m["to"] for m in report["moves"]] == [3, 2]
    with pytest.raises(cur.CurriculumError, match="ENVFOUNDRY_ADAPTIVE_DOWN < ENVFOUNDRY_ADAPTIVE_UP"):
        cur.Curriculum([1, 2], up=0.2, down=0.5)
    with pytest.raises(cur.CurriculumError, match="ENVFOUNDRY_ADAPTIVE_START=4 is not a level with sampled tasks"):
        cur.Curriculum([1, 2], start=4)
    with pytest.raises(cur.CurriculumError, match="--sample-per-level"):
        cur.Curriculum([])
    with pytest.raises(cur.CurriculumError, match="ENVFOUNDRY_ADAPTIVE_WINDOW='x' is not an integer"):
        cur.Curriculum.from_env([1], {"ENVFOUNDRY_ADAPTIVE_WINDOW": "x"})
    assert cur.Curriculum.from_env([1, 3], {"ENVFOUNDRY_ADAPTIVE_START": "3"}).level == 3
