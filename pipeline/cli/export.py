"""``envfoundry export``: write a catalog's task bank in a trainer's format."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.common import emit_json, json_option

FORMAT_HELP = (
    "verifiers: an installable verifiers package per environment (load_environment); "
    "openenv: an OpenEnv server directory per environment (openenv.yaml); "
    "verl: parquet rows + tool config YAML + tool/reward package per environment; "
    "jsonl: reference solutions as chat transcripts for SFT."
)


def register(main: click.Group) -> None:
    @main.command("export")
    @click.argument("catalog", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option(
        "--format",
        "fmt",
        required=True,
        type=click.Choice(["verifiers", "openenv", "verl", "jsonl", "all"]),
        help=FORMAT_HELP + " all: every format, each in its own subdirectory of --out.",
    )
    @click.option(
        "--out",
        "out_dir",
        required=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Directory to write the exported artefacts into.",
    )
    @json_option
    def export_cmd(catalog: Path, fmt: str, out_dir: Path, as_json: bool) -> None:
        """Export the task bank of CATALOG (envs/<env_id>/ + task_bank.jsonl) for RL trainers.

        Every format comes from the one task bank: task ids, instructions and verifiers are
        identical across them. Exported artefacts do not need envfoundry installed.
        """
        from pipeline.export import FORMATS, CatalogError, ExportError, export_catalog, load_catalog

        try:
            cat = load_catalog(catalog)
            formats = list(FORMATS) if fmt == "all" else [fmt]
            results = [export_catalog(cat, f, out_dir / f if fmt == "all" else out_dir) for f in formats]
        except (CatalogError, ExportError) as exc:
            raise click.ClickException(str(exc)) from None
        if as_json:
            emit_json(
                [
                    {
                        "format": r.format,
                        "out": str(r.out),
                        "envs": r.envs,
                        "tasks": r.tasks,
                        "paths": [str(p) for p in r.paths],
                        "skipped_envs": list(r.skipped_envs),
                    }
                    for r in results
                ]
            )
            return
        for r in results:
            click.echo(f"{r.format}: {r.tasks} tasks from {r.envs} environments -> {r.out}")
            for p in r.paths:
                click.echo(f"  {p}")
            for e in r.skipped_envs:
                click.echo(f"  skipped {e}: no task in the bank")
