"""``envfoundry export``: write a catalog's task bank in a trainer's format."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.cli.common import emit_json, json_option

FORMAT_HELP = (
    "verifiers: an installable verifiers package per environment (load_environment); "
    "openenv: an OpenEnv server directory per environment (openenv.yaml); "
    "verl: one dataset over every environment (train/val parquet, tool config YAML, tool/reward package); "
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
    @click.option(
        "--val-fraction",
        type=click.FloatRange(0.0, 1.0, max_open=True),
        default=0.1,
        show_default=True,
        help="Share of each environment's tasks held out as the validation split (chosen by task-id hash).",
    )
    @click.option(
        "--sft-arguments",
        type=click.Choice(["object", "string", "both"]),
        default="object",
        show_default=True,
        help="jsonl: tool-call arguments as JSON objects (Hugging Face chat templates), as JSON strings "
        "(OpenAI wire format), or both (objects plus an arguments_json string).",
    )
    @click.option(
        "--sample-per-level",
        type=click.IntRange(0),
        default=0,
        show_default=True,
        help="Also ship up to N tasks per difficulty level (1-5) per environment, sampled now by `envfoundry "
        "sample` (no LLM; none of the bank's): OpenEnv reset(seed=..., level=...) and its adaptive level, verifiers "
        "load_environment(n=..., level=...), veRL train_level<L>.parquet (jsonl: the bank only). 0: none.",
    )
    @click.option("--sample-seed", type=int, default=0, show_default=True,
                  help="The sampler's seed for --sample-per-level (same seed, same pools).")
    @click.option("--perturb", is_flag=True,
                  help="With --sample-per-level: sample each round on a perturbed copy of initial.db (fresh values, "
                  "the same rows named the same way) and ship those states (states/, stored once by content hash); "
                  "each pool task plays on its own state.")
    @click.option("--allow-failing", is_flag=True,
                  help="Ship tasks that fail the integrity audit (marked in audit.json) instead of refusing.")
    @json_option
    def export_cmd(
        catalog: Path, fmt: str, out_dir: Path, val_fraction: float, sft_arguments: str, sample_per_level: int,
        sample_seed: int, perturb: bool, allow_failing: bool, as_json: bool
    ) -> None:
        """Export the task bank of CATALOG (envs/<env_id>/ + task_bank.jsonl) for RL trainers.

        Every format comes from the one task bank: task ids, instructions and verifiers are
        identical across them, and each carries every task's split, tier and pass rate. Exported
        artefacts do not need envfoundry installed: they vendor the tool engine and the reward.
        """
        from pipeline.export import (
            FORMATS,
            CatalogError,
            ExportError,
            export_catalog,
            load_catalog,
            sample_pools,
        )

        try:
            cat = load_catalog(catalog)
            formats = list(FORMATS) if fmt == "all" else [fmt]
            # sampled once, shared by every format
            wanted = sample_per_level > 0 and formats != ["jsonl"]  # the SFT transcripts carry the bank only
            if perturb and not sample_per_level:
                raise click.UsageError("--perturb needs --sample-per-level N (it perturbs the sampled pools)")
            pools = sample_pools(cat, sample_per_level, sample_seed, perturb) if wanted else None
            results = [
                export_catalog(
                    cat, f, out_dir / f if fmt == "all" else out_dir,
                    val_fraction=val_fraction, sft_arguments=sft_arguments, pools=pools, allow_failing=allow_failing,
                )
                for f in formats
            ]
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
                        "pools": list(r.pools),
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
            for line in r.pools:
                click.echo(f"  sampled {line}")
