"""Rollouts at scale: the exported OpenEnv server with many concurrent sessions, each with its own database.

    .venv/bin/python benchmarks/bench_rollouts.py                    # 1,000 sessions on the example's first env
    .venv/bin/python benchmarks/bench_rollouts.py --sessions 200 --json

The example catalog's first environment is exported (``envfoundry export --format openenv``) and served as its
README says (``uvicorn server.app:app`` from the export directory, in the OpenEnv trainer venv made by
``scripts/setup_trainers.sh``), with ``ENVFOUNDRY_MAX_SESSIONS`` above the session count. A driver in the same
venv opens ``--sessions`` WebSocket sessions with OpenEnv's own ``GenericEnvClient`` (real HTTP/WebSocket on
loopback), all at once: each resets to a task (round robin over the env's tasks), replays the task's reference
calls and submits. With every session open and mid-episode, the server's resident memory is read from /proc.
Printed: sessions, wall time, episodes per second, server RSS before and with every session open (and per
session), and how many episodes earned reward 1 (every one should: they replay the reference solution).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DRIVER = r'''
import asyncio, json, sys, time
from openenv.core import GenericEnvClient

url, n, script_path, rss_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
tasks = json.load(open(script_path))
ids = sorted(tasks)

def rss(pid_file=rss_path):
    pid = int(open(pid_file).read())
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None

async def main():
    opened = asyncio.Event()
    ready, rewards, errors = [0], [], []
    async def episode(i):
        task_id = ids[i % len(ids)]
        t = tasks[task_id]
        try:
            async with GenericEnvClient(base_url=url, connect_timeout_s=300, message_timeout_s=600,
                                        websocket_ping_interval_s=None) as env:
                await env.reset(task_id=task_id)
                for c in t["calls"]:
                    await env.step({"type": "call_tool", "tool_name": c["tool"], "arguments": c["arguments"]})
                ready[0] += 1
                if ready[0] == n:
                    opened.set()
                await opened.wait()  # every session open and mid-episode: memory is read now
                args = {"answer": t["reply"]} if t["reply"] else {}
                r = await env.step({"type": "call_tool", "tool_name": t["submit"], "arguments": args})
                rewards.append(r.reward)
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors.append(repr(e)[:200])
            ready[0] += 1
            if ready[0] == n:
                opened.set()
    t0 = time.perf_counter()
    runs = [asyncio.create_task(episode(i)) for i in range(n)]
    await opened.wait()
    t_open = time.perf_counter() - t0
    peak = rss()
    await asyncio.gather(*runs)
    wall = time.perf_counter() - t0
    print(json.dumps({"open_s": round(t_open, 2), "wall_s": round(wall, 2), "rss_open_mib": round(peak, 1),
                      "rewarded": sum(1 for r in rewards if r == 1), "finished": len(rewards),
                      "errors": len(errors), "first_error": errors[0] if errors else None}))

asyncio.run(main())
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--catalog", default=str(ROOT / "generated" / "quickstart"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from pipeline.export import export_catalog, load_catalog
    from pipeline.export.common import reference_reply
    from pipeline.export.openenv_fmt import submit_tool_name

    python = ROOT / ".venv-trainers" / "openenv" / "bin" / "python"
    if not python.is_file():
        sys.exit(f"{python} is missing: run scripts/setup_trainers.sh (the OpenEnv trainer venv)")
    cat = load_catalog(Path(args.catalog))
    env_id = sorted(cat.envs)[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-rollouts-"))
    pkg = next(p for p in export_catalog(Path(args.catalog), "openenv", tmp / "export").paths if p.name.endswith(env_id))
    submit = submit_tool_name({t.name for t in cat.envs[env_id].env.tools})
    script = {t.task_id: {"calls": [c.model_dump(mode="json") for c in t.reference_solution],
                          "reply": reference_reply(t.verifier.model_dump(mode="json")), "submit": submit}
              for t in cat.tasks if t.env_id == env_id}
    (tmp / "script.json").write_text(json.dumps(script))
    (tmp / "driver.py").write_text(DRIVER)

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(python), "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning"],
        cwd=pkg, env={**os.environ, "ENVFOUNDRY_MAX_SESSIONS": str(args.sessions + 8), "PYTHONPATH": str(pkg)})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("the OpenEnv server did not come up")
                time.sleep(0.2)
        rss_idle = _rss_mib(server.pid)
        (tmp / "server.pid").write_text(str(server.pid))
        done = subprocess.run([str(python), str(tmp / "driver.py"), url, str(args.sessions), str(tmp / "script.json"),
                               str(tmp / "server.pid")], capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            sys.exit(f"driver failed:\n{done.stderr[-3000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(30)
    out = {"sessions": args.sessions, "env": env_id, "tasks": len(script), **res,
           "episodes_per_s": round(res["finished"] / res["wall_s"], 1) if res["wall_s"] else None,
           "rss_idle_mib": round(rss_idle, 1),
           "rss_per_session_kib": round((res["rss_open_mib"] - rss_idle) * 1024 / args.sessions, 1),
           "load_1min": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v}")


if __name__ == "__main__":
    main()
