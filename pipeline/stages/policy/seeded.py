"""The seeded rows obey the policy: no row exists that a rule would have forbidden writing.

``obey(env, candidates)`` runs after the rules are chosen (``pipeline.stages.policy.house_rules.make_policy``, in the
tools node, before ``initial.db`` is written from ``env.seed`` and before any task is made or verified). For each
rule, as the candidate it was chosen as, the seeded rows it would have forbidden writing
(:func:`~pipeline.stages.policy.candidates.broken_by_rows`):

* a threshold on a value the call writes (``value_over``: "any fee above 1200 needs a supervisor"): the rows whose
  column is above it get values within the rule, the column's own seeded values at or below it (the highest ones,
  in the rows' order: an IPA at 6.8 becomes 6.2 under "above 6.2 needs approval"), else the row is deleted when no
  row references it;
* a cap on the children of a row (``limit``, ``limit_where``): the newest children past the cap that no row
  references are deleted.

Each change runs in SQLite on a live instance (its CHECK, UNIQUE and foreign key constraints decide), and the same
change is made to the seed row it came from (matched by its values: rows need not state their key). A rule whose
rows cannot all be put right is dropped with a Rejection, and its changes undone; nothing is left breaking a rule.
A state or a date is no write forbidden (a row's state, or a date passing, came after it was written): nothing to
do. Every change is reported (a Rejection of stage ``policy`` per rule, with the rows changed and deleted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import qi
from pipeline.stages.policy.candidates import Candidate, broken_by_rows

STAGE = "policy"


def _row(cur: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _referencing(conn: Any) -> dict[str, list[tuple[str, str, str | None]]]:
    """Per table, the (table, column, referenced column) pairs of the foreign keys that reference it."""
    out: dict[str, list[tuple[str, str, str | None]]] = {}
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                         "AND name NOT LIKE 'sqlite_%'")]
    for t in tables:
        for fk in conn.execute(f"SELECT * FROM pragma_foreign_key_list({_lit(t)})").fetchall():
            out.setdefault(fk[2], []).append((t, fk[3], fk[4]))
    return out


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _key(conn: Any, table: str) -> str:
    pk = [r[1] for r in conn.execute(f"SELECT * FROM pragma_table_info({_lit(table)})").fetchall() if r[5]]
    return pk[0] if len(pk) == 1 else "rowid"


def _referenced(conn: Any, table: str, row: dict[str, Any], refs: dict[str, list[tuple[str, str, str | None]]]
                ) -> bool:
    """Whether some row references ``row`` of ``table``."""
    for other, col, to in refs.get(table, []):
        value = row.get(to or _key(conn, table))
        if value is not None and conn.execute(f"SELECT 1 FROM {qi(other)} WHERE {qi(col)} = ? LIMIT 1",
                                              (value,)).fetchone():
            return True
    return False


class _Rows:
    """A working copy of the seed's rows per table; a deleted row is None until :meth:`seed` drops it."""

    def __init__(self, env: ir.Environment) -> None:
        self.env = env
        self.rows: dict[str, list[dict[str, Any] | None]] = {s.table: [dict(r) for r in s.rows] for s in env.seed}
        self.touched: set[str] = set()

    def index(self, table: str, row: dict[str, Any], skip: Sequence[tuple[str, int, Any]] = ()) -> int | None:
        """The seed row ``row`` (the live row, every column) came from: the first whose values it has (and that
        ``skip``, the edits made so far, does not hold already)."""
        taken = {e[1] for e in skip if e[0] == table}
        for i, r in enumerate(self.rows.get(table, [])):
            if i not in taken and r is not None and all(k in row and row[k] == v for k, v in r.items()):
                return i
        return None

    def seed(self) -> list[ir.SeedRows]:
        out = []
        for s in self.env.seed:
            if s.table not in self.touched:
                out.append(s)
                continue
            rows = self.rows[s.table]
            plan = s.plan
            if plan is not None:  # the LLM's example rows come first: fewer of them when one is deleted
                gone = sum(1 for r in rows[:plan.examples] if r is None)
                plan = plan.model_copy(update={"examples": plan.examples - gone}) if gone else plan
            out.append(s.model_copy(update={"rows": [r for r in rows if r is not None], "plan": plan}))
        return out


