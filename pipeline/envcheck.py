"""``envfoundry check``: validate an environment directory, also one a researcher edited by hand.

``check_env_dir(path) -> EnvCheck`` runs, in order, and reports every problem with where it is:

* ``env.json`` loads as the IR (the key that is wrong is named);
* the schema builds and the seed rows insert (the table and row are named); every table's DDL passes the
  authorizer-based DDL check (``static_checks.check_ddl``: clock or random SQL, PRAGMA...), named by table;
* ``schema.sql`` and ``initial.db`` hold what ``env.json`` says;
* every tool passes the static checks (``static_checks.check_tools``), each problem named by its tool;
* ``server.py`` is a fresh render of ``env.json`` (``pipeline.server.check_server``; ``envfoundry render`` fixes it);
* every task record loads, its reference solution replays and its verifier holds (``verify.proofs.prove``:
  the reference passes, and the initial state, doing nothing and destructive writes fail), named by task id.

A path that is not an environment directory (no ``env.json``) is unusable input, not a finding:
:class:`Unusable` is raised, and the command exits 2.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.catalog.files import read_tasks
from pipeline.envdir import EnvDirError, build_database
from pipeline.ir import Environment, Task
from pipeline.meaning.findings import env_findings
from pipeline.runtime import engine, static_checks
from pipeline.server import check_server, render_server
from pipeline.settings import format_validation_error


class Unusable(ValueError):
    """The path cannot be checked at all (not a directory, no env.json)."""


@dataclass(frozen=True)
class Problem:
    where: str
    """``env.json``, ``table books``, ``tool add_book``, ``task t_...``, ``server.py``..."""
    message: str

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "message": self.message}


@dataclass
class EnvCheck:
    env_dir: str
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    """How many of each were checked: tables, seed rows, tools, tasks."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """Semantic findings (``pipeline.meaning.findings``): generated values that contradict their column's own
    example rows (table, column, value, what it contradicts). Reported, not problems: the environment works."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    def to_json(self) -> dict[str, Any]:
        return {"env_dir": self.env_dir, "ok": self.ok, "checked": self.checked,
                "problems": [p.to_json() for p in self.problems], "findings": self.findings}


def _dump(conn: sqlite3.Connection) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The schema statements and every table's rows (sorted), to compare two databases by content."""
    out = []
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                  "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall():
        rows = conn.execute(f'SELECT * FROM "{name}"').fetchall()
        out.append((sql, sorted(rows, key=repr)))
    return out


def _load_env(d: Path, report: EnvCheck) -> Environment | None:
    try:
        return Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
    except ValidationError as exc:
        report.add("env.json", format_validation_error(exc, "invalid environment IR"))
    except (OSError, UnicodeDecodeError) as exc:
        report.add("env.json", f"cannot be read: {exc}")
    return None


def _check_database(d: Path, env: Environment, report: EnvCheck) -> sqlite3.Connection | None:
    conn = engine.connect(":memory:")
    try:
        build_database(env, conn)
    except EnvDirError as exc:
        table = getattr(exc, "table", None)
        report.add(f"table {table}" if table else "schema", str(exc))
        conn.close()
        return None
    scratch = engine.connect(":memory:")
    try:
        for t in env.tables:
            for p in static_checks.check_ddl(scratch, t.ddl):
                report.add(f"table {t.name}", p)
            try:
                scratch.execute(t.ddl)
            except sqlite3.Error:
                pass
    finally:
        scratch.close()
    schema_sql = d / "schema.sql"
    if not schema_sql.is_file():
        report.add("schema.sql", "missing")
    elif schema_sql.read_text(encoding="utf-8").split("\n", 1)[-1] != env.ddl():
        report.add("schema.sql", "does not hold the tables of env.json")
    initial = d / "initial.db"
    if not initial.is_file():
        report.add("initial.db", "missing")
    else:
        try:
            src = sqlite3.connect(f"file:{initial}?mode=ro", uri=True)
            try:
                if _dump(src) != _dump(conn):
                    report.add("initial.db", "does not hold the tables and seed rows of env.json")
            finally:
                src.close()
        except sqlite3.Error as exc:
            report.add("initial.db", f"cannot be read: {exc}")
    return conn


def _load_tasks(d: Path, report: EnvCheck) -> list[Task]:
    path = d / "tasks.jsonl"
    if not path.is_file():
        return []

    def bad(lineno: int, task_id: str | None, exc: ValidationError) -> None:
        report.add(f"tasks.jsonl:{lineno}" + (f" (task {task_id})" if task_id else ""),
                   format_validation_error(exc, "invalid task record"))

    return read_tasks(path, on_error=bad)


def check_env_dir(env_dir: str | Path, *, proofs: bool = True) -> EnvCheck:
    """Check one environment directory; raises :class:`Unusable` when it is not one."""
    from verify.proofs import prove

    d = Path(env_dir)
    if not d.is_dir():
        raise Unusable(f"{d}: not a directory")
    if not (d / "env.json").is_file():
        raise Unusable(f"{d}: not an environment directory (no env.json)")
    report = EnvCheck(str(d))
    env = _load_env(d, report)
    tasks = _load_tasks(d, report)
    if env is None:
        return report
    report.checked = {"tables": len(env.tables), "seed_rows": sum(len(s.rows) for s in env.seed),
                      "tools": len(env.tools), "tasks": len(tasks)}
    report.findings = [f.as_dict() for f in env_findings(env)]
    conn = _check_database(d, env, report)
    if conn is None:
        return report
    try:
        for name, problems in static_checks.check_tools(conn, [t.model_dump(mode="json") for t in env.tools]).items():
            for p in problems:
                report.add(f"tool {name}", p)
    finally:
        conn.close()
    if not (d / "server.py").is_file():
        report.add("server.py", "missing (run `envfoundry render` on the directory)")
    elif not check_server(d):
        current = (d / "server.py").read_text(encoding="utf-8")
        what = "is not a fresh render of env.json" if current != render_server(env) else "differs"
        report.add("server.py", f"{what} (run `envfoundry render` on the directory)")
    if proofs:
        # replayed on initial.db as trainers do; on the rows of env.json when initial.db does not hold them
        initial = None if any(p.where == "initial.db" for p in report.problems) else d / "initial.db"
        for task in tasks:
            unknown = sorted({c.tool for c in task.reference_solution} - {t.name for t in env.tools})
            if unknown:
                report.add(f"task {task.task_id}", f"its reference solution calls tools env.json lacks: {unknown}")
                continue
            result = prove(env, task, initial_db=initial)
            for failed in result.failed():
                report.add(f"task {task.task_id}", f"{failed.name}: {failed.detail}")
    return report
