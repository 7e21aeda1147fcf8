"""``envfoundry browse``: a local web app over a catalog directory (FastAPI, loopback by default).

It reads the same files as the report, through :func:`pipeline.report.data.load_catalog`, and reloads
them when ``catalog.db`` or an environment's result files change, so a running ``envfoundry run`` or
``verify`` shows up on the next page load. Nothing is written: the catalog database is opened read-only
and reference solutions are replayed on in-memory instances.

On a loopback address it answers only requests whose ``Host`` (and ``Origin``, when sent) names a loopback
address: the generated servers' request gate (``pipeline.server.gate``) with its default allow-lists, and a
``Host`` required, so a web page elsewhere cannot read it through DNS rebinding.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pipeline.report.data import load_catalog
from pipeline.server.gate import LOOPBACK_NAMES, RequestGate

LOOPBACK_HOSTS = LOOPBACK_NAMES
WATCHED = ("env.json", "tasks.jsonl", "trajectories.jsonl", "report.json")
GATE = RequestGate(None)  # loopback hosts and origins only; used for its checks, not as the app's middleware


def loopback_request(host: str | None, origin: str | None) -> bool:
    """True when ``Host`` names a loopback address and ``Origin`` is absent or a loopback origin."""
    return host is not None and bool(GATE.host_allowed(host)) and bool(GATE.origin_allowed(origin))


class CatalogState:
    """The loaded catalog, reloaded when its files change; replays and the report page are cached per load."""

    def __init__(self, catalog_dir: str | Path, *, embed: bool = True) -> None:
        self.dir = Path(catalog_dir)
        self.embed = embed
        self._lock = threading.Lock()
        self._sig: tuple[Any, ...] | None = None
        self._data: dict[str, Any] = {}
        self.cache: dict[str, Any] = {}
        self.data()  # fail at start-up, not on the first page, when the directory is not a catalog

    def signature(self) -> tuple[Any, ...]:
        files = [self.dir / "catalog.db", self.dir / "catalog.db-wal", self.dir / "dedup" / "meta.json"]
        envs = self.dir / "envs"
        if envs.is_dir():
            files += [d / name for d in sorted(envs.iterdir()) for name in WATCHED]
        out = []
        for f in files:
            try:
                st = f.stat()
                out.append((str(f), st.st_mtime_ns, st.st_size))
            except OSError:
                continue
        return tuple(out)

    def data(self) -> dict[str, Any]:
        with self._lock:
            sig = self.signature()
            if sig != self._sig:
                self._data = load_catalog(self.dir, trajectories=True)
                self._sig = sig
                self.cache = {}
            return self._data

    def env(self, env_id: str) -> dict[str, Any] | None:
        return next((e for e in self.data()["environments"] if e.get("env_id") == env_id), None)

    def task(self, task_id: str) -> dict[str, Any] | None:
        return next((t for t in self.data()["tasks"] if t["task_id"] == task_id), None)

    def replay(self, task: dict[str, Any], env: dict[str, Any] | None) -> dict[str, Any] | None:
        from pipeline.report.replay import replay_reference

        if env is None or not env.get("detail") or not env.get("dir"):
            return None
        key = f"replay:{task['task_id']}"
        if key not in self.cache:
            from pipeline.catalog import read_json

            env_dir = self.dir / env["dir"]
            env_json = read_json(env_dir / "env.json", [])
            if not isinstance(env_json, dict):
                return None
            self.cache[key] = replay_reference(env_json, env_dir / "initial.db", task)
        return self.cache[key]

    def report(self) -> str:
        from pipeline.report.bundle import render_report

        data = self.data()
        if "report" not in self.cache:
            self.cache["report"] = render_report(data, self.dir, embed=self.embed)
        return self.cache["report"]


def create_app(catalog_dir: str | Path, *, host: str = "127.0.0.1", embed: bool = True) -> Any:
    """The FastAPI app browsing ``catalog_dir``; ``host`` is the address it will be served on."""
    from fastapi import FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

    from pipeline.report import views

    state = CatalogState(catalog_dir, embed=embed)
    app = FastAPI(title="envfoundry browse", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.catalog = state
    guard = host in LOOPBACK_HOSTS

    @app.middleware("http")
    async def only_loopback(request: Request, call_next: Any) -> Response:
        if guard and not loopback_request(request.headers.get("host"), request.headers.get("origin")):
            return PlainTextResponse("forbidden: this browser answers loopback hosts and origins only",
                                     status_code=403)
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        return response

    def html(text: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(text, status_code=status)

    @app.get("/health")
    def health() -> dict[str, Any]:
        data = state.data()
        return {"ok": True, "catalog": data["catalog"]["name"], "environments": len(data["environments"]),
                "tasks": len(data["tasks"])}

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return html(views.index_page(state.data()))

    @app.get("/env/{env_id}", response_class=HTMLResponse)
    def env_page(env_id: str) -> HTMLResponse:
        env = state.env(env_id)
        if env is None or not env.get("detail"):
            return html(views.not_found_page(state.data(), f"no environment {env_id!r} with a directory"), 404)
        return html(views.env_page(state.data(), env))

    @app.get("/tasks", response_class=HTMLResponse)
    def tasks(env: str = "", kind: str = "", tier: str = "", q: str = "") -> HTMLResponse:
        return html(views.tasks_page(state.data(), env=env, kind=kind, tier=tier, q=q))

    @app.get("/api/tasks")
    def api_tasks(env: str = "", kind: str = "", tier: str = "", q: str = "") -> JSONResponse:
        found = views.filter_tasks(state.data()["tasks"], env=env, kind=kind, tier=tier, q=q)
        return JSONResponse([{k: v for k, v in t.items() if k not in ("metadata", "provenance")} for t in found])

    @app.get("/task/{task_id}", response_class=HTMLResponse)
    def task_page(task_id: str) -> HTMLResponse:
        task = state.task(task_id)
        if task is None:
            return html(views.not_found_page(state.data(), f"no task {task_id!r}"), 404)
        env = state.env(task["env_id"])
        return html(views.task_page(state.data(), task, env, state.replay(task, env)))

    @app.get("/report", response_class=HTMLResponse)
    def report() -> HTMLResponse:
        return html(state.report())

    return app


def serve(catalog_dir: str | Path, *, host: str = "127.0.0.1", port: int = 8765, embed: bool = True) -> None:
    """Serve the browser until interrupted."""
    import uvicorn

    app = create_app(catalog_dir, host=host, embed=embed)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
