"""Run inside the OpenEnv trainer venv: serve an exported environment with the real openenv-core
(``python -m <package>.server.app``), check it with OpenEnv's own runtime validator, and play two
episodes per task over the WebSocket client trainers use (reference calls + submit, submit only).
Prints one JSON report."""

import json
import socket
import subprocess
import sys
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stdout.read()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server not ready at {url} after {timeout}s")


def main(package: str, script_file: str) -> dict:
    from openenv.cli._validation import validate_running_environment
    from openenv.core import GenericEnvClient

    script = json.loads(open(script_file, encoding="utf-8").read())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", f"{package}.server.app", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    report = {"package": package, "episodes": []}
    try:
        wait_ready(url, proc)
        validation = validate_running_environment(url, timeout_s=10)
        report["validation"] = {
            "passed": validation["passed"],
            "failed": [c for c in validation["criteria"] if not c.get("passed")],
        }
        with GenericEnvClient(base_url=url).sync() as env:
            listed = env.step({"type": "list_tools"})
            report["listed_tools"] = sorted(t["name"] for t in listed.observation["tools"])
            for task_id, s in script.items():
                for mode in ("reference", "noop"):
                    first = env.reset(task_id=task_id)
                    results = []
                    if mode == "reference":
                        for call in s["calls"]:
                            r = env.step(
                                {
                                    "type": "call_tool",
                                    "tool_name": call["tool"],
                                    "arguments": call["arguments"],
                                }
                            )
                            results.append(
                                {
                                    "tool": call["tool"],
                                    "result": r.observation.get("result"),
                                    "ok": r.observation.get("metadata", {}).get("ok"),
                                    "done": r.done,
                                }
                            )
                    args = {"answer": s["reply"]} if mode == "reference" and s.get("reply") else {}
                    end = env.step({"type": "call_tool", "tool_name": s["submit"], "arguments": args})
                    after = env.step({"type": "call_tool", "tool_name": s["submit"], "arguments": {}})
                    state = env.state()
                    report["episodes"].append(
                        {
                            "task_id": task_id,
                            "mode": mode,
                            "instruction": first.observation.get("instruction"),
                            "reset_task_id": first.observation.get("task_id"),
                            "n_tools": len(first.observation.get("tools", [])),
                            "results": results,
                            "reward": end.reward,
                            "done": end.done,
                            "metadata": end.observation.get("metadata"),
                            "after_end_error": (after.observation.get("error") or {}).get("message"),
                            "state": state
                            if isinstance(state, dict)
                            else getattr(state, "__dict__", str(state)),
                        }
                    )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return report


if __name__ == "__main__":
    print("REPORT " + json.dumps(main(sys.argv[1], sys.argv[2]), default=str))
