"""Runtime benchmark: reset, in-process and HTTP tool calls, memory per instance, vs a server per episode.

Usage: .venv/bin/python benchmarks/bench_runtime.py [--out benchmarks/results/runtime.md] [--instances 1000]

The environment is synthetic: 20 STRICT tables chained by foreign keys, 100 rows each (2,000 rows),
a read tool (guard + query) and a write tool (guard + query bind + UPDATE + returns) per table.
Targets: reset <= 1 ms, in-process call <= 0.5 ms, HTTP call <= 5 ms, 1,000 instances < 2 GiB.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import platform
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.envdir import write_env_dir  # noqa: E402
from pipeline.ir import Environment, Param, Returns, Scenario, SeedRows, Step, Table, Tool  # noqa: E402
from pipeline.runtime import EnvInstance  # noqa: E402

N_TABLES, N_ROWS = 20, 100


def bench_env() -> Environment:
    tables, seed, tools = [], [], []
    for k in range(N_TABLES):
        ref = f",\n  parent_id INTEGER NOT NULL REFERENCES t{k - 1}(id)" if k else ""
        ddl = (f"CREATE TABLE t{k} (\n  id INTEGER PRIMARY KEY,\n  name TEXT NOT NULL UNIQUE,\n  status TEXT NOT NULL "
               f"CHECK (status IN ('open', 'closed')),\n  amount REAL NOT NULL,\n  note TEXT{ref}\n) STRICT")
        tables.append(Table(name=f"t{k}", ddl=ddl))
        rows = []
        for i in range(1, N_ROWS + 1):
            row = {"id": i, "name": f"item {k}-{i}", "status": "open" if i % 3 else "closed", "amount": i * 1.25,
                   "note": f"note {i} of table {k} " * 3}
            if k:
                row["parent_id"] = (i % N_ROWS) + 1
            rows.append(row)
        seed.append(SeedRows(table=f"t{k}", rows=rows))
        item = Param(name="item_id", type="integer", minimum=1)
        exists = Step(kind="guard", sql=f"SELECT 1 FROM t{k} WHERE id = :item_id", must="exist", error="item {item_id} not found")
        tools.append(Tool(name=f"get_t{k}", description=f"Get one t{k} item", kind="read", params=[item], steps=[exists],
                          returns=Returns(sql=f"SELECT * FROM t{k} WHERE id = :item_id", mode="one")))
        tools.append(Tool(
            name=f"close_t{k}", description=f"Close a t{k} item and add to its amount", kind="write",
            params=[item, Param(name="delta", type="number", minimum=0, maximum=100)],
            steps=[exists,
                   Step(kind="query", bind="cur", sql=f"SELECT status, amount FROM t{k} WHERE id = :item_id"),
                   Step(kind="write", sql=f"UPDATE t{k} SET status = 'closed', amount = :cur_amount + :delta WHERE id = :item_id")],
            returns=Returns(sql=f"SELECT id, status, amount FROM t{k} WHERE id = :item_id", mode="one"),
        ))
    return Environment(scenario=Scenario(name="Runtime benchmark", description="20 chained tables, 2,000 rows"),
                       tables=tables, seed=seed, tools=tools)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def summary(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    return f"median {statistics.median(ms):.3f} ms (p10 {q[9]:.3f}, p90 {q[89]:.3f}, n={len(ms)})"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env_dir: Path, db: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(env_dir / "server.py"), "--db", str(db), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                c.close()
                return proc, port
        except OSError:
            time.sleep(0.005)
    proc.kill()
    raise RuntimeError("server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "runtime.md"))
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--n", type=int, default=2000, help="repetitions per latency measurement")
    args = ap.parse_args()
    env = bench_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench-runtime-"))
    res: dict[str, str] = {}
    try:
        env_dir = write_env_dir(env, tmp / "env")
        db_bytes = (env_dir / "initial.db").stat().st_size

        inst = EnvInstance(env, env_dir / "initial.db")
        assert inst.query("SELECT COUNT(*) FROM t19") == N_ROWS
        read_args, write_args = {"item_id": 41}, {"item_id": 41, "delta": 1.5}
        assert inst.call("get_t7", read_args)["ok"] and inst.call("close_t7", write_args)["ok"]
        timed(lambda: inst.call("get_t7", read_args), 200)  # warm the statement cache
        res["in-process read call (guard + returns one)"] = summary(timed(lambda: inst.call("get_t7", read_args), args.n))
        res["in-process write call (guard + query + UPDATE + returns)"] = summary(
            timed(lambda: inst.call("close_t7", write_args), args.n))

        def dirty_reset() -> float:
            inst.call("close_t3", write_args)
            t0 = time.perf_counter()
            inst.reset()
            return (time.perf_counter() - t0) * 1000

        reset_ms = [dirty_reset() for _ in range(args.n)]
        assert inst.query("SELECT status FROM t3 WHERE id = 41") == "open"
        res["reset (backup API from the shared template, after a write)"] = summary(reset_ms)
        res["new EnvInstance (template cached)"] = summary(timed(lambda: EnvInstance(env, env_dir / "initial.db").close(), 200))
        blob = inst.conn.serialize()
        res["(comparison) reset by sqlite3 deserialize of template bytes"] = summary(timed(lambda: inst.conn.deserialize(blob), args.n))

        gc.collect()
        before = rss_mib()
        live = [EnvInstance(env, env_dir / "initial.db") for _ in range(args.instances)]
        for i, x in enumerate(live[:: max(1, len(live) // 50)]):
            x.call("close_t1", {"item_id": (i % N_ROWS) + 1, "delta": 1})
        gc.collect()
        delta = rss_mib() - before
        res[f"memory of {args.instances} live instances (RSS delta)"] = (
            f"{delta:.0f} MiB total, {delta / args.instances * 1024:.0f} KiB per instance (initial.db is {db_bytes / 1024:.0f} KiB)")
        for x in live:
            x.close()
        del live

        db = tmp / "live.db"
        shutil.copyfile(env_dir / "initial.db", db)
        proc, port = start_server(env_dir, db)
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            headers = {"Content-Type": "application/json"}

            def post(path: str, body: dict) -> None:
                conn.request("POST", path, json.dumps(body), headers)
                r = conn.getresponse()
                r.read()
                assert r.status == 200, r.status

            timed(lambda: post("/tools/get_t7", read_args), 200)
            res["HTTP read call, keep-alive loopback"] = summary(timed(lambda: post("/tools/get_t7", read_args), args.n // 2))
            res["HTTP write call, keep-alive loopback (committed to the file)"] = summary(
                timed(lambda: post("/tools/close_t7", write_args), args.n // 4))
            res["HTTP POST /reset (file restored from memory)"] = summary(timed(lambda: post("/reset", {}), args.n // 4))

            def fresh_connection_call() -> None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("POST", "/tools/get_t7", json.dumps(read_args), headers)
                c.getresponse().read()
                c.close()

            res["HTTP read call, new connection per call"] = summary(timed(fresh_connection_call, args.n // 4))
            conn.close()
        finally:
            stop(proc)

        def restart_episode() -> None:
            shutil.copyfile(env_dir / "initial.db", db)
            p, _ = start_server(env_dir, db)
            stop(p)

        res["(baseline) new server process per episode: copy db + start + ready + stop"] = summary(timed(restart_episode, 5))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        "# Runtime benchmark",
        "",
        f"Reproduce: `.venv/bin/python benchmarks/bench_runtime.py --instances {args.instances} --n {args.n}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}. Environment: {N_TABLES} STRICT tables chained by foreign keys, "
        f"{N_TABLES * N_ROWS} rows, {len(env.tools)} tools.",
        "",
        "Targets: reset <= 1 ms, in-process call <= 0.5 ms, HTTP call <= 5 ms, 1,000 instances < 2 GiB.",
        "",
        "| measurement | result |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in res.items()],
        "",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
