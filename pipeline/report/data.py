"""Load a catalog directory into plain dicts: the one reader behind ``envfoundry report`` and ``browse``.

Reads what ``envfoundry run`` and ``verify`` write and nothing else, through :mod:`pipeline.catalog` in its
lenient mode: ``catalog.db`` (opened read-only, never written; missing tables are a problem, not an error),
``envs/*/{env.json,tasks.jsonl,report.json,trajectories.jsonl,initial.db}`` and ``dedup/`` (``meta.json``,
``entries.jsonl``; the vectors are read on demand by :func:`dedup_vectors`).

Task records are read as raw JSON, not through :class:`pipeline.ir.Task`, so records written by a newer
or older version still load: every optional field (``metadata.tier``, ``difficulty.wilson``, an answer
object, assertion roles, ...) is shown when present and left out when absent. A file that cannot be read
becomes a line in ``problems`` rather than an exception, so one damaged environment does not hide the rest.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.catalog import CATALOG_DB, Catalog, read_env_dir_raw, read_json, read_jsonl

SCENARIO_STAGES = ("expand", "dedup")


def obj(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (records are read defensively)."""
    return value if isinstance(value, dict) else {}


def arr(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def _json(text: Any, default: Any = None) -> Any:
    if not isinstance(text, str) or not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


# ---------------------------------------------------------------- reasons

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\b\d+(\.\d+)?\b")


def reason_class(reason: str, evidence: dict[str, Any] | None = None, stage: str = "") -> str:
    """A short label grouping rejections of one kind: the evidence's ``kind`` for the scenario stages
    (expand, dedup: ``unsuitable``, ``duplicate``, ...), else the reason's first clause with quoted names
    and numbers blanked (``tool … step N (write): no such table``)."""
    kind = (evidence or {}).get("kind")
    if stage in SCENARIO_STAGES and isinstance(kind, str) and kind:
        return kind
    line = next((x.strip(" -*\t") for x in reason.splitlines() if x.strip(" -*\t")), "") or "(no reason)"
    line = _NUMBER.sub("N", _QUOTED.sub("…", line))
    line = line.split(";")[0]
    head, sep, tail = line.partition(": ")
    if sep and "…" in head:  # "tool … step N (write): no such table: …" -> keep what went wrong
        line = f"{head}: {tail.split(': ')[0]}"
    elif sep:
        line = head
    return line if len(line) <= 80 else line[:79] + "…"


# ---------------------------------------------------------------- tasks


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _interval(value: Any) -> list[float] | None:
    if isinstance(value, list | tuple) and len(value) == 2 and all(_num(v) is not None for v in value):
        return [float(value[0]), float(value[1])]
    if isinstance(value, dict):
        lo = next((value[k] for k in ("lo", "low", "lower") if k in value), None)
        hi = next((value[k] for k in ("hi", "high", "upper") if k in value), None)
        if _num(lo) is not None and _num(hi) is not None:
            return [float(lo), float(hi)]  # type: ignore[arg-type]
    return None


def answer_text(answer: Any) -> str | None:
    """An expected answer for people: a plain string, or ``value`` of an answer object with its type."""
    if answer is None:
        return None
    if isinstance(answer, dict):
        value = answer.get("value", answer.get("values"))
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        kind = answer.get("type")
        return f"{shown} ({kind})" if kind else shown
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def normalize_task(raw: dict[str, Any]) -> dict[str, Any]:
    """One task record as the views use it; every field read defensively (absent -> None)."""
    md, diff, verifier = obj(raw.get("metadata")), obj(raw.get("difficulty")), obj(raw.get("verifier"))
    ref = arr(raw.get("reference_solution"))
    attempts = int(_num(diff.get("attempts")) or 0)
    passes = int(_num(diff.get("passes")) or 0)
    rate = _num(diff.get("pass_rate"))
    if rate is None:
        rate = _num(md.get("pass_rate"))
    if rate is None and attempts:
        rate = passes / attempts
    tier = md.get("tier", raw.get("tier"))
    steps = _num(md.get("steps"))
    assertions = []
    for a in verifier.get("assertions") or []:
        if isinstance(a, dict):
            assertions.append({"sql": a.get("sql", ""), "expect": a.get("expect"),
                               "description": a.get("description") or "",
                               "role": "gate" if a.get("name") == "gate" else "goal"})
    hard = diff.get("hard_pool", md.get("hard_pool"))
    return {
        "task_id": str(raw.get("task_id", "")),
        "env_id": str(raw.get("env_id", "")),
        "kind": raw.get("kind") or md.get("kind") or "unknown",
        "instruction": str(raw.get("instruction", "")),
        "tier": int(tier) if isinstance(tier, int | float) and not isinstance(tier, bool) else None,
        "steps": int(steps) if steps is not None else len(ref),
        "attempts": attempts,
        "passes": passes,
        "pass_rate": rate,
        "wilson": _interval(diff.get("wilson", md.get("wilson"))),
        "hard_pool": bool(hard) if hard is not None else None,
        "difficulty_tag": md.get("difficulty_tag"),
        "answer": verifier.get("answer"),
        "answer_text": answer_text(verifier.get("answer")),
        "assertions": assertions,
        "mutable_tables": list(verifier.get("mutable_tables") or []),
        "reference_solution": [c for c in ref if isinstance(c, dict)],
        "tools_used": list(md.get("tools_used") or dict.fromkeys(str(c.get("tool")) for c in ref if isinstance(c, dict))),
        "metadata": md,
        "provenance": obj(raw.get("provenance")),
    }


# ---------------------------------------------------------------- environments


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def schema_of(env_json: dict[str, Any]) -> list[dict[str, Any]]:
    """Tables of an environment IR with their columns and foreign keys, read by SQLite from the DDL."""
    conn = sqlite3.connect(":memory:")
    out = []
    try:
        declared = [t for t in arr(env_json.get("tables")) if isinstance(t, dict)]
        for t in declared:
            try:
                conn.execute(str(t.get("ddl", "")))
            except sqlite3.Error:
                pass  # shown without columns; the DDL itself is still listed
        created = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in declared:
            name = str(t.get("name", ""))
            cols, fks = [], []
            if name in created:
                cols = [{"name": c[1], "type": str(c[2] or ""), "pk": bool(c[5])}
                        for c in conn.execute(f"PRAGMA table_info({_q(name)})")]
                fks = [{"column": r[3], "table": r[2], "to": r[4] or ""}
                       for r in conn.execute(f"PRAGMA foreign_key_list({_q(name)})")]
            out.append({"name": name, "description": t.get("description") or "", "ddl": t.get("ddl") or "",
                        "columns": cols, "foreign_keys": fks})
    finally:
        conn.close()
    return out


def _row_counts(env_dir: Path, env_json: dict[str, Any]) -> dict[str, int]:
    db = env_dir / "initial.db"
    if db.is_file():
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
        except sqlite3.Error:
            pass
        finally:
            conn.close()
    counts: Counter[str] = Counter()
    for s in env_json.get("seed") or []:
        if isinstance(s, dict):
            counts[str(s.get("table"))] += len(s.get("rows") or [])
    return dict(counts)


def load_env(env_dir: Path, problems: list[str], *, trajectories: bool = True) -> dict[str, Any] | None:
    """One environment directory as plain dicts (``None`` when it has no readable env.json)."""
    raw = read_env_dir_raw(env_dir, problems, trajectories=trajectories)
    if raw is None:
        return None
    env_json = raw.env
    verify = obj(raw.report.get("verify"))
    tasks = [normalize_task(t) for t in raw.tasks]
    trajs: dict[str, list[dict[str, Any]]] = {}
    for t in raw.trajectories:
        trajs.setdefault(str(t.get("task_id", "")), []).append(t)
    counts = _row_counts(env_dir, env_json)
    tables = schema_of(env_json)
    for t in tables:
        t["rows"] = counts.get(t["name"], 0)
    scenario = obj(env_json.get("scenario"))
    return {
        "dir_name": env_dir.name,
        "scenario": scenario,
        "clock": env_json.get("clock"),
        "tables": tables,
        "tools": [t for t in env_json.get("tools") or [] if isinstance(t, dict)],
        "tasks": tasks,
        "trajectories": trajs,
        "summary": obj(verify.get("summary")),
        "verify_tasks": {str(v.get("task_id")): v for v in verify.get("tasks") or [] if isinstance(v, dict)},
        "model": verify.get("model"),
    }


# ---------------------------------------------------------------- scenarios


def _scenarios(db_rows: list[dict[str, Any]], rejections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in db_rows:
        out.append({"scenario_id": r["scenario_id"], "name": r["name"], "seed": r.get("seed") or None,
                    "description": r.get("description") or "", "entities": _json(r.get("entities"), []),
                    "goals": _json(r.get("goals"), []), "status": r.get("status") or "kept", "reason": "",
                    "duplicate_of": None, "similarity": None})
    seen = {s["scenario_id"] for s in out}
    for rej in rejections:
        ev = rej["evidence"]
        scn = ev.get("scenario") if isinstance(ev, dict) else None
        if rej["stage"] not in SCENARIO_STAGES or not isinstance(scn, dict) or rej["item"] in seen:
            continue
        seen.add(rej["item"])
        dup = ev.get("duplicate_of") if isinstance(ev.get("duplicate_of"), dict) else None
        out.append({"scenario_id": rej["item"], "name": str(scn.get("name", "")), "seed": scn.get("seed"),
                    "description": str(scn.get("description", "")), "entities": list(scn.get("entities") or []),
                    "goals": list(scn.get("goals") or []), "status": {"repeat": "duplicate"}.get(
                        rej["reason_class"], rej["reason_class"]),
                    "reason": rej["reason"], "duplicate_of": dup, "similarity": _num(ev.get("similarity"))})
    return out


# ---------------------------------------------------------------- the catalog


def _usage(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    total: dict[str, dict[str, float]] = {}
    for run in runs:
        for stage, s in sorted((run.get("usage") or {}).items()):
            if not isinstance(s, dict):
                continue
            acc = total.setdefault(stage, {})
            for k, v in s.items():
                if _num(v) is not None:
                    acc[k] = round(acc.get(k, 0) + float(v), 3)
    return dict(sorted(total.items()))


def load_catalog(catalog_dir: str | Path, *, trajectories: bool = True) -> dict[str, Any]:
    """Everything the report and the browser show, as plain JSON-able dicts.

    Keys: ``catalog`` (name, fingerprint), ``runs``, ``usage`` (summed per stage over runs), ``seeds``,
    ``scenarios`` (kept ones plus those rejected as unsuitable or duplicate, with ``status``),
    ``rejections`` (with a ``reason_class``), ``environments`` (catalog rows, each with ``detail`` from
    its directory or None), ``tasks`` (normalised, all environments), ``dedup`` (meta and entries) and
    ``problems`` (files that could not be read).
    """
    root = Path(catalog_dir)
    problems: list[str] = []
    cat = Catalog.open_readonly(root, lenient=True)
    try:
        missing = cat.missing_tables()
        if missing:
            problems.append(f"{root / CATALOG_DB}: missing tables {missing}")
        meta = {r["key"]: r["value"] for r in cat.rows("meta", "key")}
        runs = []
        for r in cat.rows("runs", "started, run_id"):
            runs.append({**r, **{k: _json(r.get(k), {}) for k in ("config", "prompt_hashes", "counts", "usage",
                                                                   "timings")}})
        seeds = cat.rows("seeds", "source, line, seed_id")
        rejections = []
        for r in cat.rows("rejections", "stage, rejection_id"):
            ev = _json(r.get("evidence"), {})
            rejections.append({**r, "evidence": ev, "reason_class": reason_class(r.get("reason") or "", ev, r.get("stage") or "")})
        scenario_rows = cat.rows("scenarios", "rowid")
        env_rows = cat.rows("environments", "name, scenario_id")
    finally:
        cat.close()
    environments = []
    tasks: list[dict[str, Any]] = []
    for row in env_rows:
        detail = None
        rel = row.get("dir")
        if rel:
            d = (root / rel).resolve()
            if root.resolve() not in d.parents:
                problems.append(f"environment {row.get('name')!r}: dir {rel!r} is outside the catalog; not read")
            elif d.is_dir():
                detail = load_env(d, problems, trajectories=trajectories)
            elif row.get("status") == "verified":
                problems.append(f"environment {row.get('name')!r}: directory {rel} is missing")
        if detail is not None:
            tasks.extend(detail["tasks"])
        environments.append({**row, "detail": detail})
    tasks.sort(key=lambda t: (t["env_id"], t["task_id"]))
    dedup: dict[str, Any] = {"meta": None, "entries": []}
    ddir = root / "dedup"
    if (ddir / "meta.json").is_file():
        dedup["meta"] = read_json(ddir / "meta.json", problems)
        dedup["entries"] = read_jsonl(ddir / "entries.jsonl", problems)
    return {
        "catalog": {"name": root.resolve().name, "fingerprint": meta.get("config_fingerprint")},
        "runs": runs,
        "usage": _usage(runs),
        "seeds": seeds,
        "scenarios": _scenarios(scenario_rows, rejections),
        "rejections": rejections,
        "environments": environments,
        "tasks": tasks,
        "dedup": dedup,
        "problems": problems,
    }


def dedup_vectors(catalog_dir: str | Path) -> Any:
    """The vectors of ``dedup/index.faiss`` as a (count, dim) float32 array, in entries order; None when
    the catalog has no index."""
    path = Path(catalog_dir) / "dedup" / "index.faiss"
    if not path.is_file():
        return None
    from pipeline.embed import read_index

    index = read_index(path)
    return index.reconstruct_n(0, index.ntotal)
