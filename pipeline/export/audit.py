"""The integrity audit every export bundle carries (``audit.json`` and a table in its README), in the spirit of
OpenEnv RFC 008: what a trainer can check before it spends a step on a task.

Per task of the bundle (the bank's, and the sampled pools' when shipped), on fresh copies of the task's own
initial state, with the reward the bundle vendors (``pipeline/runtime/reward.py``):

* ``reference``: the reference solution, ended by the reply the transcripts end with
  (:func:`pipeline.export.common.final_reply`), scores the maximum (1.0);
* ``do_nothing``: the initial state with no answer scores the floor (0.0); a refusal
  (:func:`verify.derive.is_refusal`: the request asks only for a write the policy forbids) too: its gold keeps the
  initial state and its reply says why (the value the forbidding rule checks), and ``blind``, the forbidden write
  done, must fail;
* ``panel``: the adversarial panel scores the floor, each trajectory failing the verifier: a read-only trajectory
  (the reference's reads and a reply that gives up, scored 0.0 by the bundle's all-or-nothing reward) and the
  adversaries of :func:`verify.proofs.prove`: a perturbed answer (questions), broad writes through every write tool
  (alone and after the reference) and, for a rule-bound task, ``overreach`` and ``blind`` (a member whose writes all
  bounce off guards is vacuous, which is not a failure);
* ``deterministic``: two replays of the reference on fresh copies leave the same database (:func:`state_hash`);

and per environment ``seed``: the environment's seed rows load into its schema (``build_database``: types,
CHECKs, keys) and give the shipped ``initial.db``'s data (same :func:`state_hash`); a perturbed state
(``data/states/``) passes SQLite's integrity and foreign-key checks.

A task that fails any check is refused by the export (:class:`AuditError`, naming task and check) unless the
caller lets it ship (``allow_failing``); then ``audit.json`` marks it ``ok: false``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import ExportError, final_reply, write_json
from pipeline.ir import Task
from pipeline.runtime import EnvInstance, reward
from pipeline.runtime.database import EnvDirError, build_database
from verify.proofs import prove

AUDIT_FILE = "audit.json"
AUDIT_VERSION = 1
PANEL = ("no_op", "wrong_answer", "destructive", "destructive_after_reference", "overreach", "blind")
"""The members of :func:`verify.proofs.prove` that are adversaries (each must fail the verifier)."""
CHECKS = ("reference", "do_nothing", "panel", "deterministic")


class AuditError(ExportError):
    """Tasks failed the integrity audit and the export was not told to ship them."""


def state_hash(conn: sqlite3.Connection) -> str:
    """sha256 of a database's data: per user table (by name), its name and its rows as canonical JSON, sorted.
    Equal for two databases that hold the same rows, whatever their page layout."""
    h = hashlib.sha256()
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    for table in tables:
        cur = conn.execute(f'SELECT * FROM "{table.replace(chr(34), chr(34) * 2)}"')
        cols = [d[0] for d in cur.description]
        rows = sorted(json.dumps(dict(zip(cols, row, strict=True)), sort_keys=True, default=repr) for row in cur)
        h.update(json.dumps([table, cols, rows], ensure_ascii=False).encode())
    return h.hexdigest()


def _replay_hash(ce: CatalogEnv, task: Task, db: Path) -> tuple[str | None, str | None]:
    """(state hash after the reference, error)."""
    with EnvInstance(ce.env, db) as inst:
        for i, call in enumerate(task.reference_solution, 1):
            out = inst.call(call.tool, call.arguments)
            if not out.get("ok"):
                return None, f"reference call {i} ({call.tool}) failed: {out.get('error')}"
        return state_hash(inst.conn), None


def _read_only(ce: CatalogEnv, task: Task, db: Path, verifier: dict[str, Any]) -> tuple[str, bool, str]:
    """The panel's read-only member, scored by the bundle's reward (all or nothing, as trainers get it by default):
    the reference's reads and a reply that gives up."""
    kinds = {t.name: t.kind for t in ce.env.tools}
    with EnvInstance(ce.env, db) as inst:
        initial = reward.snapshot(inst.conn)
        for call in task.reference_solution:
            if kinds.get(call.tool) == "read":
                inst.call(call.tool, call.arguments)
        got = reward.score(verifier, inst.conn, initial=initial, answer="I could not complete the task.")
    return ("no_op", got.reward == 0.0, "scores 0.0" if got.reward == 0.0 else f"a read-only trajectory scores "
            f"{got.reward}")


