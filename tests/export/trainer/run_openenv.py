"""Run inside the OpenEnv trainer venv (openenv 0.10 only, no envfoundry): run the exported
environment's README commands as written — ``openenv validate . --level static``, ``uvicorn
server.app:app`` from the environment directory, ``openenv validate --url`` — then openenv's own
validation runner at its runtime level (the image ``server/Dockerfile`` would build replaced by the
directory served with uvicorn: no Docker daemon here), play two episodes per task over the
WebSocket client trainers use (reference calls + submit, submit only), check that two sessions
have separate databases and how invalid calls are answered, and serve the installed package
(``python -m <package>.server.app``) through its typed client. Prints one JSON report."""

import hashlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


def readme_commands(root: Path) -> list[list[str]]:
    """The README's first bash block, one argv per command (comments dropped)."""
    block = re.search(r"```bash\n(.*?)```", (root / "README.md").read_text(encoding="utf-8"), re.S).group(1)
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def readme_command(root: Path, *prefix: str) -> list[str]:
    found = [c for c in readme_commands(root) if tuple(c[: len(prefix)]) == prefix]
    assert len(found) == 1, (prefix, readme_commands(root))
    return found[0]


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
                                        "ok": r.observation.get("ok"), "done": r.done, "reward": r.reward})
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


class LocalSubject:
    """The served directory as openenv's RunningSubject (what a started container is to it)."""

    def __init__(self, proc, base_url):
        self.proc, self.base_url = proc, base_url

    def inspect(self) -> dict:
        return {"pid": self.proc.pid}

    def logs(self, max_bytes: int = 65536) -> str:
        return ""

    def exec(self, argv, timeout_s):
        raise NotImplementedError("no exec in the local stand-in")

    def stop(self) -> None:
        stop(self.proc)


class LocalProvider:
    """openenv's validation provider, with ``uvicorn server.app:app`` in the environment directory in
    place of ``docker build`` + ``docker run`` of ``server/Dockerfile`` (which runs the same command).
    It cannot enforce a network policy, so it does not claim that capability: openenv skips that check."""

    name = "local-uvicorn"

    def __init__(self, root: Path):
        from openenv.validation.types import ProviderCapability

        self.root = root
        self.capabilities = frozenset({ProviderCapability.IMAGE_BUILD})
        self.supported_network_modes = frozenset({"public", "no-network"})

    def build(self, root, execution) -> str:
        dockerfile = (Path(root) / execution.dockerfile).read_text(encoding="utf-8")
        assert 'CMD ["uvicorn", "server.app:app"' in dockerfile, dockerfile  # what the image would run
        return "sha256:" + hashlib.sha256(dockerfile.encode()).hexdigest()

    def start(self, spec):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = serve([str(BIN / "uvicorn"), "server.app:app", "--port", str(port)], self.root, bare_env())
        wait_ready(url, proc)
        return LocalSubject(proc, url)


def runtime_validation(root: Path) -> dict:
    """openenv's runner at its runtime level, its runtime plan played on the served directory."""
    from openenv.validation import run_validation
    from openenv.validation.types import Level

    report = run_validation(root, max_level=Level.RUNTIME, provider=LocalProvider(root))
    return {"verdict": report.verdict.value, "levels": [level.name.lower() for level in report.levels_run],
            "results": {r.check_id: {"status": r.status.value, "evidence": r.evidence} for r in report.results}}


def invalid_calls(url: str, task_id: str, tool: str) -> dict:
    """How a call that cannot run as sent is answered: an unknown tool, an unknown argument."""
    from openenv.core import GenericEnvClient

    with GenericEnvClient(base_url=url).sync() as env:
        env.reset(task_id=task_id)
        out = {}
        for name, args in (("unknown_tool", ("no_such_tool", {})), ("bad_args", (tool, {"no_such_arg": 1}))):
            obs = step(env, *args)
            out[name] = {"ok": obs.observation.get("ok"), "error": obs.observation.get("error"),
                         "result": obs.observation.get("result"), "reward": obs.reward}
    return out


def main(env_dir: str, package: str, script_file: str) -> dict:
    root = Path(env_dir)
    script = json.loads(Path(script_file).read_text(encoding="utf-8"))
    probe = script.pop("__isolation__", None)
    report: dict = {"readme": readme_commands(root)}
    report["validate_dir"] = run([str(BIN / "openenv"), *readme_command(root, "openenv", "validate", ".")[1:]], root)
    report["runtime_validation"] = runtime_validation(root)
    # Directory mode, as openenv.yaml (app: server.app:app) and the README say.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve_cmd = readme_command(root, "uvicorn")
    assert serve_cmd[serve_cmd.index("--port") + 1] == "8000", serve_cmd
    serve_cmd[serve_cmd.index("--port") + 1] = str(port)  # a free port instead of the README's 8000
    proc = serve([str(BIN / "uvicorn"), *serve_cmd[1:]], root, bare_env())
    try:
        wait_ready(url, proc)
        validate_url = readme_command(root, "openenv", "validate", "--url")
        assert validate_url[-1] == "http://127.0.0.1:8000", validate_url
        report["validate_url"] = run([str(BIN / "openenv"), *validate_url[1:-1], url], root)
        with urllib.request.urlopen(url + "/schema", timeout=10) as r:
            schema = json.loads(r.read())
        report["schema"] = {k: v.get("title") for k, v in schema.items()}
        report.update(episodes(url, script))
        first = next(iter(script))
        tool = next((c["tool"] for c in script[first]["calls"]), None)
        if tool:
            report["invalid_calls"] = invalid_calls(url, first, tool)
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
