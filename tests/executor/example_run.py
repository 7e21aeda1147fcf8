"""Helpers for runs of the committed example's inputs answered by a simulated endpoint replaying its cache.

The seeds and stage settings are read from the example's own catalog.db (what it was made with), so the
recorded replies fit even when ``seeds/quickstart.*`` have moved on since the example was made.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"
KEEP = {"env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl"}
#: the endpoint serves the replies the example recorded from this model (its name goes into provenance)
MODEL = "qwen2.5-coder-1.5b"


def files(out: Path) -> dict[str, bytes]:
    """The outputs that must be byte-identical: each verified environment's files and the task bank. (A failed
    scenario may leave its half-verified directory behind locally, where the rerun resumes from it; for a
    remote worker the driver writes a directory only from the result of a scenario that finished.)"""
    con = sqlite3.connect(f"file:{out / 'catalog.db'}?mode=ro", uri=True)
    try:
        dirs = [d for (d,) in con.execute("SELECT dir FROM environments WHERE status = 'verified' ORDER BY dir")]
    finally:
        con.close()
    found = {str(p.relative_to(out)): p.read_bytes() for d in dirs for p in sorted((out / d).rglob("*"))
             if p.name in KEEP}
    found["task_bank.jsonl"] = (out / "task_bank.jsonl").read_bytes()
    return found


def example_inputs(d: Path) -> tuple[Path, dict[str, Any]]:
    """The example's seed file (written into ``d``) and its ``[stages.*]`` settings."""
    if not (EXAMPLE / "catalog.db").is_file() or not (EXAMPLE / "llm_cache.sqlite").is_file():
        raise AssertionError(f"the example catalog {EXAMPLE} (catalog.db and llm_cache.sqlite) is missing: "
                             "these runs replay its recorded replies; regenerate it")
    con = sqlite3.connect(f"file:{EXAMPLE / 'catalog.db'}?mode=ro", uri=True)
    try:
        seeds = con.execute("SELECT name, description FROM seeds ORDER BY source, line").fetchall()
        (config,) = con.execute("SELECT config FROM runs ORDER BY started LIMIT 1").fetchone()
    finally:
        con.close()
    d.mkdir(parents=True, exist_ok=True)
    seed_file = d / "seeds.txt"
    seed_file.write_text("".join(f"{n}: {desc}\n" if desc else f"{n}\n" for n, desc in seeds), encoding="utf-8")
    return seed_file, embedded_budget(json.loads(config)["stages"])


def embedded_budget(stages: dict[str, Any]) -> dict[str, Any]:
    """``stages`` with the tester's context budget the embedded model had when the example was made (its n_ctx
    less the reply and a margin, ``verify.agent.context_budget``): the simulated endpoint stands in for it, and a
    remote endpoint has no budget of its own, so a long attempt would otherwise send its whole conversation where
    the example's run had cut old tool results to fit."""
    from pipeline.config import LLMSettings
    from pipeline.settings import TesterSettings

    tester = TesterSettings(**stages.get("tester", {}))
    if tester.context_budget is not None:
        return stages
    budget = LLMSettings().n_ctx - tester.max_tokens - 64
    return {**stages, "tester": {**stages.get("tester", {}), "context_budget": budget}}


def toml_value(v: Any) -> str:
    """A setting's value in TOML: a dict as an inline table (``[stages.tasks] tiers``: ``{"1" = 0.3, ...}``), the
    rest as JSON writes it (str, int, float, bool and lists of them are written alike in JSON and TOML)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def config_file(d: Path, stages: dict[str, Any]) -> Path:
    """``stages`` as a TOML config file for the CLI, sending nothing ahead (see ``plan``)."""
    lines = ["[llm]", "prefetch = false"]
    for stage, values in sorted(stages.items()):
        lines += [f"[stages.{stage}]"] + [f"{k} = {toml_value(v)}" for k, v in sorted(values.items())]
    path = d / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def plan(url: str, cache: Path, stages: dict[str, Any], **llm: Any) -> Any:
    """A run's plan against ``url``. Requests are not sent ahead (``prefetch``) unless asked for: these runs
    check that every request the code makes is recorded in the example's cache, and a speculative request the
    run never needs (a tool prompt before a schema amendment) is not."""
    from pipeline.config import validate_config
    from pipeline.run import plan_from_config

    llm = {"prefetch": False, **llm}
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


def no_misses(replay: Any) -> None:
    """The example's cache answered every request (else the prompts moved on: regenerate the example)."""
    if replay.misses:
        first = replay.misses[0]["messages"][0]["content"][:160]
        raise AssertionError(f"generated/quickstart/llm_cache.sqlite has no reply for {len(replay.misses)} request(s) "
                             f"of the current code (first: {first!r}); regenerate the example catalog")