def audit_task(ce: CatalogEnv, task: Task, db: Path) -> dict[str, Any]:
    """The checks of one task on its initial state ``db``: ``{"ok", "checks": {name: {"ok", "detail", ...}}}``."""
    verifier = task.verifier.model_dump(mode="json")
    checks: dict[str, dict[str, Any]] = {}
    with EnvInstance(ce.env, db) as inst:
        initial = reward.snapshot(inst.conn)
        nothing = reward.score(verifier, inst.conn, initial=initial, answer=None)
        failed = None
        for i, call in enumerate(task.reference_solution, 1):
            out = inst.call(call.tool, call.arguments)
            if not out.get("ok"):
                failed = f"reference call {i} ({call.tool}) failed: {out.get('error')}"
                break
        ref = reward.score(verifier, inst.conn, initial=initial, answer=final_reply(ce, task))
    checks["reference"] = {"ok": failed is None and ref.reward == 1.0, "reward": ref.reward,
                           "detail": failed or ("; ".join(ref.failures) if ref.failures else "scores 1.0")}
    checks["do_nothing"] = {"ok": nothing.reward == 0.0, "reward": nothing.reward,
                            "detail": "scores 0.0" if nothing.reward == 0.0 else "doing nothing scores above the floor"}
    report = prove(ce.env, task, initial_db=db)
    members: list[tuple[str, bool, str]] = [(r.name, r.ok, r.detail) for r in report.results
                                             if r.name in PANEL and r.name != "no_op"]
    members.insert(0, _read_only(ce, task, db, verifier))
    beaten = [(name, detail) for name, ok, detail in members if not ok]
    checks["panel"] = {"ok": not beaten, "members": [name for name, _, _ in members],
                       "detail": "; ".join(f"{name}: {detail}" for name, detail in beaten) or
                       f"{len(members)} adversaries score the floor"}
    first, err1 = _replay_hash(ce, task, db)
    second, err2 = _replay_hash(ce, task, db)
    same = err1 is None and err2 is None and first == second
    checks["deterministic"] = {"ok": same, "state_sha256": first,
                               "detail": err1 or err2 or ("two replays, same database" if same else
                                                          f"two replays differ ({first} != {second})")}
    return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}


def seed_check(ce: CatalogEnv) -> dict[str, Any]:
    """The environment's seed rows load into its schema and give the shipped ``initial.db``'s data."""
    conn = sqlite3.connect(":memory:")
    try:
        build_database(ce.env, conn)
        built = state_hash(conn)
    except (EnvDirError, sqlite3.Error) as exc:
        return {"ok": False, "detail": f"the seed rows do not load: {exc}"}
    finally:
        conn.close()
    shipped = sqlite3.connect(f"file:{ce.path / 'initial.db'}?mode=ro", uri=True)
    try:
        data = state_hash(shipped)
        integrity = shipped.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        shipped.close()
    rows = sum(len(s.rows) for s in ce.env.seed)
    if integrity != "ok":
        return {"ok": False, "detail": f"initial.db fails SQLite's integrity check: {integrity}"}
    if built != data:
        return {"ok": False, "detail": "initial.db does not hold the seed rows of env.json (rebuilt from them, the "
                                       "data differs)", "initial_sha256": data, "seed_sha256": built}
    return {"ok": True, "detail": f"{rows} seed rows load into {len(ce.env.tables)} tables and are initial.db's data",
            "initial_sha256": data}


