"""``envfoundry report`` (one self-contained HTML file) and ``envfoundry browse`` (a local web app)."""

from __future__ import annotations

from pathlib import Path

import click

catalog_argument = click.argument("catalog", type=click.Path(exists=True, file_okay=False, path_type=Path))
embed_option = click.option(
    "--embed/--no-embed", default=True, show_default=True,
    help="Embed rejected scenarios with the dedup model to place them on the scenario map "
         "(--no-embed skips loading the model; they are then left off the map).")


def register(main: click.Group) -> None:
    @main.command()
    @catalog_argument
    @click.option("--out", "-o", required=True, type=click.Path(dir_okay=False, path_type=Path),
                  help="HTML file to write (outside the catalog).")
    @click.option("--force", is_flag=True, default=False, help="Replace --out if it exists.")
    @embed_option
    def report(catalog: Path, out: Path, force: bool, embed: bool) -> None:
        """Write one self-contained HTML report of CATALOG: scenario map, rejections, environments, tasks,
        pass rates, tokens and seconds per stage. Same catalog, same bytes; nothing is fetched when viewed."""
        from pipeline.report.bundle import write_report

        path = write_report(catalog, out, force=force, embed=embed)
        click.echo(f"wrote {path} ({path.stat().st_size:,} bytes)")

    @main.command()
    @catalog_argument
    @click.option("--port", type=int, default=8765, show_default=True, help="TCP port to listen on.")
    @click.option("--host", default="127.0.0.1", show_default=True,
                  help="Interface to bind (loopback by default; then only loopback Host/Origin headers are served).")
    @embed_option
    def browse(catalog: Path, port: int, host: str, embed: bool) -> None:
        """Browse CATALOG in a local web app: environments with their schema diagram and tool SQL, tasks with
        search and filters, each task's reference solution replayed call by call, and the testers'
        trajectories with the checker's verdicts."""
        from pipeline.report.browse import LOOPBACK_HOSTS, serve

        if host not in LOOPBACK_HOSTS:
            click.echo(f"warning: serving on {host}, which is not a loopback address; anyone who can reach it "
                       "can read the catalog", err=True)
        click.echo(f"browsing {catalog} at http://{'[::1]' if host == '::1' else host}:{port}/ (Ctrl-C to stop)",
                   err=True)
        serve(catalog, host=host, port=port, embed=embed)
