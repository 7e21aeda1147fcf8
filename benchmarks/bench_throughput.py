"""Throughput against a remote endpoint: how busy does a run keep it?

    .venv/bin/python benchmarks/bench_throughput.py                 # 8 scenarios, concurrency 16, 0.5 s latency
    .venv/bin/python benchmarks/bench_throughput.py --json          # one line for machines
    .venv/bin/python benchmarks/bench_throughput.py --scenarios 4 --latency 0.2 --skip-serial

A simulated OpenAI-compatible endpoint on loopback (``pipeline.llm.simulated``) answers every request after a
fixed latency with the reply recorded in the example catalog's LLM cache (``generated/quickstart``; its seed and
stage settings come from its catalog.db). That cache holds one scenario per seed; to drive N scenarios the seed is given N times with a marker (``~v1`` .. ``~vN``)
in its name, the endpoint strips the marker before looking a request up and puts it back into the scenario
name it replies, so the N scenarios are distinct to the pipeline (names, ids, directories) and their
requests are the recorded ones. Dedup is set to keep them (threshold 1.0, no judge).

The same run is made twice from empty caches: with ``--concurrency`` requests in flight per endpoint and as
many scenarios at once, and serially (1 and 1). The endpoint counts requests in flight over each run's wall
time. Both runs must write the same task bank, byte for byte (``identical_output``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.llm.simulated import CacheReplay, Fault, SimulatedEndpoint  # noqa: E402

EXAMPLE = ROOT / "generated" / "quickstart"
MARK = re.compile(r" ~v(\d+)")


def recorded_inputs(catalog: Path) -> tuple[tuple[str, str], dict[str, Any]]:
    """The first seed and the ``[stages.*]`` settings the recorded run was made with (its catalog.db)."""
    import sqlite3

    con = sqlite3.connect(f"file:{catalog / 'catalog.db'}?mode=ro", uri=True)
    try:
        seed = con.execute("SELECT name, description FROM seeds ORDER BY source, line").fetchone()
        (config,) = con.execute("SELECT config FROM runs ORDER BY started LIMIT 1").fetchone()
    finally:
        con.close()
    return (seed[0], seed[1] or ""), json.loads(config)["stages"]


class VariantReplay:
    """Answers requests of scenario variant k with the recorded replies of the scenarios of one seed."""

    def __init__(self, cache: Path, seed_name: str):
        import sqlite3

        self.replay = CacheReplay(cache)
        con = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT request, content FROM responses").fetchall()
        finally:
            con.close()
        self.names = []  # the scenario names the seed's expansion replies proposed
        for request, content in rows:
            if f"Domain seed: {seed_name}" in request:
                try:
                    self.names.append(str(json.loads(content)["name"]))
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
        if not self.names:
            raise SystemExit(f"{cache}: no recorded expansion of the seed {seed_name!r}")
        self.misses = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | Fault:
        text = json.dumps(body)
        m = MARK.search(text)
        if m is None:
            return self.replay(body)
        mark = m.group(0)
        content = self.replay.lookup(json.loads(text.replace(mark, "")))
        if content is None:
            with self.lock:
                self.misses += 1
            return Fault("status", status=400)
        for name in self.names:
            content = content.replace(name, name + mark)
        if _schema_name(body) == "Revision":  # a task's wording: the variant's own (see mark_wording)
            content = mark_wording(content, mark)
        return content


def _schema_name(body: dict[str, Any]) -> str:
    rf = body.get("response_format") or {}
    return str((rf.get("json_schema") or {}).get("name", "")) if isinstance(rf, dict) else ""


def mark_wording(content: str, mark: str) -> str:
    """A task's wording with the variant's marker: the prompts of the tester and the checker hold the task's
    words and the tools, not the scenario's name, so without it every variant would send the same requests,
    which a real catalog's distinct scenarios never do (and the endpoint would see each of them N times)."""
    try:
        reply = json.loads(content)
    except json.JSONDecodeError:
        return content
    if isinstance(reply, dict) and isinstance(reply.get("user_request"), str):
        reply["user_request"] += mark
        return json.dumps(reply)
    return content


class RemoteEndpoint:
    """The simulated endpoint in a process of its own, as a remote endpoint is: its HTTP handling and replay
    lookups take no time from the pipeline's processes (``stats()`` and ``misses()`` through a pipe)."""

    def __init__(self, catalog: Path, latency: float):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, str(catalog), latency), daemon=True)
        self.proc.start()
        self.url = self._ask("url")

    def _ask(self, what: str) -> Any:
        self.conn.send(what)
        if not self.conn.poll(60):
            raise SystemExit(f"the simulated endpoint did not answer {what!r}")
        return self.conn.recv()

    def reset_stats(self) -> None:
        self._ask("reset")

    def stats(self) -> dict[str, Any]:
        return self._ask("stats")

    def misses(self) -> int:
        return self._ask("misses")

    def __enter__(self) -> RemoteEndpoint:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._ask("stop")
        finally:
            self.proc.join(10)


