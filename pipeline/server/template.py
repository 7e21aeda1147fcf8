"""The server half of every generated server.py: FastAPI routes and an MCP endpoint over the engine.

``pipeline.render`` writes ``server.py`` as: the engine source (``pipeline/runtime/engine.py``) and
the request gate (``pipeline/server_gate.py``) verbatim, the sessions (``pipeline/server_sessions.py``)
and this module without their import blocks of those, then the environment as literals
(``ENV_ID``, ``ENV``, ``TOOL_SCHEMAS``, ``RESULT_SCHEMAS``) and a ``__main__`` guard calling
``main``. This module is also importable as is (the rest then comes from the package), which is how
tests exercise it.

Routes: ``POST /tools/<name>`` (a JSON object of arguments), ``GET /tools``, ``POST /reset``,
``POST /close``, ``GET /health``, ``/openapi.json`` (request and response schemas per tool) and MCP
streamable HTTP at ``/mcp`` (the same tools and input schemas; tool errors are ``isError`` results).
Sessions: each MCP session, and each ``X-Session-Id`` on HTTP, has its own in-memory copy of the
initial database; HTTP requests without one share the ``--db`` file (see ``server_sessions``).
``POST /reset`` and ``POST /close`` act on the caller's session.
Status codes: 200 ok; 422 invalid arguments (the body names the parameter); 404 unknown tool;
400 guard / not found / database constraint / malformed session id; 429 no room for another session;
503 (with ``Retry-After``) the database stayed locked by another connection; and from the gate, on
every route: 403 foreign Host or Origin, 401 missing token, 413 body over 1 MiB, 415 a body that is
not JSON. 405 answers carry ``Allow``. Nothing a client sends yields a 5xx. SQLite runs on one small
pool of worker threads shared by every session (``--workers``, default the number of cores and at least
2), never on the event loop; a session's calls wait for each other on the event loop, not in a worker, and
a call is stopped after ``--call-timeout`` seconds, so a slow call holds one worker for at most that long.
"""

# ruff: noqa: E402 (the version check must run before the imports it guards)
import argparse
import asyncio
import contextlib
import os
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata


def _require_mcp_2():
    try:
        found = metadata.version("mcp")
    except metadata.PackageNotFoundError:
        found = None
    try:
        major = int(found.split(".")[0]) if found else 0
    except ValueError:
        major = 0
    if major < 2:
        sys.exit(f"error: server.py needs mcp >= 2 (installed: {found or 'none'}); run: pip install 'mcp>=2' fastapi uvicorn")


_require_mcp_2()
try:
    import anyio
    import mcp.types as mcp_types
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException as StarletteHTTPException
    from starlette.routing import Route
except ImportError as exc:
    sys.exit(f"error: server.py needs fastapi, uvicorn and mcp >= 2 ({exc}); run: pip install 'mcp>=2' fastapi uvicorn")

# envfoundry:engine-import-begin (render replaces this block with the engine, gate and sessions sources)
from pipeline.runtime.engine import BUSY_TIMEOUT_S, DEFAULT_TIMEOUT_S, failure, json, sqlite3
from pipeline.server.gate import RequestGate
from pipeline.server.sessions import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_SESSIONS,
    MAX_SESSIONS_VAR,
    SESSION_ID,
    Sessions,
    SessionsFull,
    max_sessions_default,
    raise_cap_hint,
)

# envfoundry:engine-import-end

MAX_BODY_BYTES = 1 << 20


class Workers:
    """The pool every session's SQLite work runs on (``--workers`` threads). Calls of one session run one
    at a time: they queue on the event loop (an ``asyncio.Lock`` per session key), so a worker never waits
    for a session's lock while other sessions have work."""

    def __init__(self, workers):
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="envfoundry")
        self.queues = {}  # session key -> [lock, callers holding or waiting for it]

    async def run(self, key, fn, *args):
        entry = self.queues.get(key)
        if entry is None:
            entry = self.queues[key] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        finally:
            entry[1] -= 1
            if not entry[1]:
                del self.queues[key]

    def shutdown(self):
        self.pool.shutdown(wait=False)
STATUS_BY_KIND = {"validation": 422, "guard": 400, "not_found": 400, "sql": 400, "busy": 503, "session": 429}
ERROR_KINDS = ["validation", "guard", "not_found", "sql", "busy", "session", "request"]


class SafeJSONResponse(JSONResponse):
    """JSON with ASCII escapes: any string (even one with lone surrogates) serialises."""

    def render(self, content):
        return json.dumps(content, ensure_ascii=True, allow_nan=True, separators=(",", ":")).encode("ascii")