def state_check(path: Path) -> dict[str, Any]:
    """A shipped perturbed state: SQLite's integrity and foreign-key checks."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        keys = conn.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        conn.close()
    ok = integrity == "ok" and not keys
    return {"ok": ok, "detail": "integrity and foreign keys hold" if ok else
            f"integrity: {integrity}; {len(keys)} foreign-key violations"}


@dataclass(frozen=True)
class EnvAudit:
    env_id: str
    seed: dict[str, Any]
    tasks: Mapping[str, dict[str, Any]]
    """task_id -> :func:`audit_task` (with ``pool``: True for a sampled task, ``state``: its state file)."""
    states: Mapping[str, dict[str, Any]]

    @property
    def failing(self) -> list[str]:
        return [t for t, a in self.tasks.items() if not a["ok"]]

    def to_json(self, allowed: bool) -> dict[str, Any]:
        return {
            "audit_version": AUDIT_VERSION,
            "env_id": self.env_id,
            "ok": self.seed["ok"] and not self.failing and all(s["ok"] for s in self.states.values()),
            "shipped_failing": sorted(self.failing) if allowed else [],
            "seed": self.seed,
            "states": dict(sorted(self.states.items())),
            "summary": self.summary(),
            "tasks": dict(self.tasks),
        }

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tasks": len(self.tasks)}
        for name in CHECKS:
            out[name] = sum(1 for a in self.tasks.values() if a["checks"][name]["ok"])
        return out


def audit_env(ce: CatalogEnv, pool_tasks: list[Task] | None = None,
              states: Mapping[str, Path] | None = None) -> EnvAudit:
    """The audit of one environment's bundle: its bank's tasks on ``initial.db``, and ``pool_tasks`` each on its own
    state (``states``: task_id -> the database file it starts from; absent: ``initial.db``)."""
    from pipeline.export.pools import state_name

    states = states or {}
    tasks: dict[str, dict[str, Any]] = {}
    for task in ce.tasks:
        tasks[task.task_id] = audit_task(ce, task, ce.path / "initial.db")
    for task in pool_tasks or []:
        db = states.get(task.task_id, ce.path / "initial.db")
        tasks[task.task_id] = {**audit_task(ce, task, db), "pool": True,
                               **({"state": state_name(db)} if task.task_id in states else {})}
    checked = {state_name(p): state_check(p) for p in sorted(set(states.values()))}
    return EnvAudit(ce.env_id, seed_check(ce), tasks, checked)


def enforce(audits: Mapping[str, EnvAudit], allow_failing: bool) -> None:
    """Refuse to export when a task (or an environment's seed data) fails the audit, unless ``allow_failing``."""
    if allow_failing:
        return
    problems = []
    for a in audits.values():
        if not a.seed["ok"]:
            problems.append(f"environment {a.env_id}: seed data: {a.seed['detail']}")
        for task_id in a.failing:
            bad = {k: v for k, v in a.tasks[task_id]["checks"].items() if not v["ok"]}
            problems += [f"task {task_id} ({a.env_id}): {k}: {v['detail']}" for k, v in bad.items()]
        problems += [f"environment {a.env_id}: state {n}: {s['detail']}" for n, s in a.states.items() if not s["ok"]]
    if problems:
        raise AuditError(f"{len(problems)} integrity check(s) failed, so the export ships nothing (pass "
                         f"allow_failing=True, `envfoundry export --allow-failing`, to ship them marked in "
                         f"audit.json):\n  " + "\n  ".join(problems[:20]) +
                         (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""))


def audit_catalog(catalog: Catalog, pools: Mapping[str, Any] | None = None) -> dict[str, EnvAudit]:
    """:func:`audit_env` of every environment with tasks (with its sampled pool's tasks when ``pools`` has one)."""
    out: dict[str, EnvAudit] = {}
    for ce in catalog.envs.values():
        if not ce.tasks:
            continue
        env_pools = (pools or {}).get(ce.env_id)
        pool_tasks = [t for _, p in sorted(env_pools.levels.items()) for t in p.tasks] if env_pools else []
        out[ce.env_id] = audit_env(ce, pool_tasks, getattr(env_pools, "states", None))
    return out


def ship_audit(options: Any, env_id: str, out: Path) -> None:
    """Write ``audit.json`` of ``env_id`` into the bundle directory ``out`` (when the export was audited)."""
    audit = (options.audits or {}).get(env_id)
    if audit is not None:
        write_json(out / AUDIT_FILE, audit.to_json(options.allow_failing))


def readme_of(options: Any, env_ids: list[str]) -> str:
    """The README's audit section for ``env_ids`` ("" when the export was not audited)."""
    audits = {e: options.audits[e] for e in env_ids if options.audits and e in options.audits}
    return readme_table(audits) if audits else ""


def readme_table(audits: Mapping[str, EnvAudit]) -> str:
    """The README's section on the audit: per environment, how many tasks pass each check."""
    rows = []
    for a in audits.values():
        s = a.summary()
        n = s["tasks"]
        cells = " | ".join(f"{s[c]} / {n}" for c in CHECKS)
        rows.append(f"| `{a.env_id}` | {'yes' if a.seed['ok'] else 'NO'} | {cells} | "
                    f"{', '.join(sorted(a.failing)[:5]) or 'none'} |")
    return (
        "\n## Integrity audit\n\n"
        "Checked at export time on fresh copies of each task's initial state, with the reward this bundle vendors "
        "(`audit.json` beside the data holds every task's checks): the reference solution and its final reply "
        "score the maximum (1.0); doing nothing scores the floor (0.0); the adversarial panel (a read-only "
        "trajectory, a wrong answer, broad writes through every write tool, and for a rule-bound task overreach and "
        "blind writes) scores the floor; two replays of the reference leave the same database (`state_sha256`); the "
        "seed rows load into the schema and are `initial.db`'s data. The export refuses a task that fails unless "
        "told to ship it (`--allow-failing`); then it is listed below and in `audit.json`'s `shipped_failing`.\n\n"
        "| environment | seed data loads | reference = 1 | do-nothing = 0 | panel = 0 | same replay | failing |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )
