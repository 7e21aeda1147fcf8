"""Writing verification results: per environment ``tasks.jsonl`` + ``report.json`` (+ the kept
tester trajectories), the environment directory of a run from the graph's record of a scenario
(:func:`write_environment`), and the catalog-wide task bank in JSONL and Parquet. Same inputs, same bytes.

The bank's flat columns carry each task's pass rate and difficulty tag as :mod:`verify.difficulty` defines
them, which is why the catalog sits above ``verify`` in the layers (``tests/test_layers.py``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from pipeline import atomic
from pipeline.catalog.env_dir import TEMPLATES, TRAJECTORIES, load_env_dir, write_env_dir
from pipeline.catalog.files import BANK, TASKS, jsonl_text, pretty_json
from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Rejection, Task

REPORT_KEY = "verify"


def write_env_results(
    env_dir: str | Path,
    env: Environment,
    tasks: list[Task],
    report: dict[str, Any],
    trajectories: Iterable[dict[str, Any]] = (),
    templates: dict[str, Any] | None = None,
) -> Path:
    """Write ``tasks.jsonl``, ``report.json`` (its ``verify`` section; other sections are kept),
    ``trajectories.jsonl`` and ``templates.json`` (none when ``templates`` is empty). When ``env`` differs from the directory's ``env.json`` (a tool or the data
    was repaired) the whole directory is written again."""
    d = Path(env_dir)
    old_env, _, old_report = load_env_dir(d)
    merged = {**old_report, REPORT_KEY: report}
    if old_env.env_id != env.env_id:
        write_env_dir(env, d, tasks, merged)
    else:
        atomic.write_text(d / TASKS, jsonl_text(tasks))
        atomic.write_text(d / "report.json", pretty_json(merged))
    atomic.write_text(d / TRAJECTORIES, jsonl_text(trajectories))
    write_templates(d, templates)
    return d


def write_templates(env_dir: Path, templates: dict[str, Any] | None) -> None:
    """``templates.json`` from the graph's record (removed when there is none: an earlier run's would not match)."""
    if templates:
        atomic.write_text(env_dir / TEMPLATES, pretty_json(templates))
    elif (env_dir / TEMPLATES).is_file():
        (env_dir / TEMPLATES).unlink()


class ScenarioRecord(Protocol):
    """What a run keeps of one scenario's environment (:class:`pipeline.graph.ScenarioResult` is one)."""

    @property
    def env(self) -> Environment | None: ...
    @property
    def env_id(self) -> str | None: ...
    @property
    def env_dir(self) -> str | None:
        """Where the graph wrote the environment directory it verified against; None: nowhere."""
    @property
    def tasks(self) -> tuple[Task, ...]: ...
    @property
    def build_rejections(self) -> tuple[Rejection, ...]: ...
    @property
    def report(self) -> dict[str, Any]:
        """The ``verify`` section of ``report.json``."""
    @property
    def trajectories(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def templates(self) -> dict[str, Any]:
        """``templates.json`` (empty: none)."""


def write_environment(result: ScenarioRecord, envs_dir: str | Path) -> Path | None:
    """Write ``envs_dir/<env_id>`` from ``result`` (None when the scenario has no environment directory).

    When the graph wrote it there before verifying (same env id, this machine), only ``tasks.jsonl``,
    ``report.json`` and ``trajectories.jsonl`` are written; otherwise (a repair changed the id, a worker built
    it elsewhere) the whole directory is written beside it and renamed into place, so it is either the old one
    or the new one whole, and the directory the graph wrote is removed. Same record, same bytes; nothing is
    read back."""
    env, env_id = result.env, result.env_id
    if env is None or env_id is None or result.env_dir is None:
        return None
    envs = Path(envs_dir)
    target = envs / env_id
    report = {"build": {"rejections": [r.model_dump(mode="json") for r in result.build_rejections]},
              REPORT_KEY: result.report}
    built = Path(result.env_dir)
    if built.resolve() == target.resolve():
        atomic.write_text(target / TASKS, jsonl_text(result.tasks))
        atomic.write_text(target / "report.json", pretty_json(report))
        atomic.write_text(target / TRAJECTORIES, jsonl_text(result.trajectories))
        write_templates(target, result.templates)
        return target
    tmp, old = envs / f".{env_id}.tmp", envs / f".{env_id}.old"  # fixed names: a rerun clears a killed write's
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    write_env_dir(env, tmp, result.tasks, report)
    atomic.write_text(tmp / TRAJECTORIES, jsonl_text(result.trajectories))
    write_templates(tmp, result.templates)
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    if built.parent.resolve() == envs.resolve():  # the graph's directory under the old id (a repair)
        shutil.rmtree(built, ignore_errors=True)
    return target


def _row(t: Task) -> dict[str, Any]:
    from verify.difficulty import pass_rate, tag  # here: reading environment directories needs none of verify

    rate = pass_rate(t)
    return {
        "task_id": t.task_id,
        "env_id": t.env_id,
        "kind": t.kind,
        "instruction": t.instruction,
        "answer": None if t.verifier.answer is None else canonical_json(t.verifier.answer),
        "tier": int(t.metadata.get("tier", 1)),
        "mutable_tables": list(t.verifier.mutable_tables),
        "tools_used": list(t.metadata.get("tools_used", dict.fromkeys(c.tool for c in t.reference_solution))),
        "num_steps": len(t.reference_solution),
        "difficulty_attempts": t.difficulty.attempts,
        "difficulty_passes": t.difficulty.passes,
        "pass_rate": rate,
        "difficulty_tag": t.metadata.get("difficulty_tag", tag(rate)),
        "tools": canonical_json(t.tools),
        "reference_solution": canonical_json([c.model_dump(mode="json") for c in t.reference_solution]),
        "verifier": canonical_json(t.verifier),
        "metadata": canonical_json(t.metadata),
        "provenance": canonical_json(t.provenance),
    }


def write_task_bank(tasks: Iterable[Task], out_dir: str | Path) -> dict[str, Path]:
    """Write ``task_bank.jsonl`` (one task record per line) and ``task_bank.parquet`` (one row per task;
    nested fields as canonical JSON strings, plus flat columns for filtering), sorted by env then task."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ordered = sorted(tasks, key=lambda t: (t.env_id, t.task_id))
    ids = [t.task_id for t in ordered]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError(f"task bank: duplicate task ids {dup[:5]}")
    jsonl = out / BANK
    atomic.write_text(jsonl, jsonl_text(ordered))
    schema = pa.schema([
        ("task_id", pa.string()), ("env_id", pa.string()), ("kind", pa.string()), ("instruction", pa.string()),
        ("answer", pa.string()), ("tier", pa.int32()), ("mutable_tables", pa.list_(pa.string())), ("tools_used", pa.list_(pa.string())),
        ("num_steps", pa.int32()), ("difficulty_attempts", pa.int32()), ("difficulty_passes", pa.int32()),
        ("pass_rate", pa.float64()), ("difficulty_tag", pa.string()), ("tools", pa.string()),
        ("reference_solution", pa.string()), ("verifier", pa.string()), ("metadata", pa.string()),
        ("provenance", pa.string()),
    ])
    rows = [_row(t) for t in ordered]
    table = pa.Table.from_pylist(rows, schema=schema)
    parquet = out / "task_bank.parquet"
    with atomic.replacing(parquet) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return {"jsonl": jsonl, "parquet": parquet}