def session_key(headers):
    """The caller's session from its request ``headers`` (lower-case names): ``(key, None)``, key None for
    the default session, or ``(None, error response)``."""
    mcp_id, own_id = headers.get("mcp-session-id"), headers.get("x-session-id")
    given = mcp_id if mcp_id is not None else own_id
    if given is None:
        return None, None
    if not SESSION_ID.match(given):
        return None, SafeJSONResponse(failure("request", "a session id is 1 to 128 letters, digits or . _ : -"),
                                      status_code=400)
    return (f"mcp:{given}" if mcp_id is not None else f"x:{given}"), None


def mcp_session_key(ctx):
    """The session of an MCP request: its transport session id, or None (the default session)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    sid = headers.get("mcp-session-id") if headers is not None else None
    if sid is None:  # the request that opened the session carries no header yet
        sid = getattr(getattr(getattr(ctx, "session", None), "_connection", None), "session_id", None)
    return f"mcp:{sid}" if sid else None


def parse_arguments(body):
    """The request body as JSON (an empty body, no byte at all, is ``{}``), or a (status, failure) pair. A body of
    only white space is not JSON and is refused, as any other. The gate has already refused bodies over the size
    limit and bodies that are not declared JSON."""
    if not body:
        return {}, None
    try:
        return json.loads(body), None
    except (ValueError, RecursionError) as exc:
        return None, (422, failure("validation", f"request body is not valid JSON: {str(exc)[:200]}"))


def tool_response(out):
    status = 200 if out["ok"] else STATUS_BY_KIND.get(out["kind"], 400)
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return SafeJSONResponse(out, status_code=status, headers=headers)


async def tool_call(sessions, workers, name, headers, body):
    """The response to ``POST /tools/<name>`` with these request headers and body."""
    key, refused = session_key(headers)
    if refused is not None:
        return refused
    arguments, problem = parse_arguments(body)
    if problem is not None:
        return SafeJSONResponse(problem[1], status_code=problem[0])
    out = await workers.run(key, sessions.call, key, name, arguments)  # SQLite never blocks the event loop
    return tool_response(out)


def tool_endpoint(sessions, workers, name):
    async def call_tool(request: Request) -> Response:
        return await tool_call(sessions, workers, name, request.headers, await request.body())

    call_tool.__name__ = f"call_{name}"
    return call_tool


class ToolRoutes:
    """ASGI: ``POST /tools/<name>`` of a known tool answered straight from ``tool_call``, the response the
    FastAPI route gives, without FastAPI's routing (a scan of every route) and middleware stack; every other
    request goes to ``app``, whose per-tool routes stay for ``/openapi.json``. It sits behind the request
    gate, which has already checked the Host, Origin, token and body of every request."""

    def __init__(self, app, sessions, workers):
        self.app, self.sessions, self.workers = app, sessions, workers
        self.names = {f"/tools/{name}": name for name in sessions.tools}

    async def __call__(self, scope, receive, send):
        name = self.names.get(scope.get("path")) if scope["type"] == "http" and scope.get("method") == "POST" else None
        if name is None:
            await self.app(scope, receive, send)
            return
        try:
            headers = {}
            for key, value in scope.get("headers") or []:
                headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
            chunks = []
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    break
            response = await tool_call(self.sessions, self.workers, name, headers, b"".join(chunks))
        except Exception as exc:  # as the app's handler of unexpected errors answers
            response = SafeJSONResponse(failure("sql", f"request could not be processed: {type(exc).__name__}"),
                                        status_code=400)
        await response(scope, receive, send)


# ---------------------------------------------------------------- OpenAPI: what each route returns

ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"const": False},
        "error": {"type": "string"},
        "parameter": {"type": ["string", "null"]},
        "kind": {"enum": ERROR_KINDS},
    },
    "required": ["ok", "error", "parameter", "kind"],
    "additionalProperties": False,
}
GATE_ERRORS = {
    "401": "missing or wrong bearer token (when the server has one)",
    "403": "the Host or Origin header names a host or site that is not allowed",
    "413": "request body over 1 MiB",
    "415": "a request body that is not `application/json`",
}


def json_content(schema):
    return {"application/json": {"schema": schema}}


def error_responses(codes):
    """OpenAPI responses in the error shape: ``{code: description}`` plus the gate's refusals."""
    described = {**codes, **GATE_ERRORS}
    return {code: {"description": text, "content": json_content(ERROR_SCHEMA)} for code, text in sorted(described.items())}


