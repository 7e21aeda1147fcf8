"""Fresh initial states for sampled tasks (``envfoundry sample --perturb``): the environment's code-made rows with
their non-identifying values drawn again from the environment's own row generators.

An environment built with rows at scale stores, per table, how code made its rows (``SeedRows.plan``: the locale,
the seed, one generator per column; :mod:`pipeline.stages.rows.maker`). :func:`perturbed_db` copies ``initial.db`` and,
for every code-made row (the rows after the LLM's ``examples``), draws again the columns that do not identify it,
with the same generators and a seed derived from the plan's and the perturbation key: every row keeps its id, its
references, its UNIQUE and natural-key columns and the columns the planner names it by (the same request names
the same rows), while its other values (a status, a date, an amount, a description) change, so a question asked
again has another answer and a memorised answer fails. A row whose new values a constraint refuses keeps its old
ones; the LLM's example rows, and tables without a plan, are left as they are.

The key is a string (the sampler uses ``"<seed>:<round>"``); the same environment, ``initial.db`` and key give the
same database, byte for byte, so a sampled task records only the key, the file name and its SHA-256
(``metadata.perturb``) and anyone with the environment can derive its database again.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from pipeline.dbmodel.columns import table_columns
from pipeline.hashing import content_hash
from pipeline.ir import Environment
from pipeline.stages.rows.maker import ValueMaker, key_sets

METHOD = "redraw-v1"
"""How a perturbed database is derived (recorded with each task; changed when the derivation changes)."""


def named_columns(env: Environment, initial_db: str | Path | None) -> dict[str, set[str]]:
    """The columns the planner names each table's rows by (their natural key, declared or found in the rows)."""
    from pipeline.runtime.replay import fresh
    from pipeline.stages.tasks.planner import make_planner

    with fresh(env, initial_db) as run:
        return {t: set(k.columns) for t, k in make_planner(env, run).keys.items()}


def perturb(env: Environment, conn: sqlite3.Connection, key: str, keep: Mapping[str, Collection[str]]) -> int:
    """Draw again the non-identifying values of the code-made rows in ``conn`` (see the module docstring); ``keep``:
    more columns to keep per table. Returns how many rows changed."""
    changed = 0
    for seeded in env.seed:
        plan = seeded.plan
        table = next((t for t in env.tables if t.name == seeded.table), None)
        if plan is None or table is None:
            continue
        cols = table_columns(conn, table)
        names = [c.name for c in cols]
        fixed = {c.name for c in cols if c.pk or c.ref is not None} | set(table.natural_key) | set(keep.get(table.name, ()))
        fixed |= {c for s in key_sets(conn, table, names) for c in s}
        redraw = [g.column for g in plan.generators if g.kind != "reference" and g.column not in fixed]
        if not redraw:
            continue
        quoted = ", ".join(f'"{n}"' for n in names)
        rows = conn.execute(f'SELECT rowid, {quoted} FROM "{table.name}" ORDER BY rowid').fetchall()
        examples = {n: [r[i + 1] for r in rows[:plan.examples]] for i, n in enumerate(names)}
        seed = int(content_hash({"plan": plan.seed, "perturb": key, "method": METHOD}, 15), 16)
        maker = ValueMaker(plan.locale, seed, plan.generators, cols, examples)
        sets = ", ".join(f'"{c}" = ?' for c in redraw)
        for r in rows[plan.examples:]:
            row: dict[str, Any] = dict(zip(names, r[1:], strict=True))
            new = maker.row({c: v for c, v in row.items() if c not in redraw}, {})
            if all(new.get(c) == row[c] for c in redraw):
                continue
            try:
                conn.execute("SAVEPOINT redraw")
                conn.execute(f'UPDATE "{table.name}" SET {sets} WHERE rowid = ?', [new.get(c) for c in redraw] + [r[0]])
                conn.execute("RELEASE redraw")
                changed += 1
            except sqlite3.DatabaseError:  # a CHECK, a type, a trigger: the row keeps its values
                conn.execute("ROLLBACK TO redraw")
                conn.execute("RELEASE redraw")
    return changed


def perturbed_db(env: Environment, initial_db: str | Path, key: str, path: str | Path,
                 keep: Mapping[str, Collection[str]] | None = None) -> Path:
    """Write the database of perturbation ``key`` of ``env`` to ``path`` (replaced); same inputs, same bytes.
    ``keep``: the columns the planner names rows by (:func:`named_columns`; computed when not given)."""
    path = Path(path)
    keep = named_columns(env, initial_db) if keep is None else keep
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.copyfile(initial_db, tmp)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("BEGIN")
        perturb(env, conn, key, keep)
        conn.execute("COMMIT")
        path.unlink(missing_ok=True)
        conn.execute("VACUUM INTO ?", (str(path),))
    finally:
        conn.close()
        tmp.unlink(missing_ok=True)
    return path


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
