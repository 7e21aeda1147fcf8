"""Export to OpenEnv (PyPI ``openenv-core``): one environment directory per environment.

``<out>/<package>/`` follows the layout of ``openenv init``: ``openenv.yaml``, ``pyproject.toml``
(``server`` script), ``server/app.py`` (``create_app`` over ``EnvFoundryEnvironment``) and
``server/environment.py``. Actions are OpenEnv's MCP actions (``CallToolAction`` /
``ListToolsAction``); a ``submit`` tool ends the episode and carries the verifier's reward. The
engine, task runtime and the environment's data are copied in, so it needs only
``openenv-core``.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportError,
    dist_name,
    package_name,
    system_prompt,
    tasks_with_tools,
    write_bundle,
    write_json,
    write_runtime,
    write_text,
)

OPENENV_REQUIREMENT = "openenv-core>=0.3.0"
RESERVED = {"reset", "step", "state", "close"}

OPENENV_YAML = """spec_version: 1
name: {package}
type: space
runtime: fastapi
app: server.app:app
port: 8000
"""

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "envfoundry environment {env_id} for OpenEnv: {title}"
requires-python = ">=3.10"
dependencies = ["{requirement}", "uvicorn"]

[project.scripts]
server = "{package}.server.app:main"

[tool.setuptools]
packages = ["{package}", "{package}.server"]
package-dir = {{ "{package}" = ".", "{package}.server" = "server" }}

[tool.setuptools.package-data]
{package} = ["data/*", "openenv.yaml"]
"""

README = """# {package}

envfoundry environment `{env_id}` ({title}) as an OpenEnv environment: {n} tasks.

```bash
uvicorn server.app:app --port 8000          # from this directory, or after `pip install .`:
python -m {package}.server.app --port 8000
```

```python
from openenv.core import GenericEnvClient
with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
    obs = env.reset(task_id="<task_id>").observation          # instruction + tools
    env.step({{"type": "call_tool", "tool_name": "...", "arguments": {{...}}}})
    result = env.step({{"type": "call_tool", "tool_name": "{submit}", "arguments": {{"answer": "..."}}}})
    result.reward, result.done                                  # the verifier's verdict
```

Tools: {tools}. Task ids: `data/tasks.jsonl`.
"""

SUBMIT_DESCRIPTION = (
    "Finish the task. Call it once, after your last change; pass your answer when the request asks a question. "
    "The episode ends and is scored."
)


def submit_tool_name(tool_names: set[str]) -> str:
    name = "submit"
    while name in tool_names:
        name += "_task"
    return name


def export_env(ce: CatalogEnv, out: Path) -> Path:
    tasks = tasks_with_tools(ce)
    names = {t.name for t in ce.env.tools}
    clash = names & RESERVED
    if clash:
        raise ExportError(f"environment {ce.env_id}: tool names {sorted(clash)} are reserved by OpenEnv")
    submit = submit_tool_name(names)
    package = package_name(ce.env_id, "envfoundry_openenv")
    root = out / package
    title = ce.env.scenario.name
    fill = {"dist": dist_name(package), "env_id": ce.env_id, "title": title, "package": package}
    write_text(root / "openenv.yaml", OPENENV_YAML.format(package=package))
    write_text(root / "pyproject.toml", PYPROJECT.format(requirement=OPENENV_REQUIREMENT, **fill))
    write_text(
        root / "README.md", README.format(n=len(tasks), submit=submit, tools=", ".join(sorted(names)), **fill)
    )
    write_text(root / "__init__.py", '"""envfoundry environment for OpenEnv (see README.md)."""\n')
    write_text(root / "server" / "__init__.py", "")
    write_text(root / "server" / "app.py", (TEMPLATES / "openenv_app.py").read_text(encoding="utf-8"))
    write_text(
        root / "server" / "environment.py", (TEMPLATES / "openenv_environment.py").read_text(encoding="utf-8")
    )
    write_runtime(root)
    write_bundle(ce, root / "data")
    write_json(
        root / "data" / "export.json",
        {
            "env_id": ce.env_id,
            "name": package,
            "description": f"{title}: {ce.env.scenario.description}",
            "system_prompt": system_prompt(ce),
            "schemas": {t.name: t.input_schema() for t in ce.env.tools},
            "submit_tool": submit,
            "submit_description": SUBMIT_DESCRIPTION,
            "submit_schema": {
                "type": "object",
                "properties": {
                    "answer": {
                        "type": "string",
                        "description": "Your answer, when the request asks a question",
                    }
                },
                "required": [],
                "additionalProperties": False,
            },
        },
    )
    return root


def export(catalog: Catalog, out: Path) -> list[Path]:
    return [export_env(ce, out) for ce in catalog.envs.values() if ce.tasks]