SESSION_HEADER = {
    "name": "X-Session-Id", "in": "header", "required": False,
    "description": "your own isolated copy of the initial database (created on first use); without it, the "
                   "shared default session. `Mcp-Session-Id` reaches an MCP session's copy the same way",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
}
SESSION_ERRORS = {"400": "a malformed session id", "429": "no room for another session (see `--max-sessions`)"}


def openapi_extra(schema, result):
    ok = {"type": "object", "properties": {"ok": {"const": True}, "result": result}, "required": ["ok", "result"],
          "additionalProperties": False}
    return {
        # an empty body is the empty object: only a tool with required parameters needs one
        "requestBody": {"required": bool(schema.get("required")), "content": json_content(schema)},
        "parameters": [SESSION_HEADER],
        "responses": {
            "200": {"description": "the tool's result", "content": json_content(ok)},
            **error_responses({
                **SESSION_ERRORS,
                "400": "a rule of the tool (guard), a record not found, a database constraint, or a malformed session id",
                "422": "invalid arguments; `parameter` names the offending one",
                "503": "the database stayed locked by another connection; retry (see `Retry-After`)",
            }),
        },
    }


def plain_responses(schema, description, codes=None):
    return {200: {"description": description, "content": json_content(schema)},
            **{int(code): spec for code, spec in error_responses(codes or {}).items()}}


HEALTH_SCHEMA = {"type": "object", "properties": {"ok": {"const": True}, "env_id": {"type": "string"},
                                                  "tools": {"type": "integer"}, "sessions": {"type": "integer"}},
                 "required": ["ok", "env_id", "tools", "sessions"], "additionalProperties": False}
TOOLS_SCHEMA = {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "description": {"type": "string"}, "kind": {"enum": ["read", "write"]},
    "input_schema": {"type": "object"}}, "required": ["name", "description", "kind", "input_schema"],
    "additionalProperties": False}}
OK_SCHEMA = {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"], "additionalProperties": False}
CLOSED_SCHEMA = {"type": "object", "properties": {"ok": {"const": True}, "closed": {"type": "boolean"}},
                 "required": ["ok", "closed"], "additionalProperties": False}


# ---------------------------------------------------------------- MCP


def mcp_server(sessions, workers, schemas, env_id):
    """A low-level MCP server exposing the same tools with the same input schemas; each MCP session
    calls them on its own copy of the initial database."""

    async def list_tools(ctx, params):
        tools = []
        for name, tool in sessions.tools.items():
            annotations = mcp_types.ToolAnnotations(read_only_hint=tool["kind"] == "read")
            tools.append(
                mcp_types.Tool(
                    name=name, description=tool["description"], input_schema=schemas[name], annotations=annotations
                )
            )
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        key = mcp_session_key(ctx)
        out = await workers.run(key, sessions.call, key, params.name, params.arguments or {})
        if out["ok"]:
            text = json.dumps(out["result"], ensure_ascii=False)
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(text=text)], structured_content={"result": out["result"]}
            )
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=out["error"])], structured_content=out, is_error=True
        )

    return Server(
        env_id,
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=schemas.get,
    )


# ---------------------------------------------------------------- the app


class McpEndpoint:
    """``/mcp``: the MCP transport, plus two things it does not do itself: the session database of an
    MCP session is freed when the client ends the session (DELETE), and a server with no room for
    another session answers 429 (the transport would say 503)."""

    def __init__(self, manager, sessions, workers):
        self.app, self.sessions, self.workers = StreamableHTTPASGIApp(manager), sessions, workers

    async def __call__(self, scope, receive, send):
        headers = dict(scope.get("headers") or [])
        sid = headers.get(b"mcp-session-id")
        opening = scope.get("method") == "POST" and sid is None

        full = []

        async def send_full(message):
            if opening and message["type"] == "http.response.start" and message["status"] == 503:
                # no room for another MCP session: 429, in the tool-error shape, saying how to raise the cap
                n = self.sessions.max_sessions
                text = (f"Too many open sessions: all {n} MCP sessions are in use; end one (DELETE /mcp) or "
                        f"{raise_cap_hint(n, self.sessions.session_kib)}")
                body = json.dumps(failure("session", text), ensure_ascii=True).encode("ascii")
                full.append(body)
                message = {"type": "http.response.start", "status": 429, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"1")]}
            elif message["type"] == "http.response.body" and full:
                if full[0] is None:
                    return  # the transport's own body, already replaced
                message, full[0] = {"type": "http.response.body", "body": full[0], "more_body": False}, None
            await send(message)

        await self.app(scope, receive, send_full if opening else send)
        if scope.get("method") == "DELETE" and sid is not None:
            key = f"mcp:{sid.decode('latin-1')}"
            await self.workers.run(key, self.sessions.close, key)


