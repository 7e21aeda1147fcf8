"""Rollouts at scale: the exported OpenEnv server with many concurrent sessions, each with its own database.

    .venv/bin/python benchmarks/bench_rollouts.py                       # 1,000 sessions on the example's first env
    .venv/bin/python benchmarks/bench_rollouts.py --baseline --rounds 3  # against a do-nothing env, alternating
    .venv/bin/python benchmarks/bench_rollouts.py --sessions 200 --json

The example catalog's first environment is exported (``envfoundry export --format openenv``) and served as its
README says (``uvicorn server.app:app`` from the export directory, in the OpenEnv trainer venv made by
``scripts/setup_trainers.sh``), with ``ENVFOUNDRY_MAX_SESSIONS`` above the session count. A driver in the same
venv opens ``--sessions`` WebSocket sessions with OpenEnv's own ``GenericEnvClient`` (real HTTP/WebSocket on
loopback), all at once: each resets to a task (round robin over the env's tasks), replays the task's reference
calls (a ``$N.field`` argument filled from call N's result, as the agent would) and, once every session is open
and mid-episode (the server's resident memory is read from /proc then), submits.

``--baseline`` also serves a do-nothing OpenEnv environment the same way (an ``Environment`` as OpenEnv's docs
write one: ``reset`` and ``step`` return a constant observation, ``submit`` ends the episode with reward 1; OpenEnv's
defaults otherwise) and drives it with the same driver and the same episodes, the two servers alternating within
the run (``--rounds`` each), and prints the ratio of the medians of episodes per second.

The benchmark's episodes replay each task's reference, so every episode of a task makes the same writes, and the
export's reward reuses the verifier's checks of the task's first such episode (``taskrt``: same writes from the
same state, same database). ``--no-memo`` also serves the export with that reuse off
(``ENVFOUNDRY_REWARD_MEMO=0``) in the same rounds: every submit then runs the verifier's queries, as for a
rollout whose writes no earlier one made.

Printed per run: sessions, wall time, episodes per second, server and driver CPU seconds, server RSS before and
with every session open (per session; for the export also per session on top of its database's own size in
memory, ``db_in_memory_kib``: what one in-memory copy takes, measured here), and how many episodes earned reward
1 (every one should: they replay the reference solution). Exit 1, the reasons on stderr, when a run fails: a
session that raised, an episode that did not finish, or one not rewarded.
"""

from __future__ import annotations

import argparse
import json
import os
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

DRIVER = r'''
import asyncio, json, re, sys, time
from openenv.core import GenericEnvClient

url, n, script_path, rss_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
tasks = json.load(open(script_path))
ids = sorted(tasks)
REF = re.compile(r"^\$(\d+)\.([A-Za-z_][A-Za-z0-9_]*)$")

def rss(pid_file=rss_path):
    pid = int(open(pid_file).read())
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None

def resolve(arguments, results):
    """``$N.field``: the field of call N's result (a row, or the first row of a list), as pipeline/runtime/replay.py."""
    out = {}
    for k, v in arguments.items():
        m = REF.match(v) if isinstance(v, str) else None
        if m and 1 <= int(m.group(1)) <= len(results):
            row = results[int(m.group(1)) - 1]
            row = row[0] if isinstance(row, list) and row else row
            if isinstance(row, dict) and m.group(2) in row:
                v = row[m.group(2)]
        out[k] = v
    return out

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
                results = []
                for c in t["calls"]:
                    r = await env.step({"type": "call_tool", "tool_name": c["tool"],
                                        "arguments": resolve(c["arguments"], results)})
                    obs = r.observation
                    try:
                        results.append(json.loads(obs.get("result") if isinstance(obs, dict) else obs.result))
                    except (TypeError, ValueError, AttributeError):
                        results.append(None)
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
                      "errors": len(errors), "first_error": errors[0] if errors else None,
                      "client_cpu_s": round(time.process_time(), 1)}))

asyncio.run(main())
'''

