"""Export to verifiers (PyPI ``verifiers``, v1 API): one installable package per environment.

``<out>/<package>/`` is a source project (``pip install <out>/<package>``) whose package exposes
``load_environment(**kwargs)`` and exports its ``Taskset`` for ``vf-eval <package>``. It depends
only on ``verifiers``: the envfoundry engine and task runtime are copied in, with the
environment's ``env.json``, ``initial.db`` and tasks as package data.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    dist_name,
    package_name,
    system_prompt,
    tasks_with_tools,
    write_bundle,
    write_json,
    write_runtime,
    write_text,
)

VERIFIERS_REQUIREMENT = "verifiers>=0.4.0"

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "envfoundry environment {env_id} for verifiers: {title}"
requires-python = ">=3.11"
dependencies = ["{requirement}"]

[tool.setuptools]
packages = ["{package}"]

[tool.setuptools.package-data]
{package} = ["data/*"]
"""

README = """# {dist}

envfoundry environment `{env_id}` ({title}) as a verifiers environment: {n} tasks.

```bash
pip install .
vf-eval {package} -n 3          # the default harness is a tool-calling chat loop
```

```python
from {package} import load_environment
env = load_environment(partial_credit=False)   # task_ids=[...] selects tasks
```

Each rollout gets its own copy of the initial database (carried in the rollout state); the
reward `task_verified` is 1.0 when the task's verifier holds on the final database (SQL
assertions, unchanged tables outside `mutable_tables`, the expected answer in the final
reply), else 0.0.
"""


def export_env(ce: CatalogEnv, out: Path) -> Path:
    tasks = tasks_with_tools(ce)
    package = package_name(ce.env_id, "envfoundry")
    root = out / package
    pkg = root / package
    title = ce.env.scenario.name
    fill = {"dist": dist_name(package), "env_id": ce.env_id, "title": title, "package": package}
    write_text(root / "pyproject.toml", PYPROJECT.format(requirement=VERIFIERS_REQUIREMENT, **fill))
    write_text(root / "README.md", README.format(n=len(tasks), **fill))
    write_text(pkg / "__init__.py", (TEMPLATES / "verifiers_init.py").read_text(encoding="utf-8"))
    write_text(pkg / "toolset.py", (TEMPLATES / "verifiers_toolset.py").read_text(encoding="utf-8"))
    write_runtime(pkg)
    write_bundle(ce, pkg / "data")
    write_json(pkg / "data" / "export.json", {"env_id": ce.env_id, "system_prompt": system_prompt(ce)})
    return root


def export(catalog: Catalog, out: Path) -> list[Path]:
    return [export_env(ce, out) for ce in catalog.envs.values() if ce.tasks]
