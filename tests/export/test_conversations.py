"""Conversations in the exports (issue 30): every exported task record carries its conversational form, the
simulated user is vendored byte for byte, the SFT conversations are whole and free of user errors; and in each
trainer's own venv the multi-turn form loads as its README says and a conversation runs against scripted
OpenAI-compatible agent and user endpoints on loopback (tests/eval/scripted_server.py, the scripted user of
tests/eval/scripted_conversation.py, the agent of tests/export/conversation_agents.py): asking for each fact,
then replaying the reference, passes; the scripted user makes no user error."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import RUNTIME_FILES, conversation_form
from tests.eval.scripted_conversation import leaky_user, scripted_user
from tests.eval.scripted_server import serve
from tests.export.conftest import subprocess_env, trainer_python
from tests.export.conversation_agents import ByTask
from tests.export.test_trainers import TRAINER_DIR, install
from verify.conversation import script_of

FORM_KEYS = {"opening", "goal", "facts", "persona", "question", "pushback", "hidden", "derived", "user_system"}


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_every_format_carries_every_tasks_conversational_form(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    forms = {t.task_id: conversation_form(ce, t) for ce in cat.envs.values() for t in ce.tasks}
    for form in forms.values():
        assert set(form) == FORM_KEYS and form["opening"] and form["user_system"]
        assert "###STOP###" in form["user_system"] and all(f"- {f['label']}" in form["user_system"]
                                                           for f in form["facts"])
    for fmt, pattern in (("verifiers", "*/*/data/tasks.jsonl"), ("openenv", "*/data/tasks.jsonl"),
                         ("verl", "*/*/data/*/tasks.jsonl")):
        out = tmp_path / fmt
        export_catalog(cat, fmt, out)
        got = {r["task_id"]: r["conversation"] for p in out.glob(pattern) for r in records(p)}
        assert got == forms, fmt
        for name in ("usercheck.py", "values.py", "usersim.py"):  # the simulated user, vendored byte for byte
            copies = list(out.rglob(name))
            assert copies and all(c.read_bytes() == RUNTIME_FILES[name].read_bytes() for c in copies), (fmt, name)
    (root,) = export_catalog(cat, "verl", tmp_path / "verl2").paths
    for split in ("train", "val"):
        plain = pq.read_table(root / f"{split}.parquet").to_pylist()
        talk = pq.read_table(root / f"{split}_conversation.parquet").to_pylist()
        assert [r["extra_info"]["task_id"] for r in talk] == [r["extra_info"]["task_id"] for r in plain]
        for r in talk:
            tid = r["extra_info"]["task_id"]
            assert r["agent_name"] == "envfoundry_conversation"
            assert r["prompt"][1] == {"role": "user", "content": forms[tid]["opening"]}
            assert r["extra_info"]["interaction_kwargs"] == {"name": "envfoundry_user", "task_id": tid,
                                                            "env_id": r["extra_info"]["env_id"]}
    (loop,) = yaml.safe_load((root / "agent_loop.yaml").read_text())
    assert loop["name"] == "envfoundry_conversation" and loop["_target_"] == f"{root.name}.conversation.EnvFoundryConversationLoop"


def test_sft_conversations_are_whole_and_free_of_user_errors(any_catalog, tmp_path):
    cat = load_catalog(any_catalog)
    (sft,) = export_catalog(cat, "jsonl", tmp_path).paths
    plain = {r["task_id"]: r for r in records(sft)}
    talk = {r["task_id"]: r for r in records(sft.parent / "sft_conversation.jsonl")}
    assert set(talk) == set(plain) == {t.task_id for t in cat.tasks}
    envs = {t.task_id: ce for ce in cat.envs.values() for t in ce.tasks}
    for task in cat.tasks:
        r, script = talk[task.task_id], script_of(envs[task.task_id].env, task)
        msgs = r["messages"]
        assert [m["role"] for m in msgs[:2]] == ["system", "user"] and msgs[1]["content"] == script.opening
        n = len(script.facts)
        for i, fact in enumerate(script.facts):  # a question, then the answer, per fact
            q, a = msgs[2 + 2 * i], msgs[3 + 2 * i]
            assert q["role"] == "assistant" and fact.label in q["content"] and q["content"].endswith("?")
            assert a == {"role": "user", "content": f"It is {fact.value}."}
        assert msgs[2 + 2 * n:] == plain[task.task_id]["messages"][2:]  # then the reference calls and final reply
        assert r["conversation"] == conversation_form(envs[task.task_id], task)
        assert {k: r[k] for k in ("split", "tier", "pass_rate", "tools")} == {
            k: plain[task.task_id][k] for k in ("split", "tier", "pass_rate", "tools")}


def test_vendored_user_plays_and_flags_a_leak_on_loopback(catalog_dir, tmp_path):
    """The exported usersim.py, imported from an exported package without envfoundry's modules: the scripted
    user answers what it is asked; a user that gives every fact unasked is flagged (leak)."""
    import importlib
    import sys

    (root,) = export_catalog(catalog_dir, "verl", tmp_path).paths
    task = next(t for t in load_catalog(catalog_dir).tasks if len(script_of(load_catalog(catalog_dir).envs[t.env_id].env,
                                                                             t).facts) >= 2)
    sys.path.insert(0, str(root))
    try:
        usersim = importlib.import_module(f"{root.name}.usersim")
        tools = importlib.import_module(f"{root.name}.tools")
        b = tools.bundle(task.env_id)
        conv = b.task(task.task_id)["conversation"]
        for policy, leaks in ((scripted_user, False), (leaky_user, True)):
            with serve(policy) as server:
                endpoint = usersim.UserEndpoint(server.base_url, "scripted-user")
                user = usersim.SimulatedUser(conv, list(b.tools), endpoint)
                fact = conv["facts"][0]
                turn = user.respond(f"What is the {fact['label']}?")
                assert not turn.ends
                if not leaks:
                    assert str(fact["value"]) in turn.text and turn.errors == []
                    assert user.respond("Done, thank you.").stop
                else:
                    assert {e.kind for e in turn.errors} == {"leak"}, turn.to_json()
                assert user.record()["user_turns"] >= 1
        with pytest.raises(usersim.UserEndpointError, match="ENVFOUNDRY_USER_BASE_URL"):
            usersim.UserEndpoint.from_env(environ={})
    finally:
        sys.path.remove(str(root))
        for mod in [m for m in sys.modules if m == root.name or m.startswith(root.name + ".")]:
            del sys.modules[mod]


# ---------------------------------------------------------------- in the trainers' own venvs


def trainer_report(python: Path, script: str, args: list[str], path: list[Path], cwd: Path, env: dict[str, str],
                   timeout: int = 600) -> dict:
    full = {**subprocess_env(path), **env}
    proc = subprocess.run([str(python), str(TRAINER_DIR / script), *args], capture_output=True, text=True,
                          timeout=timeout, env=full, cwd=cwd)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("REPORT "):])


def user_env(url: str) -> dict[str, str]:
    return {"ENVFOUNDRY_USER_BASE_URL": url, "ENVFOUNDRY_USER_MODEL": "scripted-user"}


def test_openenv_conversation_in_its_venv(catalog_dir, tmp_path):
    python = trainer_python("openenv")
    (root,) = export_catalog(catalog_dir, "openenv", tmp_path / "export").paths
    cat = load_catalog(catalog_dir)
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps([t.task_id for t in cat.tasks]))
    with serve(scripted_user) as user, serve(ByTask(catalog_dir)) as agent:
        report = trainer_report(python, "run_openenv_conversation.py", [str(root), str(ids), agent.base_url], [],
                                tmp_path, user_env(user.base_url))
    env = next(iter(cat.envs.values())).env
    forms = {t.task_id: conversation_form(cat.envs[t.env_id], t) for t in cat.tasks}
    for c in report["conversations"]:
        assert c["conversation"] is True and c["opening"] == forms[c["task_id"]]["opening"]
        assert c["listed"] == sorted([t.name for t in env.tools] + ["submit", "send_message"])
        assert c["done"] and c["reward"] == 1.0 and c["passed"] is True, c
        assert len(c["replies"]) == len(forms[c["task_id"]]["facts"]) + 1  # one answer per fact, then the stop
        assert all(r["user_errors"] == [] for r in c["replies"])
        state = c["state"]
        assert state["conversation"] and state["user_errors"] == [] and state["user_turns"] == len(c["replies"])
    assert report["plain"] == {"conversation": False, "listed": sorted([t.name for t in env.tools] + ["submit"])}


def readme_bash_line(readme: Path, marker: str) -> str:
    """The one line of the README's bash blocks that holds ``marker``, as written."""
    import re

    blocks = re.findall(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    (line,) = [x for b in blocks for x in b.splitlines() if marker in x]
    return line


def test_verifiers_conversation_vf_eval_in_its_venv(catalog_dir, tmp_path):
    """The README's conversational `vf-eval` line as written, offline: verifiers' default harness (its chat
    program) plays the agent against a scripted streaming endpoint, each reply without a tool call goes to the
    scripted user on its own endpoint; every task passes with no user error."""
    import os

    from tests.export import streaming_server

    python = trainer_python("verifiers")
    (result,) = export_catalog(catalog_dir, "verifiers", tmp_path / "export").paths
    target = tmp_path / "site"
    install(python, result, target)
    line = readme_bash_line(result / "README.md", "--env.taskset.conversation true")
    cat = load_catalog(catalog_dir)
    forms = {t.task_id: conversation_form(cat.envs[t.env_id], t) for t in cat.tasks}
    env = {**subprocess_env([target]), "MODEL": "scripted", "PATH": os.pathsep.join([str(python.parent),
                                                                                    os.environ.get("PATH", "")])}
    cwd = tmp_path / "eval"
    cwd.mkdir()
    with serve(scripted_user) as user, streaming_server.serve(ByTask(catalog_dir)) as agent:
        env.update({"BASE_URL": agent.base_url, "USER_BASE_URL": user.base_url, "USER_MODEL": "scripted-user"})
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=600, env=env, cwd=cwd)
        user_requests = list(user.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (traces,) = (cwd / "outputs").glob("*/traces.jsonl")
    episodes = [json.loads(x) for x in traces.read_text().splitlines()]
    assert len(episodes) == len(forms)  # -n 3: the three tasks
    for ep in episodes:
        (trace,) = ep["traces"]
        tid = ep["task"]["data"]["task_id"]
        assert ep["ok"] and trace["ok"], trace["errors"]
        assert ep["task"]["data"]["prompt"] == forms[tid]["opening"]
        assert trace["rewards"]["task_verified"]["score"] == 1.0, (tid, trace["info"])
        record = trace["info"]["envfoundry_user"]
        assert record["user_errors"] == [] and record["user_stopped"] is True
        assert record["user_turns"] == len(forms[tid]["facts"]) + 1
        assert trace["metrics"]["user_errors"] == 0.0 and trace["metrics"]["user_turns"] == record["user_turns"]
    assert len(user_requests) == sum(len(f["facts"]) + 1 for f in forms.values())


def test_verl_conversation_agent_loop_in_its_venv(catalog_dir, tmp_path):
    """veRL's own agent-loop machinery on the conversation rows: the README's overrides compose, agent_loop.yaml
    registers the loop, hydra makes it as a rollout worker does, and every row's conversation passes (the agent
    through a stand-in LLM server over a scripted endpoint, the scripted user on its own endpoint)."""
    from tests.export.qwen_template import write_byte_tokenizer_dir

    python = trainer_python("verl")
    (root,) = export_catalog(catalog_dir, "verl", tmp_path / "export").paths
    target = tmp_path / "site"
    install(python, root, target)
    tokenizer = write_byte_tokenizer_dir(tmp_path / "tokenizer")
    cat = load_catalog(catalog_dir)
    forms = {t.task_id: conversation_form(cat.envs[t.env_id], t) for t in cat.tasks}
    with serve(scripted_user) as user, serve(ByTask(catalog_dir)) as agent:
        report = trainer_report(python, "run_verl_conversation.py", [str(root), root.name, str(tokenizer),
                                                                     agent.base_url], [target, TRAINER_DIR],
                                tmp_path, user_env(user.base_url))
    assert (report["train_files"], report["val_files"]) == ("train_conversation.parquet", "val_conversation.parquet")
    assert "actor_rollout_ref.rollout.agent.agent_loop_config_path=agent_loop.yaml" in report["overrides"]
    assert report["agent_loops"] == ["envfoundry_conversation"]
    assert sorted(r["task_id"] for r in report["rollouts"]) == sorted(forms)
    for r in report["rollouts"]:
        assert r["loop"] == "EnvFoundryConversationLoop" and r["reward"] == 1.0, json.dumps(r)
        assert r["extra"]["user_errors"] == 0.0 and r["extra"]["user_turns"] == len(forms[r["task_id"]]["facts"]) + 1
        assert r["user_masked"]  # the user's answers are in the context, out of the loss
