"""A verifiers harness that plays a fixed script instead of a model (test-only).

Loaded by verifiers as a harness plugin (``--env.agent.harness.id ef_scripted_harness``). Its
``launch`` runs in-process, as the Harness contract allows: it connects to the rollout's MCP tool
servers with the MCP client verifiers itself uses and makes the scripted tool calls; with
``mode="reference"`` the calls are the task's reference solution and the final reply is the
expected answer, with ``mode="noop"`` it makes no call and says nothing. The final reply is a
real model turn: a chat completion sent through the rollout's interception endpoint to the
driver's scripted model server, so verifiers records it as the agent's last reply.
"""

import json

import httpx
import verifiers.v1 as vf
from verifiers.v1.harnesses.utils.mcp import mcp_client


class ScriptedHarnessConfig(vf.HarnessConfig):
    id: str = "ef_scripted_harness"
    mode: str = "reference"
    script_file: str = ""
    """JSON {task_id: {"calls": [{"tool", "arguments"}], "reply": str | null}}."""


class ScriptedHarness(vf.Harness[ScriptedHarnessConfig]):
    SUPPORTS_MCP = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_):
        if self.config.mode == "noop":
            return vf.ProgramResult(0, "", "")
        script = json.loads(open(self.config.script_file, encoding="utf-8").read())[data.task_id]
        results = []
        for name, url in mcp_urls.items():
            async with mcp_client({"url": url, "timeout": 60}) as client:
                listed = await client.list_tools()
                trace.info["listed_tools"] = sorted(t.name for t in listed.tools)
                trace.info["tool_schemas"] = {t.name: t.input_schema for t in listed.tools}
                for call in script["calls"]:
                    out = await client.call_tool(call["tool"], call["arguments"])
                    results.append(
                        {
                            "tool": call["tool"],
                            "is_error": bool(out.is_error),
                            "text": "".join(getattr(c, "text", "") for c in out.content),
                        }
                    )
            trace.info["server"] = name
        trace.info["tool_results"] = results
        messages = [{"role": "user", "content": data.prompt}]
        async with httpx.AsyncClient(timeout=60) as http:
            response = await http.post(
                endpoint.rstrip("/") + "/chat/completions",
                headers={"Authorization": f"Bearer {secret}"},
                json={"model": ctx.model, "messages": messages},
            )
            response.raise_for_status()
        return vf.ProgramResult(0, json.dumps(results), "")


__all__ = ["ScriptedHarness"]
