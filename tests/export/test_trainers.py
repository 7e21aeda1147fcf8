"""Exported artefacts used the way their READMEs say, in the trainer's own venv (.venv-trainers/,
made by scripts/setup_trainers.sh; it holds the trainer's library and nothing of envfoundry):
OpenEnv from the environment directory and installed, verifiers' own ``vf-validate`` and rollouts,
veRL's tool registry, tool parser, agent-loop dispatch and reward manager with a repeated request
id, and the SFT file through the Qwen2.5 chat template with ``transformers``. Without an LLM:
the reference solution scores 1, doing nothing 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import reference_reply
from pipeline.runtime import EnvInstance
from pipeline.runtime.schemas import described_tools
from tests.eval.scripted_server import Replay, instruction_of, noop
from tests.export import streaming_server
from tests.export.conftest import install, subprocess_env, trainer_python

TRAINER_DIR = Path(__file__).parent / "trainer"


def run_report(python: Path, script: str, args: list[str], path: list[Path], cwd: Path, timeout: int = 900) -> dict:
    env = subprocess_env(path)
    env["EF_SCRIPTED_KEY"] = "scripted"
    proc = subprocess.run(
        [str(python), str(TRAINER_DIR / script), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("REPORT "):])


def isolation_probe(catalog_dir: Path, env_id: str | None = None) -> dict | None:
    """A task and a reference write that succeeds on a fresh database and fails when repeated on
    the same one: a second session that saw the first session's write would fail it too."""
    cat = load_catalog(catalog_dir)
    for ce in cat.envs.values():
        if env_id is not None and ce.env.env_id != env_id:
            continue
        for task in ce.tasks:
            for call in task.reference_solution:
                with EnvInstance(ce.env, ce.path / "initial.db") as inst:
                    if inst.call(call.tool, call.arguments)["ok"] and not inst.call(call.tool, call.arguments)["ok"]:
                        return {"task_id": task.task_id, "write": call.model_dump(mode="json")}
    return None


def script_file(catalog_dir: Path, out: Path, submit: str | None = None, env_id: str | None = None
                ) -> tuple[Path, dict]:
    """The reference calls and reply of every task (of ``env_id`` only, when given)."""
    cat = load_catalog(catalog_dir)
    script = {
        t.task_id: {
            "calls": [c.model_dump(mode="json") for c in t.reference_solution],
            "reply": reference_reply(t.verifier.model_dump(mode="json")),
            "prompt": t.instruction,
            "submit": submit,
        }
        for t in cat.tasks if env_id is None or t.env_id == env_id
    }
    path = out / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path, script


def first_package(catalog_dir: Path, fmt: str, out: Path) -> tuple[Path, str]:
    """The exported package of the catalog's first environment (one package per environment) and its env id."""
    env_id = sorted(load_catalog(catalog_dir).envs)[0]
    paths = export_catalog(catalog_dir, fmt, out).paths
    return next(p for p in paths if p.name.endswith(env_id)), env_id


def task_infos(root: Path) -> dict:
    return {k: v for p in root.rglob("task_info.json") for k, v in json.loads(p.read_text()).items()}


# ---------------------------------------------------------------- OpenEnv


