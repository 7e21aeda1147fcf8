"""Throughput against a slow remote endpoint: how busy does a run of many scenarios keep it?

    .venv/bin/python benchmarks/bench_throughput.py --copies 8 --concurrency 8 --workers 16 --latency 2 --stagger 10
    .venv/bin/python benchmarks/bench_throughput.py --json              # one JSON line for machines
    .venv/bin/python benchmarks/bench_throughput.py --copies 2 --latency 0.5 --serial

A simulated OpenAI-compatible endpoint on loopback (``pipeline.llm.simulated``), in a process of its own as a
remote endpoint is, answers every request after ``--latency`` seconds with the reply recorded for it in a recorded
catalog's LLM cache (``--catalog``, default ``generated/quickstart``; its seeds, stage settings and model name come
from its catalog.db), and counts the requests it is answering at every moment (:class:`Meter`).

The recorded catalog holds one run of its seeds. To give the endpoint many scenarios, the run is copied: ``--copies``
catalogs, each built from the recorded seeds and settings into a directory of its own with an empty LLM cache of its
own, so every copy is really built and verified by the pipeline and asks the endpoint every one of its questions (no
copy reads another's cache). The copies keep the scenarios' identity (a scenario's rows are seeded from its id,
``pipeline.stages.rowmake.derive_seed``, so a renamed copy would ask other questions than the recorded ones) and run
at once, their scenarios on one executor (``--executor process``: ``--workers`` processes) under one run-wide limit of
``--concurrency`` requests in flight, which the copies' seed expansion in this process takes slots of too. Being the
same scenarios, copies started together reach their CPU-bound phases (proofs, task sampling) together and leave the
endpoint idle meanwhile, as distinct scenarios would not: ``--stagger`` starts copy k k x that many seconds later
(the wall time counts from the first start).

Reported: the endpoint's mean and peak requests in flight over the run's wall time and the mean's share of
``--concurrency`` (the busy share), requests, wall time, scenarios verified, the load average; each copy's verified
environments and task bank are compared byte for byte with the recorded catalog's. ``--serial`` also runs the same
copies one after another with one request in flight (the speedup). ``misses``: requests the recorded cache has no
reply for (HTTP 400), e.g. a request sent ahead that the recorded run never needed.

Exit 1, with the reasons on stderr (and ``"ok": false`` in the JSON), when a run fails: a copy that raised, a scenario
not verified, a copy whose files differ from the recorded catalog's, or more requests in flight than allowed.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.executor.process import ProcessExecutor  # noqa: E402
from pipeline.llm.simulated import CacheReplay, SimulatedEndpoint  # noqa: E402

EXAMPLE = ROOT / "generated" / "quickstart"
KEEP = {"env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl"}
"""The files of a verified environment compared with the recorded catalog's (as tests/executor/example_run.py)."""


# ---------------------------------------------------------------- the recorded catalog


def recorded_inputs(catalog: Path) -> dict[str, Any]:
    """What the recorded run was made with (its catalog.db): seeds, ``[stages.*]`` settings, model name, and
    how many environments it verified."""
    for name in ("catalog.db", "llm_cache.sqlite"):
        if not (catalog / name).is_file():
            raise SystemExit(f"bench_throughput: {catalog / name} is missing (a recorded catalog holds its catalog.db "
                             "and its llm_cache.sqlite)")
    con = sqlite3.connect(f"file:{catalog / 'catalog.db'}?mode=ro", uri=True)
    try:
        seeds = con.execute("SELECT name, description FROM seeds ORDER BY source, line").fetchall()
        run = con.execute("SELECT config, model FROM runs ORDER BY started LIMIT 1").fetchone()
        (verified,) = con.execute("SELECT COUNT(*) FROM environments WHERE status = 'verified'").fetchone()
    finally:
        con.close()
    if not seeds or run is None:
        raise SystemExit(f"bench_throughput: {catalog / 'catalog.db'} records no seeds or no run")
    config = json.loads(run[0])
    return {"seeds": seeds, "stages": embedded_budget(config["stages"]), "model": run[1] or "simulated",
            "verified": int(verified)}


