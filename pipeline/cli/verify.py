"""``envfoundry verify ENV_DIR`` (tasks, proofs, tester/checker, report) and ``envfoundry task-bank``."""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import client_from_config, emit_json, json_option, llm_options
from pipeline.config import Config
from pipeline.hashing import content_hash

CHECKPOINTS = ".verify-checkpoints.sqlite"


@contextmanager
def checkpoints(env_dir: Path) -> Iterator[Any]:
    """The graph's checkpoints for one verification of ``env_dir``: kept when it is killed or fails (the rerun
    resumes with every finished task), removed when it finishes."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = env_dir / CHECKPOINTS
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    except BaseException:
        conn.close()
        raise
    conn.close()
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)


def thread_id(env: Any, tasks: list[Any] | None, settings: Any, client: Any) -> str:
    """What decides a verification's outcome: the environment, the tasks given, the settings, the model."""
    return content_hash({"env": env.env_id, "tasks": None if tasks is None else [t.task_id for t in tasks],
                         "settings": settings.model_dump(mode="json"), "model": getattr(client, "model_key", None),
                         "base_url": getattr(client, "base_url", None) if not getattr(client, "embedded", False)
                         else "embedded"})


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
    @click.option("--no-llm-checker", "llm_checker", flag_value=False, default=None,
                  help="Review tester calls with the code rules only.")
    @llm_options(stages={"n_tasks": "tasks.n_tasks", "attempts": "tester.attempts", "max_turns": "tester.max_turns",
                         "fix_rounds": "verify.fix_rounds", "policy": "difficulty.mode",
                         "min_pass_rate": "difficulty.min_pass_rate", "max_pass_rate": "difficulty.max_pass_rate",
                         "llm_checker": "checker.use_llm"})
    @json_option
    def verify(env_dir: Path, reuse_tasks: bool, config: Config, as_json: bool) -> None:
        """Generate tasks for ENV_DIR, prove each (reference replay passes; initial, no-op and destructive
        trajectories fail), run the tester k times and the checker on every call, and write tasks.jsonl,
        report.json and trajectories.jsonl.

        Resumable: until it finishes, every verified task is checkpointed in ENV_DIR/.verify-checkpoints.sqlite;
        rerun the same command after a kill and it continues with the next task. Exits 1 when no task survives.
        """
        from pipeline.envdir import load_env_dir
        from pipeline.graph import verify_env

        settings = config.stages.verification()
        env, existing, _ = load_env_dir(env_dir)
        if reuse_tasks and not existing:
            raise click.UsageError(f"{env_dir / 'tasks.jsonl'} has no tasks to reuse")
        client = client_from_config(config)
        say = (lambda _m: None) if as_json else (lambda m: click.echo(m, err=True))
        say(f"verifying {env.env_id} with {client.describe()}")
        t0 = time.perf_counter()
        initial_db = env_dir / "initial.db"
        bs = config.stages.build  # the fixers regenerate a blamed tool or table as the build stages would
        given = existing if reuse_tasks else None
        with checkpoints(env_dir) as saver:
            result = verify_env(env, client, initial_db=initial_db if initial_db.is_file() else None, tasks=given,
                                settings=settings, build=bs, repairs=True, progress=say, env_dir=env_dir,
                                checkpointer=saver, thread_id=thread_id(env, given, settings, client))
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
        from pipeline.catalog import write_task_bank
        from pipeline.envdir import load_env_dir

        tasks = []
        for d in env_dirs:
            tasks += load_env_dir(d)[1]
        paths = write_task_bank(tasks, out_dir)
        out = {"tasks": len(tasks), "envs": len(env_dirs), **{k: str(v) for k, v in paths.items()}}
        if as_json:
            emit_json(out)
        else:
            click.echo(f"{len(tasks)} tasks from {len(env_dirs)} environments -> {paths['jsonl']}, {paths['parquet']}")