def test_openenv_directory_mode_and_installed(any_catalog, tmp_path):
    python = trainer_python("openenv")
    result, env_id = first_package(any_catalog, "openenv", tmp_path / "export")
    for name in ("openenv.yaml", "pyproject.toml", "README.md", "__init__.py", "client.py", "models.py",
                 "server/app.py", "server/environment.py", "server/Dockerfile", "server/requirements.txt",
                 "server/reward.py", "server/engine.py", "server/taskrt.py"):
        assert (result / name).is_file(), name  # what `openenv init` creates, plus the vendored runtime
    assert (result / "server" / "reward.py").read_bytes() == Path("pipeline/runtime/reward.py").read_bytes()
    target = tmp_path / "site"
    install(python, result, target)
    script, expected = script_file(any_catalog, tmp_path, submit="submit", env_id=env_id)
    probe = isolation_probe(any_catalog, env_id)
    if probe:
        script.write_text(json.dumps({**expected, "__isolation__": probe}), encoding="utf-8")
    report = run_report(python, "run_openenv.py", [str(result), result.name, str(script)], [target], cwd=tmp_path)

    # The README's `openenv validate . --level static`: a clean PASS (no SKIP, no WARN).
    validate = report["validate_dir"]
    assert validate["cmd"][1:] == ["validate", ".", "--level", "static"], validate
    assert validate["rc"] == 0 and "PASS  static.manifest" in validate["out"], validate
    assert "Verdict: PASS" in validate["out"] and not re.search(r"WARN|SKIP|FAIL", validate["out"]), validate
    # openenv's runner at its runtime level (what `openenv validate .` runs with Docker), the image
    # replaced by the directory served with uvicorn: the execution binding and runtime plan are read,
    # the episode is played and every runtime contract check runs and passes.
    runtime = report["runtime_validation"]
    assert runtime["levels"] == ["static", "runtime"], runtime
    checks = runtime["results"]
    for check in ("static.manifest", "runtime.startup", "runtime.reward_well_formed", "runtime.observation_schema",
                  "runtime.state_contract"):
        assert checks[check]["status"] == "pass", (check, checks[check])
    assert checks["runtime.network_policy"] == {"status": "skip",
                                                "evidence": ["missing provider capabilities: network_policy"]}
    others = {k: v for k, v in checks.items() if v["status"] != "pass" and k != "runtime.network_policy"}
    # What is left is openenv 0.10's own gap (no grader in its build), which makes every package WARN.
    assert others and all(v == {"status": "skip", "evidence": ["grader not implemented in this build"]}
                          for v in others.values()), others
    assert runtime["verdict"] == "warn"
    assert report["validate_url"]["rc"] == 0 and "Verdict: PASS" in report["validate_url"]["out"], report["validate_url"]
    # A call that cannot run as sent fills `error`, as an unknown tool does; every step's reward is a number.
    if "invalid_calls" in report:
        bad = report["invalid_calls"]
        assert bad["unknown_tool"]["error"]["error_type"] == "tool_not_found", bad
        assert bad["bad_args"]["ok"] is False and bad["bad_args"]["error"]["error_type"] == "invalid_args", bad
        assert "no_such_arg" in bad["bad_args"]["error"]["message"] and bad["bad_args"]["result"].startswith("Error:")
        assert bad["unknown_tool"]["reward"] == bad["bad_args"]["reward"] == 0.0
    assert report["schema"] == {"action": "CallToolAction", "observation": "ToolObservation",
                                "reset_observation": "TaskObservation", "state": "EnvFoundryState"}
    env = load_catalog(any_catalog).envs[env_id].env
    assert report["listed_tools"] == sorted([t.name for t in env.tools] + ["submit"])
    infos = task_infos(result)
    assert len(report["episodes"]) == 2 * len(expected)
    for e in report["episodes"]:
        assert e["reset_task_id"] == e["task_id"] and e["instruction"] == expected[e["task_id"]]["prompt"]
        assert {"task_id", "instruction", "tools", "split", "tier", "pass_rate"} <= set(e["observation_keys"])
        info = infos[e["task_id"]]
        assert (e["split"], e["tier"], e["pass_rate"]) == (info["split"], info["tier"], info["pass_rate"])
        assert type(e["tier"]) is int and e["split"] and e["pass_rate"] is not None, e
        assert {"tool_name", "result", "ok", "passed"} <= set(e["step_keys"])  # step returns ToolObservation
        assert e["done"] is True and e["n_tools"] == len(env.tools) + 1
        assert "ended" in e["after_end_error"]
        assert e["state"]["task_id"] == e["task_id"] and e["state"]["done"] is True
        if e["mode"] == "reference":
            assert e["reward"] == 1.0 and e["passed"] is True
            assert all(r["ok"] and not r["result"].startswith("Error:") and r["reward"] == 0.0 for r in e["results"])
            assert e["state"]["step_count"] == len(expected[e["task_id"]]["calls"]) + 1
        else:
            assert e["reward"] == 0.0 and e["passed"] is False and e["state"]["step_count"] == 1
    if probe:  # the second session does not see the first one's write
        assert report["isolation"] == {"first": True, "again_in_a": False, "first_in_b": True}
    assert report["typed_client"] == {
        "reset_type": "TaskObservation", "task_id": next(iter(expected)), "step_type": "ToolObservation",
        "done": True, "reward": 0.0, "state_type": "EnvFoundryState", "state_done": True,
    }


# ---------------------------------------------------------------- verifiers


def readme_line(readme: Path, command: str, contains: str = "") -> str:
    """The line of the README's first bash block that runs ``command`` (and holds ``contains``), as written."""
    block = re.search(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S).group(1)
    (line,) = [x for x in block.splitlines() if x.split(" ", 1)[0] == command and contains in x]
    return line


