"""Environment directories: the on-disk contract trainers and the checker rely on.

An environment directory holds ``env.json`` (the IR, canonical pretty JSON), ``schema.sql``,
``initial.db`` (built from the IR, byte-for-byte deterministic), ``server.py`` (a deterministic
render, see ``pipeline.render``), ``tasks.jsonl`` (one canonical JSON task per line) and
``report.json``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import sqlite_utils
from pydantic import ValidationError

from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Task
from pipeline.render import render_server
from pipeline.runtime import engine
from pipeline.settings import format_validation_error

FILES = ("env.json", "schema.sql", "initial.db", "server.py", "tasks.jsonl", "report.json")


class EnvDirError(ValueError):
    """A malformed environment directory or IR; the message names the file, line, table or row."""


class SeedError(EnvDirError):
    """Seed rows that SQLite rejects. ``table`` and ``index`` (position in its SeedRows) name the row."""

    def __init__(self, message: str, table: str | None = None, index: int | None = None, row: Any = None) -> None:
        super().__init__(message)
        self.table, self.index, self.row = table, index, row


def pretty_json(obj: Any) -> str:
    """Canonical pretty JSON: sorted keys, two-space indent, UTF-8 kept, trailing newline."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def _short(row: Any, limit: int = 200) -> str:
    text = json.dumps(row, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _groups(rows: list[dict[str, Any]]) -> Iterable[tuple[int, list[dict[str, Any]]]]:
    """Consecutive rows with the same keys (so a missing key keeps its column DEFAULT)."""
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i].keys() != rows[start].keys():
            yield start, rows[start:i]
            start = i


