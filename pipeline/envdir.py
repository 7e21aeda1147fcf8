"""Environment directories: the on-disk contract trainers and the checker rely on.

An environment directory holds ``env.json`` (the IR, canonical pretty JSON), ``schema.sql``,
``initial.db`` (built from the IR, byte-for-byte deterministic), ``server.py`` (a deterministic
render, see ``pipeline.render``), ``tasks.jsonl`` (one canonical JSON task per line) and
``report.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline import atomic
from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Task
from pipeline.render import render_server
from pipeline.runtime import engine
from pipeline.runtime.database import EnvDirError as EnvDirError
from pipeline.runtime.database import SeedError as SeedError
from pipeline.runtime.database import build_database as build_database
from pipeline.runtime.instance import EnvInstance
from pipeline.settings import format_validation_error

FILES = ("env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl", "report.json")


def pretty_json(obj: Any) -> str:
    """Canonical pretty JSON: sorted keys, two-space indent, UTF-8 kept, trailing newline."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def create_initial_db(env: Environment, path: str | Path) -> Path:
    """Write the initial database of ``env`` to ``path`` (replaced if present); same IR, same bytes."""
    path = Path(path)
    mem = engine.connect(":memory:")
    try:
        build_database(env, mem)
        with atomic.replacing(path) as tmp:
            mem.execute("VACUUM INTO ?", (str(tmp),))
    finally:
        mem.close()
    return path


def write_env_dir(
    env: Environment, out_dir: str | Path, tasks: Iterable[Task] = (), report: dict[str, Any] | None = None
) -> Path:
    """Write the environment directory (all of ``FILES``); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = list(tasks)
    env_id = env.env_id
    for t in tasks:
        if t.env_id != env_id:
            raise EnvDirError(f"task {t.task_id} belongs to env {t.env_id!r}, not {env_id!r}")
    create_initial_db(env, out / "initial.db")
    atomic.write_text(out / "env.json", pretty_json(env))
    atomic.write_text(out / "schema.sql", f"-- {env_id}: {env.scenario.name}\n" + env.ddl())
    atomic.write_text(out / "server.py", render_server(env))
    atomic.write_text(out / "tasks.jsonl", "".join(canonical_json(t) + "\n" for t in tasks))
    atomic.write_text(out / "report.json", pretty_json(report or {}))
    return out


def load_env_dir(env_dir: str | Path) -> tuple[Environment, list[Task], dict[str, Any]]:
    """Read an environment directory: (Environment, tasks, report). Errors name the file and line."""
    d = Path(env_dir)
    if not (d / "env.json").is_file():
        raise EnvDirError(f"{d}: not an environment directory (no env.json)")
    try:
        env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise EnvDirError(format_validation_error(exc, f"{d / 'env.json'}: invalid environment IR")) from exc
    tasks: list[Task] = []
    tasks_path = d / "tasks.jsonl"
    if tasks_path.is_file():
        for lineno, line in enumerate(tasks_path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                tasks.append(Task.model_validate_json(line))
            except ValidationError as exc:
                raise EnvDirError(format_validation_error(exc, f"{tasks_path}:{lineno}: invalid task record")) from exc
    report: dict[str, Any] = {}
    report_path = d / "report.json"
    if report_path.is_file():
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise EnvDirError(f"{report_path}: not valid JSON: {exc}") from exc
        if not isinstance(report, dict):
            raise EnvDirError(f"{report_path}: must hold a JSON object")
    return env, tasks, report


def open_instance(env_dir: str | Path) -> EnvInstance:
    """An in-process instance of the environment directory ``env_dir`` (its env.json and initial.db)."""
    env, _, _ = load_env_dir(env_dir)
    return EnvInstance(env, Path(env_dir) / "initial.db")