def run_readme_line(python: Path, readme: Path, command: str, cwd: Path, path: list[Path],
                    extra_env: dict[str, str] | None = None, timeout: int = 600,
                    contains: str = "") -> subprocess.CompletedProcess:
    """Run a README command line verbatim with bash, the trainer venv's ``bin`` first on PATH (an
    activated venv), the exported package importable from ``path``."""
    env = subprocess_env(path)
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    env.update(extra_env or {})
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "-c", readme_line(readme, command, contains)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)


def vf_validate(python: Path, package: Path, target: Path, cwd: Path) -> dict:
    """The README's `vf-validate <package> -o validate-out --runtime.type subprocess`; its summary JSON."""
    proc = run_readme_line(python, package / "README.md", "vf-validate", cwd, [target])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.index("\n{") + 1:])


def test_verifiers_validate_and_rollouts(any_catalog, tmp_path):
    python = trainer_python("verifiers")
    result, env_id = first_package(any_catalog, "verifiers", tmp_path / "export")
    target = tmp_path / "site"
    install(python, result, target)
    n = sum(t.env_id == env_id for t in load_catalog(any_catalog).tasks)

    summary = vf_validate(python, result, target, tmp_path / "validate")
    assert summary["total"] == n
    assert summary["checks"]["gold"]["valid"] == n and summary["checks"]["gold"]["unchecked"] == 0
    assert summary["checks"]["noop"]["valid"] == n

    script, expected = script_file(any_catalog, tmp_path, env_id=env_id)
    report = run_report(python, "run_verifiers.py", [result.name, str(script)], [target, TRAINER_DIR], cwd=tmp_path)
    assert report["verifiers"].startswith("0.4.")
    # The package's own Env: verifiers' single-agent env, with a conversation mode (tests/export/test_conversations.py).
    assert report["env_class"] == "EnvFoundryEnv" and report["single_agent"] is True
    assert report["default_harness"] == result.name  # the package's own tool-calling chat loop
    rollouts = report["rollouts"]
    assert len(rollouts) == 2 * len(expected)
    env = load_catalog(any_catalog).envs[env_id].env
    infos = task_infos(result)
    for r in rollouts:
        assert r["ok"], r["errors"]
        assert r["key"] == r["task_id"] and r["prompt"] == expected[r["task_id"]]["prompt"]
        info = infos[r["task_id"]]
        assert (r["split"], r["tier"], r["pass_rate"]) == (info["split"], info["tier"], info["pass_rate"])
        assert type(r["tier"]) is int and r["split"] and r["pass_rate"] is not None, r
        if r["mode"] == "reference":
            assert r["reward"] == 1.0, r["info"].get("verifier_failures")
            assert r["state_calls"] == len(expected[r["task_id"]]["calls"])
            assert r["info"]["listed_tools"] == sorted(t.name for t in env.tools)
            assert not any(x["is_error"] for x in r["info"]["tool_results"])
        else:
            assert r["reward"] == 0.0 and r["state_calls"] == 0
            assert r["info"]["verifier_failures"]
    # Advertised through the MCP server's public add_tool: the IR's types, enums, bounds, required, and a date
    # parameter's form and description as the server serves them (``described_tools``).
    ref = next(r for r in rollouts if r["mode"] == "reference")
    for t in described_tools(env):
        want, got = t.input_schema(), ref["info"]["tool_schemas"][t.name]
        assert sorted(got.get("required", [])) == sorted(want["required"]), t.name
        for name, prop in want["properties"].items():
            assert {k: got["properties"][name].get(k) for k in prop} == prop, (t.name, name)


class ReplayExcept(Replay):
    """Replays every task's reference solution, except one task it answers without a call."""

    def __init__(self, tasks: list, skip: str):
        super().__init__(tasks)
        self.skip = skip

    def __call__(self, body: dict) -> dict:
        return noop(body) if instruction_of(body) == self.skip else super().__call__(body)


