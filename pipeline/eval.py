"""``envfoundry eval``: any OpenAI-compatible model on a catalog (or one environment directory).

Each (task, attempt) runs the agent harness of :mod:`verify.agent` (native tool calls, whole tool
results, a fresh in-process instance per attempt; the final answer is the last assistant message;
an environment with rules gives the model its policy after the system prompt) and is scored by the
task's verifier. The output directory holds

* ``config.json``: the resolved configuration (model, endpoint, harness settings, the hash of every
  task evaluated) written before the first attempt;
* ``results.jsonl``: one line per finished attempt (``task_id``, ``attempt``, ``reward``, ``passed``,
  ``turns``, ``tool_calls``, ``error`` and more), appended as attempts finish;
* ``trajectories.jsonl``: the whole conversation and every tool call of each attempt;
* ``summary.json``: pass@1, pass@k and mean reward overall and per environment, tier and kind.

Resume: a rerun into the same directory skips attempts already in ``results.jsonl``, keyed by a hash
of the task's content, and refuses when the task set or the model/harness settings changed (use a new
directory). Attempts lost to endpoint faults are recorded (``error``) and excluded from the rates,
and a rerun tries them again.
"""

from __future__ import annotations

import fnmatch
import json
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.catalog import CatalogError, load_catalog
from pipeline.hashing import canonical_json, content_hash
from pipeline.ir import Environment, Task
from pipeline.settings import EvalSettings as EvalSettings
from verify.agent import Attempt, resolve_protocol, run_attempt
from verify.conversation import UserSettings, user_client
from verify.policy import policy_text

STAGE = "eval"
FINAL_ANSWER = "the text of the last assistant message"
FINGERPRINT_KEYS = ("model", "protocol", "max_turns", "max_tokens", "temperature", "context_budget", "seed",
                    "conversation")


class EvalError(ValueError):
    """Bad input for an eval (missing catalog, unknown env of a task, a resume that does not match)."""


@dataclass(frozen=True)
class EvalItem:
    env: Environment
    env_dir: Path
    task: Task
    task_hash: str

    @property
    def initial_db(self) -> Path | None:
        p = self.env_dir / "initial.db"
        return p if p.is_file() else None

    @property
    def tier(self) -> str:
        tier = self.task.metadata.get("tier")
        return "-" if tier is None else str(tier)


def task_hash(task: Task, policy: str | None = None) -> str:
    """What defines a task for an eval: everything but its measured difficulty and annotations, and the policy
    the agent is given with it (``verify.policy``; None for an environment without rules, whose hashes stay)."""
    record = task.model_dump(mode="json", exclude={"difficulty", "metadata", "provenance"})
    return content_hash(record if policy is None else {"task": record, "policy": policy})


# ---------------------------------------------------------------- inputs


def load_items(source: str | Path, task_filter: str | None = None) -> list[EvalItem]:
    """The tasks to evaluate with their environments: a catalog's ``task_bank.jsonl`` (else each env dir's
    ``tasks.jsonl``), or one environment directory's ``tasks.jsonl``; then ``task_filter``. Directories are
    read as a person may have left them (``by_dir``): a task whose env id is no longer its directory's
    (``env.json`` edited) is measured on that directory's environment, under the directory's name."""
    source = Path(source)
    if not source.is_dir():
        raise EvalError(f"{source}: no such directory (give a catalog or an environment directory)")
    try:
        cat = load_catalog(source, by_dir=True)
    except CatalogError as e:
        raise EvalError(str(e)) from None
    items = [EvalItem(ce.env, ce.path, t, task_hash(t, policy_text(ce.env))) for ce in cat.envs.values()
             for t in ce.tasks]
    items = select(items, task_filter)
    if not items:
        raise EvalError(f"{source}: no task to evaluate" + (f" matches --tasks {task_filter!r}" if task_filter else ""))
    return items


def select(items: list[EvalItem], task_filter: str | None) -> list[EvalItem]:
    """``--tasks``: comma-separated terms, a task is kept when any term matches: ``kind:K``, ``tier:T``,
    ``env:GLOB`` (env id), a glob on the task id (``t_0a*``); a bare number N keeps the first N matches."""
    if not task_filter:
        return items
    terms = [t.strip() for t in task_filter.split(",") if t.strip()]
    limit = next((int(t) for t in terms if t.isdigit()), None)
    terms = [t for t in terms if not t.isdigit()]

    def match(it: EvalItem, term: str) -> bool:
        key, _, value = term.partition(":")
        if value and key == "kind":
            return it.task.kind == value
        if value and key == "tier":
            return it.tier == value
        if value and key == "env":
            return fnmatch.fnmatch(it.env.env_id, value)
        return fnmatch.fnmatch(it.task.task_id, term)

    out = [it for it in items if not terms or any(match(it, t) for t in terms)]
    return out[:limit] if limit is not None else out


