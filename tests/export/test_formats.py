"""Exports checked against the fields the trainers document and round-tripped in-process (the
trainer-venv runs are in test_trainers.py): veRL's one dataset over several environments and its
trajectory-owned tool state, JSONL transcripts with object arguments, split/tier/pass rate in every
format, the vendored runtime; all formats carry the same bank; same catalog, same bytes."""

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
from pipeline.export.common import reference_reply
from pipeline.export.verl_fmt import ROW_FIELDS
from pipeline.runtime import reward
from pipeline.runtime.schemas import described_tools, tool_schemas
from tests.export.conftest import EXAMPLE, build_catalog

OPENAI_MESSAGE_KEYS = {
    "system": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls"},
    "tool": {"role", "content", "tool_call_id", "name"},
}


def import_exported(pkg_root: Path, name: str, module: str = "tools"):
    """Import an exported package's module from its directory (as a trainer would after pip install)."""
    import importlib
    import sys

    sys.path.insert(0, str(pkg_root))
    try:
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
        return importlib.import_module(f"{name}.{module}")
    finally:
        sys.path.remove(str(pkg_root))


def test_verl_one_dataset_over_every_environment(multi_catalog_dir, tmp_path):
    cat = load_catalog(multi_catalog_dir)
    (root,) = export_catalog(cat, "verl", tmp_path).paths
    rows = {
        split: pq.read_table(root / f"{split}.parquet").to_pylist() for split in ("train", "val")
    }
    tasks = {t.task_id: t for t in cat.tasks}
    assert sorted(r["extra_info"]["task_id"] for rs in rows.values() for r in rs) == sorted(tasks)
    assert {r["extra_info"]["env_id"] for r in rows["val"]} == set(cat.envs)  # each env holds one out
    config = yaml.safe_load((root / "tool_config.yaml").read_text())
    exposed = {e["tool_schema"]["function"]["name"]: e for e in config["tools"]}
    for split, rs in rows.items():
        for i, row in enumerate(rs):
            assert set(row) == set(ROW_FIELDS)
            assert row["agent_name"] == "tool_agent" and row["ability"] == "tool_use"
            extra = row["extra_info"]
            task = tasks[extra["task_id"]]
            assert row["data_source"] == f"envfoundry/{task.env_id}" and extra["env_id"] == task.env_id
            assert [m["role"] for m in row["prompt"]] == ["system", "user"]
            assert row["prompt"][1]["content"] == task.instruction
            truth = json.loads(row["reward_model"]["ground_truth"])
            assert truth == {"task_id": task.task_id, "env_id": task.env_id,
                             "verifier": task.verifier.model_dump(mode="json")}
            assert extra["index"] == i and extra["split"] == split and extra["need_tools_kwargs"] is True
            assert "tier" in extra and "pass_rate" in extra
            # the row's own environment's tools, qualified because both environments have them
            assert sorted(extra["tool_selection"]) == sorted(f"{task.env_id}__{t.name}" for t in cat.envs[task.env_id].env.tools)
            for name in extra["tool_selection"]:
                assert exposed[name]["config"] == {"type": "native", "env_id": task.env_id, "tool": name.split("__")[-1]}
                assert extra["tools_kwargs"][name] == {"create_kwargs": {"task_id": task.task_id, "env_id": task.env_id}}
    for entry in config["tools"]:
        assert set(entry) == {"class_name", "config", "tool_schema"}
        assert entry["class_name"] == f"{root.name}.tools.EnvFoundryTool"
    readme = (root / "README.md").read_text()
    assert "data.val_files=val.parquet" in readme and f"pkg://{root.name}.tools" in readme
    for env_id in cat.envs:  # the one reward, vendored byte for byte
        assert (root / root.name / "data" / env_id / "tasks.jsonl").is_file()
    assert (root / root.name / "reward.py").read_bytes() == Path("pipeline/runtime/reward.py").read_bytes()


