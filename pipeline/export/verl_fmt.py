"""Export to veRL's multi-turn tool agent loop: parquet rows plus the tool config YAML.

Per environment, ``<out>/<package>/`` holds ``train.parquet`` (one row per task), ``tool_config.yaml``
(``actor_rollout_ref.rollout.multi_turn.tool_config_path``) and an installable package with the
tool class and the reward (``custom_reward_function.path=<package>/tools.py``,
``name=compute_score``). One environment per directory because veRL shows every configured tool
to every prompt.

Row fields (veRL's documented dataset format): ``data_source``, ``prompt`` (chat messages),
``ability``, ``reward_model`` (``style``, ``ground_truth``), ``extra_info`` (``split``, ``index``,
``need_tools_kwargs``, ``tools_kwargs`` with ``create_kwargs`` per tool, plus ``task_id``,
``env_id``, ``kind``), ``agent_name`` (``tool_agent``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    dist_name,
    package_name,
    system_prompt,
    tasks_with_tools,
    write_bundle,
    write_runtime,
    write_text,
)
from pipeline.hashing import canonical_json

ROW_FIELDS = ("data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name")

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "envfoundry environment {env_id} for veRL: tools and reward"
requires-python = ">=3.10"
dependencies = []

[tool.setuptools]
packages = ["{package}"]

[tool.setuptools.package-data]
{package} = ["data/*"]
"""

README = """# {package}

envfoundry environment `{env_id}` ({title}) for veRL's multi-turn tool agent loop: {n} tasks.

```bash
pip install .      # on every veRL worker
python -m verl.trainer.main_ppo \\
  data.train_files=train.parquet data.return_raw_chat=True \\
  actor_rollout_ref.rollout.mode=async actor_rollout_ref.rollout.multi_turn.enable=True \\
  actor_rollout_ref.rollout.multi_turn.format=hermes \\
  actor_rollout_ref.rollout.multi_turn.tool_config_path=tool_config.yaml \\
  custom_reward_function.path={package}/tools.py custom_reward_function.name=compute_score ...
```

The reward replays the response's tool calls on a fresh database and evaluates the task's
verifier (1.0 / 0.0; `extra_info.partial_credit=true` for the share of checks met).
"""


def rows(ce: CatalogEnv) -> list[dict[str, Any]]:
    out = []
    tool_names = [t.name for t in ce.env.tools]
    for index, task in enumerate(tasks_with_tools(ce)):
        out.append(
            {
                "data_source": f"envfoundry/{ce.env_id}",
                "prompt": [
                    {"role": "system", "content": system_prompt(ce)},
                    {"role": "user", "content": task.instruction},
                ],
                "ability": "tool_use",
                "reward_model": {
                    "style": "rule",
                    "ground_truth": canonical_json(
                        {"task_id": task.task_id, "verifier": task.verifier.model_dump(mode="json")}
                    ),
                },
                "extra_info": {
                    "split": "train",
                    "index": index,
                    "task_id": task.task_id,
                    "env_id": task.env_id,
                    "kind": task.kind,
                    "partial_credit": False,
                    "need_tools_kwargs": True,
                    "tools_kwargs": {
                        name: {"create_kwargs": {"task_id": task.task_id}} for name in tool_names
                    },
                },
                "agent_name": "tool_agent",
            }
        )
    return out


def tool_config(ce: CatalogEnv, package: str) -> dict[str, Any]:
    return {
        "tools": [
            {
                "class_name": f"{package}.tools.EnvFoundryTool",
                "config": {"type": "native", "tool": t.name},
                "tool_schema": t.openai_schema(),
            }
            for t in ce.env.tools
        ]
    }


def write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(records)
    pq.write_table(table, path, compression="zstd")


def export_env(ce: CatalogEnv, out: Path) -> Path:
    import yaml

    package = package_name(ce.env_id, "envfoundry_verl")
    root = out / package
    pkg = root / package
    records = rows(ce)
    fill = {
        "dist": dist_name(package),
        "env_id": ce.env_id,
        "package": package,
        "title": ce.env.scenario.name,
    }
    write_text(root / "pyproject.toml", PYPROJECT.format(**fill))
    write_text(root / "README.md", README.format(n=len(records), **fill))
    write_text(pkg / "__init__.py", '"""envfoundry tools and reward for veRL (see tools.py)."""\n')
    write_text(pkg / "tools.py", (TEMPLATES / "verl_tools.py").read_text(encoding="utf-8"))
    write_runtime(pkg)
    write_bundle(ce, pkg / "data")
    write_text(
        root / "tool_config.yaml",
        yaml.safe_dump(tool_config(ce, package), sort_keys=False, allow_unicode=True, width=100),
    )
    write_parquet(records, root / "train.parquet")
    return root


def export(catalog: Catalog, out: Path) -> list[Path]:
    return [export_env(ce, out) for ce in catalog.envs.values() if ce.tasks]
