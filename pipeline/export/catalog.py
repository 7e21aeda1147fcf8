"""Reading a catalog for export: its environments and the one task bank every format comes from.

A catalog directory holds ``envs/<env_id>/`` environment directories (see ``pipeline.envdir``)
and optionally ``task_bank.jsonl`` (the verified bank across environments) and ``catalog.db``.
The task bank is ``task_bank.jsonl`` when present, else the union of the environments'
``tasks.jsonl`` files. Every task must name an environment of the catalog and only use its tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from pipeline.envdir import EnvDirError, load_env_dir
from pipeline.ir import Environment, Task
from pipeline.settings import format_validation_error


class CatalogError(Exception):
    """A catalog that cannot be exported; the message names the file, line or key."""


@dataclass
class CatalogEnv:
    env: Environment
    path: Path
    tasks: list[Task] = field(default_factory=list)

    @property
    def env_id(self) -> str:
        return self.env.env_id


@dataclass
class Catalog:
    root: Path
    envs: dict[str, CatalogEnv]
    bank_source: str
    """Where the task bank came from: ``task_bank.jsonl`` or ``envs/*/tasks.jsonl``."""

    @property
    def tasks(self) -> list[Task]:
        return [t for e in self.envs.values() for t in e.tasks]


def _read_bank(path: Path) -> list[Task]:
    tasks = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            tasks.append(Task.model_validate_json(line))
        except ValidationError as exc:
            raise CatalogError(format_validation_error(exc, f"{path}:{lineno}: invalid task record")) from exc
    return tasks


def _check_task(task: Task, env: Environment, where: str) -> None:
    names = {t.name for t in env.tools}
    for i, call in enumerate(task.reference_solution):
        if call.tool not in names:
            raise CatalogError(
                f"{where}: task {task.task_id} reference_solution[{i}] calls unknown tool {call.tool!r} "
                f"(env {env.env_id} has {', '.join(sorted(names))})"
            )
    expected = Task.make_id(task.env_id, task.instruction, task.reference_solution, task.verifier)
    if task.task_id != expected:
        raise CatalogError(
            f"{where}: task_id {task.task_id} is not the content hash of the task ({expected})"
        )


def load_catalog(root: str | Path) -> Catalog:
    """Load ``root`` (a catalog directory) with its task bank; raises ``CatalogError``."""
    root = Path(root)
    envs_dir = root / "envs"
    if not envs_dir.is_dir():
        raise CatalogError(f"{root}: not a catalog (no envs/ directory)")
    envs: dict[str, CatalogEnv] = {}
    env_tasks: dict[str, list[Task]] = {}
    for d in sorted(p for p in envs_dir.iterdir() if p.is_dir()):
        try:
            env, tasks, _report = load_env_dir(d)
        except EnvDirError as exc:
            raise CatalogError(str(exc)) from exc
        if env.env_id in envs:
            raise CatalogError(f"{d}: environment {env.env_id} also in {envs[env.env_id].path}")
        envs[env.env_id] = CatalogEnv(env=env, path=d)
        env_tasks[env.env_id] = tasks
    if not envs:
        raise CatalogError(f"{envs_dir}: no environment directories")
    bank = root / "task_bank.jsonl"
    if bank.is_file():
        source = "task_bank.jsonl"
        pairs = [(t, f"{bank}") for t in _read_bank(bank)]
    else:
        source = "envs/*/tasks.jsonl"
        pairs = [(t, f"{envs[e].path / 'tasks.jsonl'}") for e, ts in env_tasks.items() for t in ts]
    seen: set[str] = set()
    for task, where in pairs:
        if task.env_id not in envs:
            raise CatalogError(f"{where}: task {task.task_id} names env {task.env_id!r}, not in {envs_dir}")
        if task.task_id in seen:
            raise CatalogError(f"{where}: duplicate task_id {task.task_id}")
        seen.add(task.task_id)
        _check_task(task, envs[task.env_id].env, where)
        envs[task.env_id].tasks.append(task)
    for e in envs.values():
        e.tasks.sort(key=lambda t: t.task_id)
    return Catalog(root=root, envs=envs, bank_source=source)