def test_verl_single_env_names_stay_plain(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (root,) = export_catalog(cat, "verl", tmp_path).paths
    config = yaml.safe_load((root / "tool_config.yaml").read_text())
    expected = [t.openai_schema() for ce in cat.envs.values() for t in described_tools(ce.env)]
    dated = sorted(s["function"]["name"] for s in expected  # a date parameter says its form, as the server does
                   if any(p.get("format") == "date" for p in s["function"]["parameters"]["properties"].values()))
    assert dated == sorted(name for ce in cat.envs.values() for name, schema in tool_schemas(ce.env).items()
                           if any(p.get("format") == "date" for p in schema["properties"].values()))
    assert dated or any_catalog != EXAMPLE  # the example's library and pharmacy have date parameters
    names = [s["function"]["name"] for s in expected]
    assert len(set(names)) == len(names)  # no name shared between environments: every tool keeps its own name
    def by_name(schemas: list) -> list:
        return sorted(schemas, key=lambda s: s["function"]["name"])

    assert by_name([t["tool_schema"] for t in config["tools"]]) == by_name(expected)
    assert len(pq.read_table(root / "val.parquet")) >= 1


class AgentData:  # what veRL 0.9 passes to execute(): a per-trajectory object with extra_fields
    def __init__(self, request_id, messages):
        self.request_id = request_id
        self.messages = messages
        self.extra_fields = {}


def test_verl_tool_state_belongs_to_the_trajectory(any_catalog, tmp_path):
    """Same request id for every trajectory (full_determinism): no state is shared; nothing is held
    after release; the reward reads the trajectory's database, not the response text."""
    cat = load_catalog(any_catalog)
    (root,) = export_catalog(cat, "verl", tmp_path).paths
    tools = import_exported(root, root.name)
    rows = {r["extra_info"]["task_id"]: r for s in ("train", "val") for r in pq.read_table(root / f"{s}.parquet").to_pylist()}
    by_name = {
        e["tool_schema"]["function"]["name"]: tools.EnvFoundryTool(e["config"], e["tool_schema"])
        for e in yaml.safe_load((root / "tool_config.yaml").read_text())["tools"]
    }

    async def play(task, row):
        agent = AgentData("det-0", list(row["prompt"]))
        outs = []
        for c in task.reference_solution:
            tool = by_name[c.tool]
            iid, _ = await tool.create(create_kwargs=row["extra_info"]["tools_kwargs"][c.tool]["create_kwargs"])
            outs.append(await tool.execute(iid, c.arguments, agent_data=agent))
            await tool.release(iid)
            assert tools.open_databases() == 0
        agent.messages.append({"role": "assistant", "content": reference_reply(task.verifier.model_dump(mode="json")) or "Done."})
        return agent, outs

    for task in cat.tasks:
        row = rows[task.task_id]
        for _ in range(2):  # the same request id twice: the second trajectory starts fresh too
            agent, outs = asyncio.run(play(task, row))
            assert all(metrics["ok"] for _, _, metrics in outs), outs
            assert tools.live_handles() == 0
            extra = {**row["extra_info"], **agent.extra_fields}
            # the text says nothing: the score comes from the trajectory's own database and last message
            got = tools.compute_score(row["data_source"], "", row["reward_model"]["ground_truth"], extra)
            assert got["score"] == 1.0, got
        assert tools.compute_score(row["data_source"], "I cannot help.", row["reward_model"]["ground_truth"],
                                   dict(row["extra_info"]))["score"] == 0.0


def test_verl_refuses_arguments_that_are_not_an_object(catalog_dir, tmp_path):
    """Arguments veRL parsed from the model's JSON as a string, a list or a number are refused with a
    message naming what was sent (never run as no arguments); null means none."""
    (root,) = export_catalog(catalog_dir, "verl", tmp_path).paths
    tools = import_exported(root, root.name)
    entry = next(e for e in yaml.safe_load((root / "tool_config.yaml").read_text())["tools"]
                 if e["config"]["tool"] == "search_books")
    tool = tools.EnvFoundryTool(entry["config"], entry["tool_schema"])

    async def call(parameters):
        agent = AgentData("det-0", [])
        iid, _ = await tool.create(create_kwargs={})
        out = await tool.execute(iid, parameters, agent_data=agent)
        await tool.release(iid)
        return out

    for sent, kind in (("a string", "a string"), (["x"], "an array"), (3, "an integer")):
        text, reward, metrics = asyncio.run(call(sent))
        assert text == f"Error: arguments for tool 'search_books' must be a JSON object, got {kind}", text
        assert metrics == {"ok": False} and reward == 0.0
    assert json.loads(asyncio.run(call({"query": "History"}))[0])
    text, _, _ = asyncio.run(call(None))  # no arguments: the required one is named
    assert "query" in text and "JSON object" not in text, text


def test_openenv_runtime_plan_is_a_reference_episode(catalog_dir, tmp_path):
    """``validation/runtime.json`` (what ``openenv validate`` plays at its runtime level, declared in
    openenv.yaml's ``validation.execution``): the first task whose reference replays, its calls with
    ``$N.field`` arguments resolved on the replay, then submit with the reference reply."""
    from pipeline.export.openenv_fmt import runtime_plan
    from pipeline.ir import ToolCall

    cat = load_catalog(catalog_dir)
    ce = next(iter(cat.envs.values()))
    first = ce.tasks[0]
    dependent = [ToolCall(tool="find_member_by_name", arguments={"name": "Dan Wu"}),
                 ToolCall(tool="search_books", arguments={"query": "Brief History"}),
                 ToolCall(tool="borrow_book", arguments={"member_id": "$1.id", "book_id": "$2.id", "days": 7})]
    broken = first.model_copy(update={"reference_solution": [ToolCall(tool="borrow_book", arguments={"member_id": 99})]})
    ce.tasks[:1] = [broken, first.model_copy(update={"reference_solution": dependent})]
    plan = runtime_plan(ce, "submit")
    reply = reference_reply(first.verifier.model_dump(mode="json"))
    assert plan["plan_schema_version"] == "1" and plan["reset"]["options"] == {"task_id": first.task_id}
    assert plan["actions"] == [
        {"type": "call_tool", "tool_name": "find_member_by_name", "arguments": {"name": "Dan Wu"}},
        {"type": "call_tool", "tool_name": "search_books", "arguments": {"query": "Brief History"}},
        {"type": "call_tool", "tool_name": "borrow_book", "arguments": {"member_id": 4, "book_id": 2, "days": 7}},
        {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": reply} if reply else {}},
    ]
    (root,) = export_catalog(catalog_dir, "openenv", tmp_path).paths
    manifest = yaml.safe_load((root / "openenv.yaml").read_text())
    assert manifest["validation"]["execution"] == {"kind": "openenv_ws", "probe_path": "validation/runtime.json",
                                                   "dockerfile": "server/Dockerfile", "context": ".",
                                                   "agent_boundary": "api"}
    assert (root / "server" / "Dockerfile").is_file() and (root / "validation" / "runtime.json").is_file()


def test_jsonl_transcripts_round_trip(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (path,) = export_catalog(cat, "jsonl", tmp_path).paths
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    tasks = {t.task_id: t for t in cat.tasks}
    assert sorted(x["task_id"] for x in lines) == sorted(tasks)
    for x in lines:
        task = tasks[x["task_id"]]
        refused = any(r.get("verdict") == "forbids" for r in task.metadata.get("rules") or [])
        assert set(x) == {"task_id", "env_id", "split", "tier", "pass_rate", "difficulty", "messages", "tools",
                          *(["refusals"] if refused else [])}
        assert x["tools"] == task.tools and x["split"] in ("train", "val")
        msgs = x["messages"]
        assert msgs[0]["role"] == "system" and msgs[1] == {"role": "user", "content": task.instruction}
        for m in msgs:
            assert set(m) <= OPENAI_MESSAGE_KEYS[m["role"]]
        calls = [m["tool_calls"][0] for m in msgs if m["role"] == "assistant" and m.get("tool_calls")]
        # arguments are objects (Hugging Face chat templates), not JSON strings
        assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
            (c.tool, c.arguments) for c in task.reference_solution
        ]
        results = [m for m in msgs if m["role"] == "tool"]
        assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
        assert all(not r["content"].startswith("Error:") for r in results)
        assert msgs[-1]["role"] == "assistant" and msgs[-1]["content"]
        want = reference_reply(task.verifier.model_dump(mode="json"))
        if want is not None and refused and not task.verifier.mutable_tables:  # a refusal: the rule's message
            assert reward.check_answer(task.verifier.answer, msgs[-1]["content"])[0], msgs[-1]["content"]
            assert msgs[-1]["content"].startswith("Not done: ")
        elif want is not None:
            assert msgs[-1]["content"] == want


def test_jsonl_both_argument_forms(catalog_dir, tmp_path):
    (path,) = export_catalog(catalog_dir, "jsonl", tmp_path, sft_arguments="both").paths
    for x in map(json.loads, path.read_text().splitlines()):
        for m in x["messages"]:
            for c in m.get("tool_calls") or []:
                assert json.loads(c["function"]["arguments_json"]) == c["function"]["arguments"]
    (path,) = export_catalog(catalog_dir, "jsonl", tmp_path / "s", sft_arguments="string").paths
    first = next(c for x in map(json.loads, path.read_text().splitlines()) for m in x["messages"] for c in m.get("tool_calls") or [])
    assert isinstance(first["function"]["arguments"], str)


def test_exports_carry_split_tier_and_pass_rate(catalog_dir, tmp_path):
    """The tier is ``metadata.tier`` (an integer), else the tasks stage's rule on the reference
    solution's length; the pass rate is recorded or measured, null only when no attempt ran."""
    root = build_catalog(tmp_path / "cat")
    env_dir = next((root / "envs").iterdir())
    lines = (env_dir / "tasks.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert [len(r["reference_solution"]) for r in recs] == [3, 2, 2]
    recs[0]["metadata"] = {"difficulty_tag": "hard", "pass_rate": 0.25, "pass_rate_ci": [0.05, 0.6]}
    recs[1]["difficulty"] = {"attempts": 4, "passes": 3}
    recs[1]["metadata"] = {"tier": 3}
    recs[2]["difficulty"] = {"attempts": 0, "passes": 0}
    recs[2]["metadata"] = {"pass_rate": "n/a", "tier": "medium"}  # read defensively
    (env_dir / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cat = load_catalog(root)
    (path,) = export_catalog(cat, "jsonl", tmp_path / "jsonl").paths
    got = {x["task_id"]: (x["tier"], x["pass_rate"]) for x in map(json.loads, path.read_text().splitlines())}
    assert got == {recs[0]["task_id"]: (2, 0.25), recs[1]["task_id"]: (3, 0.75), recs[2]["task_id"]: (2, None)}
    (vroot,) = export_catalog(cat, "verl", tmp_path / "verl").paths
    rows = [r for s in ("train", "val") for r in pq.read_table(vroot / f"{s}.parquet").to_pylist()]
    assert {r["extra_info"]["task_id"]: (r["extra_info"]["tier"], r["extra_info"]["pass_rate"]) for r in rows} == got
    for fmt in ("openenv", "verifiers"):
        (oroot,) = export_catalog(cat, fmt, tmp_path / fmt).paths
        info = next(json.loads(p.read_text()) for p in oroot.rglob("task_info.json"))
        assert {k: (v["tier"], v["pass_rate"]) for k, v in info.items()} == got
        assert info[recs[0]["task_id"]]["pass_rate_ci"] == [0.05, 0.6]
        assert info[recs[0]["task_id"]]["difficulty_tag"] == "hard"


PROMISED = ("split", "tier", "pass_rate")  # what every export README says each task carries


def test_every_format_fills_what_its_readme_promises(any_catalog, tmp_path):
    """Split, tier (an integer) and pass rate are set for every task in every format: veRL's
    ``extra_info``, the ``task_info.json`` the verifiers package and the OpenEnv server read (its
    reset observation and the verifiers task data copy them), and every SFT record."""
    cat = load_catalog(any_catalog)
    out = tmp_path / "out"
    for fmt in ("verifiers", "openenv", "verl", "jsonl"):
        export_catalog(cat, fmt, out / fmt)
    records = {
        "verl": [r["extra_info"] for s in ("train", "val") for p in (out / "verl").glob(f"*/{s}.parquet")
                 for r in pq.read_table(p).to_pylist()],
        "jsonl": [json.loads(x) for x in (out / "jsonl" / "sft.jsonl").read_text().splitlines()],
        **{fmt: [{"task_id": k, **v} for p in (out / fmt).rglob("task_info.json") for k, v in json.loads(p.read_text()).items()]
           for fmt in ("verifiers", "openenv")},
    }
    for fmt, recs in records.items():
        assert sorted({r["task_id"] for r in recs}) == sorted(t.task_id for t in cat.tasks), fmt
        for r in recs:
            assert all(r[k] is not None for k in PROMISED), (fmt, r)
            assert type(r["tier"]) is int and 1 <= r["tier"] <= 3, (fmt, r)
            assert r["split"] in ("train", "val") and 0.0 <= r["pass_rate"] <= 1.0, (fmt, r)
    for ce in cat.envs.values():  # the README names what the runtime plan plays
        plan = json.loads(next((out / "openenv").glob(f"*{ce.env_id}/validation/runtime.json")).read_text())
        assert f"task `{plan['reset']['options']['task_id']}`" in next((out / "openenv").glob(f"*{ce.env_id}/README.md")).read_text()



def _import_taskrt(root):
    """The exported package's ``taskrt`` module, imported afresh from the export directory ``root``."""
    import importlib
    import sys

    sys.path.insert(0, str(root))
    try:
        for mod in [m for m in sys.modules if m.startswith(root.name)]:
            del sys.modules[mod]
        return importlib.import_module(f"{root.name}.taskrt")
    finally:
        sys.path.remove(str(root))


def test_exported_runtime_is_the_one_reward_and_engine(catalog_dir, tmp_path):
    """The exports vendor pipeline/runtime/reward.py and the engine byte for byte; the runtime scores with them."""
    (root,) = export_catalog(catalog_dir, "verl", tmp_path).paths  # its package imports no trainer
    pkg = root / root.name
    assert (pkg / "reward.py").read_bytes() == Path("pipeline/runtime/reward.py").read_bytes()
    assert (pkg / "engine.py").read_bytes() == Path("pipeline/runtime/engine.py").read_bytes()
    src = (pkg / "taskrt.py").read_text()
    assert "from pipeline" not in src and "import verify" not in src and "from verify" not in src
    taskrt = _import_taskrt(root)
    bundle = taskrt.Bundle(next((pkg / "data").iterdir()))
    for task_id in bundle.tasks:
        assert bundle.check_reference(task_id).passed
    conn = bundle.fresh_db()
    out = bundle.call(conn, "borrow_book", {"member_id": 4, "book_id": 2, "days": 7})
    assert out["ok"], out
    copy = taskrt.load_db(taskrt.dump_db(conn))
    assert taskrt.reward.snapshot(copy) == taskrt.reward.snapshot(conn)
    assert copy.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert taskrt.reward.snapshot(bundle.fresh_db()) == bundle.initial_snapshot()  # every rollout starts fresh
    assert bundle.call(conn, "nope", {})["kind"] == "not_found"


def test_a_reused_session_scores_each_episode_as_a_fresh_database(catalog_dir, tmp_path):
    """``taskrt.Session`` plays episode after episode on one connection (``reset`` rolls back): each episode's
    reward, read from the tables its own statements may have written, is the reward of a fresh database and of
    reading every table; ``reset`` empties the write log, and a statement run in an earlier episode is logged
    again (engine connections cache no statements: each is prepared, so authorized and logged, at every run)."""
    (root,) = export_catalog(catalog_dir, "verl", tmp_path).paths
    taskrt = _import_taskrt(root)
    assert taskrt.engine.CACHED_STATEMENTS == 0
    bundle = taskrt.Bundle(next((root / root.name / "data").iterdir()))
    ids = sorted(bundle.tasks)
    session = taskrt.Session(bundle)
    # each task twice, then each again with one more write (a members row: fails the tasks that keep members)
    extra = {"tool": "update_member_email", "arguments": {"member_id": 2, "email": "other@example.org"}}
    episodes = [(i, []) for i in ids * 2] + [(i, [extra]) for i in ids]
    for n, (task_id, more) in enumerate(episodes):
        if n:
            session.reset()
            assert session.conn.writes.tables == set()
        task = bundle.task(task_id)
        calls = [*task["reference_solution"], *more]
        assert all(session.call(c["tool"], c["arguments"])["ok"] for c in calls)
        reply = bundle.task_info(task_id).get("reference_reply")
        got = bundle.score(task, session.conn, answer=reply)
        every_table = taskrt.reward.score(task["verifier"], session.conn, initial=bundle.initial_snapshot(), answer=reply)
        fresh, _ = bundle.replay(calls)
        assert got == every_table == bundle.score(task, fresh, answer=reply), (task_id, more)
        assert got.passed is (not more or "members" in task["verifier"]["mutable_tables"]), (task_id, more, got)
        if more:
            assert "members" in session.conn.writes.tables  # a statement run in episodes before, logged again
    session.close()


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
    for pattern in ("verifiers/*/*/data/tasks.jsonl", "openenv/*/data/tasks.jsonl", "verl/*/*/data/*/tasks.jsonl"):
        got = {}  # over the format's packages (one per environment, or one dataset)
        for pkg_tasks in run.glob(pattern):
            recs = [json.loads(x) for x in pkg_tasks.read_text().splitlines()]
            got.update({r["task_id"]: (r["instruction"], r["verifier"]) for r in recs})
        assert got == bank, pattern
    sft = [json.loads(x) for x in (run / "jsonl" / "sft.jsonl").read_text().splitlines()]
    assert {x["task_id"]: x["messages"][1]["content"] for x in sft} == {k: v[0] for k, v in bank.items()}
    for entry in outs[0]:
        assert entry["tasks"] == len(bank) and entry["envs"] == len(cat.envs)


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


def test_pyprojects_read_back_llm_written_names(tmp_path):
    """A scenario name with a quote, a backslash and a newline: every pyproject.toml is valid TOML that
    reads the name back unchanged, and the package summary holds it on one line."""
    import tomllib

    from pipeline.envdir import write_env_dir
    from tests.export.conftest import question_task
    from tests.fixtures.library import library_env, library_tasks

    name = 'The "Quoted" \\ Library\nDesk = [x]'
    env = library_env()
    env = env.model_copy(update={"scenario": env.scenario.model_copy(update={"name": name})})
    write_env_dir(env, tmp_path / "cat" / "envs" / env.env_id, tasks=[*library_tasks(env), question_task(env)],
                  report={"source": "tests/export"})
    for fmt in ("verifiers", "openenv", "verl"):
        export_catalog(tmp_path / "cat", fmt, tmp_path / "out" / fmt)
    files = sorted((tmp_path / "out").rglob("pyproject.toml"))
    assert len(files) == 3
    for path in files:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
        assert doc["build-system"]["build-backend"] == "setuptools.build_meta"
        if "verl" in path.parts:
            assert "envfoundry" not in doc["tool"]  # one dataset over every environment: no scenario to name
            continue
        assert doc["tool"]["envfoundry"] == {"env_id": env.env_id, "scenario": name}
        assert doc["project"]["description"].endswith(': The "Quoted" \\ Library Desk = [x]')
        assert doc["project"]["name"].startswith("envfoundry-")


def test_every_format_gives_the_policy_as_the_system_prompt(tmp_path):
    """An environment with rules (the permit office, its rules picked by code) puts policy.md's text where each
    trainer reads the system prompt: veRL's prompt, the SFT transcript, the verifiers package's export.json and the
    OpenEnv server's metadata; an environment without rules keeps the plain prompt."""
    from pipeline.envdir import write_env_dir
    from pipeline.llm import fake_client
    from pipeline.settings import BuildSettings, TaskSettings
    from pipeline.stages.policy.house_rules import make_policy
    from pipeline.stages.tasks.bank import generate_tasks
    from tests.fixtures.permits import permit_env
    from verify.policy import policy_text

    env = make_policy(permit_env(), fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 200),
                           settings=TaskSettings(n_tasks=4, rule_tasks=True, max_attempts=1)).value
    root = build_catalog(tmp_path / "cat")  # the library: no rules
    write_env_dir(env, root / "envs" / env.env_id, tasks=tasks, report={"source": "tests/export"})
    policy = policy_text(env)
    assert policy and (root / "envs" / env.env_id / "policy.md").read_text().strip() == policy
    assert all(t.metadata["policy"] == policy for t in tasks)
    cat = load_catalog(root)
    out = tmp_path / "out"
    for fmt in ("verifiers", "openenv", "verl", "jsonl"):
        export_catalog(cat, fmt, out / fmt)
    systems: dict[str, list[tuple[str, str]]] = {
        "verl": [(r["extra_info"]["task_id"], r["prompt"][0]["content"]) for p in (out / "verl").glob("*/*.parquet")
                 for r in pq.read_table(p).to_pylist()],
        "jsonl": [(r["task_id"], r["messages"][0]["content"])
                  for r in map(json.loads, (out / "jsonl" / "sft.jsonl").read_text().splitlines())],
        "verifiers": [(p.parent.parent.name, json.loads(p.read_text())["system_prompt"])
                      for p in (out / "verifiers").rglob("data/export.json")],
    }
    ruled = {t.task_id for t in tasks}
    for fmt, pairs in systems.items():
        assert pairs, fmt
        for key, system in pairs:
            has = policy in system
            if fmt == "verifiers":
                assert has == (env.env_id.replace("-", "_") in key or env.env_id in key), (fmt, key)
            else:
                assert has == (key in ruled), (fmt, key)
    openenv = {p.parent.parent.name: json.loads(p.read_text())["system_prompt"]
               for p in (out / "openenv").rglob("data/export.json")}
    assert len(openenv) == 2 and sum(policy in s for s in openenv.values()) == 1, openenv
