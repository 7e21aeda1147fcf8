"""Sampled tasks by level in the exports (``envfoundry export --sample-per-level N``).

At export time the sampler (:func:`pipeline.sampler.sample`, no LLM) runs per environment and per level
(:data:`pipeline.sampler.LEVELS`) and the proved tasks it finds become that level's *pool*, shipped in the
export beside the bank; the planner and the sampler are not vendored. Tasks of the bank are never in a pool (the
sampler excludes them), nor is a task of one level in another's (each level's sampling excludes the levels sampled
before it). Same catalog, ``n`` and ``seed``: the same pools, byte for byte.

Each environment's bundle (``data/`` beside ``tasks.jsonl``) then holds ``pool.jsonl`` (the pool's task records,
each with its ``conversation`` as in ``tasks.jsonl``; ``metadata.level`` is the level) and ``pool.json``:
``{"n_per_level", "seed", "sampler", "levels": {"<level>": {"found", "exhausted", "summary", "task_ids"},
...}, "info": {task_id: task_info}}``, ``summary`` being the sampler's own closing line (it says when a level
holds fewer than ``n``).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import ExportError, exported_record, task_info, write_json, write_text
from pipeline.hashing import canonical_json
from pipeline.ir import Task

POOL_FILE = "pool.jsonl"
POOL_MANIFEST = "pool.json"
STATES_DIR = "states"
"""Where an export stores the perturbed states its pool tasks play on, each once, named by its SHA-256."""
POOL_SPLIT = "train"
"""The split a pool task carries (pools are for training; the bank's val split stays the held-out set)."""


@dataclass(frozen=True)
class LevelPool:
    level: int
    tasks: tuple[Task, ...]
    exhausted: bool
    summary: str
    """The sampler's closing line (how many it found; when fewer than asked, that the environment holds no more)."""


@dataclass(frozen=True)
class EnvPools:
    env_id: str
    n: int
    seed: int
    levels: Mapping[int, LevelPool]
    states: Mapping[str, Path] = field(default_factory=dict)
    """With ``perturb``: task_id -> the perturbed database the task was sampled on (its own initial state)."""
    workdir: Any = None
    """The temporary directory holding those databases (removed when these pools are dropped)."""

    @property
    def perturbed(self) -> bool:
        return bool(self.states)

    def describe(self) -> str:
        """One line: how many distinct tasks each level holds."""
        parts = [f"level {lvl}: {len(p.tasks)}" + (" (all the environment holds)" if p.exhausted and
                                                    len(p.tasks) < self.n else "")
                 for lvl, p in sorted(self.levels.items())]
        return f"{self.env_id}: {self.n} asked per level (seed {self.seed}); " + ", ".join(parts)


def sample_env_pools(ce: CatalogEnv, n: int, seed: int = 0, perturb: bool = False) -> EnvPools:
    """Up to ``n`` proved tasks of ``ce`` at each level, none of the bank's, none repeated across levels. ``perturb``:
    each sampler round runs on a perturbed copy of ``initial.db`` (``envfoundry sample --perturb``), and every task
    plays on the state it was sampled on (``EnvPools.states``)."""
    from pipeline.catalog.env_dir import TEMPLATES
    from pipeline.sampler import LEVELS, Want, sample  # the planner: imported only when sampling
    from pipeline.stages.tasks.templates import read_templates

    if n < 1:
        raise ExportError(f"sample per level must be 1 or more, not {n}")
    db = ce.path / "initial.db"
    if not db.is_file():
        raise ExportError(f"{db}: missing (needed to sample tasks for environment {ce.env_id})")
    try:
        templates = read_templates(ce.path / TEMPLATES)
    except ValueError as e:
        raise ExportError(str(e)) from None
    levels: dict[int, LevelPool] = {}
    earlier: list[Task] = []
    workdir = tempfile.TemporaryDirectory(prefix="envfoundry-states-") if perturb else None
    for level in LEVELS:
        got = sample(ce.env, n, seed=seed, initial_db=db, want=Want(level=level), bank=ce.tasks, exclude=earlier,
                     templates=templates, perturb_dir=workdir.name if workdir is not None else None)
        levels[level] = LevelPool(level, tuple(got.tasks), got.exhausted, got.summary())
        earlier += got.tasks
    states: dict[str, Path] = {}
    if workdir is not None:
        for task in earlier:
            made = task.metadata.get("perturb") or {}
            path = Path(workdir.name) / str(made.get("db"))
            if not made.get("db") or not path.is_file():
                raise ExportError(f"task {task.task_id}: sampled on a perturbed state whose database "
                                  f"{made.get('db')!r} is missing")
            states[task.task_id] = path
    return EnvPools(ce.env_id, n, seed, levels, states, workdir)


def sample_pools(catalog: Catalog, n: int, seed: int = 0, perturb: bool = False) -> dict[str, EnvPools]:
    """:func:`sample_env_pools` for every environment of ``catalog`` with tasks in the bank (the ones exported)."""
    return {ce.env_id: sample_env_pools(ce, n, seed, perturb) for ce in catalog.envs.values() if ce.tasks}


def pool_of(pools: Mapping[str, EnvPools] | None, env_id: str) -> EnvPools | None:
    """The pools of ``env_id`` (None when the export has none); pools given for another catalog are an error."""
    if pools is None:
        return None
    if env_id not in pools:
        raise ExportError(f"no sampled pool for environment {env_id} (pools were sampled for {sorted(pools)})")
    return pools[env_id]


def pool_info(task: Task, ce: CatalogEnv | None = None) -> dict[str, Any]:
    """What the exports carry per pool task (as ``task_info.json`` per bank task), with its ``level`` and
    ``axes``."""
    meta = task.metadata.as_dict()
    return {**task_info(task, POOL_SPLIT, ce), "level": meta.get("level"), "axes": meta.get("axes"), "sampled": True}


def write_pool(ce: CatalogEnv, pools: EnvPools, out: Path) -> None:
    """``pool.jsonl`` and ``pool.json`` of one environment in its bundle directory ``out``."""
    from pipeline.sampler import LEVEL_NAMES, SAMPLER_VERSION

    tasks = [t for _, p in sorted(pools.levels.items()) for t in p.tasks]
    named = ship_states(pools, out)
    write_text(out / POOL_FILE, "".join(canonical_json(exported_record(ce, t)) + "\n" for t in tasks))
    write_json(out / POOL_MANIFEST, {
        "env_id": ce.env_id,
        "n_per_level": pools.n,
        "seed": pools.seed,
        "sampler": SAMPLER_VERSION,
        "levels": {str(lvl): {"name": LEVEL_NAMES[lvl], "found": len(p.tasks), "exhausted": p.exhausted,
                              "summary": p.summary, "task_ids": [t.task_id for t in p.tasks]}
                   for lvl, p in sorted(pools.levels.items())},
        "info": {t.task_id: {**pool_info(t, ce), **({"state": named[t.task_id]} if t.task_id in named else {})}
                 for t in tasks},
        **({"states": level_sizes(pools)} if pools.perturbed else {}),
    })


def state_name(path: Path) -> str:
    """``states/<sha256>.db``: a state's name in the bundle, by its content."""
    return f"{STATES_DIR}/{hashlib.sha256(path.read_bytes()).hexdigest()}.db"


def ship_states(pools: EnvPools, out: Path) -> dict[str, str]:
    """Copy each perturbed state the pools' tasks play on into ``out/states/``, once per content hash; task_id ->
    the state's name (``states/<sha256>.db``), the SHA-256 checked against the one the sampler recorded."""
    named: dict[str, str] = {}
    for task_id, path in sorted(pools.states.items()):
        name = state_name(path)
        dest = out / name
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            dest.chmod(0o644)
        named[task_id] = name
    return named


def level_sizes(pools: EnvPools) -> dict[str, dict[str, int]]:
    """Per level: its tasks, the distinct states they play on and those states' bytes (each stored once, so levels
    that share a state both count it)."""
    out: dict[str, dict[str, int]] = {}
    for lvl, p in sorted(pools.levels.items()):
        paths = {state_name(pools.states[t.task_id]): pools.states[t.task_id] for t in p.tasks
                 if t.task_id in pools.states}
        out[str(lvl)] = {"tasks": len(p.tasks), "states": len(paths),
                         "state_bytes": sum(q.stat().st_size for q in paths.values())}
    return out


def readme_section(pools: Mapping[str, EnvPools], usage: str) -> str:
    """The README's section on the sampled pools: how many distinct tasks each level holds, per environment, and
    ``usage`` (how this format serves them)."""
    rows = "\n".join(
        f"| `{p.env_id}` | " + " | ".join(
            f"{len(lp.tasks)}" + ("*" if lp.exhausted and len(lp.tasks) < p.n else "")
            for _, lp in sorted(p.levels.items())) + " |"
        for p in pools.values())
    first = next(iter(pools.values()))
    levels = sorted(first.levels)
    perturbed = [p for p in pools.values() if p.perturbed]
    sizes = ""
    if perturbed:
        lines = []
        for p in perturbed:
            per = level_sizes(p)
            total = len({state_name(q) for q in p.states.values()})
            lines.append(f"| `{p.env_id}` | " + " | ".join(
                f"{per[str(lvl)]['tasks']} tasks, {per[str(lvl)]['states']} states, "
                f"{per[str(lvl)]['state_bytes'] / 1024:.0f} KiB" for lvl in levels) + f" | {total} |")
        sizes = (
            "\n\nFresh states (`--perturb`): each sampler round ran on its own perturbed copy of `initial.db` (the same "
            "rows named the same way, their other values drawn again: a memorised answer fails), and each pool task "
            "plays on the state it was sampled on: `pool.json`'s `info[task_id].state` names it, a database stored "
            "once by its SHA-256 in `states/` beside `initial.db` (the reward compares against that state too). "
            "Size per level (a state shared by two levels counts in both; stored once):\n\n"
            "| environment | " + " | ".join(f"level {lvl}" for lvl in levels) + " | distinct states |\n|---|"
            + "---|" * (len(levels) + 1) + "\n" + "\n".join(lines))

    head = "| environment | " + " | ".join(f"level {lvl}" for lvl in levels) + " |\n|---|" + "---|" * len(levels)
    return (
        "\n## Sampled tasks by level\n\n"
        f"Besides the bank, this export carries tasks sampled at export time by envfoundry's sampler (no LLM; "
        f"`envfoundry sample`): up to {first.n} proved tasks per difficulty level (seed {first.seed}), none of the "
        "bank's, none in two levels, in `pool.jsonl` beside each environment's `tasks.jsonl` (`metadata.level`, "
        "`metadata.axes`) with `pool.json` (per level: `found`, `exhausted`, the sampler's `summary`, `task_ids`). "
        "Levels: 1 one call; 2 short chain; 3 deep or computed; 4 two goals or implicit intent; 5 refuse part of a "
        "request, or two goals under a rule (a rule over a write adds one level). Distinct tasks per level "
        "(`*`: all the environment holds at that level, as far as the sampler reaches):\n\n"
        f"{head}\n{rows}{sizes}\n\n{usage}\n"
    )
