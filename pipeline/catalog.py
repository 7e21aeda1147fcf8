"""The catalog database (``catalog.db``, SQLite via sqlite-utils) of a run's output directory.

Tables: ``runs`` (resolved config, git revision, model, prompt hashes, timings, tokens per stage), ``seeds``,
``scenarios``, ``rejections`` (stage, item, reason, evidence), ``environments`` (status and counts),
``tasks``, and ``meta`` (the config fingerprint the directory belongs to). Every write is an upsert on a
content-derived primary key, so a resumed or repeated run never writes duplicates.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import sqlite_utils

from pipeline.hashing import canonical_json, content_hash
from pipeline.ir import Rejection, Scenario, Task

CATALOG_DB = "catalog.db"


class CatalogError(ValueError):
    """A catalog directory that cannot be used as asked (other config, unreadable database)."""


def _j(obj: Any) -> str:
    return canonical_json(obj)


class Catalog:
    """Thread-safe writer/reader of ``<out>/catalog.db``."""

    def __init__(self, out_dir: str | Path, *, create: bool = True):
        self.dir = Path(out_dir)
        path = self.dir / CATALOG_DB
        if not create and not path.is_file():
            raise CatalogError(f"{self.dir} is not a catalog (no {CATALOG_DB})")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        conn = sqlite3.connect(path, check_same_thread=False)  # writes are serialised by self._lock
        self.db = sqlite_utils.Database(conn, use_counts_table=False)
        self.db.conn.execute("PRAGMA busy_timeout=30000")
        self.db.enable_wal()
        self._ensure()

    def _ensure(self) -> None:
        db = self.db
        if "meta" not in db.table_names():
            db["meta"].create({"key": str, "value": str}, pk="key")
            db["runs"].create({"run_id": str, "started": str, "finished": str, "status": str, "seeds_file": str,
                               "config": str, "config_fingerprint": str, "git_revision": str, "model": str,
                               "prompt_hashes": str, "counts": str, "usage": str, "timings": str}, pk="run_id")
            db["seeds"].create({"seed_id": str, "name": str, "description": str, "source": str, "line": int},
                               pk="seed_id")
            db["scenarios"].create({"scenario_id": str, "seed": str, "name": str, "description": str,
                                    "entities": str, "goals": str, "status": str}, pk="scenario_id")
            db["rejections"].create({"rejection_id": str, "scenario_id": str, "stage": str, "item": str,
                                     "reason": str, "evidence": str}, pk="rejection_id")
            db["environments"].create({"scenario_id": str, "env_id": str, "name": str, "status": str,
                                       "reason": str, "dir": str, "tables": int, "rows": int, "tools": int,
                                       "tasks": int, "prompt_tokens": int, "completion_tokens": int,
                                       "seconds": float}, pk="scenario_id")
            db["tasks"].create({"task_id": str, "env_id": str, "kind": str, "instruction": str, "steps": int,
                                "attempts": int, "passes": int}, pk="task_id")
            db["rejections"].create_index(["stage"], if_not_exists=True)
            db["tasks"].create_index(["env_id"], if_not_exists=True)

    # ---------------------------------------------------------------- meta / runs

    def fingerprint(self) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key='config_fingerprint'").fetchone()
        return row[0] if row else None

    def claim(self, fingerprint: str, *, allow_other: bool) -> None:
        """Bind the directory to a config fingerprint; refuse another unless ``allow_other``."""
        have = self.fingerprint()
        if have is not None and have != fingerprint and not allow_other:
            raise CatalogError(
                f"{self.dir} was produced with another configuration (fingerprint {have}, now {fingerprint}); "
                "use another --out, or pass --continue-other-config to add to it anyway"
            )
        with self._lock:
            self.db["meta"].upsert({"key": "config_fingerprint", "value": fingerprint}, pk="key")

    def record_run(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.db["runs"].upsert({k: v if isinstance(v, str | int | float) or v is None else _j(v)
                                    for k, v in row.items()}, pk="run_id")

    # ---------------------------------------------------------------- items

    def add_seeds(self, seeds: list[Any]) -> None:
        rows = [{"seed_id": content_hash({"name": s.name, "description": s.description}), "name": s.name,
                 "description": s.description, "source": s.source, "line": s.line} for s in seeds]
        with self._lock:
            self.db["seeds"].upsert_all(rows, pk="seed_id")

    def add_scenarios(self, scenarios: list[Scenario], status: str = "kept") -> None:
        rows = [{"scenario_id": s.scenario_id, "seed": s.seed or "", "name": s.name, "description": s.description,
                 "entities": _j(s.entities), "goals": _j(s.goals), "status": status} for s in scenarios]
        with self._lock:
            self.db["scenarios"].upsert_all(rows, pk="scenario_id")

    def kept_scenarios(self) -> list[Scenario]:
        rows = self.db.execute(
            "SELECT name, description, seed, entities, goals FROM scenarios WHERE status='kept' ORDER BY rowid"
        ).fetchall()
        return [Scenario(name=r[0], description=r[1], seed=r[2] or None, entities=json.loads(r[3]),
                         goals=json.loads(r[4])) for r in rows]

    def add_rejections(self, rejections: list[Rejection] | tuple[Rejection, ...], scenario_id: str = "") -> None:
        rows = []
        for r in rejections:
            data = r.model_dump(mode="json")
            rows.append({"rejection_id": content_hash({"scenario": scenario_id, **data}), "scenario_id": scenario_id,
                         "stage": r.stage, "item": r.item, "reason": r.reason, "evidence": _j(r.evidence)})
        if rows:
            with self._lock:
                self.db["rejections"].upsert_all(rows, pk="rejection_id")

    def set_environment(self, scenario_id: str, **fields: Any) -> None:
        with self._lock:
            self.db["environments"].upsert({"scenario_id": scenario_id, **fields}, pk="scenario_id")

    def environment_status(self, scenario_id: str) -> str | None:
        row = self.db.execute("SELECT status FROM environments WHERE scenario_id=?", (scenario_id,)).fetchone()
        return row[0] if row else None

    def set_tasks(self, env_id: str, tasks: list[Task]) -> None:
        rows = [{"task_id": t.task_id, "env_id": t.env_id, "kind": t.kind, "instruction": t.instruction,
                 "steps": len(t.reference_solution), "attempts": t.difficulty.attempts,
                 "passes": t.difficulty.passes} for t in tasks]
        with self._lock:
            self.db.execute("DELETE FROM tasks WHERE env_id = ?", (env_id,))
            if rows:
                self.db["tasks"].upsert_all(rows, pk="task_id")
            self.db.conn.commit()

    # ---------------------------------------------------------------- reading

    def environments(self) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM environments ORDER BY name, scenario_id"))

    def environment(self, key: str) -> dict[str, Any] | None:
        rows = list(self.db.query(
            "SELECT * FROM environments WHERE env_id = ? OR scenario_id = ? OR name = ?", [key, key, key]))
        if not rows:
            rows = list(self.db.query("SELECT * FROM environments WHERE env_id LIKE ?", [key + "%"]))
        return rows[0] if len(rows) == 1 else None

    def tasks_of(self, env_id: str) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM tasks WHERE env_id = ? ORDER BY task_id", [env_id]))

    def rejections(self, scenario_id: str | None = None) -> list[dict[str, Any]]:
        if scenario_id is None:
            return list(self.db.query("SELECT * FROM rejections ORDER BY stage, rejection_id"))
        return list(self.db.query("SELECT * FROM rejections WHERE scenario_id = ? ORDER BY stage, rejection_id",
                                  [scenario_id]))

    def runs(self) -> list[dict[str, Any]]:
        return list(self.db.query("SELECT * FROM runs ORDER BY started"))

    def close(self) -> None:
        self.db.close()