def test_verifiers_readme_vf_eval_offline(any_catalog, tmp_path):
    """The README's `vf-eval` line as written, offline (no Prime account, no hosted sandbox): verifiers'
    default harness (its chat program, a uv script) against a scripted endpoint that streams, as that
    harness always asks. The reference replayed scores 1, answering without a call scores 0."""
    python = trainer_python("verifiers")
    result, env_id = first_package(any_catalog, "verifiers", tmp_path / "export")
    target = tmp_path / "site"
    install(python, result, target)
    tasks = [t for t in load_catalog(any_catalog).tasks if t.env_id == env_id]
    order = [json.loads(x)["task_id"] for x in (result / result.name / "data" / "tasks.jsonl").read_text().splitlines()]
    skipped = next(t for t in tasks if t.task_id == order[0])  # the first task, which `-n 3` evaluates
    infos = task_infos(result)
    with streaming_server.serve(ReplayExcept(tasks, skipped.instruction)) as server:
        proc = run_readme_line(python, result / "README.md", "vf-eval", tmp_path / "eval", [target],
                               {"MODEL": "scripted", "BASE_URL": server.base_url})
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert requests and all(r.get("stream") is True for r in requests)  # the harness streams every turn
    (traces,) = (tmp_path / "eval" / "outputs").glob("*/traces.jsonl")
    episodes = [json.loads(x) for x in traces.read_text().splitlines()]
    assert len(episodes) == 3  # -n 3
    rewards = {}
    for ep in episodes:
        data = ep["task"]["data"]
        (trace,) = ep["traces"]
        assert ep["ok"] and trace["ok"], trace["errors"]
        rewards[data["task_id"]] = trace["rewards"]["task_verified"]["score"]
        info = infos[data["task_id"]]
        assert (data["split"], data["tier"], data["pass_rate"]) == (info["split"], info["tier"], info["pass_rate"])
        assert type(data["tier"]) is int and data["split"] and data["pass_rate"] is not None, data
    assert rewards == {k: 0.0 if k == skipped.task_id else 1.0 for k in rewards} and skipped.task_id in rewards


def test_verifiers_validate_reports_a_broken_reference_invalid(catalog_dir, tmp_path):
    """The gold check is real: a task whose verifier its reference solution misses is reported invalid."""
    python = trainer_python("verifiers")
    (result,) = export_catalog(catalog_dir, "verifiers", tmp_path / "export").paths
    tasks_file = result / result.name / "data" / "tasks.jsonl"
    lines = tasks_file.read_text().splitlines()
    first = json.loads(lines[0])
    first["verifier"]["assertions"][0]["expect"] = "no such value"
    tasks_file.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    target = tmp_path / "site"
    install(python, result, target)
    summary = vf_validate(python, result, target, tmp_path / "validate")
    assert summary["checks"]["gold"]["invalid"] == 1 and summary["checks"]["gold"]["valid"] == len(lines) - 1


# ---------------------------------------------------------------- veRL


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_coder"])
def test_verl_tools_and_reward_in_verl(fmt, multi_catalog_dir, tmp_path):
    python = trainer_python("verl")
    (result,) = export_catalog(multi_catalog_dir, "verl", tmp_path / "export").paths
    target = tmp_path / "site"
    install(python, result, target)
    script, expected = script_file(multi_catalog_dir, tmp_path)
    report = run_report(python, "run_verl.py", [str(result), result.name, str(script), fmt], [target], cwd=tmp_path)

    assert report["readme_config"] == {
        "overrides": report["readme_config"]["overrides"], "train_files": "train.parquet", "val_files": "val.parquet",
        "tool_config_path": "tool_config.yaml", "reward_path": f"pkg://{result.name}.tools", "reward_name": "compute_score",
    }
    cat = load_catalog(multi_catalog_dir)
    assert len(cat.envs) == 2
    # The two environments share tool names: both are exposed qualified, each row sees its own.
    assert report["tools"] == sorted(f"{e}__{t.name}" for e, ce in cat.envs.items() for t in ce.env.tools)
    assert report["leaks"] == []  # no database or handle outlives a call / a trajectory
    by_mode: dict[str, list] = {}
    for r in report["rollouts"]:
        by_mode.setdefault(r["mode"], []).append(r)
    assert len(by_mode["reference"]) == 2 * len(expected)  # twice per task with the same request id
    for r in by_mode["reference"] + by_mode["reference-interleaved"]:
        assert r["reward"] == 1.0, r
        assert r["extra"]["acc"] == 1.0 and r["extra"]["goals_met"] == 1.0
        assert r["results"] and not any(x.startswith(("Error", "Unknown", "Invalid")) for x in r["results"]), r
    for r in by_mode["noop"] + by_mode["noop-interleaved"]:
        assert r["reward"] == 0.0, r
    assert {r["split"] for r in report["rollouts"]} == {"train", "val"}
    if fmt == "hermes":  # parsed by veRL's hermes parser and dispatched by its agent loop
        bare = report["string_arguments"]["tool"].split("__")[-1]
        assert report["string_arguments"]["results"] == [
            f"Error: arguments for tool '{bare}' must be a JSON object, got a string"], report["string_arguments"]


