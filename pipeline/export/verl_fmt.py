"""Export to veRL's multi-turn tool agent loop (veRL 0.9.x): one dataset over every environment.

``<out>/<package>/`` holds ``train.parquet`` and ``val.parquet`` (one row per task, split by
task-id hash), ``tool_config.yaml`` (``actor_rollout_ref.rollout.multi_turn.tool_config_path``:
every tool of every environment) and an installable package with the tool class and the reward
(``reward.custom_reward_function.path=pkg://<package>.tools``, ``name=compute_score``). The tool
engine, the reward (``pipeline/runtime/reward.py``) and the task runtime are vendored; each environment's
data sits in ``<package>/data/<env_id>/``.

Row fields (veRL's documented dataset format): ``data_source`` (``envfoundry/<env_id>``),
``prompt`` (system + user messages), ``ability``, ``reward_model`` (``style``, ``ground_truth``),
``extra_info`` (``split``, ``index``, ``task_id``, ``env_id``, ``kind``, ``tier``, ``pass_rate``,
``partial_credit``, ``need_tools_kwargs``, ``tools_kwargs`` with ``create_kwargs`` per tool, and
``tool_selection``: the row's own environment's tools, which veRL alone shows and dispatches),
``agent_name`` (``tool_agent``). A tool name used by two environments is exposed as
``<env_id>__<tool>`` for both (veRL keys tools by name).

Conversations: ``train_conversation.parquet`` and ``val_conversation.parquet`` hold the same tasks in their
conversational form (``prompt``: the conversational system prompt and the user's opening line; ``agent_name``:
``envfoundry_conversation``; ``extra_info.interaction_kwargs``: ``task_id``, ``env_id``), played by the package's
``conversation.EnvFoundryConversationLoop`` (veRL 0.9 has no interaction interface any more: a conversation is an
agent loop), registered with the user's endpoint by ``agent_loop.yaml``
(``actor_rollout_ref.rollout.agent.agent_loop_config_path``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.export.audit import readme_of, ship_audit
from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportError,
    ExportOptions,
    conversation_form,
    conversation_prompt,
    difficulty_info,
    dist_name,
    package_name,
    pyproject,
    refusals,
    splits,
    system_prompt,
    write_bundle,
    write_runtime,
    write_text,
)
from pipeline.export.pools import POOL_SPLIT, EnvPools, pool_of, readme_section, write_pool
from pipeline.hashing import canonical_json
from pipeline.ir import Task
from pipeline.runtime.schemas import described_tools

ROW_FIELDS = ("data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name")
MAX_TOOL_NAME = 64

README = """# {package}

{n_envs} envfoundry environment(s) for veRL's multi-turn tool agent loop (veRL 0.9.x): {n_train}
training and {n_val} validation tasks in one dataset. Each row selects its own environment's tools
(`extra_info.tool_selection`); the reward is the task's verifier on the trajectory's own final
database (the tool calls' effects, whatever the tool-call format), scored by envfoundry's
`pipeline/runtime/reward.py` (vendored, stdlib only).

```bash
pip install .      # on every veRL worker (no dependencies besides veRL itself)
python -m verl.trainer.main_ppo \\
  data.train_files=train.parquet data.val_files=val.parquet data.return_raw_chat=True \\
  actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.multi_turn.enable=True \\
  actor_rollout_ref.rollout.multi_turn.format=hermes \\
  actor_rollout_ref.rollout.multi_turn.tool_config_path=tool_config.yaml \\
  reward.custom_reward_function.path=pkg://{package}.tools \\
  reward.custom_reward_function.name=compute_score ...
```

`multi_turn.format` is the model's tool-call format (`hermes` for Qwen2.5, `qwen3_coder` for
Qwen3-Coder, ...): the reward does not depend on it. `compute_score` returns `score` (1.0 / 0.0;
`extra_info.partial_credit=true` for the share of goals met), `acc` and `goals_met`. Rows carry
`extra_info.split`, `extra_info.tier` (1 to 3) and `extra_info.pass_rate` (the share of envfoundry's
test attempts that passed, null when none ran) for curricula, and `extra_info.refusal_rules`: the ids of the
rules that refuse part of the task's request (empty for most tasks; each refused write, with its rule's message,
is in `task_info.json`'s `refusals`). Tool arguments that are not a JSON
object (`"a string"`, a list) are refused with an `Error: ...` result naming what was sent.
{val_note}
Environments: {envs}.