# ---------------------------------------------------------------- resume


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill: that attempt runs again
    return rows


def resolved_config(client: Any, items: list[EvalItem], settings: EvalSettings, source: Path,
                    user: UserSettings | None = None) -> dict[str, Any]:
    llm = client.settings
    return {
        "source": str(source),
        "model": getattr(client, "model_key", None) or getattr(client, "model", None),
        "base_url": None if getattr(client, "embedded", False) else client.base_url,
        "embedded": bool(getattr(client, "embedded", False)),
        "protocol": resolve_protocol(client, settings),
        "final_answer": FINAL_ANSWER,
        "settings": settings.model_dump(mode="json"),
        **({"user": user.model_dump(mode="json")} if settings.conversation and user is not None else {}),
        "llm": llm.model_dump(mode="json", exclude={"api_key", "cache_path"}),
        "tasks": len(items),
        "tasks_hash": content_hash(sorted(it.task_hash for it in items)),
        "task_hashes": {it.task.task_id: it.task_hash for it in items},
    }


def _fingerprint(cfg: dict[str, Any]) -> dict[str, Any]:
    s = cfg.get("settings", {})
    return {"model": cfg.get("model"), "protocol": cfg.get("protocol"), "seed": cfg.get("llm", {}).get("seed"),
            **{k: s.get(k) for k in FINGERPRINT_KEYS if k in s}, **({"user": cfg["user"]} if "user" in cfg else {})}


def check_resume(out: Path, cfg: dict[str, Any]) -> None:
    """Refuse to add to a directory written for other tasks or another model/harness."""
    path = out / "config.json"
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise EvalError(f"{path}: not valid JSON ({e}); use a new --out directory") from None
    if old.get("tasks_hash") != cfg["tasks_hash"]:
        a, b = old.get("task_hashes", {}), cfg["task_hashes"]
        changed = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
        raise EvalError(
            f"{out} holds results for another task set ({len(changed)} changed, {len(b.keys() - a.keys())} added, "
            f"{len(a.keys() - b.keys())} removed{': ' + ', '.join(changed[:3]) if changed else ''}); "
            "refusing to resume: use a new --out directory")
    fa, fb = _fingerprint(old), _fingerprint(cfg)
    diff = [k for k in fb if fa.get(k) != fb.get(k)]
    if diff:
        raise EvalError(f"{out} holds results of another setup ({', '.join(f'{k}: {fa.get(k)!r} -> {fb.get(k)!r}' for k in diff)}); "
                        "refusing to resume: use a new --out directory")


# ---------------------------------------------------------------- running


def result_row(item: EvalItem, a: Attempt) -> dict[str, Any]:
    return {
        "task_id": item.task.task_id, "attempt": a.attempt, "reward": a.reward, "passed": a.passed,
        "turns": a.turns, "tool_calls": a.tool_calls, "error": a.error if a.endpoint_fault else
        (f"{a.stop}: {a.error}" if a.error else None),
        "endpoint_error": a.endpoint_fault, "stop": a.stop, "final_answer": a.final_answer,
        "env_id": item.env.env_id, "kind": item.task.kind, "tier": item.tier, "task_hash": item.task_hash,
        "failures": a.failures[:5], "prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
        "seconds": a.seconds,
        **({"user_turns": a.user_turns, "user_errors": len(a.user_errors),
            "user_error_kinds": sorted({e["kind"] for e in a.user_errors})} if a.conversation else {}),
    }


def trajectory_row(item: EvalItem, a: Attempt) -> dict[str, Any]:
    return {"task_id": item.task.task_id, "task_hash": item.task_hash, "env_id": item.env.env_id,
            "instruction": item.task.instruction, **a.model_dump(mode="json")}


@dataclass
class EvalRun:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    ran: int
    skipped: int


def turns_for(task: Task, settings: EvalSettings) -> EvalSettings:
    """``settings`` with at least one turn per call of ``task``'s reference solution plus one to answer: a budget
    below that would fail an agent that does exactly what the task needs (the example's deepest task is 8 calls;
    the default budget is 8 turns)."""
    need = min(50, len(task.reference_solution) + 1)
    return settings if settings.max_turns >= need else settings.model_copy(update={"max_turns": need})


