"""``envfoundry serve`` and ``envfoundry render``: run and (re)generate an environment's server.py."""

from __future__ import annotations

import runpy
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import click

env_dir_argument = click.argument("env_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def register(main: click.Group) -> None:
    @main.command()
    @env_dir_argument
    @click.option("--port", type=int, default=8000, show_default=True, help="TCP port to listen on (0: any free port; "
                                                                             "the bound one is printed).")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
    @click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Serve (and write to) this database file; default: a temporary copy of initial.db.",
    )
    @click.option("--allow-host", multiple=True, metavar="NAME[:PORT]",
                  help="Also accept this Host header (repeatable; loopback always; DNS rebinding protection).")
    @click.option("--allow-origin", multiple=True, metavar="ORIGIN",
                  help="Also accept browser requests from this origin (repeatable; loopback always).")
    @click.option("--token", default=None, help="Require 'Authorization: Bearer TOKEN' on every route "
                                                "(default: $ENVFOUNDRY_TOKEN).")
    @click.option("--max-sessions", type=int, default=None, help="Isolated sessions open at once (server default 1024, or $ENVFOUNDRY_MAX_SESSIONS).")
    @click.option("--idle-timeout", type=float, default=None, help="Seconds before an idle session is closed "
                                                                   "(server default 1800).")
    @click.option("--allow-modified", is_flag=True, default=False,
                  help="Serve a server.py that no longer matches env.json (edited by hand or stale).")
    def serve(env_dir: Path, port: int, host: str, db: Path | None, allow_host: tuple[str, ...],
              allow_origin: tuple[str, ...], token: str | None, max_sessions: int | None, idle_timeout: float | None,
              allow_modified: bool) -> None:
        """Serve ENV_DIR's server.py (HTTP tools, /reset, OpenAPI, MCP at /mcp) until interrupted."""
        from pipeline.server import EnvJsonError, check_server

        server = env_dir / "server.py"
        initial = env_dir / "initial.db"
        if not server.is_file() or not initial.is_file():
            raise click.UsageError(f"{env_dir} is not an environment directory (needs server.py and initial.db)")
        try:
            fresh = check_server(env_dir)
        except EnvJsonError as exc:
            _fail(str(exc))
        if not fresh and not allow_modified:
            _fail(f"{server} no longer matches {env_dir / 'env.json'}: run `envfoundry render {env_dir}` to "
                  "regenerate it, or pass --allow-modified to serve it as it is")
        if not fresh:
            click.echo(f"warning: serving {server}, which differs from a fresh render of env.json", err=True)
        tmp = None
        if db is None:
            tmp = Path(tempfile.mkdtemp(prefix="envfoundry-serve-"))
            db = tmp / "env.db"
            shutil.copyfile(initial, db)
        elif not db.exists():
            shutil.copyfile(initial, db)
        # Run the directory's own server.py in this process (exactly what a trainer runs), so signals reach
        # uvicorn directly and the temporary copy is removed afterwards. server.py prints the address it serves.
        argv = sys.argv
        sys.argv = [str(server), "--db", str(db), "--port", str(port), "--host", host]
        for flag, values in (("--allow-host", allow_host), ("--allow-origin", allow_origin)):
            for value in values:
                sys.argv += [flag, value]
        for flag, setting in (("--token", token), ("--max-sessions", max_sessions), ("--idle-timeout", idle_timeout)):
            if setting is not None:
                sys.argv += [flag, str(setting)]
        code: object = 0
        # uvicorn shuts down gracefully on SIGTERM and then re-raises it; end with a clean exit instead.
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            runpy.run_path(str(server), run_name="__main__")
        except SystemExit as exc:
            code = exc.code
        except KeyboardInterrupt:
            code = 0
        finally:
            sys.argv = argv
            signal.signal(signal.SIGTERM, previous)
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(code, str):  # server.py exited with a message (e.g. it needs mcp >= 2)
            click.echo(code, err=True)
            code = 1
        sys.exit(code if isinstance(code, int) else 1)

    @main.command()
    @click.argument("env_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--check", is_flag=True, default=False, help="Write nothing; exit 1 if any server.py is stale.")
    def render(env_dirs: tuple[Path, ...], check: bool) -> None:
        """Render server.py from env.json in each ENV_DIR (deterministic: same IR, same bytes)."""
        from pipeline.server import EnvJsonError, check_server, load_env_json, render_server

        stale = []
        for d in env_dirs:
            if not (d / "env.json").is_file():
                raise click.UsageError(f"{d} has no env.json")
            try:
                if check:
                    if not check_server(d):
                        stale.append(d)
                        click.echo(f"{d / 'server.py'} differs from a fresh render of {d / 'env.json'}", err=True)
                    continue
                env = load_env_json(d)
            except EnvJsonError as exc:
                _fail(str(exc))
            (d / "server.py").write_text(render_server(env), encoding="utf-8")
            click.echo(f"rendered {d / 'server.py'}")
        if stale:
            click.echo(f"{len(stale)} of {len(env_dirs)} server.py files are stale; run `envfoundry render DIR`", err=True)
            sys.exit(1)
        if check:
            click.echo(f"{len(env_dirs)} server.py file(s) up to date")
