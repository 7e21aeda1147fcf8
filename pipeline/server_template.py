"""The server half of every generated server.py: FastAPI routes and an MCP endpoint over the engine.

``pipeline.render`` writes ``server.py`` as: the engine source (``pipeline/runtime/engine.py``) and
the request gate (``pipeline/server_gate.py``) verbatim, then this module without its import
block of those two, then the environment as literals (``ENV_ID``, ``ENV``, ``TOOL_SCHEMAS``,
``RESULT_SCHEMAS``) and a ``__main__`` guard calling ``main``. This module is also importable as
is (the engine and gate then come from the package), which is how tests exercise it.

Routes: ``POST /tools/<name>`` (a JSON object of arguments), ``GET /tools``, ``POST /reset``,
``GET /health``, ``/openapi.json`` (request and response schemas per tool) and MCP streamable HTTP
at ``/mcp`` (the same tools and input schemas; tool errors are ``isError`` results).
Status codes: 200 ok; 422 invalid arguments (the body names the parameter); 404 unknown tool;
400 guard / not found / database constraint; 503 (with ``Retry-After``) the database stayed
locked by another connection; and from the gate, on every route: 403 foreign Host or Origin,
401 missing token, 413 body over 1 MiB, 415 a body that is not JSON. 405 answers carry ``Allow``.
Nothing a client sends yields a 5xx. SQLite runs in worker threads, never on the event loop.
Every call runs in one transaction on the ``--db`` file and is committed when it succeeds;
``POST /reset`` restores the file to the state the server started with.
"""

import argparse
import contextlib
import os
import sys
import threading

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

# envfoundry:engine-import-begin (render replaces this block with the engine and gate sources)
from pipeline.runtime.engine import (
    BUSY_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    connect,
    failure,
    json,
    run_tool,
    served_tool,
    sqlite3,
)
from pipeline.server_gate import RequestGate

# envfoundry:engine-import-end

MAX_BODY_BYTES = 1 << 20
STATUS_BY_KIND = {"validation": 422, "guard": 400, "not_found": 400, "sql": 400, "busy": 503}
ERROR_KINDS = ["validation", "guard", "not_found", "sql", "busy", "request"]


class SafeJSONResponse(JSONResponse):
    """JSON with ASCII escapes: any string (even one with lone surrogates) serialises."""

    def render(self, content):
        return json.dumps(content, ensure_ascii=True, allow_nan=True, separators=(",", ":")).encode("ascii")


class EnvState:
    """The live database (the --db file), its starting state for reset, and the tool programs.

    One lock serialises tool calls and resets, so HTTP and MCP requests never interleave. Each
    successful call is committed to the file before the response is sent (``synchronous = OFF``:
    readers and a crashed server lose nothing; only an OS crash could, which episodes do not need).
    Each tool validates its arguments by the rules its published schema states.
    """

    def __init__(self, env, schemas, db_path, call_timeout=DEFAULT_TIMEOUT_S, busy_timeout=BUSY_TIMEOUT_S):
        self.env = env
        self.tools = {t["name"]: served_tool(t, schemas.get(t["name"])) for t in env["tools"]}
        self.call_timeout = call_timeout
        self.lock = threading.Lock()
        self.conn = connect(db_path, timeout=busy_timeout)
        self.conn.execute("PRAGMA synchronous = OFF")
        self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        self.pristine = connect(":memory:")
        self.conn.backup(self.pristine)

    def call(self, name, arguments):
        tool = self.tools.get(name)
        if tool is None:
            return failure("not_found", f"unknown tool {name!r} (available: {', '.join(self.tools)})")
        with self.lock:
            return run_tool(self.conn, tool, arguments, now=self.env["clock"], timeout=self.call_timeout)

    def reset(self):
        with self.lock:
            self.pristine.backup(self.conn)

    def close(self):
        self.conn.close()
        self.pristine.close()


async def read_arguments(request):
    """The request body as JSON (an empty body is ``{}``), or a (status, failure) pair. The gate
    has already refused bodies over the size limit and bodies that are not declared JSON."""
    body = await request.body()
    if not body.strip():
        return {}, None
    try:
        return json.loads(body), None
    except (ValueError, RecursionError) as exc:
        return None, (422, failure("validation", f"request body is not valid JSON: {str(exc)[:200]}"))


def tool_response(out):
    status = 200 if out["ok"] else STATUS_BY_KIND.get(out["kind"], 400)
    headers = {"Retry-After": "1"} if status == 503 else None
    return SafeJSONResponse(out, status_code=status, headers=headers)


def tool_endpoint(state, name):
    async def call_tool(request: Request) -> Response:
        arguments, problem = await read_arguments(request)
        if problem is not None:
            return SafeJSONResponse(problem[1], status_code=problem[0])
        out = await run_in_threadpool(state.call, name, arguments)  # SQLite work never blocks the event loop
        return tool_response(out)

    call_tool.__name__ = f"call_{name}"
    return call_tool


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


def openapi_extra(schema, result):
    ok = {"type": "object", "properties": {"ok": {"const": True}, "result": result}, "required": ["ok", "result"],
          "additionalProperties": False}
    return {
        # an empty body is the empty object: only a tool with required parameters needs one
        "requestBody": {"required": bool(schema.get("required")), "content": json_content(schema)},
        "responses": {
            "200": {"description": "the tool's result", "content": json_content(ok)},
            **error_responses({
                "400": "a rule of the tool (guard), a record not found, or a database constraint",
                "422": "invalid arguments; `parameter` names the offending one",
                "503": "the database stayed locked by another connection; retry (see `Retry-After`)",
            }),
        },
    }


