"""A scripted OpenAI-compatible chat server on loopback that answers with native tool calls.

``serve(policy)`` runs a real HTTP server (``POST /v1/chat/completions``) in a thread and yields its
base URL; each request body goes to ``policy(body) -> message`` (an assistant message dict with
``content`` and optional ``tool_calls``: ``[{"name": ..., "arguments": {...} or "raw text"}]``), or to
a fault (an ``int`` HTTP status, or ``"drop"`` to close the connection without a reply). Requests
are recorded on the server object.

Policies (each a function of the conversation only, as a model is):

* :class:`Replay`: replays the reference solution of the task whose instruction it is asked, one call
  per turn, resolving ``"$N.field"`` from the tool results it saw, then states the reference answer;
* :func:`noop`: answers at once without calling a tool;
* :class:`Paste`: replays the reference calls, then answers with every tool result pasted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pipeline.ir import Task
from pipeline.runtime.replay import field_of
from pipeline.runtime.reward import expected_answer

Policy = Callable[[dict[str, Any]], Any]


class ScriptedServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, policy: Policy):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.policy = policy
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def completion(message: dict[str, Any], n: int) -> dict[str, Any]:
    calls = [{"id": f"call_{n}_{i}", "type": "function",
              "function": {"name": c["name"], "arguments": c["arguments"] if isinstance(c["arguments"], str)
                           else json.dumps(c["arguments"])}}
             for i, c in enumerate(message.get("tool_calls") or [])]
    msg: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if calls:
        msg["tool_calls"] = calls
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": msg}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with self.server.lock:
            self.server.requests.append(body)
            n = len(self.server.requests)
        if not self.path.endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        try:
            out = self.server.policy(body)
        except Exception as e:  # a broken policy is a test bug: say so in the reply
            return self._send(500, {"error": {"message": f"policy raised {type(e).__name__}: {e}"}})
        if out == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return None
        if isinstance(out, int):
            return self._send(out, {"error": {"message": f"scripted HTTP {out}"}})
        return self._send(200, completion(out, n))

    def _send(self, status: int, obj: dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serve(policy: Policy) -> Iterator[ScriptedServer]:
    server = ScriptedServer(policy)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---------------------------------------------------------------- policies


def instruction_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def say_answer(answer: Any) -> str:
    """The reference answer as a person would state it."""
    if answer is None:
        return "Done."
    spec = expected_answer(answer)
    value = spec["value"]
    if spec["type"] == "boolean":
        return "Yes." if value else "No."
    if spec["type"] == "list":
        return "The answer: " + ", ".join(str(v) for v in value) + "."
    if spec["type"] == "number":
        return f"The answer is {value:g}." if isinstance(value, float) else f"The answer is {value}."
    return f"The answer is {value}."


def _resolve(arguments: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for k, v in arguments.items():
        if isinstance(v, str) and v.startswith("$") and "." in v:
            n, name = v[1:].split(".", 1)
            v = field_of(results[int(n) - 1]["result"], name)
        out[k] = v
    return out


class Replay:
    """Replays the reference solution of the task asked, then states its answer."""

    def __init__(self, tasks: list[Task]):
        self.tasks = {t.instruction: t for t in tasks}

    def next_call(self, body: dict[str, Any]) -> dict[str, Any] | None:
        task = self.tasks[instruction_of(body)]
        results = tool_results(body)
        if len(results) >= len(task.reference_solution):
            return None
        call = task.reference_solution[len(results)]
        return {"content": "", "tool_calls": [{"name": call.tool, "arguments": _resolve(dict(call.arguments), results)}]}

    def final(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"content": say_answer(self.tasks[instruction_of(body)].verifier.answer)}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.next_call(body) or self.final(body)


class Paste(Replay):
    """Replays the reference calls, then pastes every tool result as its answer."""

    def final(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"content": "\n".join(m["content"] for m in body["messages"] if m["role"] == "tool")}


def noop(body: dict[str, Any]) -> dict[str, Any]:
    return {"content": "Done."}


class Calls:
    """Calls, one per turn, the concrete calls scripted for each task (by its request), then says it is done: the
    rules' adversaries (``verify.proofs.overreach_calls``: do everything; ``blind_calls``: do everything asked
    without reading)."""

    def __init__(self, script: dict[str, list[Any]]):
        self.script = script

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        calls = self.script[instruction_of(body)]
        n = len(tool_results(body))
        if n >= len(calls):
            return {"content": "Done."}
        call = calls[n]
        return {"content": "", "tool_calls": [{"name": call.tool, "arguments": dict(call.arguments)}]}
