"""Helpers for runs of the README's quickstart answered by a simulated endpoint replaying the example's cache."""

from __future__ import annotations

import sqlite3
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"
SEEDS = ROOT / "seeds" / "quickstart.txt"
CONFIG = ROOT / "seeds" / "quickstart.toml"
KEEP = {"env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl"}
#: the endpoint serves the replies the example recorded from this model (its name goes into provenance)
MODEL = "qwen2.5-coder-1.5b"


def files(out: Path) -> dict[str, bytes]:
    """The outputs that must be byte-identical: each environment's files and the task bank."""
    found = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "envs").rglob("*")) if p.name in KEEP}
    found["task_bank.jsonl"] = (out / "task_bank.jsonl").read_bytes()
    return found


def plan(url: str, cache: Path, **llm: Any) -> Any:
    from pipeline.config import validate_config
    from pipeline.run import plan_from_config

    stages = tomllib.loads(CONFIG.read_text(encoding="utf-8"))["stages"]
    config = validate_config({"llm": {"base_url": url, "model": MODEL, "cache_path": str(cache), **llm},
                              "stages": stages})
    return plan_from_config(config)


def catalog_rows(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every catalog table's rows, without what differs between runs by nature (times, run records)."""
    con = sqlite3.connect(f"file:{out / 'catalog.db'}?mode=ro", uri=True)
    try:
        rows: dict[str, list[tuple[Any, ...]]] = {}
        for table in ("seeds", "scenarios", "rejections", "environments", "tasks"):
            cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})") if c[1] not in ("seconds", "created")]
            rows[table] = sorted(con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)
        return rows
    finally:
        con.close()


def cache_rows(path: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return sorted(con.execute("SELECT key, content FROM responses").fetchall())
    finally:
        con.close()
