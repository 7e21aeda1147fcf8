"""The catalog's file formats: names, the one error type, and the one parser of task JSONL.

Task records are one canonical JSON object per line (``tasks.jsonl`` of an environment directory,
``task_bank.jsonl`` of a catalog). :func:`read_tasks` reads them typed (a bad line is an error naming file,
line and key, or is handed to ``on_error``); :func:`read_jsonl` reads any JSONL leniently, for the report:
a bad line becomes a line in ``problems``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.hashing import canonical_json
from pipeline.ir import Task
from pipeline.settings import format_validation_error

CATALOG_DB = "catalog.db"
TABLES = ("meta", "runs", "seeds", "scenarios", "rejections", "environments", "tasks")
ENVS = "envs"
BANK = "task_bank.jsonl"
TASKS = "tasks.jsonl"


class CatalogError(ValueError):
    """A catalog directory that cannot be used as asked (other config, unreadable database, a bad task bank);
    the message names the file, line or key."""


def pretty_json(obj: Any) -> str:
    """Canonical pretty JSON: sorted keys, two-space indent, UTF-8 kept, trailing newline."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def jsonl_text(records: Iterable[Any]) -> str:
    """One canonical JSON record per line (tasks, trajectories)."""
    return "".join(canonical_json(r) + "\n" for r in records)


def read_tasks(
    path: Path,
    *,
    error: type[ValueError] = CatalogError,
    on_error: Callable[[int, str | None, ValidationError], None] | None = None,
) -> list[Task]:
    """The task records of a JSONL file, typed. A line that is not a valid task raises ``error`` naming
    ``path:line`` and the key; with ``on_error`` it is handed over instead (line number, its ``task_id``
    when the line is a JSON object that has one, the validation error) and reading goes on."""
    tasks = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.model_validate_json(line))
        except ValidationError as exc:
            if on_error is None:
                raise error(format_validation_error(exc, f"{path}:{lineno}: invalid task record")) from exc
            on_error(lineno, _task_id(line), exc)
    return tasks


def _task_id(line: str) -> str | None:
    try:
        value = json.loads(line).get("task_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def read_jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    """Objects of a JSONL file, untyped; a bad line is reported in ``problems`` by file and line and skipped."""
    out: list[dict[str, Any]] = []
    if not path.is_file():
        return out
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            problems.append(f"{path}:{lineno}: not valid JSON ({e})")
            continue
        if isinstance(obj, dict):
            out.append(obj)
        else:
            problems.append(f"{path}:{lineno}: not a JSON object")
    return out


def read_json(path: Path, problems: list[str], default: Any = None) -> Any:
    """A JSON file, untyped; ``default`` when it is absent or (reported in ``problems``) not valid JSON."""
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        problems.append(f"{path}: not valid JSON ({e})")
        return default
