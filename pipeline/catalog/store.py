"""``catalog.db`` and the :class:`Catalog` object: the run's thread-safe writer, the readers' read-only view,
and the environments + task bank of the directory (read by :mod:`pipeline.catalog.reader`).

The database's tables: ``runs`` (resolved config, git revision, model, prompt hashes, timings, tokens per
stage), ``seeds``, ``scenarios``, ``rejections`` (stage, item, reason, evidence), ``environments`` (status,
counts, and ``stopped_by``: the stage that rejected it or the type of the error that failed it), ``tasks``,
and ``meta`` (the config fingerprint the directory belongs to). Every write is an upsert on a content-derived
primary key, so a resumed or repeated run never writes duplicates.

Readers (``catalog list``/``show``, the report) open it read-only (:meth:`Catalog.open_readonly`): nothing is
created, converted (no switch to WAL) or repaired, and a catalog on a read-only mount can be browsed. An empty,
corrupt or foreign ``catalog.db`` is refused with an error naming the file, and left as it is.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlite_utils

from pipeline.catalog.files import CATALOG_DB, TABLES, CatalogError
from pipeline.catalog.reader import CatalogEnv, read_envs
from pipeline.hashing import canonical_json, content_hash
from pipeline.ir import Rejection, Scenario, Task


def _j(obj: Any) -> str:
    return canonical_json(obj)


class Catalog:
    """A catalog directory: the thread-safe writer/reader of ``<root>/catalog.db`` and the reader of its
    environments and task bank.

    ``create=True`` (a run) creates the directory and the database; ``create=False`` opens an existing one
    (raising :class:`CatalogError` when there is none); ``readonly=True`` (:meth:`open_readonly`) only reads;
    ``database=False`` (:func:`load_catalog`) reads only the files. ``lenient`` (readonly) opens a database
    with tables missing (see :meth:`missing_tables`); ``by_dir`` is how the files are read (see
    :mod:`pipeline.catalog.reader`).
    """

    def __init__(self, root: str | Path, *, create: bool = True, readonly: bool = False, database: bool = True,
                 lenient: bool = False, by_dir: bool = False):
        self.dir = self.root = Path(root)
        self.path = path = self.dir / CATALOG_DB
        self.readonly = readonly
        self._by_dir = by_dir
        self._envs: dict[str, CatalogEnv] | None = None
        self._bank_source = ""
        self._db: sqlite_utils.Database | None = None
        if not database:
            return
        if (readonly or not create) and not path.is_file():
            raise CatalogError(f"{self.dir} is not a catalog (no {CATALOG_DB})")
        # A writer takes an empty file as a new database (SQLite does; a kill right after creating it leaves
        # one); a reader must not make it into a catalog.
        if (readonly or not create) and path.stat().st_size == 0:
            raise CatalogError(f"{path}: empty file (0 bytes), not a catalog database; it was left as it is "
                               "(move it away to start a new catalog here)")
        self._lock = threading.Lock()
        with self._errors("cannot be opened"):
            conn = self._connect_readonly() if readonly else self._connect_write()
            self._db = sqlite_utils.Database(conn, use_counts_table=False)
            if readonly:
                if not lenient:
                    self._check_tables()
            else:
                self.db.conn.execute("PRAGMA busy_timeout=30000")
                have = set(self.db.table_names())
                if have and "meta" not in have:  # another database: never convert it into a catalog
                    self._check_tables()
                self.db.enable_wal()
                self._ensure()

    @property
    def db(self) -> sqlite_utils.Database:
        if self._db is None:
            raise CatalogError(f"{self.dir}: opened without its {CATALOG_DB}")
        return self._db

    @classmethod
    def open_readonly(cls, out_dir: str | Path, *, lenient: bool = False) -> Catalog:
        """Open an existing catalog for reading only (works on a read-only directory or mount); ``lenient``
        (the report) also opens one with tables missing."""
        return cls(out_dir, create=False, readonly=True, lenient=lenient)

    def _connect_write(self) -> sqlite3.Connection:
        self.dir.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(self.path, check_same_thread=False)  # writes are serialised by self._lock

    def _connect_readonly(self) -> sqlite3.Connection:
        uri = "file:" + quote(str(self.path.resolve()))
        wal = self.path.with_name(self.path.name + "-wal")
        with open(self.path, "rb") as f:
            header = f.read(100)
        if header.startswith(b"SQLite format 3\x00") and len(header) > 18 and header[18] == 2 and not wal.exists():
            # A WAL database that no connection has open (the last one to close merges and removes the -wal):
            # read the file as it is. A plain read-only open would create -wal and -shm files beside it, and
            # cannot at all in a read-only directory or mount.
            return self._ro(uri + "?mode=ro&immutable=1")
        try:
            return self._ro(uri + "?mode=ro")
        except sqlite3.OperationalError as e:
            # A WAL database with a -wal left but no -shm, in a read-only directory: the -shm cannot be made.
            if wal.is_file() and wal.stat().st_size:
                raise CatalogError(f"{self.path}: cannot be read here ({e}) and {wal} holds writes not yet merged "
                                   "into it; open the catalog once where its directory is writable") from None
            return self._ro(uri + "?mode=ro&immutable=1")

    @staticmethod
    def _ro(uri: str) -> sqlite3.Connection:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def missing_tables(self) -> list[str]:
        """The catalog tables the database does not have (none once a run has opened it)."""
        have = set(self.db.table_names())
        return [t for t in TABLES if t not in have]

    def _check_tables(self) -> None:
        have = set(self.db.table_names())
        missing = self.missing_tables()
        if missing:
            raise CatalogError(f"{self.path}: not a catalog database (no table {missing[0]!r}"
                               + (f"; it has {', '.join(sorted(have)[:5])}" if have else "; it has no tables")
                               + "); it was left as it is")

    @contextlib.contextmanager
    def _errors(self, what: str = "cannot be read") -> Iterator[None]:
        """sqlite3 errors (corrupt file, not a database) become a :class:`CatalogError` naming the file."""
        try:
            yield
        except sqlite3.OperationalError as e:
            raise CatalogError(f"{self.path}: {what}: {e}") from None
        except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
            raise CatalogError(f"{self.path}: {what}: {e} (damaged, or not a catalog); it was left as it is") from None

    def _ensure(self) -> None:
        """Create the tables that are missing (all of them in a new file; the rest after a kill mid-way)."""
        db = self.db
        have = set(db.table_names())
        columns: dict[str, tuple[dict[str, Any], str]] = {
            "meta": ({"key": str, "value": str}, "key"),
            "runs": ({"run_id": str, "started": str, "finished": str, "status": str, "seeds_file": str,
                      "config": str, "config_fingerprint": str, "git_revision": str, "model": str,
                      "prompt_hashes": str, "counts": str, "usage": str, "timings": str}, "run_id"),
            "seeds": ({"seed_id": str, "name": str, "description": str, "source": str, "line": int}, "seed_id"),
            "scenarios": ({"scenario_id": str, "seed": str, "name": str, "description": str, "entities": str,
                           "goals": str, "status": str}, "scenario_id"),
            "rejections": ({"rejection_id": str, "scenario_id": str, "stage": str, "item": str, "reason": str,
                            "evidence": str}, "rejection_id"),
            "environments": ({"scenario_id": str, "env_id": str, "name": str, "status": str, "reason": str,
                              "dir": str, "tables": int, "rows": int, "tools": int, "tasks": int,
                              "prompt_tokens": int, "completion_tokens": int, "seconds": float,
                              "stopped_by": str}, "scenario_id"),
            "tasks": ({"task_id": str, "env_id": str, "kind": str, "instruction": str, "steps": int,
                       "attempts": int, "passes": int}, "task_id"),
        }
        for name in TABLES:
            if name not in have:
                cols, pk = columns[name]
                db.table(name).create(cols, pk=pk)
        db.table("rejections").create_index(["stage"], if_not_exists=True)
        db.table("tasks").create_index(["env_id"], if_not_exists=True)
        self._add_stopped_by()

    def _add_stopped_by(self) -> None:
        """``environments.stopped_by`` (what stopped an environment: the stage that rejected it, or the type of
        the error that failed it; the run's summary counts it) in a catalog made before the column existed:
        its rows get it once from their reason, which then began with it."""
        table = self.db.table("environments")
        if "stopped_by" in table.columns_dict:
            return
        table.add_column("stopped_by", str)
        self.db.execute("UPDATE environments SET stopped_by = substr(reason, 1, instr(reason || ':', ':') - 1) "
                        "WHERE status != 'verified'")
        self.db.conn.commit()

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
            self.db.table("meta").upsert({"key": "config_fingerprint", "value": fingerprint}, pk="key")

    def record_run(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.db.table("runs").upsert({k: v if isinstance(v, str | int | float) or v is None else _j(v)
                                    for k, v in row.items()}, pk="run_id")

    # ---------------------------------------------------------------- items

    def add_seeds(self, seeds: list[Any]) -> None:
        rows = [{"seed_id": content_hash({"name": s.name, "description": s.description}), "name": s.name,
                 "description": s.description, "source": s.source, "line": s.line} for s in seeds]
        with self._lock:
            self.db.table("seeds").upsert_all(rows, pk="seed_id")

    def add_scenarios(self, scenarios: list[Scenario], status: str = "kept") -> None:
        rows = [{"scenario_id": s.scenario_id, "seed": s.seed or "", "name": s.name, "description": s.description,
                 "entities": _j(s.entities), "goals": _j(s.goals), "status": status} for s in scenarios]
        with self._lock:
            self.db.table("scenarios").upsert_all(rows, pk="scenario_id")

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
                self.db.table("rejections").upsert_all(rows, pk="rejection_id")

    def set_environment(self, scenario_id: str, **fields: Any) -> None:
        with self._lock:
            self.db.table("environments").upsert({"scenario_id": scenario_id, **fields}, pk="scenario_id")

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
                self.db.table("tasks").upsert_all(rows, pk="task_id")
            self.db.conn.commit()

    # ---------------------------------------------------------------- reading

    def _query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        with self._errors():
            return list(self.db.query(sql, params or []))

    def environments(self) -> list[dict[str, Any]]:
        return self._query("SELECT * FROM environments ORDER BY name, scenario_id")

    def environment(self, key: str) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM environments WHERE env_id = ? OR scenario_id = ? OR name = ?",
                           [key, key, key])
        if not rows:
            rows = self._query("SELECT * FROM environments WHERE env_id LIKE ?", [key + "%"])
        return rows[0] if len(rows) == 1 else None

    def tasks_of(self, env_id: str) -> list[dict[str, Any]]:
        return self._query("SELECT * FROM tasks WHERE env_id = ? ORDER BY task_id", [env_id])

    def rejections(self, scenario_id: str | None = None) -> list[dict[str, Any]]:
        if scenario_id is None:
            return self._query("SELECT * FROM rejections ORDER BY stage, rejection_id")
        return self._query("SELECT * FROM rejections WHERE scenario_id = ? ORDER BY stage, rejection_id",
                           [scenario_id])

    def runs(self) -> list[dict[str, Any]]:
        return self._query("SELECT * FROM runs ORDER BY started")

    def rows(self, table: str, order: str) -> list[dict[str, Any]]:
        """Every row of ``table`` (one of ``TABLES``) in ``order``; none when the table is missing."""
        if table not in TABLES:
            raise ValueError(f"not a catalog table: {table!r}")
        if table not in self.db.table_names():
            return []
        return self._query(f"SELECT * FROM [{table}] ORDER BY {order}")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # ---------------------------------------------------------------- the files: environments and task bank

    @property
    def envs(self) -> dict[str, CatalogEnv]:
        """The environments by env id, each with its tasks of the task bank (sorted by task id)."""
        if self._envs is None:
            self._envs, self._bank_source = read_envs(self.dir, by_dir=self._by_dir)
        return self._envs

    @property
    def bank_source(self) -> str:
        """Where the task bank came from: ``task_bank.jsonl`` or ``envs/*/tasks.jsonl``."""
        self.envs  # noqa: B018 (reads the files)
        return self._bank_source

    @property
    def tasks(self) -> list[Task]:
        return [t for e in self.envs.values() for t in e.tasks]


def load_catalog(root: str | Path, *, by_dir: bool = False) -> Catalog:
    """Read ``root`` (a catalog directory, with or without ``catalog.db``) with its environments and task
    bank; raises :class:`CatalogError` naming the file and line of a problem. ``by_dir=True``: the rules of
    ``envfoundry eval`` (one environment directory is a catalog too; see :mod:`pipeline.catalog.reader`)."""
    cat = Catalog(root, database=False, by_dir=by_dir)
    cat.envs  # noqa: B018 (reads and checks the files now)
    return cat