def embedded_budget(stages: dict[str, Any]) -> dict[str, Any]:
    """``stages`` with the tester's context budget the embedded model had when the example was made (as
    ``tests/executor/example_run.embedded_budget``): a remote endpoint has no budget of its own, so a long attempt
    would otherwise send its whole conversation where the recorded run had cut old tool results to fit."""
    from pipeline.config import LLMSettings
    from pipeline.settings import TesterSettings

    tester = TesterSettings(**stages.get("tester", {}))
    if tester.context_budget is not None:
        return stages
    budget = LLMSettings().n_ctx - tester.max_tokens - 64
    return {**stages, "tester": {**stages.get("tester", {}), "context_budget": budget}}


def outputs(catalog: Path) -> dict[str, bytes]:
    """The bytes that must match the recorded catalog's: each verified environment's files and the task bank."""
    con = sqlite3.connect(f"file:{catalog / 'catalog.db'}?mode=ro", uri=True)
    try:
        dirs = [d for (d,) in con.execute("SELECT dir FROM environments WHERE status = 'verified' ORDER BY dir")]
    finally:
        con.close()
    found = {str(p.relative_to(catalog)): p.read_bytes() for d in dirs for p in sorted((catalog / d).rglob("*"))
             if p.name in KEEP}
    bank = catalog / "task_bank.jsonl"
    found["task_bank.jsonl"] = bank.read_bytes() if bank.is_file() else b""
    return found


# ---------------------------------------------------------------- the endpoint, in a process of its own


class RemoteEndpoint:
    """The simulated endpoint replaying ``catalog``'s cache in a process of its own, as a remote endpoint is: its
    HTTP handling and lookups take no time from the pipeline's processes (``stats()``, ``misses()``: a pipe)."""

    def __init__(self, catalog: Path, latency: float):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, str(catalog), latency), daemon=True)
        self.proc.start()
        self.url = self._ask("url")

    def _ask(self, what: str) -> Any:
        self.conn.send(what)
        if not self.conn.poll(120):
            raise SystemExit(f"bench_throughput: the simulated endpoint did not answer {what!r}")
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


class Meter:
    """Requests being answered over time: the time average, the peak and the mean of each second since ``reset``.

    Counted while a reply is being prepared (the latency), not while it is written: the client frees its slot
    when the reply has arrived, and a count that ended only after the write could see the slot's next request
    arrive first (a transient one over the limit that the client never had; seen under load)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.now = self.peak = 0
            self.area = 0.0
            self.t0 = self.last = time.monotonic()
            self.seconds: list[float] = []

    def _tick(self) -> None:
        now = time.monotonic()
        self.area += self.now * (now - self.last)
        t = self.last
        while t < now:  # spread the interval over the seconds it covers
            second = int(t - self.t0)
            end = min(now, self.t0 + second + 1)
            while len(self.seconds) <= second:
                self.seconds.append(0.0)
            self.seconds[second] += self.now * (end - t)
            t = end
        self.last = now

    def add(self, n: int) -> None:
        with self.lock:
            self._tick()
            self.now += n
            self.peak = max(self.peak, self.now)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            self._tick()
            secs = self.last - self.t0
            return {"mean_in_flight": self.area / secs if secs > 0 else 0.0, "peak_in_flight": self.peak,
                    "per_second": [round(a, 1) for a in self.seconds]}


class SlowReplay:
    """The recorded reply after ``latency`` seconds (a miss at once: HTTP 400), metered."""

    def __init__(self, cache: Path, latency: float):
        self.replay = CacheReplay(cache)
        self.latency = latency
        self.meter = Meter()

    def __call__(self, body: dict[str, Any]) -> Any:
        reply = self.replay(body)
        if isinstance(reply, str):
            self.meter.add(1)
            try:
                time.sleep(self.latency)
            finally:
                self.meter.add(-1)
        return reply


def _serve(conn: Any, catalog: str, latency: float) -> None:
    answer = SlowReplay(Path(catalog) / "llm_cache.sqlite", latency)
    with SimulatedEndpoint(answer) as ep:
        while True:
            what = conn.recv()
            if what == "url":
                conn.send(ep.url)
            elif what == "reset":
                ep.reset_stats()
                answer.meter.reset()
                conn.send(None)
            elif what == "stats":
                st = ep.stats()
                conn.send({"requests": st["requests"], "outcomes": st["outcomes"], **answer.meter.stats()})
            elif what == "misses":
                conn.send(len(answer.replay.misses))
            elif what == "stop":
                conn.send(None)
                return


# ---------------------------------------------------------------- the run


class RunWideProcessExecutor(ProcessExecutor):
    """The process executor whose run-wide endpoint limit this process's requests take slots of too: here the
    copies' seed expansions (in this process) overlap with other copies' scenarios (in the workers), which a
    single run's never do (it expands its seeds before any scenario starts)."""

    def _start(self, limits: dict[str, int]) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, wait

        from pipeline.executor.process import PRELOAD, _init_worker, _ready
        from pipeline.llm.endpoints import share_limits

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        gates = {url.rstrip("/"): ctx.BoundedSemaphore(n) for url, n in limits.items()}
        share_limits(gates)
        self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker, initargs=(gates,))
        wait([self._pool.submit(_ready) for _ in range(self.workers)])
        return self._pool