def run_eval(
    client: Any,
    items: list[EvalItem],
    out: str | Path,
    settings: EvalSettings | None = None,
    *,
    source: str | Path = "",
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    user: UserSettings | None = None,
) -> EvalRun:
    """Run every missing (task, attempt) of ``items`` into ``out`` and summarise all of them. With
    ``settings.conversation`` each task runs in its conversational form against the simulated user of ``user``
    (``[stages.user]``; its own endpoint, else ``client``)."""
    settings = settings or EvalSettings()
    user = user or UserSettings()
    out = Path(out)
    cfg = resolved_config(client, items, settings, Path(source), user)
    sim_client = user_client(client, user) if settings.conversation else None
    check_resume(out, cfg)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    done = {(r.get("task_hash"), r.get("attempt")) for r in _read_jsonl(out / "results.jsonl")
            if not r.get("endpoint_error")}
    jobs = [(it, k) for it in items for k in range(1, settings.attempts + 1) if (it.task_hash, k) not in done]
    if on_start:
        on_start(len(jobs), len(items) * settings.attempts - len(jobs))
    lock = threading.Lock()

    def work(job: tuple[EvalItem, int]) -> None:
        item, k = job
        a = run_attempt(client, item.env, item.task, attempt=k, initial_db=item.initial_db,
                        settings=turns_for(item.task, settings),
                        stage=STAGE, user=sim_client, user_settings=user)
        row = result_row(item, a)
        with lock:
            with open(out / "trajectories.jsonl", "a", encoding="utf-8") as f:
                f.write(canonical_json(trajectory_row(item, a)) + "\n")
            with open(out / "results.jsonl", "a", encoding="utf-8") as f:
                f.write(canonical_json(row) + "\n")
            if on_result:
                on_result(row)

    with ThreadPoolExecutor(max_workers=settings.concurrency) as pool:
        for fut in [pool.submit(work, j) for j in jobs]:
            fut.result()
    rows = latest_rows(_read_jsonl(out / "results.jsonl"), items, settings.attempts)
    summary = summarize(rows, items, settings.attempts)
    summary["model"] = cfg["model"]
    summary["protocol"] = cfg["protocol"]
    summary["out"] = str(out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return EvalRun(rows, summary, len(jobs), len(items) * settings.attempts - len(jobs))


def latest_rows(rows: Iterable[dict[str, Any]], items: list[EvalItem], attempts: int) -> list[dict[str, Any]]:
    """One row per (task, attempt) of this eval: the last written (a retried endpoint fault replaces its row)."""
    wanted = {(it.task_hash, k) for it in items for k in range(1, attempts + 1)}
    last: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        key = (r.get("task_hash"), r.get("attempt"))
        if key in wanted and (key not in last or last[key].get("endpoint_error") or not r.get("endpoint_error")):
            last[key] = r  # type: ignore[index]
    return [last[k] for k in sorted(last)]


# ---------------------------------------------------------------- summary


def _group(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if not r.get("endpoint_error")]
    per_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in scored:
        per_task[r["task_hash"]].append(r)
    n = len(scored)
    talks = [r for r in scored if "user_errors" in r]
    conversation = {
        "user_error_rate": round(sum(r["user_errors"] > 0 for r in talks) / len(talks), 4),
        "user_errors": sum(r["user_errors"] for r in talks),
        "user_turns_mean": round(sum(r["user_turns"] for r in talks) / len(talks), 2),
    } if talks else {}
    return {
        **conversation,
        "tasks": len({r["task_hash"] for r in rows}),
        "attempts": n,
        "errors": len(rows) - n,
        "pass_rate": round(sum(r["passed"] for r in scored) / n, 4) if n else None,
        "mean_reward": round(sum(float(r["reward"]) for r in scored) / n, 4) if n else None,
        "pass_at_1": round(sum(sum(r["passed"] for r in rs) / len(rs) for rs in per_task.values()) / len(per_task), 4)
        if per_task else None,
        "pass_at_k": round(sum(any(r["passed"] for r in rs) for rs in per_task.values()) / len(per_task), 4)
        if per_task else None,
    }


def summarize(rows: list[dict[str, Any]], items: list[EvalItem], attempts: int) -> dict[str, Any]:
    """pass@1 (mean per-task pass rate), pass@k (share of tasks any attempt passed), mean reward: overall and
    per environment, tier and kind. Attempts lost to endpoint faults count as ``errors``, not as failures."""
    out = _group(rows)
    out["tasks"] = len(items)
    out["k"] = attempts
    for key in ("env_id", "tier", "kind"):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            groups[str(r.get(key))].append(r)
        out[f"by_{key.removesuffix('_id')}"] = {g: _group(rs) for g, rs in sorted(groups.items())}
    return out


def summary_table(summary: dict[str, Any]) -> list[list[str]]:
    """Rows for a table: group, tasks, attempts, pass@1, pass@k, mean reward, errors."""
    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    def line(name: str, g: dict[str, Any]) -> list[str]:
        return [name, fmt(g["tasks"]), fmt(g["attempts"]), fmt(g["pass_at_1"]), fmt(g["pass_at_k"]),
                fmt(g["mean_reward"]), fmt(g["errors"])]

    lines = [line("all", summary)]
    for key, label in (("by_env", "env"), ("by_tier", "tier"), ("by_kind", "kind")):
        for name, g in summary.get(key, {}).items():
            lines.append(line(f"{label} {name}", g))
    return lines
