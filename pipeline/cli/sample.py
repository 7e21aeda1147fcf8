"""``envfoundry sample ENV_DIR``: fresh proved tasks from an environment's rows, by seed and level, with no LLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pipeline.cli.common import emit_json, json_option


def register(main: click.Group) -> None:
    @main.command()
    @click.argument("env_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--n", "n", type=click.IntRange(0), default=10, show_default=True, help="Tasks to sample.")
    @click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same tasks, byte for byte.")
    @click.option("--level", type=click.IntRange(1, 5), default=None,
                  help="Difficulty level 1-5 (the ladder in `pipeline.sampler`: one call, short chain, deep or "
                  "computed, two goals or implicit; a rule over a write one level up; 5: refuse part of a request, or two goals "
                  "under a rule); default: any.")
    @click.option("--tier", type=click.IntRange(1, 3), default=None, help="Task tier 1-3 instead of a level.")
    @click.option("--writes", type=click.IntRange(0), default=None, help="Only tasks with exactly this many writes.")
    @click.option("--exclude", "exclude", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
                  metavar="TASK_BANK", help="Never repeat a task of this JSONL file (a task bank, an earlier "
                  "sample; repeatable). The environment's own tasks.jsonl is always excluded.")
    @click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help="Write the task records here (JSONL); default: stdout.")
    @click.option("--perturb", is_flag=True, default=False,
                  help="Plan each round's tasks on a fresh initial state (the code-made rows' non-identifying values "
                  "drawn again from the environment's row generators): written to OUT's folder as "
                  "<out-stem>.dbs/perturb-<seed>-<round>.db and named in each task's metadata.perturb. Needs --out.")
    @json_option
    def sample(env_dir: Path, n: int, seed: int, level: int | None, tier: int | None, writes: int | None,
               exclude: tuple[Path, ...], out: Path | None, perturb: bool, as_json: bool) -> None:
        """Sample N fresh tasks of ENV_DIR from its real rows, worded by code and proved as the build proves them
        (reference passes; initial state, no-op, destructive and the rules' adversaries fail). No LLM is called.

        Tasks never repeat the environment's bank or an --exclude file. The closing line says how many distinct
        proved tasks were found and, when fewer than N, that the environment holds only that many at that level.
        Exit 2 on bad input (not an environment directory, a bad line of an --exclude file).
        """
        from pipeline import atomic
        from pipeline.catalog import jsonl_text
        from pipeline.sampler import Want, sample_env_dir

        if level is not None and tier is not None:
            raise click.UsageError("give --level or --tier, not both")
        if perturb and out is None:
            raise click.UsageError("--perturb writes the tasks' databases beside --out: give --out")
        dbs = out.with_name(out.stem + ".dbs") if perturb and out is not None else None
        if dbs is not None:
            dbs.mkdir(parents=True, exist_ok=True)
        got = sample_env_dir(env_dir, n, seed=seed, want=Want(level=level, tier=tier, writes=writes), exclude=exclude,
                             perturb_dir=dbs)
        text = jsonl_text(got.tasks)
        if out is not None:
            atomic.write_text(out, text)
        else:
            sys.stdout.write(text)
        if as_json:
            report = {**got.to_json(), "env_dir": str(env_dir), "seed": seed, "out": str(out) if out else None}
            if out is None:
                click.echo(json.dumps(report, sort_keys=True), err=True)
            else:
                emit_json(report)
        else:
            click.echo(got.summary() + (f" -> {out}" if out else "") + (f" (databases in {dbs})" if dbs else ""),
                   err=out is None)
