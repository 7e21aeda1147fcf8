"""``envfoundry serve`` and ``envfoundry render``: run and (re)generate an environment's server.py."""

from __future__ import annotations

import runpy
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import click

env_dir_argument = click.argument("env_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(0)


def register(main: click.Group) -> None:
    @main.command()
    @env_dir_argument
    @click.option("--port", type=int, default=8000, show_default=True, help="TCP port to listen on.")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
    @click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Serve (and write to) this database file; default: a temporary copy of initial.db.",
    )
    def serve(env_dir: Path, port: int, host: str, db: Path | None) -> None:
        """Serve ENV_DIR's server.py (HTTP tools, /reset, OpenAPI, MCP at /mcp) until interrupted."""
        from pipeline.render import check_server

        server = env_dir / "server.py"
        initial = env_dir / "initial.db"
        if not server.is_file() or not initial.is_file():
            raise click.UsageError(f"{env_dir} is not an environment directory (needs server.py and initial.db)")
        if not check_server(env_dir):
            click.echo(f"warning: {server} differs from a fresh render (run `envfoundry render {env_dir}`)", err=True)
        tmp = None
        if db is None:
            tmp = Path(tempfile.mkdtemp(prefix="envfoundry-serve-"))
            db = tmp / "env.db"
            shutil.copyfile(initial, db)
        elif not db.exists():
            shutil.copyfile(initial, db)
        click.echo(f"serving {env_dir.name} at http://{host}:{port} (MCP: /mcp, database: {db})", err=True)
        # Run the directory's own server.py in this process (exactly what a trainer runs), so signals reach
        # uvicorn directly and the temporary copy is removed afterwards.
        argv = sys.argv
        sys.argv = [str(server), "--db", str(db), "--port", str(port), "--host", host]
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
        sys.exit(code if isinstance(code, int) else 1)

    @main.command()
    @click.argument("env_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--check", is_flag=True, default=False, help="Write nothing; exit 1 if any server.py is stale.")
    def render(env_dirs: tuple[Path, ...], check: bool) -> None:
        """Render server.py from env.json in each ENV_DIR (deterministic: same IR, same bytes)."""
        from pipeline.ir import Environment
        from pipeline.render import check_server, render_server

        stale = []
        for d in env_dirs:
            if not (d / "env.json").is_file():
                raise click.UsageError(f"{d} has no env.json")
            if check:
                if not check_server(d):
                    stale.append(d)
                    click.echo(f"{d / 'server.py'} differs from a fresh render of {d / 'env.json'}", err=True)
                continue
            env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
            (d / "server.py").write_text(render_server(env), encoding="utf-8")
            click.echo(f"rendered {d / 'server.py'}")
        if stale:
            click.echo(f"{len(stale)} of {len(env_dirs)} server.py files are stale; run `envfoundry render DIR`", err=True)
            sys.exit(1)
        if check:
            click.echo(f"{len(env_dirs)} server.py file(s) up to date")
