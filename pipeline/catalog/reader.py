"""The environments of a catalog directory with the task bank: the one typed reader of both.

The task bank is ``task_bank.jsonl`` when present, else the union of the environments' ``tasks.jsonl``.
By default (a run, ``catalog``, every export) each task must name an environment of the catalog by its env
id and only use its tools, task ids are unique and are the content hashes of their tasks, and an
environment's tasks are sorted by task id.

``by_dir=True`` is what ``envfoundry eval`` reads, directories that may have been edited by hand: the root
may be one environment directory (its ``tasks.jsonl``, never a bank); directories under ``envs/`` without
``env.json`` are skipped; a task names its environment by env id or by directory name, and a task of a
``tasks.jsonl`` that names neither belongs to the directory it was read from and is given that directory's
name as its env id (the id it was written with, before ``env.json`` changed); the tool and task-id checks
are left out (a changed task is measured as it is) and tasks keep their file order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.catalog.env_dir import load_env_dir
from pipeline.catalog.files import BANK, ENVS, TASKS, CatalogError, read_tasks
from pipeline.ir import Environment, Task
from pipeline.runtime.database import EnvDirError


@dataclass
class CatalogEnv:
    """One environment of a catalog with its tasks from the task bank."""

    env: Environment
    path: Path
    tasks: list[Task] = field(default_factory=list)

    @property
    def env_id(self) -> str:
        return self.env.env_id


def read_task_bank(path: str | Path) -> list[Task]:
    """Tasks from a ``task_bank.jsonl`` (or a directory holding one); errors name the file, line and key."""
    p = Path(path)
    return read_tasks(p / BANK if p.is_dir() else p)


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
        raise CatalogError(f"{where}: task_id {task.task_id} is not the content hash of the task ({expected})")


def _env_dirs(root: Path, by_dir: bool) -> list[Path]:
    if by_dir and (root / "env.json").is_file():
        return [root]
    envs_dir = root / ENVS
    neither = f"{root}: neither an environment directory (env.json) nor a catalog (envs/*/env.json)"
    if not envs_dir.is_dir():
        raise CatalogError(neither if by_dir else f"{root}: not a catalog (no envs/ directory)")
    dirs = sorted(p for p in envs_dir.iterdir() if p.is_dir() and (not by_dir or (p / "env.json").is_file()))
    if not dirs:
        raise CatalogError(neither if by_dir else f"{envs_dir}: no environment directories")
    return dirs


def read_envs(root: str | Path, *, by_dir: bool = False) -> tuple[dict[str, CatalogEnv], str]:
    """The environments of ``root`` by env id, each with its tasks, and where the task bank came from
    (``task_bank.jsonl`` or ``envs/*/tasks.jsonl``); raises :class:`CatalogError` naming the file and line."""
    root = Path(root)
    dirs = _env_dirs(root, by_dir)
    envs: dict[str, CatalogEnv] = {}
    read: list[tuple[CatalogEnv, list[Task]]] = []
    for d in dirs:
        try:
            env, tasks, _report = load_env_dir(d)
        except EnvDirError as exc:
            raise CatalogError(str(exc)) from exc
        if env.env_id in envs:
            raise CatalogError(f"{d}: environment {env.env_id} also in {envs[env.env_id].path}")
        envs[env.env_id] = CatalogEnv(env=env, path=d)
        read.append((envs[env.env_id], tasks))
    bank = root / BANK
    homes: list[CatalogEnv | None]
    if dirs != [root] and bank.is_file():
        source = BANK
        tasks = read_task_bank(bank)
        wheres, homes = [str(bank)] * len(tasks), [None] * len(tasks)
    else:
        source = f"{ENVS}/*/{TASKS}"
        tasks = [t for _, ts in read for t in ts]
        wheres = [str(ce.path / TASKS) for ce, ts in read for _ in ts]
        homes = [ce for ce, ts in read for _ in ts]
    named = {ce.path.name: ce for ce in envs.values()} if by_dir else {}
    seen: set[str] = set()
    for task, where, home in zip(tasks, wheres, homes, strict=True):
        ce = envs.get(task.env_id) or named.get(task.env_id)
        if ce is None and by_dir and home is not None:
            task, ce = task.model_copy(update={"env_id": home.path.name}), home
        if ce is None:
            raise CatalogError(f"{where}: task {task.task_id} names env {task.env_id!r}, not in {root / ENVS}")
        if not by_dir:
            if task.task_id in seen:
                raise CatalogError(f"{where}: duplicate task_id {task.task_id}")
            seen.add(task.task_id)
            _check_task(task, ce.env, where)
        ce.tasks.append(task)
    if not by_dir:
        for ce in envs.values():
            ce.tasks.sort(key=lambda t: t.task_id)
    return envs, source