def _fix(conn: Any, c: Candidate, rows: _Rows, refs: dict[str, list[tuple[str, str, str | None]]],
         edits: list[tuple[str, int, dict[str, Any] | None]]) -> str | None:
    """Put right the rows that break ``c`` on ``conn``, recording each change in ``edits`` (table, seed index, the
    new values or None for a deletion); why it cannot, or None."""
    w = c.words
    table, column, x = w["table"], w["column"], c.number

    def delete(t: str, row: dict[str, Any]) -> bool:
        i = rows.index(t, row, edits)
        if i is None or _referenced(conn, t, row, refs):
            return False
        conn.execute(f"DELETE FROM {qi(t)} WHERE rowid = ?", (row["__rowid"],))
        edits.append((t, i, None))
        return True

    if w.get("section") == "value_over":
        bad = _row(conn.execute(f"SELECT rowid AS __rowid, * FROM {qi(table)} WHERE {qi(column)} > ? "
                                f"ORDER BY {qi(column)}, rowid", (x,)))
        good = [r[0] for r in conn.execute(f"SELECT DISTINCT {qi(column)} FROM {qi(table)} WHERE {qi(column)} <= ? "
                                           f"ORDER BY {qi(column)}", (x,))]
        pool = good[-len(bad):] if len(bad) <= len(good) else good
        for n, row in enumerate(bad):
            i = rows.index(table, row, edits)
            if i is None:
                return f"a {table} row that breaks it is not one of the seed's ({_short(row)})"
            if pool:
                value = pool[n * len(pool) // len(bad)]
                conn.execute("SAVEPOINT obey_row")
                try:
                    conn.execute(f"UPDATE {qi(table)} SET {qi(column)} = ? WHERE rowid = ?", (value, row["__rowid"]))
                    conn.execute("RELEASE obey_row")
                    edits.append((table, i, {column: value}))
                    continue
                except Exception:  # noqa: BLE001 - a constraint the value breaks: the row is deleted instead
                    conn.execute("ROLLBACK TO obey_row")
                    conn.execute("RELEASE obey_row")
            if not delete(table, row):
                return f"no value within it fits the {table} row {_short(row)}, and other rows reference it"
        return None
    if w.get("section") in ("limit", "limit_where"):
        where = w.get("where", "")
        over = conn.execute(f"SELECT {qi(column)}, COUNT(*) FROM {qi(table)} WHERE {qi(column)} IS NOT NULL{where} "
                            f"GROUP BY {qi(column)} HAVING COUNT(*) > ?", (x,)).fetchall()
        for parent, count in over:
            need = count - int(x or 0)
            for row in _row(conn.execute(f"SELECT rowid AS __rowid, * FROM {qi(table)} WHERE {qi(column)} = ?{where} "
                                         "ORDER BY rowid DESC", (parent,))):
                if need and delete(table, row):
                    need -= 1
            if need:
                return (f"{need} of the {count} {table} rows of {column} {parent!r} past the cap are referenced by "
                        "other rows")
        return None
    return f"no way to put right the rows of a {w.get('section', '')!r} rule"


def _short(row: dict[str, Any]) -> str:
    text = repr({k: v for k, v in row.items() if k != "__rowid"})
    return text if len(text) <= 120 else text[:117] + "..."


def obey(env: ir.Environment, candidates: Sequence[Candidate], ids: Sequence[str]
         ) -> tuple[ir.Environment, set[str], list[ir.Rejection]]:
    """``env`` with seed rows that none of ``candidates`` (the rules chosen, ``ids`` their rule ids) would have
    forbidden writing (the module docstring); the ids of the rules dropped because their rows could not be put
    right; a Rejection per rule whose rows were changed or that was dropped. ``env`` itself when nothing breaks."""
    rows = _Rows(env)
    dropped: set[str] = set()
    notes: list[ir.Rejection] = []
    with EnvInstance(env) as inst:
        conn = inst.conn
        refs = _referencing(conn)
        for c, rid in zip(candidates, ids, strict=True):
            n = broken_by_rows(conn, c)
            if not n:
                continue
            edits: list[tuple[str, int, dict[str, Any] | None]] = []
            conn.execute("SAVEPOINT obey")
            why = _fix(conn, c, rows, refs, edits)
            if why is None and broken_by_rows(conn, c):
                why = "rows still break it after the changes"
            if why is not None:
                conn.execute("ROLLBACK TO obey")
                conn.execute("RELEASE obey")
                dropped.add(rid)
                notes.append(ir.Rejection(stage=STAGE, item=rid, reason=f"rule {rid} dropped: {n} seeded rows break "
                                          f"it and cannot be put right ({why})",
                                          evidence={"rows": n, "condition": c.condition}))
                continue
            conn.execute("RELEASE obey")
            for table, i, new in edits:
                rows.touched.add(table)
                old = rows.rows[table][i]
                rows.rows[table][i] = None if new is None or old is None else {**old, **new}
            changed = sum(1 for e in edits if e[2] is not None)
            notes.append(ir.Rejection(
                stage=STAGE, item=rid, reason=f"{n} seeded rows broke rule {rid}: {changed} changed to a value "
                f"within it, {len(edits) - changed} deleted", evidence={
                    "rows": n, "condition": c.condition, "changed": changed, "deleted": len(edits) - changed,
                    "tables": sorted({e[0] for e in edits})}))
    if not rows.touched:
        return env, dropped, notes
    return env.model_copy(update={"seed": rows.seed()}), dropped, notes
