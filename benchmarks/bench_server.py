"""server.py over HTTP with many concurrent clients, against a bare FastAPI route served the same way.

    .venv/bin/python benchmarks/bench_server.py                          # 100 clients, 3 rounds alternating
    .venv/bin/python benchmarks/bench_server.py --clients 100 --seconds 8 --rounds 3 --json

The example catalog's first environment's ``server.py`` is rendered (``pipeline.server.render``) and served as the
README says (``python server.py --db COPY --port PORT``, uvicorn, one process). The baseline is a bare FastAPI app
(one ``POST /tools/{name}`` route answering ``{"ok": true, "result": <the body>}``) served the same way (uvicorn
on a socket, warning log level, no access log). A load process (plain asyncio, HTTP/1.1 keep-alive: the same
client for both) holds ``--clients`` connections, each its own session (``X-Session-Id``), and sends the
example's read-only reference calls round robin for ``--seconds`` after a warm-up; the two servers alternate
``--rounds`` times each. Printed: calls per second (median over rounds), the ratio, server CPU seconds, errors.
Exit 1, the reasons on stderr, when a run fails: a call answered other than HTTP 200, or none answered.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BARE_APP = r'''
import socket, sys

import uvicorn
from fastapi import FastAPI, Request

app = FastAPI()


@app.get("/health")
async def health():
    return {"ok": True}


@app.post("/tools/{name}")
async def call(name: str, request: Request):
    return {"ok": True, "result": await request.json()}


if __name__ == "__main__":
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(sys.argv[1])))
    sock.listen(2048)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
'''

LOAD = r'''
import asyncio, json, sys, time

port, clients, seconds, warmup, calls = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
requests = [(f"POST /tools/{c['tool']} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
             f"Content-Length: {len(json.dumps(c['arguments']).encode())}\r\nX-Session-Id: SID\r\n\r\n"
             + json.dumps(c["arguments"])) for c in calls]

async def client(i, state):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    mine = [r.replace("SID", f"bench-{i}").encode() for r in requests]
    k = i
    while not state["stop"]:
        writer.write(mine[k % len(mine)])
        k += 1
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(l.split(":", 1)[1]) for l in lines if l.lower().startswith("content-length:"))
        await reader.readexactly(length)
        if state["counting"]:
            state["ok" if lines[0].split()[1] == "200" else "bad"] += 1
    writer.close()

async def main():
    state = {"stop": False, "counting": False, "ok": 0, "bad": 0}
    tasks = [asyncio.create_task(client(i, state)) for i in range(clients)]
    await asyncio.sleep(warmup)
    state["counting"] = True
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    state["counting"] = False
    wall = time.perf_counter() - t0
    state["stop"] = True
    await asyncio.gather(*tasks, return_exceptions=True)
    print(json.dumps({"ok": state["ok"], "errors": state["bad"], "seconds": round(wall, 2),
                      "calls_per_s": round(state["ok"] / wall, 1)}))

asyncio.run(main())
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(argv: list[str], port: int, tmp: Path, args: argparse.Namespace, calls: list[dict]) -> dict:
    server = subprocess.Popen(argv, cwd=tmp, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300  # a loaded machine starts it slowly
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit(f"the server did not come up: {argv}")
                time.sleep(0.2)  # polling for readiness
        cpu0 = _cpu_s(server.pid)
        done = subprocess.run([sys.executable, str(tmp / "load.py"), str(port), str(args.clients), str(args.seconds),
                               str(args.warmup), json.dumps(calls)], capture_output=True, text=True, timeout=600)
        cpu = _cpu_s(server.pid) - cpu0
        if done.returncode != 0:
            sys.exit(f"load failed:\n{done.stderr[-3000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(30)
    return {**res, "server_cpu_s": round(cpu, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--catalog", default=str(ROOT / "generated" / "quickstart"))
    ap.add_argument("--also", type=Path, metavar="SERVER_PY", help="another server.py of the same environment (e.g. "
                    "rendered by an older envfoundry), served and loaded the same way in the same rounds")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from pipeline.export import load_catalog
    from pipeline.server.render import render_server

    cat = load_catalog(Path(args.catalog))
    env_id = sorted(cat.envs)[0]
    ce = cat.envs[env_id]
    reads = {t.name for t in ce.env.tools if t.kind == "read"}
    calls = [c.model_dump(mode="json") for t in ce.tasks for c in t.reference_solution
             if c.tool in reads and not any(isinstance(v, str) and v.startswith("$") for v in c.arguments.values())]
    if not calls:
        sys.exit(f"{env_id}: no read-only reference call without $N arguments")
    tmp = Path(tempfile.mkdtemp(prefix="bench-server-"))
    (tmp / "server.py").write_text(render_server(ce.env))
    shutil.copyfile(ce.path / "initial.db", tmp / "live.db")
    (tmp / "bare.py").write_text(BARE_APP)
    (tmp / "load.py").write_text(LOAD)
    servers = {
        "server.py": lambda port: [sys.executable, str(tmp / "server.py"), "--db", str(tmp / "live.db"), "--port",
                                   str(port), "--max-sessions", str(args.clients + 8)],
        "bare": lambda port: [sys.executable, str(tmp / "bare.py"), str(port)],
    }
    if args.also:
        shutil.copyfile(args.also, tmp / "also.py")
        servers["also"] = lambda port: [sys.executable, str(tmp / "also.py"), "--db", str(tmp / "live.db"), "--port",
                                        str(port), "--max-sessions", str(args.clients + 8)]
    runs: dict[str, list[dict]] = {k: [] for k in servers}
    for r in range(args.rounds):
        order = list(servers) if r % 2 == 0 else list(servers)[::-1]
        for kind in order:
            port = _free_port()
            res = run_once(servers[kind](port), port, tmp, args, calls)
            runs[kind].append(res)
            print(f"{kind:>9} run {r + 1}: {json.dumps(res)}", file=sys.stderr, flush=True)
    med = {k: round(statistics.median(x["calls_per_s"] for x in v), 1) for k, v in runs.items()}
    out = {"clients": args.clients, "env": env_id, "calls": len(calls), "rounds": args.rounds, "runs": runs,
           "server_calls_per_s": med["server.py"], "bare_calls_per_s": med["bare"],
           "ratio": round(med["server.py"] / med["bare"], 3),
           "errors": sum(x["errors"] for v in runs.values() for x in v), "load_1min": os.getloadavg()[0]}
    if args.also:
        out["also_calls_per_s"] = med["also"]
        out["also_ratio"] = round(med["also"] / med["bare"], 3)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            if k != "runs":
                print(f"{k:>20}: {v}")
    failed = problems_of(runs)
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    if failed:
        sys.exit(f"bench_server: FAILED ({len(failed)} problem(s)); the figures above measure failed runs")


def problems_of(runs: dict[str, list[dict]]) -> list[str]:
    """Why the runs failed: calls answered other than HTTP 200, or a run in which none was answered."""
    out = []
    for kind, v in runs.items():
        for i, x in enumerate(v, start=1):
            if x["errors"]:
                out.append(f"{kind} run {i}: {x['errors']} call(s) answered other than HTTP 200")
            if not x["ok"]:
                out.append(f"{kind} run {i}: no call answered")
    return out


if __name__ == "__main__":
    main()