def _serve(conn: Any, catalog: str, latency: float) -> None:
    answer = VariantReplay(Path(catalog) / "llm_cache.sqlite", recorded_inputs(Path(catalog))[0][0])
    with SimulatedEndpoint(answer, latency=latency) as ep:
        while True:
            what = conn.recv()
            if what == "url":
                conn.send(ep.url)
            elif what == "reset":
                ep.reset_stats()
                conn.send(None)
            elif what == "stats":
                conn.send(ep.stats())
            elif what == "misses":
                conn.send(answer.misses)
            elif what == "stop":
                conn.send(None)
                return


def one_run(url: str, workdir: Path, n: int, concurrency: int, ep: RemoteEndpoint,
            catalog: Path, executor: str = "local") -> dict[str, Any]:
    from pipeline.config import validate_config
    from pipeline.executor import make_executor
    from pipeline.run import plan_from_config, run_catalog

    (name, description), stages = recorded_inputs(catalog)
    workdir.mkdir(parents=True, exist_ok=True)
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{name} ~v{k}: {description}\n" for k in range(1, n + 1)), encoding="utf-8")
    stages.setdefault("run", {})["concurrency"] = concurrency
    stages["dedup"] = {"threshold": 1.0, "judge": False}
    config = validate_config({"llm": {"base_url": url, "model": "simulated", "concurrency": concurrency,
                                      "cache_path": str(workdir / "llm_cache.sqlite"), "timeout_s": 120},
                              "stages": stages})
    plan = plan_from_config(config)
    ex = make_executor(executor, workers=concurrency)
    ex.warm_up(plan.config.llm, wait=True)  # one-time start-up (worker processes), like the dedup model: untimed
    ep.reset_stats()
    t0 = time.perf_counter()
    try:
        result = run_catalog(seeds, workdir / "catalog", plan, executor=ex)
    finally:
        ex.close()
    wall = time.perf_counter() - t0
    stats = ep.stats()
    bank = (workdir / "catalog" / "task_bank.jsonl").read_bytes()
    return {"wall_s": wall, "stats": stats, "counts": result.counts, "failed": result.failed,
            "bank": bank}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.5, help="seconds the endpoint takes per request")
    ap.add_argument("--catalog", type=Path, default=EXAMPLE,
                    help="a recorded catalog: its llm_cache.sqlite answers, its catalog.db gives seed and settings")
    ap.add_argument("--executor", choices=["local", "process"], default="process",
                    help="where the concurrent run's scenarios run (the serial run: one thread)")
    ap.add_argument("--skip-serial", action="store_true", help="only the concurrent run")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--timeline", action="store_true", help="also the mean in flight during each second")
    args = ap.parse_args()

    from pipeline.embed import get_embedder

    get_embedder(None).encode(["warm-up"])  # load the dedup model before timing anything
    out: dict[str, Any] = {"scenarios": args.scenarios, "concurrency": args.concurrency, "latency_s": args.latency,
                           "executor": args.executor}
    with RemoteEndpoint(args.catalog, args.latency) as ep, tempfile.TemporaryDirectory() as tmp:
        conc = one_run(ep.url, Path(tmp) / "concurrent", args.scenarios, args.concurrency, ep, args.catalog,
                       args.executor)
        out.update(requests=conc["stats"]["requests"], mean_in_flight=round(conc["stats"]["mean_in_flight"], 2),
                   peak_in_flight=conc["stats"]["peak_in_flight"], wall_s=round(conc["wall_s"], 1),
                   verified=conc["counts"].get("environments_verified"), failed=len(conc["failed"]))
        if args.timeline:
            out["per_second"] = conc["stats"]["per_second"]
        if not args.skip_serial:
            ser = one_run(ep.url, Path(tmp) / "serial", args.scenarios, 1, ep, args.catalog)
            out.update(serial_wall_s=round(ser["wall_s"], 1),
                       serial_mean_in_flight=round(ser["stats"]["mean_in_flight"], 2),
                       speedup_vs_serial=round(ser["wall_s"] / conc["wall_s"], 2),
                       identical_output=ser["bank"] == conc["bank"])
        out["misses"] = ep.misses()
        out["in_flight_vs_concurrency"] = round(out["mean_in_flight"] / args.concurrency, 3)
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        for k, v in out.items():
            print(f"{k:>24}: {v}")


if __name__ == "__main__":
    main()