def test_trainer_venvs_hold_the_trainer_library_and_not_envfoundry(tmp_path):
    for venv, module in (("openenv", "openenv"), ("verifiers", "verifiers"), ("verl", "verl"), ("sft", "transformers")):
        proc = subprocess.run(
            [str(trainer_python(venv)), "-c", f"import {module}\nimport pipeline.export"],
            capture_output=True, text=True, env=subprocess_env(), cwd=tmp_path,
        )
        assert proc.returncode != 0 and "No module named 'pipeline'" in proc.stderr, (venv, proc.stderr[-2000:])


def test_sft_readme_renders_through_the_qwen_chat_template(any_catalog, tmp_path):
    """The SFT export's README command as written, offline: the Qwen2.5 chat template (read from the
    embedded model's GGUF) in a local tokenizer directory, in a venv holding only transformers, with
    the Hub out of reach: arguments render as JSON objects, once. A Hub id offline, or a directory
    without a chat template, stops with a message saying what to pass instead."""
    from tests.export.qwen_template import write_tokenizer_dir

    python = trainer_python("sft")
    (sft,) = export_catalog(any_catalog, "jsonl", tmp_path / "export").paths
    write_tokenizer_dir(sft.parent / "qwen2.5-tokenizer")  # what the README's `hf download` line makes
    out = sft.parent / "rendered.jsonl"
    assert (sft.parent / "render_sft.py").is_file()
    offline = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}  # nothing listens on port 9
    proc = run_readme_line(python, sft.parent / "README.md", "python", sft.parent, [], offline, contains=" sft.jsonl")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The conversations (issue 30) through the same template: the user's answers are user turns between the
    # assistant's questions and its tool calls.
    proc = run_readme_line(python, sft.parent / "README.md", "python", sft.parent, [], offline,
                           contains="sft_conversation.jsonl")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    talk = [json.loads(x) for x in (sft.parent / "rendered_conversation.jsonl").read_text().splitlines()]
    assert len(talk) == len(load_catalog(any_catalog).tasks)
    assert all(x["text"].count("<|im_start|>user\n") >= 1 for x in talk)
    assert any("<|im_start|>user\nIt is " in x["text"] for x in talk)
    render = [str(python), "render_sft.py", "sft.jsonl", "--out", str(tmp_path / "x.jsonl"), "--tokenizer"]
    env = {**subprocess_env(), **offline}
    hub = subprocess.run([*render, "Qwen/Qwen2.5-7B-Instruct"], capture_output=True, text=True, env=env,
                         cwd=sft.parent, timeout=300)
    assert hub.returncode != 0 and "--tokenizer ./qwen2.5-tokenizer" in hub.stderr and "hf download" in hub.stderr
    bare = sft.parent / "no-template"
    bare.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).write_bytes((sft.parent / "qwen2.5-tokenizer" / name).read_bytes())
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template")
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    no_template = subprocess.run([*render, "./no-template"], capture_output=True, text=True, env=env,
                                 cwd=sft.parent, timeout=300)
    assert no_template.returncode != 0 and "has no chat template" in no_template.stderr, no_template.stderr[-2000:]
    rendered = {json.loads(x)["task_id"]: json.loads(x)["text"] for x in out.read_text().splitlines()}
    tasks = {t.task_id: t for t in load_catalog(any_catalog).tasks}
    assert set(rendered) == set(tasks)
    for task_id, text in rendered.items():
        assert text.startswith("<|im_start|>system\n") and "<tools>" in text
        # The calls as the template rendered them: {"name": ..., "arguments": {...}}, the form Qwen2.5
        # itself emits; a JSON string there (double encoding) would not equal the arguments object.
        conversation = text.split("<|im_start|>user\n", 1)[1]  # after the system turn (its format example)
        blocks = [json.loads(b) for b in re.findall(r"<tool_call>\n(.*?)\n</tool_call>", conversation, re.S)]
        want = [{"name": c.tool, "arguments": c.arguments} for c in tasks[task_id].reference_solution]
        assert blocks == want, (blocks, want)
        assert all(isinstance(b["arguments"], dict) for b in blocks)
