"""The scripted OpenAI-compatible endpoint of ``tests/eval/scripted_server.py``, also answering
``"stream": true`` requests with server-sent events, as verifiers' chat harness always asks.

Same policies (a function of the conversation) and the same request record; a streamed answer is
the same completion cut into chunks the OpenAI SDK reassembles: the role, the text, each tool call
(name, then its arguments in two pieces), the finish reason, a usage chunk when asked, ``[DONE]``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.eval.scripted_server import Policy, ScriptedServer, _Handler, completion


def chunks(reply: dict[str, Any], usage: bool) -> Iterator[dict[str, Any]]:
    """``reply`` (a chat completion) as the chunks of a streamed one."""
    choice = reply["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": reply["id"], "object": "chat.completion.chunk", "created": 0, "model": reply["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        text = message["content"]
        yield chunk({"content": text[: len(text) // 2]})
        yield chunk({"content": text[len(text) // 2 :]})
    for i, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]})
        args = call["function"]["arguments"]
        for part in (args[: len(args) // 2], args[len(args) // 2 :]):
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
    yield chunk({}, choice["finish_reason"])
    if usage:
        yield {"id": reply["id"], "object": "chat.completion.chunk", "created": 0, "model": reply["model"],
               "choices": [], "usage": reply["usage"]}


class _StreamingHandler(_Handler):
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
        if isinstance(out, int):  # a scripted HTTP failure
            return self._send(out, {"error": {"message": f"scripted HTTP {out}"}})
        reply = completion(out, n)
        if not body.get("stream"):
            return self._send(200, reply)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for c in chunks(reply, usage):
            self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True  # HTTP/1.0: the end of the stream is the end of the connection
        return None


@contextmanager
def serve(policy: Policy) -> Iterator[ScriptedServer]:
    """The streaming scripted endpoint on loopback (``server.base_url``) while the block runs."""
    server = ScriptedServer(policy)
    server.RequestHandlerClass = _StreamingHandler
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