def plain_responses(schema, description):
    return {200: {"description": description, "content": json_content(schema)},
            **{int(code): spec for code, spec in error_responses({}).items()}}


HEALTH_SCHEMA = {"type": "object", "properties": {"ok": {"const": True}, "env_id": {"type": "string"},
                                                  "tools": {"type": "integer"}},
                 "required": ["ok", "env_id", "tools"], "additionalProperties": False}
TOOLS_SCHEMA = {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "description": {"type": "string"}, "kind": {"enum": ["read", "write"]},
    "input_schema": {"type": "object"}}, "required": ["name", "description", "kind", "input_schema"],
    "additionalProperties": False}}
OK_SCHEMA = {"type": "object", "properties": {"ok": {"const": True}}, "required": ["ok"], "additionalProperties": False}


# ---------------------------------------------------------------- MCP


def mcp_server(state, schemas, env_id):
    """A low-level MCP server exposing the same tools with the same input schemas."""

    async def list_tools(ctx, params):
        tools = []
        for name, tool in state.tools.items():
            annotations = mcp_types.ToolAnnotations(read_only_hint=tool["kind"] == "read")
            tools.append(
                mcp_types.Tool(
                    name=name, description=tool["description"], input_schema=schemas[name], annotations=annotations
                )
            )
        return mcp_types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        out = await anyio.to_thread.run_sync(state.call, params.name, params.arguments or {})
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


def create_app(env, schemas, db_path, env_id="environment", results=None, allow_hosts=(), allow_origins=(), token=None,
               call_timeout=DEFAULT_TIMEOUT_S, busy_timeout=BUSY_TIMEOUT_S):
    """The ASGI app serving ``env`` (the IR as a dict) on the SQLite file ``db_path``: the FastAPI
    routes and ``/mcp`` behind the request gate (``allow_hosts``, ``allow_origins``, ``token``)."""
    state = EnvState(env, schemas, db_path, call_timeout=call_timeout, busy_timeout=busy_timeout)
    results = results or {}
    # The gate enforces Host/Origin on every route, /mcp included, so the MCP transport's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    manager = StreamableHTTPSessionManager(app=mcp_server(state, schemas, env_id), security_settings=security,
                                           max_request_body_size=MAX_BODY_BYTES)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with manager.run():
            yield
        state.close()

    scenario = env["scenario"]
    app = FastAPI(
        title=scenario["name"],
        description=scenario["description"],
        version=env_id,
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    app.state.env = state

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

    @app.get("/health", responses=plain_responses(HEALTH_SCHEMA, "the server is up"))
    async def health():
        return {"ok": True, "env_id": env_id, "tools": len(state.tools)}

    @app.get("/tools", responses=plain_responses(TOOLS_SCHEMA, "every tool with its JSON input schema"))
    async def list_tools():
        return [
            {"name": n, "description": t["description"], "kind": t["kind"], "input_schema": schemas[n]}
            for n, t in state.tools.items()
        ]

    @app.post("/reset", responses=plain_responses(OK_SCHEMA, "the database is back in its initial state"))
    async def reset():
        await run_in_threadpool(state.reset)
        return {"ok": True}

    for name, tool in state.tools.items():
        app.add_api_route(
            f"/tools/{name}",
            tool_endpoint(state, name),
            methods=["POST"],
            operation_id=name,
            summary=tool["description"].splitlines()[0][:120],
            description=tool["description"],
            tags=[tool["kind"]],
            openapi_extra=openapi_extra(schemas[name], results.get(name, {})),
        )

    @app.post("/tools/{name}", include_in_schema=False)
    async def unknown_tool(name: str):
        available = ", ".join(state.tools)
        return SafeJSONResponse(failure("not_found", f"unknown tool {name!r} (available: {available})"), status_code=404)

    app.router.routes.append(Route("/mcp", endpoint=StreamableHTTPASGIApp(manager)))
    return RequestGate(app, allow_hosts=allow_hosts, allow_origins=allow_origins, token=token, max_body=MAX_BODY_BYTES)


def main(env, schemas, env_id, argv=None, results=None):
    """``python server.py --db PATH --port PORT [--host 127.0.0.1] [options]``."""
    parser = argparse.ArgumentParser(description=f"Serve the {env_id} environment over HTTP and MCP.")
    parser.add_argument("--db", required=True, help="SQLite database file (a copy of initial.db); writes go here")
    parser.add_argument("--port", type=int, default=8000)
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
    parser.add_argument("--call-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help="stop a tool call that runs longer than this (default %(default)s)")
    parser.add_argument("--busy-timeout", type=float, default=BUSY_TIMEOUT_S, metavar="SECONDS",
                        help="wait this long for a lock held by another connection before answering 503 (default %(default)s)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    args = parser.parse_args(argv)
    if not os.path.isfile(args.db):
        print(f"error: database file {args.db} does not exist (start from a copy of initial.db)", file=sys.stderr)
        return 2
    try:
        app = create_app(env, schemas, args.db, env_id=env_id, results=results, allow_hosts=args.allow_host,
                         allow_origins=args.allow_origin, token=args.token, call_timeout=args.call_timeout,
                         busy_timeout=args.busy_timeout)
    except sqlite3.Error as exc:
        print(f"error: cannot open {args.db} as a SQLite database: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    return 0
