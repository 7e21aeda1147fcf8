"""Run inside the verifiers trainer venv: load an exported package with the real verifiers
library and play two rollouts per task (reference script, no-op). Prints one JSON report.

``run_verifiers.py PACKAGE SCRIPT [OPTIONS]``: OPTIONS is JSON, ``{"env": {...}, "modes": [...]}``: more
``load_environment`` keywords (``{"level": 1, "n": 1}``) and the modes played (default both). OPTIONS may be a
list of such objects, each with its own ``"script"`` file (SCRIPT when absent): one environment is loaded and
played per object, in this one process (verifiers' import alone is ~10 s of CPU), each rollout naming the
object's index as ``run``."""

import asyncio
import importlib
import json
import sys


async def scripted_model(replies: dict) -> tuple:
    """An OpenAI-compatible endpoint on loopback that answers each prompt with its scripted reply."""
    from aiohttp import web

    async def completions(request):
        body = await request.json()
        prompt = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        text = replies.get(prompt) or "Done."
        return web.json_response(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/v1"


async def main(package: str, script_file: str, options: dict | list) -> dict:
    from verifiers.v1.clients import ModelContext
    from verifiers.v1.configs.client import EvalClientConfig

    mod = importlib.import_module(package)
    report = {"package": package, "verifiers": __import__("verifiers").__version__, "rollouts": []}
    replies: dict = {}  # the scripted model's replies: those of the run being played
    runner, base_url = await scripted_model(replies)
    ctx = ModelContext(
        model="scripted", client=EvalClientConfig(base_url=base_url, api_key_var="EF_SCRIPTED_KEY")
    )
    for run, opts in enumerate(options if isinstance(options, list) else [options]):
        await play(mod, opts.get("script", script_file), opts, run, replies, ctx, report)
    await runner.cleanup()
    return report


async def play(mod, script_file: str, options: dict, run: int, replies: dict, ctx, report: dict) -> None:
    """Each mode of one ``options`` object: its environment loaded anew and every task played once."""
    script = json.loads(open(script_file, encoding="utf-8").read())
    replies.clear()
    replies.update({s["prompt"]: s["reply"] for s in script.values() if s.get("reply")})
    for mode in options.get("modes", ("reference", "noop")):
        harness = {"id": "ef_scripted_harness", "mode": mode, "script_file": script_file}
        env = mod.load_environment(agent={"harness": harness, "runtime": {"type": "subprocess"}},
                                   **options.get("env", {}))
        report["env_class"] = type(env).__name__
        report["single_agent"] = isinstance(env, __import__("verifiers.v1", fromlist=["SingleAgentEnv"]).SingleAgentEnv)
        report["default_harness"] = mod.load_environment().config.agent_harnesses()["agent"].id
        tasks = list(env.taskset)
        async with env.serving():
            for task in tasks:
                episode = await env.run_episode(task, ctx)
                for trace in episode.traces:
                    report["rollouts"].append(
                        {
                            "run": run,
                            "task_id": task.data.task_id,
                            "key": task.key,
                            "mode": mode,
                            "prompt": task.data.prompt,
                            "split": task.data.split,
                            "tier": task.data.tier,
                            "level": task.data.level,
                            "tools": getattr(task.data, "tools", None),
                            "pass_rate": task.data.pass_rate,
                            "reward": trace.reward,
                            "rewards": {k: (v.score if v else None) for k, v in trace.rewards.items()},
                            "metrics": trace.metrics,
                            "ok": trace.ok,
                            "errors": [e.message[-500:] for e in trace.errors],
                            "info": trace.info,
                            "state_calls": getattr(trace.state, "calls", None),
                            "last_reply": trace.last_reply,
                        }
                    )


if __name__ == "__main__":
    options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    print("REPORT " + json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], options)), default=str))