def create_app(env, schemas, db_path, env_id="environment", results=None, allow_hosts=(), allow_origins=(), token=None,
               max_sessions=DEFAULT_MAX_SESSIONS, idle_timeout=DEFAULT_IDLE_TIMEOUT_S, call_timeout=DEFAULT_TIMEOUT_S,
               busy_timeout=BUSY_TIMEOUT_S, workers=None):
    """The ASGI app serving ``env`` (the IR as a dict) on the SQLite file ``db_path``: the FastAPI
    routes and ``/mcp`` behind the request gate (``allow_hosts``, ``allow_origins``, ``token``), SQLite
    on ``workers`` threads (None: the number of cores, at least 2)."""
    sessions = Sessions(env, schemas, db_path, max_sessions=max_sessions, idle_timeout=idle_timeout,
                        call_timeout=call_timeout, busy_timeout=busy_timeout)
    sessions.measure()
    pool = Workers(workers or default_workers())
    results = results or {}
    # The gate enforces Host/Origin on every route, /mcp included, so the MCP transport's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    manager = StreamableHTTPSessionManager(app=mcp_server(sessions, pool, schemas, env_id), security_settings=security,
                                           max_request_body_size=MAX_BODY_BYTES, session_idle_timeout=idle_timeout,
                                           max_sessions=max_sessions)

    async def sweep():
        while True:
            await anyio.sleep(min(idle_timeout / 4, 30.0))
            await run_in_threadpool(sessions.expire)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with manager.run(), anyio.create_task_group() as tasks:
            if idle_timeout is not None:
                tasks.start_soon(sweep)
            yield
            tasks.cancel_scope.cancel()
        pool.shutdown()
        sessions.close_all()

    scenario = env["scenario"]
    app = FastAPI(
        title=scenario["name"],
        description=scenario["description"],
        version=env_id,
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    app.state.sessions = sessions

    async def on_error(request, exc):
        message = f"request could not be processed: {type(exc).__name__}"
        return SafeJSONResponse(failure("sql", message), status_code=400)

    async def on_http_error(request, exc):
        kind = "not_found" if exc.status_code == 404 else "request"
        return SafeJSONResponse(failure(kind, str(exc.detail)), status_code=exc.status_code,
                                headers=getattr(exc, "headers", None))

    async def on_validation_error(request, exc):
        return SafeJSONResponse(failure("validation", "invalid request"), status_code=422)

    app.add_exception_handler(Exception, on_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)

    @app.get("/health", responses=plain_responses(HEALTH_SCHEMA, "the server is up; `sessions`: isolated sessions open"))
    async def health():
        return {"ok": True, "env_id": env_id, "tools": len(sessions.tools), "sessions": len(sessions)}

    @app.get("/tools", responses=plain_responses(TOOLS_SCHEMA, "every tool with its JSON input schema"))
    async def list_tools():
        return [
            {"name": n, "description": t["description"], "kind": t["kind"], "input_schema": schemas[n]}
            for n, t in sessions.tools.items()
        ]

    @app.post("/reset", openapi_extra={"parameters": [SESSION_HEADER]},
              responses=plain_responses(OK_SCHEMA, "the caller's session is back in its initial state", SESSION_ERRORS))
    async def reset(request: Request):
        key, refused = session_key(request.headers)
        if refused is not None:
            return refused
        try:
            await pool.run(key, sessions.reset, key)
        except SessionsFull as exc:
            return SafeJSONResponse(failure("session", str(exc)), status_code=429, headers={"Retry-After": "1"})
        return {"ok": True}

    @app.post("/close", openapi_extra={"parameters": [SESSION_HEADER]},
              responses=plain_responses(CLOSED_SCHEMA, "the caller's session database is freed (`closed`: it existed)",
                                        {"400": "no session header (the default session cannot be closed) or a "
                                                "malformed session id"}))
    async def close(request: Request):
        key, refused = session_key(request.headers)
        if refused is not None:
            return refused
        if key is None:
            return SafeJSONResponse(failure("request", "send X-Session-Id (or Mcp-Session-Id) to close that session; "
                                                       "the default session cannot be closed"), status_code=400)
        return {"ok": True, "closed": await pool.run(key, sessions.close, key)}

    for name, tool in sessions.tools.items():
        app.add_api_route(
            f"/tools/{name}",
            tool_endpoint(sessions, pool, name),
            methods=["POST"],
            operation_id=name,
            summary=tool["description"].splitlines()[0][:120],
            description=tool["description"],
            tags=[tool["kind"]],
            openapi_extra=openapi_extra(schemas[name], results.get(name, {})),
        )

    @app.post("/tools/{name}", include_in_schema=False)
    async def unknown_tool(name: str):
        available = ", ".join(sessions.tools)
        return SafeJSONResponse(failure("not_found", f"unknown tool {name!r} (available: {available})"), status_code=404)

    app.router.routes.append(Route("/mcp", endpoint=McpEndpoint(manager, sessions, pool)))
    gate = RequestGate(ToolRoutes(app, sessions, pool), allow_hosts=allow_hosts, allow_origins=allow_origins,
                       token=token, max_body=MAX_BODY_BYTES)
    gate.sessions = sessions
    return gate


def listen(host, port):
    """A listening socket on ``host:port`` (port 0: any free port); OSError names why not."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def default_workers():
    return max(2, os.cpu_count() or 1)


def url_of(host, port):
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def main(env, schemas, env_id, argv=None, results=None):
    """``python server.py --db PATH --port PORT [--host 127.0.0.1] [options]``."""
    parser = argparse.ArgumentParser(description=f"Serve the {env_id} environment over HTTP and MCP.")
    parser.add_argument("--db", required=True, help="SQLite database file (a copy of initial.db); the default "
                                                    "session's writes go here")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port; the bound one is printed)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default %(default)s)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                        help="also accept requests whose Host header names this host (repeatable; '*' for any). "
                             "Loopback names are always accepted; others are refused (DNS rebinding protection), "
                             "also when bound to 0.0.0.0")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="also accept browser requests from this origin, e.g. https://app.example.org "
                             "(repeatable; '*' for any). Loopback origins are always accepted")
    parser.add_argument("--token", default=os.environ.get("ENVFOUNDRY_TOKEN") or None,
                        help="require 'Authorization: Bearer TOKEN' on every route (default: $ENVFOUNDRY_TOKEN)")
    try:
        max_sessions = max_sessions_default()
    except ValueError as exc:
        parser.error(str(exc))
    parser.add_argument("--max-sessions", type=int, default=max_sessions, metavar="N",
                        help=f"isolated sessions (MCP sessions and X-Session-Id values) open at once; one more is "
                             f"answered 429 (default ${MAX_SESSIONS_VAR} or {DEFAULT_MAX_SESSIONS}: %(default)s)")
    parser.add_argument("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="SECONDS",
                        help="close a session after this long without a request (default %(default)s)")
    parser.add_argument("--call-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help="stop a tool call that runs longer than this (default %(default)s)")
    parser.add_argument("--busy-timeout", type=float, default=BUSY_TIMEOUT_S, metavar="SECONDS",
                        help="wait this long for a lock held by another connection before answering 503 (default %(default)s)")
    parser.add_argument("--workers", type=int, default=default_workers(), metavar="N",
                        help="threads running SQLite for every session (default: the cores, at least 2: %(default)s)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    args = parser.parse_args(argv)
    for flag, value in (("--max-sessions", args.max_sessions), ("--idle-timeout", args.idle_timeout),
                        ("--call-timeout", args.call_timeout), ("--busy-timeout", args.busy_timeout),
                        ("--workers", args.workers)):
        if not value > 0:
            parser.error(f"{flag} must be positive, not {value}")
    if not os.path.isfile(args.db):
        print(f"error: database file {args.db} does not exist (start from a copy of initial.db)", file=sys.stderr)
        return 2
    try:
        app = create_app(env, schemas, args.db, env_id=env_id, results=results, allow_hosts=args.allow_host,
                         allow_origins=args.allow_origin, token=args.token, max_sessions=args.max_sessions,
                         idle_timeout=args.idle_timeout, call_timeout=args.call_timeout, busy_timeout=args.busy_timeout,
                         workers=args.workers)
    except sqlite3.Error as exc:
        print(f"error: cannot open {args.db} as a SQLite database: {exc}", file=sys.stderr)
        return 2
    try:
        sock = listen(args.host, args.port)
    except OSError as exc:
        why = "the port is already in use" if getattr(exc, "errno", None) in (48, 98, 10048) else exc.strerror or exc
        print(f"error: cannot listen on {url_of(args.host, args.port)}: {why} (choose another --port, or 0 for any "
              f"free port)", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    print(f"serving {env_id} at {url_of(args.host, port)} (MCP: {url_of(args.host, port)}/mcp, database: {args.db})",
          file=sys.stderr, flush=True)
    per = app.sessions.session_kib
    print(f"sessions: up to {args.max_sessions} at once (--max-sessions or {MAX_SESSIONS_VAR}); one session measured "
          f"{per:.0f} KiB at start-up (its database copy), about {args.max_sessions * per / 1024:.0f} MiB at the cap",
          file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level=args.log_level, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
