"""``envfoundry eval CATALOG_OR_ENV_DIR --out DIR``: measure a model on a catalog with native tool calls."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import client_from_config, json_option, llm_options
from pipeline.config import Config


def register(main: click.Group) -> None:
    @main.command("eval")
    @click.argument("source", metavar="CATALOG_OR_ENV_DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Directory for results.jsonl, trajectories.jsonl, config.json and summary.json "
                       "(a rerun resumes it).")
    @click.option("--api-key", default=None, help="API key for --base-url (env OPENAI_API_KEY); never written out.")
    @click.option("--attempts", type=click.IntRange(1, 64), default=None, help="Attempts per task, k (default 1).")
    @click.option("--concurrency", type=click.IntRange(1, 256), default=None, help="Attempts in flight (default 4).")
    @click.option("--tasks", "task_filter", default=None,
                  help="Which tasks: comma-separated kind:K, tier:T, env:GLOB, task-id globs; a number N keeps "
                       "the first N.")
    @click.option("--max-turns", type=click.IntRange(1, 50), default=None, help="Model replies per attempt (default 8).")
    @click.option("--max-tokens", type=click.IntRange(32, 8192), default=None, help="Reply budget per turn (default 300).")
    @click.option("--context-budget", type=click.IntRange(512, None), default=None,
                  help="Tokens the conversation may fill before older tool results are cut (default: never cut; "
                       "the embedded server: its context window).")
    @click.option("--protocol", type=click.Choice(["auto", "native", "json_action"]), default=None,
                  help="Tool-call protocol (default auto: native tool calls).")
    @click.option("--conversation/--no-conversation", default=None,
                  help="Run each task in its conversational form: the agent gets the opening line and talks with "
                       "the simulated user of [stages.user] (its own endpoint, else this model), who gives the "
                       "task's facts when asked; user errors are counted apart from the agent's.")
    @click.option("--user-base-url", default=None, help="The simulated user's own endpoint ([stages.user] base_url).")
    @click.option("--user-model", default=None, help="Model name at --user-base-url ([stages.user] model).")
    @llm_options(stages={**{key: f"eval.{key}" for key in ("attempts", "concurrency", "max_turns", "max_tokens",
                                                           "context_budget", "protocol", "conversation")},
                         "user_base_url": "user.base_url", "user_model": "user.model"})
    @json_option
    def eval_cmd(source: Path, out_dir: Path, api_key: str | None, task_filter: str | None, config: Config,
                 as_json: bool) -> None:
        """Run a model on every task of CATALOG_OR_ENV_DIR (a catalog's task_bank.jsonl, or an environment
        directory's tasks.jsonl) with native OpenAI tool calls and score it with each task's verifier.

        Each attempt runs on a fresh in-process copy of its environment; tool results go back whole as
        `tool` messages; tool errors (unknown tool, bad JSON, bad arguments, timeouts) go back to the model.
        The final answer is the text of the last assistant message: the attempt ends when the model replies
        without calling a tool. Without --base-url the embedded model runs; its llama.cpp server returns no
        native tool calls for Qwen2.5 (measured), so --protocol auto gives it one schema-constrained JSON
        action per reply instead (the final answer is then its final_answer field).

        With --conversation each task runs in its conversational form (metadata.conversation, else derived from
        its reference solution): the user holds the facts and gives them when asked, ends the conversation with
        ###STOP###, and code counts its mistakes (a fact given unasked, a value made up, a tool or id named, an
        early end) as user errors; the summary adds the user error rate.

        Writes results.jsonl (task_id, attempt, reward, passed, turns, tool_calls, error per attempt),
        trajectories.jsonl, config.json and summary.json into --out, prints pass@1, pass@k and mean reward
        per environment, tier and kind, and with --json one JSON object as the last line of stdout. Endpoint
        faults are retried, then recorded (error) and left out of the rates; a rerun retries them and skips
        finished attempts, and refuses a directory written for other tasks or another model.
        """
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table

        from pipeline.eval import load_items, run_eval, summary_table

        if api_key:
            config = config.model_copy(update={"llm": config.llm.model_copy(update={"api_key": api_key})})
        settings = config.stages.eval
        if settings.concurrency > config.llm.concurrency:  # requests in flight follow the attempts in flight
            config = config.model_copy(update={"llm": config.llm.model_copy(update={"concurrency": settings.concurrency})})
        items = load_items(source, task_filter)
        client = client_from_config(config)
        err = Console(stderr=True)
        if not as_json:
            err.print(f"evaluating {client.describe()} on {len(items)} tasks x {settings.attempts} attempts")
        t0 = time.perf_counter()
        progress = Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TextColumn("passed {task.fields[passed]}"),
                            TimeElapsedColumn(), console=err, transient=as_json)
        with progress:
            bar = progress.add_task("eval", total=None, passed=0)
            passed = 0

            def on_start(todo: int, skipped: int) -> None:
                progress.update(bar, total=todo)
                if skipped and not as_json:
                    err.print(f"resuming: {skipped} attempts already in {out_dir / 'results.jsonl'}")

            def on_result(row: dict[str, Any]) -> None:
                nonlocal passed
                passed += int(bool(row["passed"]))
                progress.update(bar, advance=1, passed=passed)

            result = run_eval(client, items, out_dir, settings, source=source, on_start=on_start, on_result=on_result,
                              user=config.stages.user)
        summary = dict(result.summary)
        summary["seconds"] = round(time.perf_counter() - t0, 1)
        summary["ran"], summary["skipped"] = result.ran, result.skipped
        summary["usage"] = client.usage.total()
        if as_json:
            click.echo(json.dumps(summary, sort_keys=True, default=str))
            return
        talk = (f", conversations (user error rate {summary['user_error_rate']:.2f})"
                if "user_error_rate" in summary else "")
        table = Table(title=f"{summary['model']} ({summary['protocol']} tool calls{talk}), k={summary['k']}")
        for col in ("group", "tasks", "attempts", "pass@1", "pass@k", "mean reward", "errors"):
            table.add_column(col, justify="left" if col == "group" else "right", no_wrap=True)
        for row in summary_table(summary):
            table.add_row(*row)
        out = Console()
        out.width = max(out.width, 140)  # env ids are long: never fold them
        out.print(table)
        click.echo(f"wrote {out_dir}/results.jsonl, trajectories.jsonl, summary.json in {summary['seconds']}s")
        if summary["errors"]:
            click.echo(f"{summary['errors']} attempts lost to endpoint faults (rerun to retry them)", err=True)
