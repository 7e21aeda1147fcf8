"""The request gate of every generated server.py: what a request must be before any route sees it.

Embedded verbatim into ``server.py`` (after the engine) by ``pipeline.render``; standard library
only. ``RequestGate`` is an ASGI middleware in front of the whole app, ``/mcp`` included:

1. ``Host`` must name an allowed host (DNS rebinding): loopback names by default, more with
   ``--allow-host`` (``name`` for any port, ``name:port``, ``*`` for any) — also when the server is
   bound to 0.0.0.0;
2. an ``Origin`` header, when sent, must be an allowed origin: loopback origins by default, more
   with ``--allow-origin`` (``scheme://host[:port]`` or ``*``). Clients that send no Origin (every
   non-browser client) pass;
3. with a token (``--token`` or ``ENVFOUNDRY_TOKEN``), ``Authorization: Bearer <token>`` on every
   route;
4. a request body must be JSON (``Content-Type: application/json``; an empty body may omit it)
   and at most ``max_body`` bytes, declared or streamed.

Refusals are JSON in the tool-error shape (``{"ok": false, "error", "parameter": null, "kind":
"request"}``): 403, 401 (with ``WWW-Authenticate``), 415 and 413.
"""

import hmac
from json import dumps
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
DEFAULT_PORTS = {"http": "80", "https": "443"}


def split_host(value):
    """``("example.com", "8000")`` from a Host header (``[::1]:8000`` too); the port may be ""."""
    value = (value or "").strip().lower()
    if value.startswith("["):
        end = value.find("]")
        host, rest = value[1:end], value[end + 1 :]
        return host, rest[1:] if rest.startswith(":") else ""
    if value.count(":") == 1:
        host, port = value.split(":")
        return host, port
    return value, ""


def _origin_key(value):
    try:
        parts = urlsplit(value.strip().lower())
        port = str(parts.port) if parts.port is not None else DEFAULT_PORTS.get(parts.scheme, "")
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port


class RequestGate:
    """ASGI middleware: Host and Origin allow-lists, optional bearer token, JSON bodies up to a size."""

    def __init__(self, app, allow_hosts=(), allow_origins=(), token=None, max_body=1 << 20):
        self.app = app
        self.any_host = "*" in allow_hosts
        self.hosts = [split_host(h) for h in (*LOOPBACK_NAMES, *allow_hosts) if h != "*"]
        self.any_origin = "*" in allow_origins
        self.origins = {k for k in (_origin_key(o) for o in allow_origins if o != "*") if k}
        self.token = token or None
        self.max_body = max_body

    def host_allowed(self, header):
        if self.any_host or header is None:  # HTTP/1.0 without Host: nothing to rebind
            return True
        host, port = split_host(header)
        return any(host == h and (not p or p == port) for h, p in self.hosts)

    def origin_allowed(self, header):
        if header is None or self.any_origin:
            return True
        key = _origin_key(header)
        if key is None:  # "null" (sandboxed pages, file://) and malformed origins
            return False
        return key[1] in LOOPBACK_NAMES or key in self.origins

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for name, value in scope.get("headers") or []:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        if not self.host_allowed(headers.get("host")):
            host = headers.get("host", "")[:100]
            return await refuse(send, 403, f"Host {host!r} is not allowed (DNS rebinding protection); "
                                           f"start the server with --allow-host {split_host(host)[0] or 'NAME'} to serve it")
        if not self.origin_allowed(headers.get("origin")):
            origin = headers.get("origin", "")[:100]
            return await refuse(send, 403, f"Origin {origin!r} is not allowed (cross-site request); "
                                           "start the server with --allow-origin ORIGIN to accept it")
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, credential = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(credential.strip().encode(), self.token.encode()):
                return await refuse(send, 401, "missing or wrong bearer token (send Authorization: Bearer <token>)",
                                    [(b"www-authenticate", b'Bearer realm="envfoundry"')])
        if scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return await refuse(send, 413, f"request body is larger than {self.max_body} bytes", kind="validation")
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        if media and media != "application/json":
            return await refuse(send, 415, f"Content-Type must be application/json, not {media[:60]!r}", kind="validation")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await refuse(send, 413, f"request body is larger than {self.max_body} bytes", kind="validation")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        if size and not media:
            return await refuse(send, 415, "Content-Type must be application/json (a body was sent without one)",
                                kind="validation")
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def refuse(send, status, message, extra_headers=(), kind="request"):
    """Answer with a JSON error in the tool-error shape."""
    body = dumps({"ok": False, "error": message, "parameter": None, "kind": kind}, ensure_ascii=True).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
