"""Run inside the OpenEnv trainer venv (openenv 0.10 only, no envfoundry): serve an exported environment with its
defaults (``uvicorn server.app:app`` from its directory, no ``ENVFOUNDRY_*`` variable set) and open ``n`` sessions
at once over OpenEnv's own WebSocket client: each resets to a task (round robin), replays the task's reference
calls, waits until every session is open and mid-episode, then submits with the reference reply. Then serve it again
with ``ENVFOUNDRY_MAX_SESSIONS=2`` and open a third session while two are open. Prints one JSON report: the start-up
lines, the rewards per task, the errors, and the refusal at the cap."""

import asyncio
import json
import os
import subprocess
import sys

from openenv.core import GenericEnvClient
from run_openenv_slow import free_port, wait_ready  # beside this script (its folder is on sys.path)


def serve(root: str, extra: dict):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENVFOUNDRY_")}
    env.update(extra)
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--port", str(port), "--log-level",
                             "warning"], cwd=root, env=env, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return proc, url


def stop(proc) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    return err


async def many(url: str, n: int, script: dict) -> dict:
    ids = sorted(script)
    opened = asyncio.Event()
    ready = [0]
    rewards: list = []
    errors: list = []

    def arrived():
        ready[0] += 1
        if ready[0] == n:
            opened.set()

    async def episode(i: int) -> None:
        task_id = ids[i % len(ids)]
        s = script[task_id]
        try:
            async with GenericEnvClient(base_url=url, connect_timeout_s=300, message_timeout_s=600,
                                        websocket_ping_interval_s=None) as env:
                await env.reset(task_id=task_id)
                for call in s["calls"]:
                    await env.step({"type": "call_tool", "tool_name": call["tool"], "arguments": call["arguments"]})
                arrived()
                await opened.wait()  # every session open at once
                args = {"answer": s["reply"]} if s["reply"] else {}
                r = await env.step({"type": "call_tool", "tool_name": s["submit"], "arguments": args})
                rewards.append([task_id, r.reward])
        except Exception as exc:  # counted and reported
            errors.append(repr(exc)[:300])
            arrived()

    await asyncio.gather(*(episode(i) for i in range(n)))
    return {"rewards": rewards, "errors": errors}


async def at_the_cap(url: str, task_id: str) -> dict:
    async with GenericEnvClient(base_url=url) as a, GenericEnvClient(base_url=url) as b:
        await a.reset(task_id=task_id)
        await b.reset(task_id=task_id)
        try:
            async with GenericEnvClient(base_url=url) as c:
                await c.reset(task_id=task_id)
            return {"refused": None}
        except Exception as exc:  # the server's refusal, as the client raises it
            return {"refused": str(exc)}


def main() -> None:
    root, n, script = sys.argv[1], int(sys.argv[2]), json.load(open(sys.argv[3]))
    report: dict = {}
    proc, url = serve(root, {})
    try:
        report["many"] = asyncio.run(many(url, n, script))
    finally:
        report["startup"] = stop(proc)
    proc, url = serve(root, {"ENVFOUNDRY_MAX_SESSIONS": "2"})
    try:
        report["cap"] = asyncio.run(at_the_cap(url, sorted(script)[0]))
    finally:
        report["cap_startup"] = stop(proc)
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
