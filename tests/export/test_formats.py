"""veRL and JSONL exports checked against the fields those trainers document and round-tripped;
all formats carry the same task ids, instructions and verifiers; same catalog, same bytes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from pipeline.export import CatalogError, ExportError, export_catalog, load_catalog
from pipeline.export.verl_fmt import ROW_FIELDS
from tests.export.conftest import build_catalog

OPENAI_MESSAGE_KEYS = {
    "system": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls"},
    "tool": {"role", "content", "tool_call_id", "name"},
}


def import_exported(pkg_root: Path, name: str):
    """Import an exported package from its directory (as a trainer would after pip install)."""
    import importlib
    import sys

    sys.path.insert(0, str(pkg_root))
    try:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
        return importlib.import_module(f"{name}.tools")
    finally:
        sys.path.remove(str(pkg_root))


def test_verl_rows_and_tool_config(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (root,) = export_catalog(cat, "verl", tmp_path).paths
    rows = pq.read_table(root / "train.parquet").to_pylist()
    tasks = {t.task_id: t for t in cat.tasks}
    assert len(rows) == len(tasks)
    for i, row in enumerate(rows):
        assert set(row) == set(ROW_FIELDS)
        assert row["agent_name"] == "tool_agent" and row["ability"] == "tool_use"
        assert row["data_source"] == f"envfoundry/{row['extra_info']['env_id']}"
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        task = tasks[row["extra_info"]["task_id"]]
        assert row["prompt"][1]["content"] == task.instruction
        assert row["reward_model"]["style"] == "rule"
        truth = json.loads(row["reward_model"]["ground_truth"])
        assert truth == {"task_id": task.task_id, "verifier": task.verifier.model_dump(mode="json")}
        extra = row["extra_info"]
        assert extra["index"] == i and extra["split"] == "train" and extra["need_tools_kwargs"] is True
        assert set(extra["tools_kwargs"]) == {t["function"]["name"] for t in task.tools}
        assert all(v == {"create_kwargs": {"task_id": task.task_id}} for v in extra["tools_kwargs"].values())
    config = yaml.safe_load((root / "tool_config.yaml").read_text())
    assert [t["tool_schema"] for t in config["tools"]] == next(iter(tasks.values())).tools
    for entry in config["tools"]:
        assert set(entry) == {"class_name", "config", "tool_schema"}
        assert entry["class_name"] == f"{root.name}.tools.EnvFoundryTool"
        assert entry["config"] == {"type": "native", "tool": entry["tool_schema"]["function"]["name"]}


def hermes(calls, reply):
    parts = []
    for c in calls:
        parts.append(
            "<tool_call>\n"
            + json.dumps({"name": c.tool, "arguments": c.arguments})
            + "\n</tool_call><|im_end|>"
        )
        parts.append(
            '<|im_start|>user\n<tool_response>\n{"ok": true}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
        )
    parts.append((reply or "Done.") + "<|im_end|>")
    return "".join(parts)


def test_verl_tool_and_reward_run_trajectories(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (root,) = export_catalog(cat, "verl", tmp_path).paths
    tools = import_exported(root, root.name)
    rows = {r["extra_info"]["task_id"]: r for r in pq.read_table(root / "train.parquet").to_pylist()}

    class AgentData:  # what veRL passes to execute(): one request_id per trajectory
        def __init__(self, request_id):
            self.request_id = request_id

    for task in cat.tasks:
        row = rows[task.task_id]
        args = (
            row["data_source"],
            hermes(task.reference_solution, task.verifier.answer),
            row["reward_model"]["ground_truth"],
            row["extra_info"],
        )
        assert tools.compute_score(*args) == 1.0
        assert (
            tools.compute_score(
                row["data_source"], "I cannot help.", row["reward_model"]["ground_truth"], row["extra_info"]
            )
            == 0.0
        )
        # the tool class keeps one database per trajectory, shared by all its tools
        by_name = {
            n: tools.EnvFoundryTool({"type": "native", "tool": n}, None)
            for n in row["extra_info"]["tools_kwargs"]
        }
        agent = AgentData(f"traj-{task.task_id}")

        async def play(task=task, by_name=by_name, agent=agent):
            outs = []
            for c in task.reference_solution:
                tool = by_name[c.tool]
                iid, _ = await tool.create(create_kwargs={"task_id": task.task_id})
                outs.append(await tool.execute(iid, c.arguments, agent_data=agent))
                await tool.release(iid)
            return outs

        outs = asyncio.run(play())
        assert all(metrics["ok"] for _, _, metrics in outs)
        conn = tools._DBS[agent.request_id]
        assert (
            tools.bundle().score(tools.bundle().task(task.task_id), conn, answer=task.verifier.answer) == 1.0
        )
        tools.release_trajectory(agent.request_id)
        assert agent.request_id not in tools._DBS


def test_jsonl_transcripts_round_trip(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (path,) = export_catalog(cat, "jsonl", tmp_path).paths
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    tasks = {t.task_id: t for t in cat.tasks}
    assert sorted(x["task_id"] for x in lines) == sorted(tasks)
    for x in lines:
        task = tasks[x["task_id"]]
        assert set(x) == {"task_id", "env_id", "messages", "tools"} and x["tools"] == task.tools
        msgs = x["messages"]
        assert msgs[0]["role"] == "system" and msgs[1] == {"role": "user", "content": task.instruction}
        for m in msgs:
            assert set(m) <= OPENAI_MESSAGE_KEYS[m["role"]]
        calls = [m["tool_calls"][0] for m in msgs if m["role"] == "assistant" and m.get("tool_calls")]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            (c.tool, c.arguments) for c in task.reference_solution
        ]
        results = [m for m in msgs if m["role"] == "tool"]
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
        assert all(not r["content"].startswith("Error:") for r in results)
        assert msgs[-1]["role"] == "assistant" and msgs[-1]["content"]
        if task.verifier.answer is not None:
            assert msgs[-1]["content"] == task.verifier.answer


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_all_formats_same_bank_and_deterministic(any_catalog, tmp_path):
    runner = CliRunner()
    from pipeline.cli import export as export_cli
    from pipeline.cli import main

    if "export" not in main.commands:
        export_cli.register(main)
    outs = []
    for n in (1, 2):
        r = runner.invoke(
            main,
            ["export", str(any_catalog), "--format", "all", "--out", str(tmp_path / f"run{n}"), "--json"],
        )
        assert r.exit_code == 0, r.output
        outs.append(json.loads(r.output))
    assert [o["format"] for o in outs[0]] == ["verifiers", "openenv", "verl", "jsonl"]
    assert digest(tmp_path / "run1") == digest(tmp_path / "run2")
    cat = load_catalog(any_catalog)
    bank = {t.task_id: (t.instruction, t.verifier.model_dump(mode="json")) for t in cat.tasks}
    run = tmp_path / "run1"
    for pkg_tasks in [
        *run.glob("verifiers/*/*/data/tasks.jsonl"),
        *run.glob("openenv/*/data/tasks.jsonl"),
        *run.glob("verl/*/*/data/tasks.jsonl"),
    ]:
        recs = [json.loads(x) for x in pkg_tasks.read_text().splitlines()]
        assert {r["task_id"]: (r["instruction"], r["verifier"]) for r in recs} == bank
    sft = [json.loads(x) for x in (run / "jsonl" / "sft.jsonl").read_text().splitlines()]
    assert {x["task_id"]: x["messages"][1]["content"] for x in sft} == {k: v[0] for k, v in bank.items()}
    for entry in outs[0]:
        assert entry["tasks"] == len(bank) and entry["envs"] == 1


def test_catalog_errors_name_the_problem(tmp_path):
    with pytest.raises(CatalogError, match="no envs/ directory"):
        load_catalog(tmp_path)
    root = build_catalog(tmp_path / "cat")
    env_dir = next((root / "envs").iterdir())
    bank = root / "task_bank.jsonl"
    lines = (env_dir / "tasks.jsonl").read_text().splitlines()
    bank.write_text(lines[0] + "\n" + lines[0] + "\n")
    with pytest.raises(CatalogError, match=r"task_bank.jsonl: duplicate task_id"):
        load_catalog(root)
    bad = json.loads(lines[0])
    bad["instruction"] = "changed"
    bank.write_text(json.dumps(bad) + "\n")
    with pytest.raises(CatalogError, match="not the content hash"):
        load_catalog(root)
    bank.write_text("{not json\n")
    with pytest.raises(CatalogError, match=r"task_bank.jsonl:1: invalid task record"):
        load_catalog(root)
    bank.write_text(lines[1] + "\n")  # the bank wins over the environments' tasks.jsonl
    cat = load_catalog(root)
    assert cat.bank_source == "task_bank.jsonl" and len(cat.tasks) == 1
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    with pytest.raises(ExportError, match="unknown format"):
        export_catalog(cat, "csv", tmp_path / "out")
