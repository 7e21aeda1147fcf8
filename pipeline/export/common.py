"""What every export format shares: names, the system prompt, the runtime bundle, file writing.

Every format is written from the same ``Catalog`` (one task bank), so task ids, instructions
and verifiers are identical across formats. Files are written deterministically: same catalog,
same bytes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pipeline.export.catalog import CatalogEnv
from pipeline.hashing import canonical_json
from pipeline.ir import Task

EXPORT_DIR = Path(__file__).parent
ENGINE_SRC = EXPORT_DIR.parent / "runtime" / "engine.py"
TASKRT_SRC = EXPORT_DIR / "taskrt.py"
TEMPLATES = EXPORT_DIR / "templates"


class ExportError(Exception):
    """The catalog cannot be exported in the requested format; the message says why."""


SYSTEM_PROMPT = (
    "You are an agent operating the application '{name}': {description}\n"
    "Use the provided tools to carry out the user's request. Tool results are JSON; a result "
    "starting with 'Error:' means the call changed nothing. Do only what the request asks. "
    "When you are done, reply with a short final message that states any answer the user asked for."
)


def system_prompt(ce: CatalogEnv) -> str:
    s = ce.env.scenario
    return SYSTEM_PROMPT.format(name=s.name, description=s.description.strip())


def package_name(env_id: str, prefix: str) -> str:
    """A Python package name for an environment: ``<prefix>_<env_id>`` (identifier-safe)."""
    name = re.sub(r"[^a-z0-9_]", "_", f"{prefix}_{env_id}".lower())
    return re.sub(r"_+", "_", name).strip("_")


def dist_name(package: str) -> str:
    return package.replace("_", "-")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def task_record(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json")


def write_bundle(ce: CatalogEnv, out: Path) -> Path:
    """The runtime data of one environment: ``env.json``, ``initial.db``, ``tasks.jsonl``."""
    out.mkdir(parents=True, exist_ok=True)
    write_text(
        out / "env.json", json.dumps(ce.env.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    )
    shutil.copyfile(ce.path / "initial.db", out / "initial.db")
    os.chmod(out / "initial.db", 0o644)
    write_text(out / "tasks.jsonl", "".join(canonical_json(t) + "\n" for t in ce.tasks))
    return out


def write_runtime(pkg_dir: Path) -> None:
    """Copy the stdlib runtime (engine + task runtime) into an exported package."""
    write_text(pkg_dir / "engine.py", ENGINE_SRC.read_text(encoding="utf-8"))
    write_text(pkg_dir / "taskrt.py", TASKRT_SRC.read_text(encoding="utf-8"))


def template(name: str, **values: str) -> str:
    """A template file with ``__KEY__`` placeholders filled (unknown placeholders are an error)."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    left = sorted(set(re.findall(r"__[A-Z][A-Z_]+__", text)))
    if left:
        raise ExportError(f"template {name}: placeholders left unfilled: {', '.join(left)}")
    return text


def tasks_with_tools(ce: CatalogEnv) -> list[Task]:
    if not ce.tasks:
        raise ExportError(f"environment {ce.env_id} has no tasks in the task bank")
    return ce.tasks
