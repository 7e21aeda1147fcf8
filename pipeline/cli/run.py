"""``envfoundry run`` (the batch job) and ``envfoundry catalog list|show``."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pipeline.cli.common import emit_json, json_option, llm_options
from pipeline.config import Config
from pipeline.run import Progress as RunProgress


class RichProgress(RunProgress):
    """Progress bars per stage with counts, ETA and tokens/s; a status line with the current step."""

    def __init__(self, console: Console):
        self.console = console
        self.bars = Progress(TextColumn("[bold]{task.description:<13}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                             TextColumn("{task.fields[info]}"), console=console, transient=False)
        self.ids: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.tok = 0
        self.tok_s = 0.0
        self.t0 = time.perf_counter()

    def __enter__(self) -> RichProgress:
        self.bars.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bars.__exit__(*exc)

    def stage(self, name: str, total: int) -> None:
        with self.lock:
            self.ids[name] = self.bars.add_task(name, total=total, info="")

    def advance(self, name: str, n: int = 1, info: str = "") -> None:
        with self.lock:
            self.bars.update(self.ids[name], advance=n, info=info[:60])

    def message(self, text: str) -> None:
        with self.lock:
            if "environments" in self.ids:
                rate = f"  [{self.tok / self.tok_s:.1f} tok/s]" if self.tok_s else ""
                self.bars.update(self.ids["environments"], info=text[:60] + rate)

    def tokens(self, completion_tokens: int, seconds: float) -> None:
        with self.lock:
            self.tok += completion_tokens
            self.tok_s += seconds


class LogProgress(RunProgress):
    """Plain timestamped lines for batch jobs whose stderr is a log file (rich draws no bars there)."""

    def __init__(self, console: Console):
        self.console = console
        self.lock = threading.Lock()
        self.totals: dict[str, int] = {}
        self.done: dict[str, int] = {}
        self.t0 = time.perf_counter()

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def _line(self, text: str) -> None:
        self.console.print(f"[{time.perf_counter() - self.t0:7.1f}s] {text}", markup=False, highlight=False,
                           soft_wrap=True)

    def stage(self, name: str, total: int) -> None:
        with self.lock:
            self.totals[name], self.done[name] = total, 0
            self._line(f"{name}: {total} to do")

    def advance(self, name: str, n: int = 1, info: str = "") -> None:
        with self.lock:
            self.done[name] = self.done.get(name, 0) + n
            self._line(f"{name}: {self.done[name]}/{self.totals.get(name, '?')}" + (f"  {info}" if info else ""))

    def message(self, text: str) -> None:
        with self.lock:
            self._line(text)


def stage_lines(usage: dict[str, dict[str, float]]) -> list[tuple[str, str]]:
    """One line per stage of a run's LLM usage, the most tokens first: calls (from cache), prompt and completion
    tokens, and the seconds its calls took (summed over calls made at once; a reply from the cache takes none)."""
    def tokens(u: dict[str, float]) -> float:
        return u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)

    return [(stage, f"{int(u.get('calls', 0))} calls ({int(u.get('cached', 0))} from cache), {token_words(u)}, "
                    f"{u.get('seconds', 0):.0f} s")
            for stage, u in sorted(usage.items(), key=lambda kv: (-tokens(kv[1]), kv[0]))]


def token_words(u: dict[str, float]) -> str:
    """``N prompt + M completion tokens``, with ``(R read)`` after the prompt tokens when the endpoint said how many
    it read rather than served from its prefix cache."""
    read = f" ({int(u['prompt_read']):,} read)" if "prompt_read" in u else ""
    return f"{int(u.get('prompt_tokens', 0)):,} prompt{read} + {int(u.get('completion_tokens', 0)):,} completion tokens"


def print_summary(console: Console, s: dict[str, Any]) -> None:
    c = s["counts"]
    t = Table(title=f"envfoundry run: {s['out']}", show_header=False, title_justify="left")
    t.add_row("seeds", str(c.get("seeds", 0)))
    t.add_row("scenarios", f"{c.get('generated', 0)} generated, {c.get('unsuitable', 0)} unsuitable, "
                           f"{c.get('duplicates', 0)} duplicates, {c.get('capped', 0)} over the per-seed cap, "
                           f"{c.get('kept', 0)} kept")
    t.add_row("environments", f"{c.get('environments_verified', 0)} verified, "
                              f"{c.get('environments_rejected', 0)} rejected, {c.get('environments_failed', 0)} failed"
                              f" ({c.get('skipped_done', 0)} done in earlier runs)")
    for why, n in sorted(s["rejections_by_stage"].items()):
        t.add_row("  not verified", f"{n} x {why}")
    t.add_row("tasks emitted", str(c.get("tasks", 0)))
    t.add_row("pass rates", ", ".join(f"{k}: {v}" for k, v in s["pass_rate_histogram"].items()) or "-")
    if s["tokens_per_verified_env"] is not None:
        read = s.get("tokens_read_per_verified_env")
        t.add_row("per verified env", f"{s['tokens_per_verified_env']:,} tokens"
                                      + (f" ({read:,} with prompt tokens read)" if read is not None else "")
                                      + f", {s['seconds_per_verified_env']} s")
    keys = ("calls", "cached", "prompt_tokens", "completion_tokens")
    tot = {k: sum(v.get(k, 0) for v in s["usage"].values())
           for k in keys + (("prompt_read",) if any("prompt_read" in v for v in s["usage"].values()) else ())}
    t.add_row("LLM", f"{int(tot['calls'])} calls ({int(tot['cached'])} from cache), {token_words(tot)}")
    for stage, line in stage_lines(s["usage"]):
        t.add_row(f"  {stage}", line)
    t.add_row("time", f"{s['seconds']:.0f} s")
    t.add_row("task bank", s["task_bank"].get("jsonl", "-"))
    console.print(t)
    for f in s["failed"]:
        console.print(f"[red]failed[/red] {f['scenario']}: {f['reason']}  (rerun the command to retry)")


def register(main: click.Group) -> None:
    @main.command()
    @click.option("--seeds", "seeds_file", required=True, type=click.Path(path_type=Path),
                  help="Seed file (text or JSONL).")
    @click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="Catalog directory, e.g. generated/NAME.")
    @click.option("--scenarios-per-seed", type=click.IntRange(1, 100), default=None,
                  help="Scenarios accepted per seed ([stages.expand] scenarios_per_seed).")
    @click.option("--tasks-per-env", type=click.IntRange(1, 200), default=None,
                  help="Tasks generated per environment ([stages.run] tasks_per_env).")
    @click.option("--attempts", type=click.IntRange(1, 64), default=None,
                  help="Tester attempts per task, k ([stages.tester] attempts).")
    @click.option("--concurrency", type=click.IntRange(1, 64), default=None,
                  help="Scenarios processed at once ([stages.run] concurrency).")
    @click.option("--max-scenarios", type=click.IntRange(1), default=None, help="Stop after this many scenarios.")
    @click.option("--continue-other-config", is_flag=True, default=False,
                  help="Add to a catalog directory produced with another configuration.")
    @click.option("--executor", "executor_kind", type=click.Choice(["local", "process", "ray"]), default="local",
                  show_default=True, help="Where scenarios run (--concurrency of them at once): threads in this "
                  "process; worker processes of this machine (a remote endpoint: local work on every core); "
                  "or Ray tasks.")
    @click.option("--ray-address", default=None, help="An existing Ray cluster (auto, HOST:6379 or "
                  "ray://HOST:10001); default: a local Ray instance. Only with --executor ray.")
    @llm_options(stages={"scenarios_per_seed": "expand.scenarios_per_seed", "tasks_per_env": "run.tasks_per_env",
                         "attempts": "tester.attempts", "concurrency": "run.concurrency",
                         "max_scenarios": "run.max_scenarios"})
    @json_option
    def run(config: Config, seeds_file: Path, out_dir: Path, continue_other_config: bool, executor_kind: str,
            ray_address: str | None, as_json: bool) -> None:
        """Run every stage from a seed file to a verified catalog (resumable: rerun the same command)."""
        from pipeline.run import plan_from_config, run_catalog, summary_dict
        from pipeline.seeds import load_seeds

        load_seeds(seeds_file)  # validate before touching --out
        plan = plan_from_config(config)
        from pipeline.executor import make_executor

        executor = make_executor(executor_kind, workers=plan.run.concurrency, address=ray_address)
        console = Console(stderr=True)
        front: type[RichProgress | LogProgress] = RichProgress if console.is_terminal else LogProgress
        try:
            with front(console) as prog:
                prog.message(f"executor: {executor.describe()}")
                result = run_catalog(seeds_file, out_dir, plan, allow_other_config=continue_other_config,
                                     progress=prog, executor=executor)
        finally:
            executor.close()
        s = summary_dict(result)
        if as_json:
            emit_json(s)
        else:
            print_summary(Console(), s)
        if result.failed:
            raise SystemExit(1)

    @main.group()
    def catalog() -> None:
        """Browse a catalog directory written by `envfoundry run`."""

    @catalog.command("list")
    @click.argument("catalog_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @json_option
    def list_(catalog_dir: Path, as_json: bool) -> None:
        """List the environments of CATALOG_DIR with their status and counts (reads catalog.db only)."""
        from pipeline.catalog import Catalog

        cat = Catalog.open_readonly(catalog_dir)  # never writes: works on a read-only mount
        envs = cat.environments()
        if as_json:
            emit_json(envs)
            return
        t = Table(title=str(catalog_dir))
        for col in ("env_id", "name", "status", "tables", "rows", "tools", "tasks", "seconds"):
            t.add_column(col, justify="right" if col in ("tables", "rows", "tools", "tasks", "seconds") else "left")
        for e in envs:
            t.add_row(e["env_id"] or "-", e["name"], e["status"], *(str(e[k] if e[k] is not None else "-")
                                                                   for k in ("tables", "rows", "tools", "tasks",
                                                                             "seconds")))
        Console().print(t)

    @catalog.command("show")
    @click.argument("catalog_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
    @click.argument("env")
    @json_option
    def show(catalog_dir: Path, env: str, as_json: bool) -> None:
        """Show one environment (by env id, its prefix, scenario id or name): tools, tasks, rejections."""
        from pipeline.catalog import Catalog, CatalogError
        from pipeline.envdir import load_env_dir

        cat = Catalog.open_readonly(catalog_dir)  # never writes: works on a read-only mount
        row = cat.environment(env)
        if row is None:
            raise CatalogError(f"{catalog_dir}: no single environment matches {env!r} (see `envfoundry catalog list`)")
        ir_env = None
        if row["dir"] and (catalog_dir / row["dir"]).is_dir():
            ir_env = load_env_dir(catalog_dir / row["dir"])[0]
        data: dict[str, Any] = {"environment": row, "tasks": cat.tasks_of(row["env_id"]) if row["env_id"] else [],
                "rejections": cat.rejections(row["scenario_id"]),
                "tools": [{"name": t.name, "kind": t.kind, "description": t.description} for t in ir_env.tools]
                if ir_env else []}
        if as_json:
            emit_json(data)
            return
        con = Console()
        con.print(f"[bold]{row['name']}[/bold]  {row['env_id']}  status={row['status']}  {row['reason'] or ''}")
        if ir_env:
            con.print(ir_env.scenario.description)
        for title, items, cols in (("tools", data["tools"], ("name", "kind", "description")),
                                   ("tasks", data["tasks"], ("kind", "instruction", "passes", "attempts")),
                                   ("rejections", data["rejections"], ("stage", "item", "reason"))):
            t = Table(title=f"{title} ({len(items)})", title_justify="left")
            for c in cols:
                t.add_column(c)
            for it in items:
                t.add_row(*(str(it[c])[:90] for c in cols))
            con.print(t)