def build_database(env: Environment, conn: sqlite3.Connection) -> None:
    """Create the tables and insert the seed rows of ``env`` into the empty database ``conn``.

    Tables are created in declared order. Seed rows are inserted through sqlite-utils in declared
    order with foreign keys deferred to one ``PRAGMA foreign_key_check`` at the end, which must be
    empty; every other constraint (STRICT types, NOT NULL, CHECK, UNIQUE) is checked per row.
    Raises ``EnvDirError``/``SeedError`` naming the table and row. Foreign keys are on afterwards.
    """
    conn.execute("PRAGMA foreign_keys = ON")
    for table in env.tables:
        try:
            conn.execute(table.ddl)
        except sqlite3.Error as exc:
            raise EnvDirError(f"table {table.name!r}: DDL rejected by SQLite: {exc}") from exc
    created = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [t.name for t in env.tables if t.name not in created]
    if missing:
        raise EnvDirError(f"tables {missing} are declared but their DDL creates a table with another name")
    conn.execute("PRAGMA foreign_keys = OFF")
    db = sqlite_utils.Database(conn)
    for seed in env.seed:
        if seed.table not in created:
            raise SeedError(f"seed rows for unknown table {seed.table!r} (tables: {sorted(created)})", seed.table)
        columns = {c.name for c in db[seed.table].columns}
        for start, group in _groups(seed.rows):
            unknown = sorted(set(group[0]) - columns)
            if unknown:
                raise SeedError(
                    f"table {seed.table!r} row {start} {_short(group[0])}: unknown columns {unknown}",
                    seed.table, start, group[0],
                )
            conn.execute("SAVEPOINT seed_group")
            try:
                db[seed.table].insert_all(group, alter=False)  # type: ignore[union-attr]
                conn.execute("RELEASE seed_group")
            except sqlite3.Error:
                conn.execute("ROLLBACK TO seed_group")
                conn.execute("RELEASE seed_group")
                _raise_first_bad_row(conn, seed.table, start, group)
                raise  # unreachable unless the group fails only as a whole
    problems = conn.execute("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise _foreign_key_error(conn, env, problems)
    conn.execute("PRAGMA foreign_keys = ON")


def _raise_first_bad_row(conn: sqlite3.Connection, table: str, start: int, group: list[dict[str, Any]]) -> None:
    db = sqlite_utils.Database(conn)
    conn.execute("SAVEPOINT seed_probe")
    try:
        for i, row in enumerate(group):
            try:
                db[table].insert(row, alter=False)  # type: ignore[union-attr]
            except sqlite3.Error as exc:
                index = start + i
                hint = " (a value does not match its column type)" if str(exc) == "datatype mismatch" else ""
                raise SeedError(f"table {table!r} row {index} {_short(row)}: {exc}{hint}", table, index, row) from exc
    finally:
        conn.execute("ROLLBACK TO seed_probe")
        conn.execute("RELEASE seed_probe")


def _foreign_key_error(conn: sqlite3.Connection, env: Environment, problems: list[tuple]) -> SeedError:
    lines = []
    first: tuple[str, int | None, Any] | None = None
    for table, rowid, parent, fkid in problems[:10]:
        fk = conn.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall()
        cols = [f"{r[3]} -> {parent}.{r[4] or 'rowid'}" for r in fk if r[0] == fkid]
        row: Any = None
        if rowid is not None:
            quoted = table.replace('"', '""')
            cur = conn.execute(f'SELECT * FROM "{quoted}" WHERE rowid = ?', (rowid,))
            names = [d[0] for d in cur.description]
            found = cur.fetchone()
            row = dict(zip(names, found, strict=True)) if found else None
        index = _seed_index(env, table, row)
        if first is None:
            first = (table, index, row)
        where = f"row {index} " if index is not None else ""
        lines.append(f"table {table!r} {where}{_short(row)}: foreign key {', '.join(cols)} refers to a missing {parent!r} record")
    more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
    table, index, row = first if first else (None, None, None)
    return SeedError("foreign key check failed: " + "; ".join(lines) + more, table, index, row)


def _seed_index(env: Environment, table: str, row: dict[str, Any] | None) -> int | None:
    if row is None:
        return None
    for seed in env.seed:
        if seed.table == table:
            for i, candidate in enumerate(seed.rows):
                if all(row.get(k) == v for k, v in candidate.items()):
                    return i
    return None


def create_initial_db(env: Environment, path: str | Path) -> Path:
    """Write the initial database of ``env`` to ``path`` (replaced if present); same IR, same bytes."""
    path = Path(path)
    mem = engine.connect(":memory:")
    try:
        build_database(env, mem)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.unlink(missing_ok=True)
        mem.execute("VACUUM INTO ?", (str(tmp),))
        os.replace(tmp, path)
    finally:
        mem.close()
    return path


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")  # one fixed name: a write killed mid-way leaves no stray file behind
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:  # (the next write of the same file replaces it)
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_env_dir(
    env: Environment, out_dir: str | Path, tasks: Iterable[Task] = (), report: dict[str, Any] | None = None
) -> Path:
    """Write the environment directory (all of ``FILES``); returns its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks = list(tasks)
    env_id = env.env_id
    for t in tasks:
        if t.env_id != env_id:
            raise EnvDirError(f"task {t.task_id} belongs to env {t.env_id!r}, not {env_id!r}")
    create_initial_db(env, out / "initial.db")
    _write_text(out / "env.json", pretty_json(env))
    _write_text(out / "schema.sql", f"-- {env_id}: {env.scenario.name}\n" + env.ddl())
    _write_text(out / "server.py", render_server(env))
    _write_text(out / "tasks.jsonl", "".join(canonical_json(t) + "\n" for t in tasks))
    _write_text(out / "report.json", pretty_json(report or {}))
    return out


def load_env_dir(env_dir: str | Path) -> tuple[Environment, list[Task], dict[str, Any]]:
    """Read an environment directory: (Environment, tasks, report). Errors name the file and line."""
    d = Path(env_dir)
    if not (d / "env.json").is_file():
        raise EnvDirError(f"{d}: not an environment directory (no env.json)")
    try:
        env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise EnvDirError(format_validation_error(exc, f"{d / 'env.json'}: invalid environment IR")) from exc
    tasks: list[Task] = []
    tasks_path = d / "tasks.jsonl"
    if tasks_path.is_file():
        for lineno, line in enumerate(tasks_path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                tasks.append(Task.model_validate_json(line))
            except ValidationError as exc:
                raise EnvDirError(format_validation_error(exc, f"{tasks_path}:{lineno}: invalid task record")) from exc
    report: dict[str, Any] = {}
    report_path = d / "report.json"
    if report_path.is_file():
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise EnvDirError(f"{report_path}: not valid JSON: {exc}") from exc
        if not isinstance(report, dict):
            raise EnvDirError(f"{report_path}: must hold a JSON object")
    return env, tasks, report
