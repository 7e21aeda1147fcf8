"""Persistent SQLite response cache for LLM calls.

The key is the sha256 of the canonical JSON of everything that can change the answer (model, messages,
response schema, sampling parameters) and nothing that cannot (retries, timeouts, concurrency). Failed
requests are recorded in a separate table and are never served as answers. Each write is one transaction,
so a crash leaves no half-written entry.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from pipeline.hashing import canonical_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
  key TEXT PRIMARY KEY,
  request TEXT NOT NULL,
  content TEXT NOT NULL,
  usage TEXT NOT NULL,
  created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS errors (
  key TEXT NOT NULL,
  error TEXT NOT NULL,
  created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS errors_key ON errors(key);
"""


class CacheError(RuntimeError):
    """The cache file cannot be used (corrupt, not SQLite, unwritable)."""


def cache_key(request: dict[str, Any]) -> str:
    import hashlib

    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


class ResponseCache:
    """Thread-safe SQLite cache: ``get(key)`` -> (content, usage) or None; ``put``; ``record_error``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA busy_timeout=30000")
            ok = self._con.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                raise sqlite3.DatabaseError(ok)
            self._con.executescript(SCHEMA)
        except (sqlite3.DatabaseError, OSError) as e:
            raise CacheError(
                f"LLM cache {self.path} is unusable ({e}); move it away or delete it and envfoundry starts a "
                "new one (or set llm.cache_path / --no-cache)"
            ) from None

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        with self._lock:
            row = self._con.execute("SELECT content, usage FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return row[0], json.loads(row[1])

    def put(self, key: str, request: dict[str, Any], content: str, usage: dict[str, Any]) -> None:
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                self._con.execute(
                    "INSERT OR REPLACE INTO responses(key, request, content, usage, created) VALUES (?,?,?,?,?)",
                    (key, canonical_json(request), content, canonical_json(usage), time.time()),
                )
                self._con.execute("COMMIT")
            except BaseException:
                self._con.execute("ROLLBACK")
                raise

    def record_error(self, key: str, error: str) -> None:
        with self._lock:
            self._con.execute(
                "INSERT INTO errors(key, error, created) VALUES (?,?,?)", (key, error[:4000], time.time())
            )

    def errors(self, key: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._con.execute("SELECT error FROM errors WHERE key = ? ORDER BY rowid", (key,))]

    def __len__(self) -> int:
        with self._lock:
            return self._con.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Fold the write-ahead log into the file (so the cache is one self-contained file) and close."""
        with self._lock:
            try:
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            self._con.close()
