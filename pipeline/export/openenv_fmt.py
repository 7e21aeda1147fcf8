"""Export to OpenEnv (PyPI ``openenv`` 0.10.x): one environment directory per environment.

``<out>/<package>/`` has the layout ``openenv init`` creates: ``openenv.yaml`` (with the
``validation:`` block ``openenv validate`` reads), ``pyproject.toml`` (``server`` script),
``models.py`` (the action, observation and state models ``/schema`` declares), ``client.py``
(a typed ``EnvClient``), ``server/app.py`` (``create_app``), ``server/environment.py``,
``server/Dockerfile`` and ``server/requirements.txt``, and ``validation/runtime.json`` (the episode
``openenv validate`` plays at its runtime level, in the image ``server/Dockerfile`` builds). The tool engine, the reward and the task
runtime are vendored into ``server/`` and the environment's data into ``data/``, so it needs only
``openenv``: it runs from the directory (``uvicorn server.app:app``) or installed (``pip install .``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from pipeline.export.audit import readme_of, ship_audit
from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportError,
    ExportOptions,
    conversation_prompt,
    dist_name,
    one_line,
    package_name,
    pyproject,
    reference_reply,
    splits,
    system_prompt,
    tasks_with_tools,
    write_bundle,
    write_json,
    write_runtime,
    write_text,
)
from pipeline.export.pools import EnvPools, pool_of, readme_section, write_pool
from pipeline.runtime import EnvInstance
from pipeline.runtime.replay import resolve
from pipeline.runtime.schemas import described_tools

OPENENV_REQUIREMENT = "openenv>=0.10,<0.11"
RESERVED = {"reset", "step", "state", "close"}
PLAN_PATH = "validation/runtime.json"
MAX_PLAN_ACTIONS, MAX_PLAN_BYTES = 100, 65_536  # openenv's runtime plan (schema 1) limits

REQUIREMENTS = "{requirement}\nuvicorn\n"

DOCKERFILE = """# The environment served by OpenEnv in a container: `docker build -t {package} -f server/Dockerfile .`
# from the environment directory, then `docker run -p 8000:8000 {package}`.
ARG BASE_IMAGE=python:3.11-slim
FROM ${{BASE_IMAGE}}
WORKDIR /app/env
COPY server/requirements.txt /app/env/server/requirements.txt
RUN pip install --no-cache-dir -r server/requirements.txt
COPY . /app/env
ENV PYTHONPATH=/app/env
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \\
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"
CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "8000"]
"""

README = """# {package}

