"""Environment directories: the on-disk contract trainers and the checker rely on.

An environment directory holds ``env.json`` (the IR, canonical pretty JSON), ``schema.sql``,
``initial.db`` (built from the IR, byte-for-byte deterministic), ``server.py`` (a deterministic
render, see ``pipeline.server``), ``tasks.jsonl`` (one canonical JSON task per line) and
``report.json``; after verification also ``trajectories.jsonl`` (see :mod:`pipeline.catalog.emit`); with rules
(``[stages.build] policy``) also ``policy.md``, the rules for the agent (:func:`policy_markdown`).

:func:`load_env_dir` reads one typed and strictly (errors name the file and line); :func:`read_env_dir_raw`
reads one as plain JSON for the report, where a file that cannot be read becomes a line in ``problems``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline import atomic
from pipeline.catalog.files import TASKS, jsonl_text, pretty_json, read_json, read_jsonl, read_tasks
from pipeline.ir import Environment, Task
from pipeline.runtime import engine
from pipeline.runtime.database import EnvDirError, build_database
from pipeline.server import render_server
from pipeline.settings import format_validation_error
from verify.policy import policy_markdown as policy_markdown

FILES = ("env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl", "report.json")
TRAJECTORIES = "trajectories.jsonl"
POLICY = "policy.md"
TEMPLATES = "templates.json"
"""The LLM's request templates for the sampler (:mod:`pipeline.stages.tasks.templates`); absent: code words every task."""


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
    atomic.write_text(out / TASKS, jsonl_text(tasks))
    atomic.write_text(out / "report.json", pretty_json(report or {}))
    if env.rules:
        atomic.write_text(out / POLICY, policy_markdown(env))
    elif (out / POLICY).is_file():  # the rules of an earlier write are gone
        (out / POLICY).unlink()
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
    tasks = read_tasks(d / TASKS, error=EnvDirError) if (d / TASKS).is_file() else []
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


@dataclass
class RawEnvDir:
    """An environment directory as plain JSON (records of any version load; absent files are empty)."""

    path: Path
    env: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    trajectories: list[dict[str, Any]] = field(default_factory=list)


def read_env_dir_raw(env_dir: Path, problems: list[str], *, trajectories: bool = True) -> RawEnvDir | None:
    """The lenient reader (for the report): ``None`` when ``env.json`` is missing or unreadable; any other
    file that cannot be read, or a bad line of a JSONL file, is reported in ``problems`` and left out."""
    path = env_dir / "env.json"
    if not path.is_file():
        problems.append(f"{env_dir}: no env.json")
        return None
    env = read_json(path, problems)
    if env is None:
        return None
    report = read_json(env_dir / "report.json", problems, {})
    return RawEnvDir(
        path=env_dir,
        env=env if isinstance(env, dict) else {},
        report=report if isinstance(report, dict) else {},
        tasks=read_jsonl(env_dir / TASKS, problems),
        trajectories=read_jsonl(env_dir / TRAJECTORIES, problems) if trajectories else [],
    )
