"""Writing verification results: per environment ``tasks.jsonl`` + ``report.json`` (+ the kept
tester trajectories), and the catalog-wide task bank in JSONL and Parquet. Same inputs, same bytes.

The bank's flat columns carry each task's pass rate and difficulty tag as :mod:`verify.difficulty` defines
them, which is why the catalog sits above ``verify`` in the layers (``tests/test_layers.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pipeline import atomic
from pipeline.catalog.env_dir import TRAJECTORIES, load_env_dir, write_env_dir
from pipeline.catalog.files import BANK, TASKS, jsonl_text, pretty_json
from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Task

REPORT_KEY = "verify"


def write_env_results(
    env_dir: str | Path,
    env: Environment,
    tasks: list[Task],
    report: dict[str, Any],
    trajectories: Iterable[dict[str, Any]] = (),
) -> Path:
    """Write ``tasks.jsonl``, ``report.json`` (its ``verify`` section; other sections are kept) and
    ``trajectories.jsonl``. When ``env`` differs from the directory's ``env.json`` (a tool or the data
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
    return d


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