# A do-nothing OpenEnv environment, written as OpenEnv's docs write one (sync reset/step, OpenEnv's defaults).
BASELINE_APP = r'''
import os

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State

SUBMIT = os.environ.get("BASELINE_SUBMIT", "submit")


class NothingEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id, step_count=0)
        return Observation(done=False, reward=0.0)

    def step(self, action, timeout_s=None, **kwargs):
        self._state.step_count += 1
        done = action.tool_name == SUBMIT
        return CallToolObservation(tool_name=action.tool_name, result="{}", done=done, reward=1.0 if done else 0.0)

    @property
    def state(self):
        return self._state


app = create_app(NothingEnvironment, CallToolAction, CallToolObservation, env_name="nothing",
                 max_concurrent_envs=int(os.environ.get("ENVFOUNDRY_MAX_SESSIONS", "64")))
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


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _wait_up(url: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300  # a loaded machine starts it slowly
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=5).read()
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the OpenEnv server did not come up")
            time.sleep(0.2)  # polling for readiness


def db_in_memory_kib(path: Path, n: int = 300) -> float:
    """What one in-memory copy of the database takes in this process (SQLite's page cache holding it): the RSS
    that filling ``n`` open empty connections with it adds, per copy. (Measured on connections that stay open:
    RSS of ``n`` filled connections minus that of ``n`` empty ones closed before, as it was until issue 32's
    memory round, came out ~18 KiB low, the filled ones reusing the memory the closed ones had touched.)"""
    import gc
    import sqlite3

    src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    gc.collect()
    conns = [sqlite3.connect(":memory:") for _ in range(n)]
    for c in conns:
        c.execute("SELECT 1").fetchall()
    before = _rss_mib(os.getpid())
    for c in conns:
        src.backup(c)
        c.execute("SELECT 1").fetchall()
    used = (_rss_mib(os.getpid()) - before) * 1024 / n
    for c in conns:
        c.close()
    src.close()
    return used


def reward_ms(pkg: Path, script: dict, repeat: int = 20) -> dict:
    """Milliseconds per submit of the reward on each task's final database (its reference replayed), in this
    process with the export's own taskrt: as ``reward.score`` was before issue 32 (the schema read, every row of
    every table), as the server scores a rollout whose writes no earlier one of the task made (cached layouts, only
    the tables outside ``mutable_tables`` a statement may have written, assertions on unwritten tables answered
    from the initial state), and when an earlier episode of the task made the same writes (``memo_ms``: its
    checks reused); the same scores."""
    sys.path.insert(0, str(pkg))
    try:
        from server import taskrt  # type: ignore[import-not-found]  # the export's vendored runtime
    finally:
        sys.path.remove(str(pkg))
    from pipeline.runtime.replay import resolve

    reward = taskrt.reward
    b = taskrt.Bundle(pkg / "data")
    initial = b.initial_snapshot()
    before = now = memo = 0.0
    for task_id, t in script.items():
        session, outcomes = taskrt.Session(b), []
        for c in t["calls"]:
            outcomes.append(session.call(c["tool"], resolve(c["arguments"], outcomes)))
        task, conn = b.task(task_id), session.conn
        frozen = sorted(set(initial) - set(task["verifier"].get("mutable_tables") or []))
        t0 = time.perf_counter()
        for _ in range(repeat):  # before: the goals and gates, then the schema and every row of every table
            old = reward.score(dict(task["verifier"], mutable_tables=list(initial)), conn, answer=t["reply"])
            moved = reward.changed_tables(initial, reward.snapshot(conn), frozen)
        t1 = time.perf_counter()
        for _ in range(repeat):
            new = b.score(task, conn, answer=t["reply"])
        t2 = time.perf_counter()
        b.score(task, conn, answer=t["reply"], session=session)  # the first episode with these writes
        t3 = time.perf_counter()
        for _ in range(repeat):
            again = b.score(task, conn, answer=t["reply"], session=session)
        t4 = time.perf_counter()
        assert new.reward == again.reward == (0.0 if moved else old.reward) and new.passed, (task_id, new)
        before, now, memo = before + t1 - t0, now + t2 - t1, memo + t4 - t3
        session.close()
    n = repeat * len(script)
    return {"before_ms": round(before / n * 1000, 3), "now_ms": round(now / n * 1000, 3),
            "memo_ms": round(memo / n * 1000, 3)}


def run_once(python: Path, app_dir: Path, sessions: int, tmp: Path, submit: str, extra_env: dict | None = None) -> dict:
    """Serve ``app_dir`` (``uvicorn server.app:app``), drive ``sessions`` episodes, stop it: the driver's figures
    plus the server's idle RSS and CPU seconds over the drive."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ENVFOUNDRY_MAX_SESSIONS": str(sessions + 8), "PYTHONPATH": str(app_dir),
           "BASELINE_SUBMIT": submit, **(extra_env or {})}
    server = subprocess.Popen(
        [str(python), "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning"], cwd=app_dir, env=env)
    try:
        _wait_up(url, server)
        rss_idle = _rss_mib(server.pid)
        (tmp / "server.pid").write_text(str(server.pid))
        cpu0 = _cpu_s(server.pid)
        done = subprocess.run([str(python), str(tmp / "driver.py"), url, str(sessions), str(tmp / "script.json"),
                               str(tmp / "server.pid")], capture_output=True, text=True, timeout=3600)
        cpu = _cpu_s(server.pid) - cpu0
        if done.returncode != 0:
            sys.exit(f"driver failed:\n{done.stderr[-3000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(30)
    return {**res, "episodes_per_s": round(res["finished"] / res["wall_s"], 1) if res["wall_s"] else None,
            "server_cpu_s": round(cpu, 1), "rss_idle_mib": round(rss_idle, 1),
            "rss_per_session_kib": round((res["rss_open_mib"] - rss_idle) * 1024 / sessions, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--catalog", default=str(ROOT / "generated" / "quickstart"))
    ap.add_argument("--baseline", action="store_true", help="also a do-nothing OpenEnv env, alternating; the ratio")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each server (alternating with --baseline)")
    ap.add_argument("--also", type=Path, metavar="PKG", help="another OpenEnv export of the same environment (e.g. "
                    "made by an older envfoundry), served and driven the same way in the same rounds")
    ap.add_argument("--no-memo", action="store_true", help="also the export with the reward's reuse of checks off "
                    "(ENVFOUNDRY_REWARD_MEMO=0), in the same rounds")
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
    base = tmp / "baseline"
    (base / "server").mkdir(parents=True)
    (base / "server" / "__init__.py").write_text("")
    (base / "server" / "app.py").write_text(BASELINE_APP)
    db_kib = (pkg / "data" / "initial.db").stat().st_size / 1024
    db_mem_kib = db_in_memory_kib(pkg / "data" / "initial.db")

    reward = reward_ms(pkg, script)
    runs: dict[str, list[dict]] = {"export": [], "baseline": [], "also": [], "no_memo": []}
    for r in range(args.rounds):
        order = [("export", pkg), ("baseline", base)] if args.baseline else [("export", pkg)]
        if args.also:
            order.append(("also", args.also.resolve()))
        if args.no_memo:
            order.append(("no_memo", pkg))
        for kind, app_dir in order if r % 2 == 0 else order[::-1]:
            extra = {"ENVFOUNDRY_REWARD_MEMO": "0"} if kind == "no_memo" else None
            res = run_once(python, app_dir, args.sessions, tmp, submit, extra)
            runs[kind].append(res)
            print(f"{kind:>8} run {r + 1}: {json.dumps(res)}", file=sys.stderr, flush=True)

    def med(kind: str, key: str) -> float | None:
        values = [x[key] for x in runs[kind] if x.get(key) is not None]
        return round(statistics.median(values), 1) if values else None

    out = {"sessions": args.sessions, "env": env_id, "tasks": len(script), "rounds": args.rounds,
           "db_kib": round(db_kib, 1), "db_in_memory_kib": round(db_mem_kib, 1), "reward_per_submit": reward,
           "runs": runs,
           "export": {k: med("export", k) for k in ("episodes_per_s", "open_s", "server_cpu_s", "rss_open_mib",
                                                    "rss_per_session_kib")},
           "load_1min": os.getloadavg()[0]}
    out["export"]["overhead_per_session_kib"] = round(out["export"]["rss_per_session_kib"] - db_mem_kib, 1)
    out["export"]["rewarded"] = min(x["rewarded"] for x in runs["export"])
    if args.baseline:
        out["baseline"] = {k: med("baseline", k) for k in ("episodes_per_s", "open_s", "server_cpu_s",
                                                           "rss_open_mib", "rss_per_session_kib")}
        out["ratio"] = round(out["export"]["episodes_per_s"] / out["baseline"]["episodes_per_s"], 3)
    if args.also:
        out["also"] = {k: med("also", k) for k in ("episodes_per_s", "open_s", "server_cpu_s", "rss_open_mib",
                                                   "rss_per_session_kib")}
        if args.baseline:
            out["also_ratio"] = round(out["also"]["episodes_per_s"] / out["baseline"]["episodes_per_s"], 3)
    if args.no_memo:
        out["no_memo"] = {k: med("no_memo", k) for k in ("episodes_per_s", "open_s", "server_cpu_s", "rss_open_mib",
                                                         "rss_per_session_kib")}
        if args.baseline:
            out["no_memo_ratio"] = round(out["no_memo"]["episodes_per_s"] / out["baseline"]["episodes_per_s"], 3)
    out["problems"] = problems_of(runs, args.sessions)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            if k not in ("runs", "problems"):
                print(f"{k:>10}: {v}")
    for p in out["problems"]:
        print(f"FAILED: {p}", file=sys.stderr)
    if out["problems"]:
        sys.exit(f"bench_rollouts: FAILED ({len(out['problems'])} problem(s)); the figures above measure failed runs")


def problems_of(runs: dict[str, list[dict]], sessions: int) -> list[str]:
    """Why the runs failed: a session that raised, did not finish, or was not rewarded (each replays its task's
    reference solution, so every episode should earn reward 1)."""
    out = []
    for kind, rs in runs.items():
        for i, r in enumerate(rs, start=1):
            if r.get("errors"):
                out.append(f"{kind} run {i}: {r['errors']} session(s) failed (first: {r.get('first_error')})")
            if r.get("finished", 0) < sessions:
                out.append(f"{kind} run {i}: {r.get('finished', 0)} of {sessions} episodes finished")
            if r.get("rewarded", 0) < r.get("finished", 0):
                out.append(f"{kind} run {i}: {r['finished'] - r.get('rewarded', 0)} finished episode(s) not rewarded")
    return out


if __name__ == "__main__":
    main()
