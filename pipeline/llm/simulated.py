"""A simulated OpenAI-compatible endpoint on loopback: real HTTP, chosen latency, and faults on demand.

Used by the throughput benchmark (a remote endpoint that answers after a fixed latency) and by the fault
tests (an endpoint that times out, throttles with 429 + Retry-After, answers 5xx, truncates or garbles its
body, or drops the connection). ``answer(body)`` decides each reply: the assistant content as a string, or a
:class:`Fault`. :class:`CacheReplay` answers from a recorded run's LLM cache (``llm_cache.sqlite``).

The server counts what is in flight over time, so ``stats()`` gives the mean and peak number of requests
being served at once: what a remote endpoint would see of a run.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from pipeline.hashing import canonical_json

FaultKind = Literal["timeout", "status", "truncated", "non_json", "drop"]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour for one request.

    ``timeout``: hold the request without answering (until ``hang_s`` passes or the server stops);
    ``status``: answer HTTP ``status`` with an error body (and ``Retry-After: retry_after`` if given);
    ``truncated``: announce the whole body but send half of it, then close;
    ``non_json``: HTTP 200 with an HTML error page; ``drop``: close the connection without a reply.
    """

    kind: FaultKind
    status: int = 500
    retry_after: float | None = None
    hang_s: float = 30.0


Answer = Callable[[dict[str, Any]], "str | Fault"]


def completion_body(content: str, model: str = "simulated") -> bytes:
    body = {
        "id": "chatcmpl-sim", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(content) // 4),
                  "total_tokens": 10 + max(1, len(content) // 4)},
    }
    return json.dumps(body).encode("utf-8")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    owner: SimulatedEndpoint


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _in_flight = False  # a chat request counted in by ``owner._enter`` and not yet out

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _send(self, status: int, body: bytes, ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._leave()  # before the reply's bytes: once a client has read them it may send its next request
        self.wfile.write(body)

    def _leave(self) -> None:
        """Counts this request out of flight once, before its reply is written, so the peak can never include a
        request whose client already has its answer (and may have given its slot of a limit to the next one)."""
        if self._in_flight:
            self._in_flight = False
            self.server.owner._leave()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": self.server.owner.model,
                                                                   "object": "model"}]}).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        owner._enter()
        self._in_flight = True
        try:
            self._serve(owner, body)
        finally:
            self._leave()

    def _serve(self, owner: SimulatedEndpoint, body: dict[str, Any]) -> None:
        reply = owner.answer(body)
        if isinstance(reply, Fault):
            owner._count(reply.kind)
            self._fault(owner, reply)
            return
        if owner.latency > 0 and owner._stopping.wait(owner.latency):
            self.close_connection = True
            return
        owner._count("ok")
        self._send(200, completion_body(reply, owner.model))

    def _fault(self, owner: SimulatedEndpoint, f: Fault) -> None:
        if f.kind == "timeout":
            owner._stopping.wait(f.hang_s)
            self.close_connection = True
        elif f.kind == "status":
            headers = {"Retry-After": f"{f.retry_after:g}"} if f.retry_after is not None else {}
            msg = {429: "rate limited", 500: "internal error", 502: "bad gateway", 503: "overloaded"}
            body = json.dumps({"error": {"message": f"simulated {msg.get(f.status, 'failure')}"}}).encode()
            self._send(f.status, body, headers=headers)
        elif f.kind == "truncated":
            full = completion_body('{"truncated": "this reply will not arrive whole"}', owner.model)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(full)))
            self.end_headers()
            self._leave()
            self.wfile.write(full[: len(full) // 2])
            self.wfile.flush()
            self._hang_up()
        elif f.kind == "non_json":
            self._send(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", ctype="text/html")
        elif f.kind == "drop":
            self._hang_up()
        else:  # pragma: no cover - Literal guards it
            raise ValueError(f"unknown fault {f.kind!r}")

    def _hang_up(self) -> None:
        self.close_connection = True
        self._leave()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class SimulatedEndpoint:
    """``with SimulatedEndpoint(answer, latency=0.5) as ep: ... ep.url ... ep.stats()``."""

    def __init__(self, answer: Answer, *, latency: float = 0.0, model: str = "simulated"):
        self.answer = answer
        self.latency = latency
        self.model = model
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.reset_stats()

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> SimulatedEndpoint:
        self._stopping.clear()
        srv = _Server(("127.0.0.1", 0), _Handler)
        srv.owner = self
        self._server = srv
        self._thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="simulated-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SimulatedEndpoint:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the endpoint first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # ---------------------------------------------------------------- accounting

    def reset_stats(self) -> None:
        with self._lock:
            self._in_flight = 0
            self._peak = 0
            self._area = 0.0
            self._t0 = self._last = time.monotonic()
            self._counts: dict[str, int] = {}
            self._seconds: list[float] = []  # area (requests x seconds) of each second since the reset

    def _tick(self) -> None:
        now = time.monotonic()
        self._area += self._in_flight * (now - self._last)
        t = self._last
        while t < now:  # spread the interval over the seconds it covers
            second = int(t - self._t0)
            end = min(now, self._t0 + second + 1)
            while len(self._seconds) <= second:
                self._seconds.append(0.0)
            self._seconds[second] += self._in_flight * (end - t)
            t = end
        self._last = now

    def _enter(self) -> None:
        with self._lock:
            self._tick()
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._tick()
            self._in_flight -= 1

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1

    def stats(self) -> dict[str, Any]:
        """Since the last reset: requests by outcome, mean and peak in flight, seconds, and ``per_second``:
        the mean in flight during each second."""
        with self._lock:
            self._tick()
            secs = self._last - self._t0
            return {"requests": sum(self._counts.values()), "outcomes": dict(sorted(self._counts.items())),
                    "mean_in_flight": self._area / secs if secs > 0 else 0.0, "peak_in_flight": self._peak,
                    "seconds": secs, "per_second": [round(a, 1) for a in self._seconds]}


# ---------------------------------------------------------------- answers from a recorded run


def request_key(body: dict[str, Any]) -> str:
    """What identifies a request whichever endpoint, model name or structured-output style it used:
    messages, sampling, max_tokens and the reply schema."""
    rf = body.get("response_format") or None
    schema = None
    if isinstance(rf, dict):
        schema = rf.get("schema") if rf.get("type") == "json_object" else (rf.get("json_schema") or {}).get("schema")
    return canonical_json({"messages": body.get("messages"), "temperature": body.get("temperature"),
                           "top_p": body.get("top_p"), "seed": body.get("seed"),
                           "max_tokens": body.get("max_tokens"), "schema": schema})


class CacheReplay:
    """Answers requests with the replies recorded in an LLM cache file (``responses`` table), whatever model
    name and endpoint they were recorded with; an unknown request gets ``miss`` (default: HTTP 400)."""

    def __init__(self, cache_path: str | Path, miss: Fault | None = None):
        con = sqlite3.connect(f"file:{Path(cache_path)}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT request, content FROM responses").fetchall()
        finally:
            con.close()
        self.replies = {request_key(json.loads(req)): content for req, content in rows}
        self.miss = miss or Fault("status", status=400)
        self.misses: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def lookup(self, body: dict[str, Any]) -> str | None:
        return self.replies.get(request_key(body))

    def __call__(self, body: dict[str, Any]) -> str | Fault:
        content = self.lookup(body)
        if content is None:
            with self._lock:
                self.misses.append(body)
            return self.miss
        return content
