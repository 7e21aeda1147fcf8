"""The batch run: seeds -> scenarios -> dedup -> per-scenario graph (build + verify) -> task bank -> catalog.

Resumable with nothing lost: the LLM cache lives in the catalog directory, each scenario's graph is
checkpointed (``checkpoints.sqlite``, thread id = scenario id), finished scenarios are skipped by their
status in ``catalog.db``, and every catalog write is an upsert. Kill it at any moment and rerun the same
command: it continues where it stopped.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.catalog import Catalog
from pipeline.config import Config, LLMSettings, with_flags
from pipeline.ir import Task
from pipeline.settings import RunPlan as RunPlan
from pipeline.settings import RunSettings as RunSettings

if TYPE_CHECKING:
    from pipeline.llm.client import LLMClient


def plan_from_config(config: Config, overrides: dict[str, dict[str, Any]] | None = None) -> RunPlan:
    """The run's settings, read from the configuration's typed ``[stages.*]`` tables (checked when it was
    loaded), with ``overrides`` (``{"run": {"concurrency": 4}}``, Nones ignored) on top as flags."""
    if overrides:
        config = with_flags(config, {"stages": overrides})
    stages = config.stages
    return RunPlan(config, stages.run, stages.scenarios(), stages.build, stages.verification())


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass
class RunResult:
    out_dir: Path
    counts: dict[str, int]
    environments: list[dict[str, Any]]
    failed: list[dict[str, str]]
    usage: dict[str, dict[str, float]]
    seconds: float
    histogram: dict[str, int] = field(default_factory=dict)
    task_bank: dict[str, str] = field(default_factory=dict)


class Progress:
    """Callbacks a front end (rich progress bars, logs, tests) implements; all optional."""

    def stage(self, name: str, total: int) -> None: ...
    def advance(self, name: str, n: int = 1, info: str = "") -> None: ...
    def message(self, text: str) -> None: ...
    def tokens(self, completion_tokens: int, seconds: float) -> None: ...


def _llm_for_run(config: Config, out_dir: Path) -> LLMSettings:
    llm = config.llm
    if llm.cache and llm.cache_path is None:  # a catalog carries its own cache: reruns and reproductions
        llm = llm.model_copy(update={"cache_path": out_dir / "llm_cache.sqlite"})
    return llm


def run_catalog(
    seeds_file: str | Path,
    out_dir: str | Path,
    plan: RunPlan,
    *,
    allow_other_config: bool = False,
    progress: Progress | None = None,
    client_factory: Callable[[LLMSettings], LLMClient] | None = None,
    executor: Any = None,
) -> RunResult:
    """``executor``: where the per-scenario graphs run (``pipeline.executor``; default: a thread pool of
    ``[stages.run] concurrency``)."""
    from pipeline.llm import client_from_settings
    from pipeline.seeds import load_seeds

    prog = progress or Progress()
    seeds = load_seeds(seeds_file)  # a bad seed file fails here, before anything is written
    out = Path(out_dir)
    t0 = time.perf_counter()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    catalog = Catalog(out)
    fingerprint = plan.fingerprint()
    catalog.claim(fingerprint, allow_other=allow_other_config)
    llm = _llm_for_run(plan.config, out)
    make = client_factory or client_from_settings
    run_id = uuid.uuid4().hex[:16]  # a record of this invocation, not an output: need not be reproducible
    from pipeline.prompts import prompt_hashes

    run_row: dict[str, Any] = {
        "run_id": run_id, "started": started, "finished": None, "status": "running", "seeds_file": str(seeds_file),
        "config": {"llm": llm.model_dump(mode="json", exclude={"api_key"}), "stages": plan.config.stages.recorded()},
        "config_fingerprint": fingerprint, "git_revision": git_revision(),
        "model": llm.model if llm.base_url else llm.embedded_model, "prompt_hashes": prompt_hashes(),
    }
    catalog.record_run(run_row)
    catalog.add_seeds(seeds)
    clients: list[LLMClient] = []

    def new_client() -> LLMClient:
        c = make(llm)
        clients.append(c)
        return c

    if executor is not None:
        executor.warm_up(llm)  # worker processes start while the seeds are expanded

    # ---- seeds -> scenarios -> dedup (against everything already in the catalog)
    from pipeline.scenarios.dedup import DedupIndex
    from pipeline.scenarios.expand import expand_and_dedup

    prog.stage("seeds", len(seeds))
    exp_client = new_client()
    index = DedupIndex.open(out / "dedup", plan.scenarios.dedup)
    kept, rejections, counts = expand_and_dedup(
        seeds, exp_client, plan.scenarios, index,
        on_seed=lambda p: prog.advance("seeds", 1, p.seed.name),
    )
    catalog.add_scenarios(kept)
    catalog.add_rejections(rejections)
    scenarios = catalog.kept_scenarios()  # this run's and every earlier run's, in first-seen order
    if plan.run.max_scenarios:
        scenarios = scenarios[: plan.run.max_scenarios]

    # ---- per scenario: the checkpointed graph, on the executor (threads here, or Ray tasks)
    from langgraph.checkpoint.sqlite import SqliteSaver

    from pipeline.catalog import write_environment
    from pipeline.executor import LocalExecutor, ScenarioOutcome, ScenarioWork

    envs_dir = out / "envs"
    envs_dir.mkdir(parents=True, exist_ok=True)
    ck_conn = sqlite3.connect(out / "checkpoints.sqlite", check_same_thread=False)
    saver = SqliteSaver(ck_conn)
    todo = [s for s in scenarios if catalog.environment_status(s.scenario_id) not in ("verified", "rejected")]
    skipped = len(scenarios) - len(todo)
    prog.stage("environments", len(scenarios))
    if skipped:
        prog.advance("environments", skipped, f"{skipped} already done")
    failed: list[dict[str, str]] = []
    remote_usage: list[dict[str, dict[str, float]]] = []
    made: dict[str, tuple[Task, ...]] = {}  # scenario id -> the tasks this run verified (and wrote)
    work = ScenarioWork(plan, llm, fingerprint, envs_dir, make_client=new_client, checkpointer=saver,
                        progress=prog.message)

    def building(scn: Any) -> Any:  # pulled by the executor when a slot is free
        catalog.set_environment(scn.scenario_id, name=scn.name, status="building", reason="")
        return scn

    def record(scn: Any, o: ScenarioOutcome) -> dict[str, Any]:
        if o.remote:
            remote_usage.append(o.usage)
        if o.error or o.result is None:  # an LLM endpoint that died, a bug in one item: record it, finish the rest
            catalog.set_environment(scn.scenario_id, name=scn.name, status="failed", reason=o.error,
                                    stopped_by=o.error_type, seconds=round(o.seconds, 2))
            return {"scenario": scn.name, "status": "failed", "reason": o.error}
        res = o.result
        write_environment(res, envs_dir)  # the files first, from the graph's record
        catalog.add_rejections(res.rejections, scn.scenario_id)
        tot = o.usage_total()
        row = {"name": scn.name, "status": res.status, "reason": res.reason, "stopped_by": res.stage,
               "env_id": res.env_id,
               "dir": f"envs/{res.env_id}" if res.env_id else None,  # relative to the catalog
               "tools": res.tools, "tables": res.tables, "rows": res.rows, "tasks": len(res.tasks),
               "prompt_tokens": int(tot["prompt_tokens"]), "completion_tokens": int(tot["completion_tokens"]),
               "seconds": round(o.seconds, 2)}
        if res.status == "verified" and res.env_id:  # tasks first: a final status is never without them
            catalog.set_tasks(res.env_id, list(res.tasks))
            made[scn.scenario_id] = res.tasks
        catalog.set_environment(scn.scenario_id, **row)
        prog.tokens(int(tot["completion_tokens"]), tot["seconds"])
        return {"scenario": scn.name, **row}

    for scn, outcome in (executor or LocalExecutor(plan.run.concurrency)).run((building(s) for s in todo), work):
        r = record(scn, outcome)
        if r["status"] == "failed":
            failed.append({"scenario": r["scenario"], "reason": r["reason"]})
        prog.advance("environments", 1, f"{r['scenario']}: {r['status']}")
    ck_conn.close()

    # ---- the catalog-wide task bank, from every verified environment: this run's from its results, the
    # earlier runs' from their directories
    from pipeline.catalog import load_env_dir, write_task_bank
    from verify.difficulty import pass_rate

    envs = catalog.environments()
    all_tasks: list[Task] = []
    for e in envs:
        if e["scenario_id"] in made:
            all_tasks.extend(made[e["scenario_id"]])
        elif e["status"] == "verified" and e["dir"] and (out / e["dir"]).is_dir():
            all_tasks.extend(load_env_dir(out / e["dir"])[1])
    all_tasks.sort(key=lambda t: (t.env_id, t.task_id))
    bank = write_task_bank(all_tasks, out)
    hist: Counter[str] = Counter()
    for t in all_tasks:
        rate = pass_rate(t)
        hist["untested" if rate is None else f"{min(int(rate * 4), 3) * 25}-{min(int(rate * 4), 3) * 25 + 25}%"] += 1

    usage = merge_usage([c.usage.by_stage() for c in clients] + remote_usage)
    status = Counter(e["status"] for e in envs)
    counts = {**counts, "skipped_done": skipped, "environments_verified": status.get("verified", 0),
              "environments_rejected": status.get("rejected", 0), "environments_failed": status.get("failed", 0),
              "tasks": len(all_tasks)}
    seconds = round(time.perf_counter() - t0, 2)
    run_row.update(finished=datetime.now(UTC).isoformat(timespec="seconds"),
                   status="failed-items" if failed else "done", counts=counts, usage=usage,
                   timings={"total": seconds})
    catalog.record_run(run_row)
    catalog.close()
    for c in clients:  # the last close folds the log in: one file, the catalog can be copied or committed as is
        if c.cache is not None:
            c.cache.close()
    return RunResult(out, counts, envs, failed, usage, seconds, dict(sorted(hist.items())),
                     {k: str(v) for k, v in bank.items()})


def merge_usage(ledgers: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Usage by stage of several clients' ledgers (``Usage.by_stage``) added up. Once any of them has ``prompt_read``
    (the prompt tokens its endpoint read, the rest served from its prefix cache), every stage has it, a ledger
    without it counted as read whole."""
    said = any("prompt_read" in s for by_stage in ledgers for s in by_stage.values())
    usage: dict[str, dict[str, float]] = {}
    for by_stage in ledgers:
        for stage, s in by_stage.items():
            if said and "prompt_read" not in s:
                s = {**s, "prompt_read": s.get("prompt_tokens", 0)}
            acc = usage.setdefault(stage, dict.fromkeys(s, 0))
            for k, v in s.items():
                acc[k] = round(acc.get(k, 0) + v, 3)
    return usage


