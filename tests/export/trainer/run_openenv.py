"""Run inside the OpenEnv trainer venv (openenv 0.10 only, no envfoundry): run the exported
environment's README commands — ``openenv validate .``, ``uvicorn server.app:app`` from the
environment directory, ``openenv validate --url`` — then play two episodes per task over the
WebSocket client trainers use (reference calls + submit, submit only), check that two sessions
have separate databases, and serve the installed package (``python -m <package>.server.app``)
through its typed client. Prints one JSON report."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}: {proc.stdout.read()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server not ready at {url} after {timeout}s")


def bare_env() -> dict:
    """The environment without PYTHONPATH: directory mode must not need the installed package."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(cmd: list[str], cwd: Path) -> dict:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env=bare_env())
    return {"cmd": cmd, "rc": proc.returncode, "out": proc.stdout[-4000:], "err": proc.stderr[-2000:]}


def serve(cmd: list[str], cwd: Path, env: dict | None = None):
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def step(env, name: str, arguments: dict):
    return env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})


def episodes(url: str, script: dict) -> dict:
    from openenv.core import GenericEnvClient

    out: dict = {"episodes": []}
    with GenericEnvClient(base_url=url).sync() as env:
        listed = env.step({"type": "list_tools"})
        out["listed_tools"] = sorted(t["name"] for t in listed.observation["tools"])
        for task_id, s in script.items():
            for mode in ("reference", "noop"):
                first = env.reset(task_id=task_id)
                results = []
                if mode == "reference":
                    for call in s["calls"]:
                        r = step(env, call["tool"], call["arguments"])
                        results.append({"tool": call["tool"], "result": r.observation.get("result"),
                                        "ok": r.observation.get("ok"), "done": r.done})
                args = {"answer": s["reply"]} if mode == "reference" and s.get("reply") else {}
                end = step(env, s["submit"], args)
                after = step(env, s["submit"], {})
                state = env.state()
                out["episodes"].append({
                    "task_id": task_id,
                    "mode": mode,
                    "observation_keys": sorted(first.observation),
                    "instruction": first.observation.get("instruction"),
                    "reset_task_id": first.observation.get("task_id"),
                    "split": first.observation.get("split"),
                    "tier": first.observation.get("tier"),
                    "pass_rate": first.observation.get("pass_rate"),
                    "n_tools": len(first.observation.get("tools", [])),
                    "results": results,
                    "reward": end.reward,
                    "done": end.done,
                    "passed": end.observation.get("passed"),
                    "step_keys": sorted(end.observation),
                    "after_end_error": (after.observation.get("error") or {}).get("message"),
                    "state": state if isinstance(state, dict) else getattr(state, "__dict__", str(state)),
                })
    return out


def isolation(url: str, probe: dict) -> dict:
    """Session A writes; session B, opened on the same task, does not see it."""
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as a, GenericEnvClient(base_url=url).sync() as b:
        a.reset(task_id=probe["task_id"])
        b.reset(task_id=probe["task_id"])
        first = step(a, probe["write"]["tool"], probe["write"]["arguments"]).observation
        again_a = step(a, probe["write"]["tool"], probe["write"]["arguments"]).observation
        in_b = step(b, probe["write"]["tool"], probe["write"]["arguments"]).observation
    return {"first": first.get("ok"), "again_in_a": again_a.get("ok"), "first_in_b": in_b.get("ok")}


def typed_client(url: str, package: str, task_id: str) -> dict:
    mod = __import__(package)
    with mod.EnvFoundryEnv(base_url=url).sync() as env:
        first = env.reset(task_id=task_id)
        end = env.step(mod.CallToolAction(tool_name=first.observation.submit_tool, arguments={}))
        state = env.state()
    return {"reset_type": type(first.observation).__name__, "task_id": first.observation.task_id,
            "step_type": type(end.observation).__name__, "done": end.done, "reward": end.reward,
            "state_type": type(state).__name__, "state_done": state.done}


def main(env_dir: str, package: str, script_file: str) -> dict:
    root = Path(env_dir)
    script = json.loads(Path(script_file).read_text(encoding="utf-8"))
    probe = script.pop("__isolation__", None)
    report: dict = {"validate_dir": run([str(BIN / "openenv"), "validate", "."], root)}
    # Directory mode, as openenv.yaml (app: server.app:app) and the README say.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve([str(BIN / "uvicorn"), "server.app:app", "--port", str(port)], root, bare_env())
    try:
        wait_ready(url, proc)
        report["validate_url"] = run([str(BIN / "openenv"), "validate", "--url", url], root)
        with urllib.request.urlopen(url + "/schema", timeout=10) as r:
            schema = json.loads(r.read())
        report["schema"] = {k: v.get("title") for k, v in schema.items()}
        report.update(episodes(url, script))
        if probe:
            report["isolation"] = isolation(url, probe)
    finally:
        stop(proc)
    # Installed mode: `python -m <package>.server.app`, driven by the package's typed client.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = serve([sys.executable, "-m", f"{package}.server.app", "--port", str(port)], Path(os.getcwd()))
    try:
        wait_ready(url, proc)
        report["typed_client"] = typed_client(url, package, next(iter(script)))
    finally:
        stop(proc)
    return report


if __name__ == "__main__":
    print("REPORT " + json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3]), default=str))
