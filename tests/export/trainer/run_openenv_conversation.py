"""Run inside the OpenEnv trainer venv: serve an exported environment directory as its README says
(``uvicorn server.app:app``, the user's endpoint in ``ENVFOUNDRY_USER_BASE_URL`` / ``ENVFOUNDRY_USER_MODEL``), and
play every task in conversation with ``GenericEnvClient``: ``reset(task_id=..., conversation=True)``, then per
turn the scripted agent endpoint's reply (model = the task id) becomes a step: its tool calls ``call_tool``
steps, its text a step of the message tool, whose result is the simulated user's answer. Prints one JSON report."""

import json
import sys
import urllib.request
from pathlib import Path

from openenv.core import GenericEnvClient
from run_openenv import BIN, bare_env, free_port, readme_command, serve, stop, wait_ready


def chat(base_url, model, messages, tools):
    body = {"model": model, "messages": messages, "tools": tools}
    request = urllib.request.Request(base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())["choices"][0]["message"]


def conversation(env, agent_url, task_id, max_steps=40):
    obs = env.reset(task_id=task_id, conversation=True).observation
    message_tool = obs["message_tool"]
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["input_schema"]}} for t in obs["tools"]]
    messages = [{"role": "system", "content": obs["system_prompt"]}, {"role": "user", "content": obs["instruction"]}]
    out = {"task_id": task_id, "opening": obs["instruction"], "conversation": obs["conversation"],
           "listed": sorted(t["name"] for t in obs["tools"]), "replies": [], "steps": 0}
    for _ in range(max_steps):
        reply = chat(agent_url, task_id, messages, [t for t in tools if t["function"]["name"] != message_tool])
        messages.append(reply)
        out["steps"] += 1
        if reply.get("tool_calls"):
            for call in reply["tool_calls"]:
                result = env.step({"type": "call_tool", "tool_name": call["function"]["name"],
                                   "arguments": json.loads(call["function"]["arguments"])})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.observation["result"]})
            continue
        result = env.step({"type": "call_tool", "tool_name": message_tool, "arguments": {"message": reply["content"]}})
        obs = result.observation
        out["replies"].append({"text": obs["result"], "user_errors": obs["metadata"].get("user_errors")})
        if result.done:
            out.update(reward=result.reward, passed=obs.get("passed"), done=True)
            break
        messages.append({"role": "user", "content": obs["result"]})
    out["state"] = env.state()
    return out


def main(env_dir, task_ids_file, agent_url):
    root = Path(env_dir)
    task_ids = json.loads(Path(task_ids_file).read_text())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve_cmd = readme_command(root, "uvicorn")
    serve_cmd[serve_cmd.index("--port") + 1] = str(port)
    proc = serve([str(BIN / "uvicorn"), *serve_cmd[1:]], root, bare_env())
    report = {"serve": serve_cmd, "conversations": []}
    try:
        wait_ready(url, proc)
        with GenericEnvClient(base_url=url).sync() as env:
            for task_id in task_ids:
                report["conversations"].append(conversation(env, agent_url, task_id))
            plain = env.reset(task_id=task_ids[0]).observation  # the single-turn form is unchanged
            report["plain"] = {"conversation": plain["conversation"], "listed": sorted(t["name"] for t in plain["tools"])}
    finally:
        stop(proc)
    return report


if __name__ == "__main__":
    print("REPORT " + json.dumps(main(*sys.argv[1:4]), default=str))