def summary_dict(r: RunResult) -> dict[str, Any]:
    """The run's summary. ``tokens_per_verified_env`` is what issue 42's 30,000 target is stated in: the prompt and
    completion tokens of every call a verified environment made, each prompt counted whole. Where the endpoint says
    how much of each prompt its prefix cache served (the embedded server does), ``tokens_read_per_verified_env`` is
    beside it: the whole run's prompt tokens read plus completion tokens, over the verified environments (the
    model's work; it also counts the scenario stages and the environments not verified)."""
    verified = [e for e in r.environments if e["status"] == "verified"]
    tok = sum((e.get("completion_tokens") or 0) + (e.get("prompt_tokens") or 0) for e in verified)
    secs = sum(e.get("seconds") or 0 for e in verified)
    read = [u["prompt_read"] + u.get("completion_tokens", 0) for u in r.usage.values() if "prompt_read" in u]
    return {
        "out": str(r.out_dir), "counts": r.counts, "failed": r.failed, "pass_rate_histogram": r.histogram,
        "tokens_per_verified_env": round(tok / len(verified)) if verified else None,
        **({"tokens_read_per_verified_env": round(sum(read) / len(verified)) if verified else None} if read else {}),
        "seconds_per_verified_env": round(secs / len(verified), 1) if verified else None,
        "seconds": r.seconds, "usage": r.usage, "task_bank": r.task_bank,
        "rejections_by_stage": dict(Counter(f"{e['status']}:{e.get('stopped_by') or ''}"
                                            for e in r.environments if e["status"] != "verified")),
    }