envfoundry environment `{env_id}` ({title}) as an OpenEnv environment: {n} tasks ({n_val} in the
validation split). The only dependency is `openenv` (0.10.x); the tool engine and the reward
(envfoundry's `pipeline/runtime/reward.py`) are vendored in `server/`.

```bash
pip install "{requirement}" uvicorn
openenv validate . --level static             # openenv.yaml and validation/runtime.json (no Docker)
uvicorn server.app:app --port 8000            # from this directory, as openenv.yaml says
openenv validate --url http://127.0.0.1:8000  # the running server (from another shell)
```

Or installed: `pip install . && python -m {package}.server.app --port 8000`.

With Docker, `openenv validate .` (its default level) also builds `server/Dockerfile`, runs the
image without network and plays `validation/runtime.json` (task `{plan_task}`: its reference
solution, then `{submit}`) on one WebSocket session: startup, reward, observation schema, state and
network checks. openenv 0.10 has no grader yet for its other runtime and semantic checks: it lists
them as SKIP ("grader not implemented in this build"), which makes its verdict WARN for any package.

```python
from openenv.core import GenericEnvClient
with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
    task = env.reset(task_id="<task_id>").observation          # instruction, tools, split, tier, pass_rate
    env.step({{"type": "call_tool", "tool_name": "...", "arguments": {{...}}}})
    result = env.step({{"type": "call_tool", "tool_name": "{submit}", "arguments": {{"answer": "..."}}}})
    result.reward, result.done                                  # the verifier's verdict
```

The typed client is `{package}.EnvFoundryEnv` (after `pip install .`). `reset` returns a
`TaskObservation` (`split`: train or val; `tier`: 1 to 3; `pass_rate`: the share of envfoundry's
test attempts that passed, null when none ran), `step` a `ToolObservation` (`result` is the text
the agent reads; `reward` 0.0 until `{submit}`), `state` an `EnvFoundryState`; `/schema` declares
these. A call that could not run as sent fills `error` (`tool_not_found`, `invalid_args` naming the
parameter, `execution_error`); a refusal by one of the application's rules is the tool's answer:
`ok` false, `error` null, the message in `result`. Every WebSocket session gets its own copy of the
database. `ENVFOUNDRY_PARTIAL_CREDIT=1` rewards the share of goals met instead of 1/0;
`ENVFOUNDRY_MAX_SESSIONS` bounds concurrent sessions (default 1024, sized for a training step's rollouts; the
server prints the cap and the memory one session measured at start-up; a session refused at the cap is told to
raise it). Sessions own no thread: their tool
calls and rewards run on one pool of `ENVFOUNDRY_WORKERS` threads (default the number of cores, at least
2), and a call is stopped after `ENVFOUNDRY_CALL_TIMEOUT` seconds (default 10), so a slow call cannot
stall the other sessions. An episode that made the same write calls from the same state as an earlier one of its
task ends on the same database (the engine is deterministic), so its reward reuses that episode's verifier checks
(the answer is checked each time; `ENVFOUNDRY_REWARD_MEMO`, default 4096 kept, 0 turns it off).

## Conversations

Every task also has a conversational form (each record's `conversation` in `data/tasks.jsonl`): the user
opens with a vague request and gives each detail only when asked. `reset(task_id=..., conversation=True)`
(or every episode, with `ENVFOUNDRY_CONVERSATION=1` set for the server) plays it: the observation's
`instruction` is the user's opening line, `system_prompt` tells the agent to ask for what is missing, and
the tools include `{message}`. A step `{message}` with `{{"message": "..."}}` sends the agent's message to
a simulated user and returns the user's reply as `result`; tool calls still go to the tools. The user ends
the conversation with `###STOP###`: that step is `done` and its `reward` is the verifier on the final
database, the agent's last message to the user being the answer. The user runs on any OpenAI-compatible
endpoint, named in the server's environment:

```bash
export ENVFOUNDRY_USER_BASE_URL=http://127.0.0.1:8001/v1   # the user's endpoint (vLLM, SGLang, Ollama, ...)
export ENVFOUNDRY_USER_MODEL=Qwen/Qwen2.5-7B-Instruct        # the model it serves
export ENVFOUNDRY_USER_API_KEY=...                           # when the endpoint wants one
uvicorn server.app:app --port 8000
```

```python
with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
    opening = env.reset(task_id="<task_id>", conversation=True).observation["instruction"]
    reply = env.step({{"type": "call_tool", "tool_name": "{message}", "arguments": {{"message": "Which book?"}}}})
    reply.observation["result"], reply.done, reply.reward       # the user's answer; done once the user stops
```

`ENVFOUNDRY_USER_TEMPERATURE` (default 0), `ENVFOUNDRY_USER_MAX_TOKENS` (160), `ENVFOUNDRY_USER_TIMEOUT`
(60 s) and `ENVFOUNDRY_USER_MAX_TURNS` (10 replies, then the episode ends and is scored) tune the user. Each
reply's `metadata.user_errors` lists the user's own mistakes caught by code (a fact given before it was asked
for, a value it invented, a tool name or an id, an early stop), kept apart from the agent's and summed in
`state.user_errors`; `state.user_turns` counts its replies. The submit tool still ends an episode at once.

Tools: {tools}. Task ids, splits, tiers and pass rates: `data/tasks.jsonl`, `data/task_info.json`.
"""

SUBMIT_DESCRIPTION = (
    "Finish the task. Call it once, after your last change; pass your answer when the request asks a question. "
    "The episode ends and is scored."
)

SUBMIT_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "description": "Your answer, when the request asks a question"}},
    "required": [],
    "additionalProperties": False,
}


MESSAGE_DESCRIPTION = (
    "Send a message to the user (a question, or your final reply); the result is the user's answer. The episode "
    "ends when the user is done."
)

MESSAGE_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What you say to the user"}},
    "required": ["message"],
    "additionalProperties": False,
}


def submit_tool_name(tool_names: set[str], name: str = "submit") -> str:
    while name in tool_names:
        name += "_task"
    return name


def runtime_plan(ce: CatalogEnv, submit: str) -> dict[str, Any]:
    """``validation/runtime.json``, the episode ``openenv validate`` plays at its runtime level (schema 1:
    one reset, then actions until ``done``): the first task whose reference solution replays, its calls
    (``$N.field`` arguments resolved on the replay) and the submit call with the reference reply."""
    for task in ce.tasks:
        if len(task.reference_solution) + 1 > MAX_PLAN_ACTIONS:
            continue
        actions: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        with EnvInstance(ce.env, ce.path / "initial.db") as inst:
            for call in task.reference_solution:
                try:
                    arguments = resolve(dict(call.arguments), responses)
                except ValueError:
                    break
                responses.append(inst.call(call.tool, arguments))
                if not responses[-1]["ok"]:
                    break
                actions.append({"type": "call_tool", "tool_name": call.tool, "arguments": arguments})
        if len(actions) < len(task.reference_solution):
            continue
        reply = reference_reply(task.verifier.model_dump(mode="json"))
        actions.append({"type": "call_tool", "tool_name": submit, "arguments": {"answer": reply} if reply else {}})
        plan = {
            "plan_schema_version": "1",
            "reset": {"episode_id": "envfoundry-validation", "seed": 0, "options": {"task_id": task.task_id}},
            "actions": actions,
        }
        if len(json.dumps(plan, ensure_ascii=False).encode()) <= MAX_PLAN_BYTES:
            return plan
    raise ExportError(f"environment {ce.env_id}: no task's reference solution replays (needed for validation/runtime.json)")


def manifest(ce: CatalogEnv, package: str, submit: str, split: dict[str, str]) -> dict:
    """``openenv.yaml``: the served app, and the ``validation:`` block ``openenv validate`` reads, with
    the ``execution`` binding of its runtime level (the image ``server/Dockerfile`` builds, the episode
    ``validation/runtime.json`` plays)."""
    counts: dict[str, int] = {}
    for t in ce.tasks:
        counts[split[t.task_id]] = counts.get(split[t.task_id], 0) + 1
    bank = "".join(sorted(t.task_id for t in ce.tasks)).encode()
    models = sorted({str(t.provenance.get("model")) for t in ce.tasks if t.provenance.get("model")})
    pin: dict = {"dataset_version": hashlib.sha256(bank).hexdigest()[:16]}
    if models:
        pin["generator_model"] = ", ".join(models)
    return {
        "spec_version": 1,
        "name": package,
        "version": "0.1.0",
        "type": "space",
        "runtime": "fastapi",
        "app": "server.app:app",
        "port": 8000,
        "validation": {
            # Reference solutions score 1.0 and doing nothing 0.0 (envfoundry proves both per task).
            "reward": {"range": [0.0, 1.0], "oracle_tolerance": 0.0, "floor_margin": 1.0},
            "resources": {"cpu": 1.0, "memory_mb": 512, "disk_mb": 256, "episode_timeout_s": 600.0},
            "network": {"mode": "no-network"},
            "capabilities": {
                "verifier": {"kind": "reward_channel"},
                "declared_tools": sorted([*(t.name for t in ce.env.tools), submit]),
                "declared_task_count": dict(sorted(counts.items())),
            },
            "task_distribution": pin,
            "types": {"tags": ["tool-use", "sqlite", "envfoundry"]},
            "execution": {"kind": "openenv_ws", "probe_path": PLAN_PATH, "dockerfile": "server/Dockerfile",
                          "context": ".", "agent_boundary": "api"},
        },
    }


POOL_USAGE = """Served by level: `env.reset(seed=7, level=3)` plays the task at index 7 (modulo the pool's size) of level
3's pool, the same task for the same seed and level (without a seed: the server's next task of that level); a
level with no sampled task is an error naming the levels that have some. The observation carries `level` and lists
the tools the task offers (those it needs plus the level's distractors).

Adaptive level: `env.reset(adaptive=True)` (or every episode reset without `task_id` or `level`, with
`ENVFOUNDRY_ADAPTIVE=1` set for the server) plays at the server's current level. Each adaptive episode's reward
goes into a sliding window of its level (the last `ENVFOUNDRY_ADAPTIVE_WINDOW` rewards, default 8); when the
current level's window is full and its mean reaches `ENVFOUNDRY_ADAPTIVE_UP` (default 0.7) the level moves up to
the next level with tasks, when it falls under `ENVFOUNDRY_ADAPTIVE_DOWN` (default 0.2) it moves down, and both
windows start again (RLVE's rule). `ENVFOUNDRY_ADAPTIVE_START` sets the first level (default the lowest). The state
(`env.state()`, `GET /state`) reports it as `adaptive`: `level`, `levels`, `window`, `up`, `down`, `windows` and
their `means`, `episodes` and the last `moves`; the step that ends an episode that moved the level carries the
move in `metadata.level_move`. The level is the server's, shared by its sessions."""


def export_env(ce: CatalogEnv, out: Path, split: dict[str, str], pools: EnvPools | None = None,
               options: ExportOptions | None = None) -> Path:
    options = options or ExportOptions()
    tasks = tasks_with_tools(ce)
    names = {t.name for t in ce.env.tools}
    clash = names & RESERVED
    if clash:
        raise ExportError(f"environment {ce.env_id}: tool names {sorted(clash)} are reserved by OpenEnv")
    submit = submit_tool_name(names)
    message = submit_tool_name(names | {submit}, "send_message")
    package = package_name(ce.env_id, "envfoundry_openenv")
    root = out / package
    title = ce.env.scenario.name
    fill = {"dist": dist_name(package), "env_id": ce.env_id, "title": title, "package": package}
    write_text(
        root / "openenv.yaml",
        yaml.safe_dump(manifest(ce, package, submit, split), sort_keys=False, allow_unicode=True, width=100),
    )
    write_text(root / "pyproject.toml", pyproject(
        {"name": fill["dist"], "version": "0.1.0",
         "description": f"envfoundry environment {ce.env_id} for OpenEnv: {one_line(title)}",
         "requires-python": ">=3.10", "dependencies": [OPENENV_REQUIREMENT, "uvicorn"],
         "scripts": {"server": f"{package}.server.app:main"}},
        {"packages": [package, f"{package}.server"], "package-dir": {package: ".", f"{package}.server": "server"},
         "package-data": {package: ["data/*", "data/states/*", "openenv.yaml", "README.md"]}},
        {"env_id": ce.env_id, "scenario": title},
    ))
    n_val = sum(1 for t in tasks if split[t.task_id] == "val")
    plan = runtime_plan(ce, submit)
    write_text(
        root / "README.md",
        README.format(
            n=len(tasks), n_val=n_val, submit=submit, tools=", ".join(sorted(names)),
            requirement=OPENENV_REQUIREMENT, plan_task=plan["reset"]["options"]["task_id"], message=message, **fill,
        ) + (readme_section({ce.env_id: pools}, POOL_USAGE) if pools is not None else "")
        + readme_of(options, [ce.env_id]),
    )
    write_text(
        root / "__init__.py",
        '"""envfoundry environment for OpenEnv (see README.md)."""\n\n'
        "from .client import EnvFoundryEnv\n"
        "from .models import CallToolAction, EnvFoundryState, TaskObservation, ToolObservation\n\n"
        '__all__ = ["CallToolAction", "EnvFoundryEnv", "EnvFoundryState", "TaskObservation", "ToolObservation"]\n',
    )
    write_text(root / "models.py", (TEMPLATES / "openenv_models.py").read_text(encoding="utf-8"))
    write_text(root / "client.py", (TEMPLATES / "openenv_client.py").read_text(encoding="utf-8"))
    server = root / "server"
    write_text(server / "__init__.py", "")
    write_text(server / "app.py", (TEMPLATES / "openenv_app.py").read_text(encoding="utf-8"))
    write_text(server / "environment.py", (TEMPLATES / "openenv_environment.py").read_text(encoding="utf-8"))
    write_text(server / "curriculum.py", (TEMPLATES / "curriculum.py").read_text(encoding="utf-8"))
    write_text(server / "requirements.txt", REQUIREMENTS.format(requirement=OPENENV_REQUIREMENT))
    write_text(server / "Dockerfile", DOCKERFILE.format(package=package))
    write_runtime(server)
    write_json(root / PLAN_PATH, plan)
    write_bundle(ce, root / "data", split)
    if pools is not None:
        write_pool(ce, pools, root / "data")
    ship_audit(options, ce.env_id, root / "data")
    write_json(
        root / "data" / "export.json",
        {
            "env_id": ce.env_id,
            "name": package,
            "description": f"{title}: {ce.env.scenario.description}",
            "system_prompt": system_prompt(ce),
            "schemas": {t.name: t.input_schema() for t in described_tools(ce.env)},
            "submit_tool": submit,
            "submit_description": SUBMIT_DESCRIPTION,
            "submit_schema": SUBMIT_SCHEMA,
            "conversation_system_prompt": conversation_prompt(ce),
            "message_tool": message,
            "message_description": MESSAGE_DESCRIPTION,
            "message_schema": MESSAGE_SCHEMA,
        },
    )
    return root


def export(catalog: Catalog, out: Path, options: ExportOptions) -> list[Path]:
    split = splits(catalog, options.val_fraction)
    return [export_env(ce, out, split, pool_of(options.pools, ce.env_id), options)
            for ce in catalog.envs.values() if ce.tasks]
