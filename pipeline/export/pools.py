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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import ExportError, exported_record, task_info, write_json, write_text
from pipeline.hashing import canonical_json
from pipeline.ir import Task

POOL_FILE = "pool.jsonl"
POOL_MANIFEST = "pool.json"
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

    def describe(self) -> str:
        """One line: how many distinct tasks each level holds."""
        parts = [f"level {lvl}: {len(p.tasks)}" + (" (all the environment holds)" if p.exhausted and
                                                    len(p.tasks) < self.n else "")
                 for lvl, p in sorted(self.levels.items())]
        return f"{self.env_id}: {self.n} asked per level (seed {self.seed}); " + ", ".join(parts)


def sample_env_pools(ce: CatalogEnv, n: int, seed: int = 0) -> EnvPools:
    """Up to ``n`` proved tasks of ``ce`` at each level, none of the bank's, none repeated across levels."""
    from pipeline.catalog.env_dir import TEMPLATES
    from pipeline.sampler import LEVELS, Want, sample  # the planner: imported only when sampling
    from pipeline.stages.phrasing import read_templates

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
    for level in LEVELS:
        got = sample(ce.env, n, seed=seed, initial_db=db, want=Want(level=level), bank=ce.tasks, exclude=earlier,
                     templates=templates)
        levels[level] = LevelPool(level, tuple(got.tasks), got.exhausted, got.summary())
        earlier += got.tasks
    return EnvPools(ce.env_id, n, seed, levels)


def sample_pools(catalog: Catalog, n: int, seed: int = 0) -> dict[str, EnvPools]:
    """:func:`sample_env_pools` for every environment of ``catalog`` with tasks in the bank (the ones exported)."""
    return {ce.env_id: sample_env_pools(ce, n, seed) for ce in catalog.envs.values() if ce.tasks}


def pool_of(pools: Mapping[str, EnvPools] | None, env_id: str) -> EnvPools | None:
    """The pools of ``env_id`` (None when the export has none); pools given for another catalog are an error."""
    if pools is None:
        return None
    if env_id not in pools:
        raise ExportError(f"no sampled pool for environment {env_id} (pools were sampled for {sorted(pools)})")
    return pools[env_id]


def pool_info(task: Task) -> dict[str, Any]:
    """What the exports carry per pool task (as ``task_info.json`` per bank task), with its ``level`` and
    ``axes``."""
    meta = task.metadata if isinstance(task.metadata, dict) else {}
    return {**task_info(task, POOL_SPLIT), "level": meta.get("level"), "axes": meta.get("axes"), "sampled": True}


def write_pool(ce: CatalogEnv, pools: EnvPools, out: Path) -> None:
    """``pool.jsonl`` and ``pool.json`` of one environment in its bundle directory ``out``."""
    from pipeline.sampler import LEVEL_NAMES, SAMPLER_VERSION

    tasks = [t for _, p in sorted(pools.levels.items()) for t in p.tasks]
    write_text(out / POOL_FILE, "".join(canonical_json(exported_record(ce, t)) + "\n" for t in tasks))
    write_json(out / POOL_MANIFEST, {
        "env_id": ce.env_id,
        "n_per_level": pools.n,
        "seed": pools.seed,
        "sampler": SAMPLER_VERSION,
        "levels": {str(lvl): {"name": LEVEL_NAMES[lvl], "found": len(p.tasks), "exhausted": p.exhausted,
                              "summary": p.summary, "task_ids": [t.task_id for t in p.tasks]}
                   for lvl, p in sorted(pools.levels.items())},
        "info": {t.task_id: pool_info(t) for t in tasks},
    })


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
        f"{head}\n{rows}\n\n{usage}\n"
    )
