"""Export to verifiers (PyPI ``verifiers``, v1 API): one installable package per environment.

``<out>/<package>/`` is a source project (``pip install <out>/<package>``) whose package exposes
``load_environment(**kwargs)`` and exports its ``Taskset`` for ``vf-eval <package>`` and
``vf-validate <package>`` (``Task.validate`` replays the reference solution). It depends only on
``verifiers``: the envfoundry tool engine, the reward (``pipeline/runtime/reward.py``) and the task runtime
are vendored, with the environment's ``env.json``, ``initial.db``, tasks and per-task split, tier
and pass rate as package data.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.export.audit import readme_of, ship_audit
from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportOptions,
    conversation_prompt,
    dist_name,
    one_line,
    package_name,
    pyproject,
    splits,
    system_prompt,
    tasks_with_tools,
    write_bundle,
    write_json,
    write_runtime,
    write_text,
)
from pipeline.export.pools import EnvPools, pool_of, readme_section, write_pool

VERIFIERS_REQUIREMENT = "verifiers>=0.4.0"
UV_VERSION = "0.13.9"  # the uv the trainer venv holds (scripts/setup_trainers.sh)

README = """# {dist}

envfoundry environment `{env_id}` ({title}) as a verifiers environment: {n} tasks ({n_val} in the
validation split). The only dependency is `verifiers` (0.4.x); the tool engine and the reward
(envfoundry's `pipeline/runtime/reward.py`) are vendored in the package.

```bash
pip install .
pip install "uv=={uv}"    # verifiers' default harness runs its chat program with uv (see below)
vf-validate {package} -o validate-out --runtime.type subprocess   # gold (reference) and noop checks per task
vf-eval {package} -m "$MODEL" --client.base-url "$BASE_URL" --no-push --env.agent.runtime.type subprocess -n 3
```

`vf-eval` runs the default harness, a tool-calling chat loop, against any OpenAI-compatible endpoint
(`$BASE_URL`, e.g. `http://127.0.0.1:8000/v1` for vLLM; the key is read from `$PRIME_API_KEY`, or name
another variable with `--client.api-key-var`), and writes `outputs/<run>/traces.jsonl`. **The endpoint must
stream**: the harness asks for every turn with `"stream": true` (server-sent events), so an endpoint that
answers streamed chat completions with an error fails every rollout (vLLM, SGLang, llama.cpp's server and
Ollama stream; check a proxy or a scripted server with `curl $BASE_URL/chat/completions -d '{{"model": "...",
"stream": true, "messages": [...]}}'`). Offline it needs
`--no-push` (else it uploads the run to Prime Intellect and asks for a Prime API key) and
`--env.agent.runtime.type subprocess` (else each rollout provisions a Prime hosted sandbox). The harness
runs its chat program as a `uv` script (`uv sync --script` resolves the program's own dependencies
once, from PyPI or your index), so `uv` must be on `PATH`: `pip install "uv=={uv}"` puts it beside
`vf-eval`.

```python
from {package} import load_environment
env = load_environment(partial_credit=False)   # split="train" | "val", task_ids=[...] select tasks
```

Each rollout gets its own copy of the initial database (carried in the rollout state); the
reward `task_verified` is 1.0 when the task's verifier holds on the final database and last
reply (goal assertions and the typed answer; gate assertions and unchanged tables outside
`mutable_tables` must hold, else 0), else 0.0; the metric `goals_met` is the share of goals held.
Each task's data carries `split` (train or val), `tier` (1 to 3) and `pass_rate` (the share of
envfoundry's test attempts that passed, null when none ran).

## Conversations

Every task also has a conversational form (each record's `conversation` in `data/tasks.jsonl`): the user
opens with a vague request and gives each detail only when asked. With `conversation` on, the agent gets
the user's opening line; its tool calls go to the tools as usual, and each reply it ends without a tool
call goes to a simulated user, whose answer is the environment's response, until the user ends the
conversation (`###STOP###`) or its replies run out. The user runs on any OpenAI-compatible endpoint:

```python
env = load_environment(conversation=True, user_base_url="http://127.0.0.1:8001/v1", user_model="Qwen/Qwen2.5-7B-Instruct")
```

or on the command line (`$USER_BASE_URL`, `$USER_MODEL`: the user's endpoint and model; without them the
`ENVFOUNDRY_USER_BASE_URL` and `ENVFOUNDRY_USER_MODEL` variables name it):

```bash
vf-eval {package} -m "$MODEL" --client.base-url "$BASE_URL" --no-push --env.agent.runtime.type subprocess -n 3 --env.taskset.conversation true --env.taskset.user-base-url "$USER_BASE_URL" --env.taskset.user-model "$USER_MODEL"
```

The user's key is read from `$ENVFOUNDRY_USER_API_KEY` (`user_api_key_var` names another variable);
`user_temperature` (default 0) and `user_max_turns` (default 10 replies) tune it. The reward is unchanged:
the verifier on the final database, the agent's last message to the user being the answer. The user's own
mistakes caught by code (a fact given before it was asked for, a value it invented, a tool name or an id,
an early stop) are the metric `user_errors`, apart from the agent's reward; `user_turns` counts its
replies, and `info.envfoundry_user` holds both in full.
"""


POOL_USAGE = """`load_environment(level=3)` builds the dataset from level 3's pool instead of the bank, and `n=5` takes
its first 5 tasks in the sampler's order (the same tasks every time; `n` alone takes the bank's first `n`); a
level with no sampled task, or `n` beyond what the level holds, is an error naming the levels and their sizes. On
the command line: `--env.taskset.level 3 --env.taskset.n 5`. A sampled task's data carries `level` and
`difficulty.axes`; `vf-validate` replays its reference as for the bank's. A sampled task offers only its own tools
(its data's `tools`: those it needs and its level's distractors): its rollout's tool server lists only them and refuses
a call to any other with an error naming them; a task of the bank offers every tool."""


def export_env(ce: CatalogEnv, out: Path, split: dict[str, str], pools: EnvPools | None = None,
               options: ExportOptions | None = None) -> Path:
    options = options or ExportOptions()
    tasks = tasks_with_tools(ce)
    package = package_name(ce.env_id, "envfoundry")
    root = out / package
    pkg = root / package
    title = ce.env.scenario.name
    fill = {"dist": dist_name(package), "env_id": ce.env_id, "title": title, "package": package}
    write_text(root / "pyproject.toml", pyproject(
        {"name": fill["dist"], "version": "0.1.0",
         "description": f"envfoundry environment {ce.env_id} for verifiers: {one_line(title)}",
         "requires-python": ">=3.11", "dependencies": [VERIFIERS_REQUIREMENT]},
        {"packages": [package], "package-data": {package: ["data/*", "data/states/*"]}},
        {"env_id": ce.env_id, "scenario": title},
    ))
    n_val = sum(1 for t in tasks if split[t.task_id] == "val")
    write_text(root / "README.md", README.format(n=len(tasks), n_val=n_val, uv=UV_VERSION, **fill)
               + (readme_section({ce.env_id: pools}, POOL_USAGE) if pools is not None else "")
               + readme_of(options, [ce.env_id]))
    write_text(pkg / "__init__.py", (TEMPLATES / "verifiers_init.py").read_text(encoding="utf-8"))
    write_text(pkg / "toolset.py", (TEMPLATES / "verifiers_toolset.py").read_text(encoding="utf-8"))
    write_runtime(pkg)
    write_bundle(ce, pkg / "data", split)
    if pools is not None:
        write_pool(ce, pools, pkg / "data")
    ship_audit(options, ce.env_id, pkg / "data")
    write_json(pkg / "data" / "export.json", {"env_id": ce.env_id, "system_prompt": system_prompt(ce),
                                              "conversation_system_prompt": conversation_prompt(ce)})
    return root


def export(catalog: Catalog, out: Path, options: ExportOptions) -> list[Path]:
    split = splits(catalog, options.val_fraction)
    return [export_env(ce, out, split, pool_of(options.pools, ce.env_id), options)
            for ce in catalog.envs.values() if ce.tasks]
