"""``envfoundry verify ENV_DIR`` (tasks, proofs, tester/checker, report) and ``envfoundry task-bank``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from pipeline.cli.common import client_from_config, emit_json, json_option, llm_options
from pipeline.config import Config
from pipeline.settings import Stages, format_validation_error


def verify_settings(config: Config, **flags: Any) -> Any:
    """``[stages.verify|tasks|tester|checker|difficulty]`` of the config with flags on top."""
    from verify.run import VerifySettings

    stages = {k: dict(v) for k, v in config.stages.items()}
    for dotted, value in flags.items():
        if value is None:
            continue
        section, key = dotted.split(".")
        stages.setdefault(section, {})[key] = value
    try:
        Stages.model_validate(stages)  # names the table of a bad key ([stages.verify] or an agent's own)
        return VerifySettings.from_stages(stages)
    except ValidationError as e:
        raise click.UsageError(format_validation_error(e, prefix="stages")) from None


def _summary_line(summary: dict[str, Any]) -> str:
    return (f"planned {summary['planned']}, tested {summary['tested']}, accepted {summary['accepted']}, "
            f"kept {summary['kept']}, rejections {summary['rejected']}")


def register(main: click.Group) -> None:
    @main.command()
    @click.argument("env_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--tasks", "n_tasks", type=click.IntRange(1, 200), default=None,
                  help="Tasks to generate (default 6; [stages.tasks] n_tasks).")
    @click.option("--attempts", type=click.IntRange(1, 64), default=None,
                  help="Tester attempts per task, k (default 4; [stages.tester] attempts).")
    @click.option("--max-turns", type=click.IntRange(1, 50), default=None, help="Tester turns per attempt (default 8).")
    @click.option("--fix-rounds", type=click.IntRange(0, 10), default=None,
                  help="Repair rounds per task after an environment fault (default 2).")
    @click.option("--reuse-tasks", is_flag=True, default=False,
                  help="Verify the tasks already in tasks.jsonl instead of generating new ones.")
    @click.option("--policy", type=click.Choice(["tag", "band"]), default=None,
                  help="Keep every task and tag it (default), or keep pass rates within the band.")
    @click.option("--min-pass-rate", type=click.FloatRange(0, 1), default=None, help="Band floor (inclusive).")
    @click.option("--max-pass-rate", type=click.FloatRange(0, 1), default=None, help="Band ceiling (inclusive).")
    @click.option("--no-llm-checker", is_flag=True, default=False,
                  help="Review tester calls with the code rules only.")
    @llm_options
    @json_option
    def verify(env_dir: Path, n_tasks: int | None, attempts: int | None, max_turns: int | None,
               fix_rounds: int | None, reuse_tasks: bool, policy: str | None, min_pass_rate: float | None,
               max_pass_rate: float | None, no_llm_checker: bool, config: Config, as_json: bool) -> None:
        """Generate tasks for ENV_DIR, prove each (reference replay passes; initial, no-op and destructive
        trajectories fail), run the tester k times and the checker on every call, and write tasks.jsonl,
        report.json and trajectories.jsonl.

        Exits 1 when no task survives.
        """
        from pipeline.cli.build import build_settings
        from pipeline.envdir import load_env_dir
        from pipeline.stages.repair import repair_data, repair_tool
        from verify.emit import write_env_results
        from verify.run import verify_env

        settings = verify_settings(
            config, **{"tasks.n_tasks": n_tasks, "tester.attempts": attempts, "tester.max_turns": max_turns,
                       "verify.fix_rounds": fix_rounds, "difficulty.mode": policy,
                       "difficulty.min_pass_rate": min_pass_rate, "difficulty.max_pass_rate": max_pass_rate,
                       "checker.use_llm": False if no_llm_checker else None})
        env, existing, _ = load_env_dir(env_dir)
        if reuse_tasks and not existing:
            raise click.UsageError(f"{env_dir / 'tasks.jsonl'} has no tasks to reuse")
        client = client_from_config(config)
        say = (lambda _m: None) if as_json else (lambda m: click.echo(m, err=True))
        say(f"verifying {env.env_id} with {client.describe()}")
        t0 = time.perf_counter()
        initial_db = env_dir / "initial.db"
        bs = build_settings(config)  # the fixers regenerate a blamed tool or table as the build stages would
        result = verify_env(env, client, initial_db=initial_db if initial_db.is_file() else None,
                            tasks=existing if reuse_tasks else None, settings=settings, progress=say,
                            fix_tool=lambda e, fault: repair_tool(e, fault, client, bs),
                            fix_data=lambda e, fault: repair_data(e, fault, client, bs))
        write_env_results(env_dir, result.env, result.tasks, result.report, result.trajectories)
        summary = dict(result.report["summary"])
        summary["env_dir"] = str(env_dir)
        summary["seconds"] = round(time.perf_counter() - t0, 1)
        summary["usage"] = client.usage.by_stage()
        if as_json:
            emit_json(summary)
        else:
            click.echo(_summary_line(summary))
            click.echo(f"pass-rate histogram: {summary['pass_rate_histogram']}")
            for r in result.rejections:
                click.echo(f"  rejected [{r.stage}] {r.item}: {r.reason[:200]}")
            click.echo(f"wrote {env_dir}/tasks.jsonl, report.json, trajectories.jsonl in {summary['seconds']}s")
        if not result.tasks:
            sys.exit(1)

    @main.command("task-bank")
    @click.argument("env_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Directory for task_bank.jsonl and task_bank.parquet.")
    @json_option
    def task_bank(env_dirs: tuple[Path, ...], out_dir: Path, as_json: bool) -> None:
        """Collect the tasks.jsonl of verified environment directories into one task bank (JSONL + Parquet)."""
        from pipeline.envdir import load_env_dir
        from verify.emit import write_task_bank

        tasks = []
        for d in env_dirs:
            tasks += load_env_dir(d)[1]
        paths = write_task_bank(tasks, out_dir)
        out = {"tasks": len(tasks), "envs": len(env_dirs), **{k: str(v) for k, v in paths.items()}}
        if as_json:
            emit_json(out)
        else:
            click.echo(f"{len(tasks)} tasks from {len(env_dirs)} environments -> {paths['jsonl']}, {paths['parquet']}")