def write_seeds(path: Path, seeds: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{n}: {d}\n" if d else f"{n}\n" for n, d in seeds), encoding="utf-8")
    return path


def copy_plan(url: str, rec: dict[str, Any], cache: Path, concurrency: int) -> Any:
    from pipeline.config import validate_config
    from pipeline.run import plan_from_config

    stages = json.loads(json.dumps(rec["stages"]))
    stages.setdefault("run", {})["concurrency"] = concurrency
    config = validate_config({"llm": {"base_url": url, "model": rec["model"], "concurrency": concurrency,
                                      "cache_path": str(cache), "timeout_s": 600},
                              "stages": stages})
    return plan_from_config(config)


def one_run(url: str, workdir: Path, rec: dict[str, Any], copies: int, concurrency: int, workers: int,
            executor: str, ep: RemoteEndpoint, expected: dict[str, bytes], *, serial: bool = False,
            stagger: float = 0.0) -> dict[str, Any]:
    """``copies`` copies of the recorded run at once under one limit of ``concurrency`` requests in flight, copy k
    starting ``k * stagger`` seconds after the first (with ``serial``: one after another, each scenario after the
    other)."""
    from pipeline.executor import LocalExecutor
    from pipeline.run import run_catalog

    ex: Any
    if executor == "process":
        ex = RunWideProcessExecutor(workers, limits={url.rstrip("/"): concurrency})
        ex.warm_up(None, wait=True)  # one-time start-up (worker processes), like the dedup model: untimed
    else:
        ex = LocalExecutor(workers)
    results: list[dict[str, Any]] = [{} for _ in range(copies)]

    def build(k: int) -> None:
        d = workdir / f"copy-{k + 1}"
        if not serial:
            time.sleep(k * stagger)
        try:
            plan = copy_plan(url, rec, d / "catalog" / "llm_cache.sqlite", concurrency)
            r = run_catalog(write_seeds(d / "seeds.txt", rec["seeds"]), d / "catalog", plan, executor=ex)
            same = outputs(d / "catalog") == expected
            results[k] = {"verified": r.counts.get("environments_verified", 0),
                          "scenarios": r.counts.get("kept", len(r.environments)), "failed": r.failed,
                          "identical": same}
        except BaseException as e:  # noqa: BLE001 - a copy that raised is reported, and fails the benchmark
            results[k] = {"error": f"{type(e).__name__}: {e}"[:500]}

    ep.reset_stats()
    t0 = time.perf_counter()
    try:
        if serial:
            for k in range(copies):
                build(k)
        else:
            threads = [threading.Thread(target=build, args=(k,), name=f"copy-{k + 1}") for k in range(copies)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        ex.close()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "stats": ep.stats(), "copies": results}


def problems_of(name: str, run: dict[str, Any], rec: dict[str, Any], concurrency: int) -> list[str]:
    """Why ``run`` failed (nothing: it did not)."""
    out = []
    for k, c in enumerate(run["copies"], start=1):
        if "error" in c:
            out.append(f"{name} run, copy {k}: {c['error']}")
            continue
        for f in c["failed"]:
            out.append(f"{name} run, copy {k}: scenario {f['scenario']!r} failed: {f['reason']}")
        if c["verified"] != rec["verified"] or c["verified"] != c["scenarios"]:
            out.append(f"{name} run, copy {k}: {c['verified']} of {c['scenarios']} scenarios verified (the recorded "
                       f"catalog verified {rec['verified']})")
        if not c["identical"]:
            out.append(f"{name} run, copy {k}: its environments or task bank differ from the recorded catalog's")
    if run["stats"]["peak_in_flight"] > concurrency:
        out.append(f"{name} run: {run['stats']['peak_in_flight']} requests in flight, more than the {concurrency} "
                   "allowed")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=8, help="copies of the recorded run, built at once")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight allowed at the endpoint")
    ap.add_argument("--workers", type=int, default=None,
                    help="scenarios at once (worker processes or threads; default: --concurrency)")
    ap.add_argument("--latency", type=float, default=2.0, help="seconds the endpoint takes per request")
    ap.add_argument("--stagger", type=float, default=0.0,
                    help="seconds between the copies' starts (the copies are the same scenarios: started together "
                    "they reach their CPU-bound phases together, which distinct scenarios do not)")
    ap.add_argument("--catalog", type=Path, default=EXAMPLE,
                    help="a recorded catalog: its llm_cache.sqlite answers, its catalog.db gives seeds and settings")
    ap.add_argument("--executor", choices=["local", "process"], default="process",
                    help="where the scenarios run: worker processes shared by the copies, or threads of this "
                    "process (--workers per copy); the serial run: one thread")
    ap.add_argument("--serial", action="store_true",
                    help="also the same copies one after another, one request in flight (speedup; slow)")
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--timeline", action="store_true", help="also the mean in flight during each second")
    args = ap.parse_args(argv)
    if args.copies < 1 or args.concurrency < 1:
        ap.error("--copies and --concurrency must be at least 1")
    workers = args.workers or args.concurrency
    catalog = args.catalog.resolve()
    rec = recorded_inputs(catalog)
    expected = outputs(catalog)

    from pipeline.embed import get_embedder
    from pipeline.run import git_revision

    get_embedder(None).encode(["warm-up"])  # load the dedup model before timing anything
    out: dict[str, Any] = {"catalog": str(args.catalog), "copies": args.copies, "concurrency": args.concurrency,
                           "workers": workers, "latency_s": args.latency, "stagger_s": args.stagger,
                           "executor": args.executor,
                           "cores": os.cpu_count(), "git_revision": git_revision()[:12],
                           "load_1min_before": round(os.getloadavg()[0], 2)}
    problems: list[str] = []
    with RemoteEndpoint(catalog, args.latency) as ep, tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        conc = one_run(ep.url, Path(tmp) / "concurrent", rec, args.copies, args.concurrency, workers, args.executor,
                       ep, expected, stagger=args.stagger)
        problems += problems_of("concurrent", conc, rec, args.concurrency)
        st = conc["stats"]
        ok_copies = [c for c in conc["copies"] if "error" not in c]
        out.update(scenarios=args.copies * len(rec["seeds"]), verified=sum(c["verified"] for c in ok_copies),
                   failed=sum(len(c["failed"]) for c in ok_copies) + len(conc["copies"]) - len(ok_copies),
                   identical_to_recorded=sum(bool(c.get("identical")) for c in conc["copies"]),
                   requests=st["requests"], outcomes=st["outcomes"], wall_s=round(conc["wall_s"], 1),
                   mean_in_flight=round(st["mean_in_flight"], 2), peak_in_flight=st["peak_in_flight"],
                   in_flight_vs_concurrency=round(st["mean_in_flight"] / args.concurrency, 3))
        if args.timeline:
            out["per_second"] = st["per_second"]
        if args.serial:
            ser = one_run(ep.url, Path(tmp) / "serial", rec, args.copies, 1, 1, "local", ep, expected, serial=True)
            problems += problems_of("serial", ser, rec, 1)
            out.update(serial_wall_s=round(ser["wall_s"], 1),
                       serial_mean_in_flight=round(ser["stats"]["mean_in_flight"], 2),
                       speedup_vs_serial=round(ser["wall_s"] / conc["wall_s"], 2))
        out["misses"] = ep.misses()
    out["load_1min_after"] = round(os.getloadavg()[0], 2)
    out["ok"] = not problems
    out["problems"] = problems
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        for k, v in out.items():
            if k != "problems":
                print(f"{k:>24}: {v}")
    for p in problems:
        print(f"FAILED: {p}", file=sys.stderr)
    if problems:
        print(f"bench_throughput: FAILED ({len(problems)} problem(s)); the figures above measure failed runs",
              file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
