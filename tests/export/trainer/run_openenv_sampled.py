"""Run inside the OpenEnv trainer venv (openenv 0.10 only, no envfoundry): serve an exported environment that
carries sampled tasks by level (``uvicorn server.app:app`` from its directory, an adaptive window of 3 episodes)
and, over OpenEnv's WebSocket client: reset by seed and level (twice the same seed, then other seeds), ask a level
that has no sampled task, then play adaptive episodes with an agent that always succeeds (the reference calls of
the task it is given, and the reference reply) and then with one that always fails (submits at once), reading the
adaptive level from the session's state after each episode and from ``GET /state`` at the end. Prints one JSON
report."""

import json
import os
import subprocess
import sys
import urllib.request

from openenv.core import GenericEnvClient
from run_openenv_slow import free_port, wait_ready  # beside this script (its folder is on sys.path)


def step(env, name: str, arguments: dict):
    return env.step({"type": "call_tool", "tool_name": name, "arguments": arguments})


def by_level(env, levels: list[int], missing: int, every: list[str]) -> dict:
    out: dict = {"draws": {}, "again": {}, "observed": {}}
    for level in levels:
        draws = [env.reset(seed=seed, level=level).observation for seed in range(4)]
        out["draws"][str(level)] = [o["task_id"] for o in draws]
        out["again"][str(level)] = env.reset(seed=1, level=level).observation["task_id"]
        out["observed"][str(level)] = {"level": draws[0].get("level"), "tools": sorted(t["name"] for t in draws[0]["tools"]),
                                       "task_id": draws[0]["task_id"]}
    # a tool of the environment the task does not offer: refused, not run
    first = env.reset(seed=0, level=levels[0]).observation
    other = next(name for name in every if name not in {t["name"] for t in first["tools"]})
    refused = step(env, other, {}).observation
    out["not_offered"] = {"tool": other, "error": refused.get("error")}
    try:
        env.reset(seed=0, level=missing)
        out["missing"] = None
    except Exception as exc:  # the server's error, as the client raises it
        out["missing"] = str(exc)
    return out


def play(env, script: dict, succeed: bool, episodes: int) -> list[dict]:
    played = []
    for _ in range(episodes):
        first = env.reset(adaptive=True).observation
        s = script[first["task_id"]]
        if succeed:
            for call in s["calls"]:
                step(env, call["tool"], call["arguments"])
        end = step(env, s["submit"], {"answer": s["reply"]} if succeed and s["reply"] else {})
        state = env.state()
        state = state if isinstance(state, dict) else state.__dict__
        played.append({"task_id": first["task_id"], "played_level": first.get("level"), "reward": end.reward,
                       "adaptive_after": state.get("adaptive"), "move": (end.observation.get("metadata") or {}).get(
                           "level_move")})
    return played


def main() -> None:
    root, script_file, levels, missing = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
    every = json.loads(sys.argv[5])
    script = json.loads(open(script_file, encoding="utf-8").read())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "ENVFOUNDRY_ADAPTIVE_WINDOW": "3"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--port", str(port),
                             "--log-level", "warning"], cwd=root, env=env)
    report: dict = {}
    try:
        wait_ready(url, proc)
        with urllib.request.urlopen(url + "/state", timeout=5) as r:
            report["state_before"] = json.loads(r.read())
        with GenericEnvClient(base_url=url).sync() as client:
            report["by_level"] = by_level(client, levels, missing, every)
            up = 3 * (len(levels) - 1)  # three successes per level, to the top
            report["succeeding"] = play(client, script, True, up + 3)
            report["failing"] = play(client, script, False, up + 3)
        with urllib.request.urlopen(url + "/state", timeout=5) as r:
            report["state_after"] = json.loads(r.read())
    finally:
        proc.terminate()
        proc.wait(30)
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main()