## Conversations

Every task also has a conversational form: the user opens with a vague request and gives each detail only
when asked (each task record's `conversation` in `{package}/data/<env_id>/tasks.jsonl`).
`train_conversation.parquet` and `val_conversation.parquet` hold the same tasks with the user's opening line
as the prompt, played by the agent loop `envfoundry_conversation` (`{package}.conversation`): veRL's tool
agent loop, where a reply without tool calls goes to a simulated user whose answer comes back as the next
user turn (masked out of the loss, as tool results are), until the user ends the conversation
(`###STOP###`). veRL 0.9 removed its interaction interface (`BaseInteraction`,
`multi_turn.interaction_config_path`); a conversation is an agent loop, registered by `agent_loop.yaml` and
chosen by each row's `agent_name`. `agent_loop.yaml` names the user's OpenAI-compatible endpoint
(`user_base_url`, `user_model`; left null, they are read from `ENVFOUNDRY_USER_BASE_URL` and
`ENVFOUNDRY_USER_MODEL`; the key from the variable `user_api_key_var` names, `ENVFOUNDRY_USER_API_KEY`):

```bash
export ENVFOUNDRY_USER_BASE_URL=http://127.0.0.1:8001/v1 ENVFOUNDRY_USER_MODEL=Qwen/Qwen2.5-7B-Instruct
python -m verl.trainer.main_ppo \
  data.train_files=train_conversation.parquet data.val_files=val_conversation.parquet data.return_raw_chat=True \
  actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.multi_turn.enable=True \
  actor_rollout_ref.rollout.multi_turn.format=hermes \
  actor_rollout_ref.rollout.multi_turn.tool_config_path=tool_config.yaml \
  actor_rollout_ref.rollout.agent.agent_loop_config_path=agent_loop.yaml \
  reward.custom_reward_function.path=pkg://{package}.tools \
  reward.custom_reward_function.name=compute_score ...
```

The reward is unchanged: the trajectory's final database, the agent's last message to the user being the
answer. `compute_score` also returns `user_turns` and `user_errors`: the user's own mistakes caught by code
(a fact given before it was asked for, a value it invented, a tool name or an id, an early stop), apart
from the score. `user_max_turns` (default 10) caps the user's replies; `multi_turn.max_user_turns` caps the
user and tool turns together, as in the tool agent loop.
"""

AGENT_LOOP_NAME = "envfoundry_conversation"

POOL_USAGE = """Per level, one training file: {files}; a level that holds no sampled task has no file. Each row is
a sampled task (`extra_info.level`; `extra_info.tool_selection` shows the tools the task offers: those it needs and
the level's distractors), scored by the same `compute_score`. A curriculum trains on them in order, e.g.
`data.train_files=train_level2.parquet`, then level 3 once the reward passes 0.7."""


def exposed_names(catalog: Catalog) -> dict[tuple[str, str], str]:
    """``{(env_id, tool): name shown to the model}``: the tool's own name, or ``<env_id>__<tool>``
    when another environment of the catalog has a tool of that name."""
    envs = [ce for ce in catalog.envs.values() if ce.tasks]
    counts = Counter(t.name for ce in envs for t in ce.env.tools)
    out = {}
    for ce in envs:
        for t in ce.env.tools:
            name = t.name if counts[t.name] == 1 else f"{ce.env_id}__{t.name}"
            if len(name) > MAX_TOOL_NAME:
                raise ExportError(
                    f"environment {ce.env_id}: tool {t.name} is also in another environment and its qualified "
                    f"name {name!r} exceeds {MAX_TOOL_NAME} characters"
                )
            out[(ce.env_id, t.name)] = name
    return out


def task_row(ce: CatalogEnv, task: Task, part: str, index: int, selection: list[str]) -> dict[str, Any]:
    """One dataset row: ``task`` of ``ce`` in split ``part``, at ``index``, showing the tools of ``selection``."""
    info = difficulty_info(task)
    return {
        "data_source": f"envfoundry/{ce.env_id}",
        "prompt": [
            {"role": "system", "content": system_prompt(ce)},
            {"role": "user", "content": task.instruction},
        ],
        "ability": "tool_use",
        "reward_model": {
            "style": "rule",
            "ground_truth": canonical_json(
                {
                    "task_id": task.task_id,
                    "env_id": task.env_id,
                    "verifier": task.verifier.model_dump(mode="json"),
                }
            ),
        },
        "extra_info": {
            "split": part,
            "index": index,
            "task_id": task.task_id,
            "env_id": task.env_id,
            "kind": task.kind,
            "tier": info["tier"],
            "pass_rate": info["pass_rate"],
            "partial_credit": False,
            "need_tools_kwargs": True,
            "tools_kwargs": {
                name: {"create_kwargs": {"task_id": task.task_id, "env_id": task.env_id}} for name in selection
            },
            "tool_selection": selection,
            "refusal_rules": [r["rule"] for r in refusals(ce, task)],
        },
        "agent_name": "tool_agent",
    }


def rows(catalog: Catalog, split: dict[str, str], names: dict[tuple[str, str], str]) -> dict[str, list[dict]]:
    out: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    for ce in catalog.envs.values():
        selection = [names[(ce.env_id, t.name)] for t in ce.env.tools]
        for task in ce.tasks:
            part = split[task.task_id]
            out[part].append(task_row(ce, task, part, len(out[part]), selection))
    return out


def level_rows(catalog: Catalog, pools: Mapping[str, EnvPools], names: dict[tuple[str, str], str]
               ) -> dict[int, list[dict]]:
    """``{level: rows}``: every environment's sampled tasks of that level, training rows (``extra_info.level``);
    each row shows the tools its task offers (those it needs and the level's distractors)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for ce in catalog.envs.values():
        env_pools = pool_of(pools, ce.env_id) if ce.tasks else None
        if env_pools is None:
            continue
        for level, lp in sorted(env_pools.levels.items()):
            for task in lp.tasks:
                offered = {t["function"]["name"] for t in task.tools}
                selection = [names[(ce.env_id, t.name)] for t in ce.env.tools if t.name in offered]
                part = out.setdefault(level, [])
                row = task_row(ce, task, POOL_SPLIT, len(part), selection)
                part.append({**row, "extra_info": {**row["extra_info"], "level": level}})
    return out


def conversation_rows(catalog: Catalog, data: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The rows of ``data`` in their tasks' conversational form: the conversational system prompt and the user's
    opening line as the prompt, the conversation agent loop, and ``extra_info.interaction_kwargs``."""
    envs = {ce.env_id: ce for ce in catalog.envs.values()}
    tasks = {t.task_id: t for ce in envs.values() for t in ce.tasks}
    out: dict[str, list[dict[str, Any]]] = {}
    for part, rs in data.items():
        out[part] = []
        for r in rs:
            extra = r["extra_info"]
            ce = envs[extra["env_id"]]
            conv = conversation_form(ce, tasks[extra["task_id"]])
            out[part].append({
                **r,
                "prompt": [{"role": "system", "content": conversation_prompt(ce)},
                           {"role": "user", "content": conv["opening"]}],
                "extra_info": {**extra, "interaction_kwargs": {"name": "envfoundry_user", "task_id": extra["task_id"],
                                                               "env_id": extra["env_id"]}},
                "agent_name": AGENT_LOOP_NAME,
            })
    return out


def agent_loop_config(package: str) -> list[dict[str, Any]]:
    """``agent_loop.yaml``: the conversation agent loop and the simulated user's endpoint (null: from
    ``ENVFOUNDRY_USER_*``)."""
    return [{"name": AGENT_LOOP_NAME, "_target_": f"{package}.conversation.EnvFoundryConversationLoop",
             "user_base_url": None, "user_model": None, "user_api_key_var": "ENVFOUNDRY_USER_API_KEY",
             "user_temperature": None, "user_max_turns": 10}]


def tool_config(catalog: Catalog, package: str, names: dict[tuple[str, str], str]) -> dict[str, Any]:
    tools = []
    for ce in catalog.envs.values():
        if not ce.tasks:
            continue
        for t in described_tools(ce.env):
            schema = t.openai_schema()
            schema["function"]["name"] = names[(ce.env_id, t.name)]
            tools.append(
                {
                    "class_name": f"{package}.tools.EnvFoundryTool",
                    "config": {"type": "native", "env_id": ce.env_id, "tool": t.name},
                    "tool_schema": schema,
                }
            )
    return {"tools": tools}


def write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), path, compression="zstd")


def export(catalog: Catalog, out: Path, options: ExportOptions) -> list[Path]:
    import yaml

    envs: list[CatalogEnv] = [ce for ce in catalog.envs.values() if ce.tasks]
    split = splits(catalog, options.val_fraction)
    names = exposed_names(catalog)
    package = package_name(catalog.root.resolve().name or "catalog", "envfoundry_verl")
    root = out / package
    pkg = root / package
    data = rows(catalog, split, names)
    val_note = ""
    if not data["val"]:
        # Every environment has a single task: nothing can be held out, so validation re-uses them.
        data["val"] = [{**r, "extra_info": {**r["extra_info"], "split": "val"}} for r in data["train"]]
        val_note = "\n`val.parquet` repeats the training tasks: no environment has two tasks to hold one out.\n"
    write_text(root / "pyproject.toml", pyproject(
        {"name": dist_name(package), "version": "0.1.0",
         "description": f"envfoundry environments for veRL: tools and reward ({len(envs)} environments)",
         "requires-python": ">=3.10", "dependencies": []},
        {"packages": [package], "package-data": {package: ["data/*/*", "data/*/states/*"]}},
    ))
    by_level = level_rows(catalog, options.pools, names) if options.pools is not None else {}
    pool_note = ""
    if options.pools is not None:
        files = ", ".join(f"`train_level{lvl}.parquet` ({len(r)} rows)" for lvl, r in sorted(by_level.items()))
        pool_note = readme_section({ce.env_id: options.pools[ce.env_id] for ce in envs if pool_of(options.pools, ce.env_id)},
                                   POOL_USAGE.format(
            files=files or "none (no level holds a sampled task)"))
    write_text(
        root / "README.md",
        README.format(
            package=package,
            n_envs=len(envs),
            n_train=len(data["train"]),
            n_val=len(data["val"]),
            val_note=val_note,
            envs=", ".join(f"`{ce.env_id}` ({ce.env.scenario.name})" for ce in envs),
        ) + pool_note + readme_of(options, [ce.env_id for ce in envs]),
    )
    write_text(pkg / "__init__.py", '"""envfoundry tools and reward for veRL (see tools.py)."""\n')
    write_text(pkg / "tools.py", (TEMPLATES / "verl_tools.py").read_text(encoding="utf-8"))
    write_text(pkg / "conversation.py", (TEMPLATES / "verl_conversation.py").read_text(encoding="utf-8"))
    write_runtime(pkg)
    for ce in envs:
        write_bundle(ce, pkg / "data" / ce.env_id, split)
        env_pools = pool_of(options.pools, ce.env_id)
        if env_pools is not None:
            write_pool(ce, env_pools, pkg / "data" / ce.env_id)
        ship_audit(options, ce.env_id, pkg / "data" / ce.env_id)
    write_text(
        root / "tool_config.yaml",
        yaml.safe_dump(tool_config(catalog, package, names), sort_keys=False, allow_unicode=True, width=100),
    )
    write_parquet(data["train"], root / "train.parquet")
    write_parquet(data["val"], root / "val.parquet")
    for level, level_data in sorted(by_level.items()):
        write_parquet(level_data, root / f"train_level{level}.parquet")
    talk = conversation_rows(catalog, data)
    write_parquet(talk["train"], root / "train_conversation.parquet")
    write_parquet(talk["val"], root / "val_conversation.parquet")
    write_text(root / "agent_loop.yaml", yaml.safe_dump(agent_loop_config(package), sort_keys=False, width=100))
    return [root]
