"""Run inside the OpenEnv trainer venv: serve an exported environment (``uvicorn server.app:app``, 2 workers,
a 2-second call limit) and, while one session's call runs into its time limit, play whole episodes (reset, a
call, submit) in four other sessions over OpenEnv's WebSocket client. Prints one JSON report: the slow call's
outcome and duration, and the other sessions' episodes with the latency of each message."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from openenv.core import GenericEnvClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)  # polling for readiness
    raise RuntimeError(f"server not ready at {url} after {timeout}s")


async def drive(url: str, task_id: str, fast: dict, slow: dict) -> dict:
    report: dict = {"episodes": [], "slow": None}
    slow_done = asyncio.Event()

    async def slow_session() -> None:
        async with GenericEnvClient(base_url=url, message_timeout_s=60) as env:
            await env.reset(task_id=task_id)
            started = time.monotonic()
            r = await env.step({"type": "call_tool", **slow})
            report["slow"] = {"seconds": time.monotonic() - started, "result": r.observation.get("result"),
                              "ok": r.observation.get("ok")}
            slow_done.set()

    async def other_session() -> None:
        async with GenericEnvClient(base_url=url, message_timeout_s=60) as env:
            await asyncio.sleep(0.3)  # the slow call is running by now (it takes 2 s)
            while not slow_done.is_set():
                latencies = []
                for message in ({"reset": task_id}, fast, {"tool_name": "submit", "arguments": {}}):
                    started = time.monotonic()
                    if "reset" in message:
                        await env.reset(task_id=task_id)
                    else:
                        r = await env.step({"type": "call_tool", **message})
                    latencies.append(time.monotonic() - started)
                report["episodes"].append({"latencies": latencies, "done": r.done,
                                           "during_slow_call": not slow_done.is_set()})

    await asyncio.gather(slow_session(), *(other_session() for _ in range(4)))
    return report


def main() -> None:
    root, task_id, fast, slow = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ENVFOUNDRY_CALL_TIMEOUT": "2", "ENVFOUNDRY_WORKERS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--port", str(port),
                             "--log-level", "warning"], cwd=root, env=env)
    try:
        wait_ready(url, proc)
        report = asyncio.run(drive(url, task_id, fast, slow))
    finally:
        proc.terminate()
        proc.wait(30)
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
