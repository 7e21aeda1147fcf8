"""Helpers for runs of the committed example's inputs answered by a simulated endpoint replaying its cache.

The seeds and stage settings are read from the example's own catalog.db (what it was made with), so the
recorded replies fit even when ``seeds/quickstart.*`` have moved on since the example was made.

:func:`uninterrupted_run` is the one uninterrupted run of those inputs (the README's ``envfoundry run``, the
local executor) that the executor, Ray and kill-point tests compare their runs with: made once per test session
(fixture ``example_run`` in tests/conftest.py), shared by the xdist workers.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "generated" / "quickstart"
KEEP = {"env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl"}
DRIVER = ROOT / "tests" / "run" / "kill_driver.py"
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


class Recorder:
    """The example's recorded replies (:class:`CacheReplay`) as an endpoint's answers, with every request asked,
    in order (the sha256 of its ``request_key``: the messages, sampling and reply schema)."""

    def __init__(self) -> None:
        from pipeline.llm.simulated import CacheReplay

        self.replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        from pipeline.llm.simulated import request_key

        key = hashlib.sha256(request_key(body).encode("utf-8")).hexdigest()
        with self._lock:
            self.asked.append(key)
        return self.replay(body)

    def take(self) -> list[str]:
        """The requests asked since the last call; every one of them must have had a recorded reply."""
        no_misses(self.replay)
        with self._lock:
            asked, self.asked = self.asked, []
        return asked


def cli_run(url: str, seeds: Path, config: Path, out: Path, point: str = "none",
            timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``envfoundry run --json`` of ``seeds`` into ``out`` against ``url``, in its own process, SIGKILLed at
    ``point`` (tests/run/kill_driver.py; ``none``: run to the end)."""
    args = ["run", "--seeds", str(seeds), "--out", str(out), "--config", str(config), "--base-url", url,
            "--model", MODEL, "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    for var in ("OPENAI_BASE_URL", "ENVFOUNDRY_MODEL"):
        env.pop(var, None)
    return subprocess.run([sys.executable, str(DRIVER), point, "--", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class ExampleRun:
    """One uninterrupted ``envfoundry run`` of the example's inputs (read only: tests compare with it)."""

    out: Path
    seeds: Path
    config: Path
    stages: dict[str, Any]
    returncode: int
    stderr: str
    summary: dict[str, Any]
    asked: list[str]
    misses: list[str]

    @property
    def counts(self) -> dict[str, int]:
        return self.summary["counts"]

    @property
    def failed(self) -> list[dict[str, str]]:
        return self.summary["failed"]

    @property
    def usage(self) -> dict[str, dict[str, float]]:
        return self.summary["usage"]

    def no_misses(self) -> None:
        """The example's cache answered every request of this run (else the prompts moved on)."""
        if self.misses:
            raise AssertionError(f"generated/quickstart/llm_cache.sqlite has no reply for {len(self.misses)} "
                                 f"request(s) of the current code (first: {self.misses[0]!r}); regenerate the "
                                 "example catalog")

    def ok(self) -> None:
        """The run finished with every scenario done."""
        self.no_misses()
        assert self.returncode == 0 and not self.failed, self.stderr[-3000:]


def uninterrupted_run(shared: Path) -> ExampleRun:
    """The example's inputs run once into ``shared`` (a directory every xdist worker of the session sees): the
    first caller runs it while holding a lock, the others wait for it and read what it recorded."""
    from pipeline.llm.simulated import SimulatedEndpoint

    shared.mkdir(parents=True, exist_ok=True)
    record = shared / "run.json"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            d = Path(tempfile.mkdtemp(prefix="run-", dir=shared))  # a fresh directory if an earlier try failed
            seeds, stages = example_inputs(d / "inputs")
            config = config_file(d / "inputs", stages)
            answers = Recorder()
            with SimulatedEndpoint(answers) as ep:
                done = cli_run(ep.url, seeds, config, d / "catalog")
            try:
                summary = json.loads(done.stdout)
            except json.JSONDecodeError as e:
                raise AssertionError(f"the uninterrupted example run printed no summary (exit "
                                     f"{done.returncode}): {done.stderr[-3000:]}") from e
            misses = [m["messages"][0]["content"][:160] for m in answers.replay.misses]
            data = {"out": str(d / "catalog"), "seeds": str(seeds), "config": str(config), "stages": stages,
                    "returncode": done.returncode, "stderr": done.stderr[-5000:], "summary": summary,
                    "asked": answers.asked, "misses": misses}
            (d / "run.json").write_text(json.dumps(data), encoding="utf-8")
            os.replace(d / "run.json", record)
    data = json.loads(record.read_text(encoding="utf-8"))
    return ExampleRun(**{**data, "out": Path(data["out"]), "seeds": Path(data["seeds"]),
                         "config": Path(data["config"])})
