"""Stage 3, seed data: realistic, mutually consistent rows, table by table, parents first.

``generate_seed(scenario, tables, client, settings) -> StageResult[tuple[ir.SeedRows, ...]]``.

Every row is written by the LLM (no synthetic expansion): ``rows_per_table`` rows per table in calls
of ``rows_per_call``. Rows come back as JSON arrays in column order (about half the tokens of
objects); the response model types each position from the table (INTEGER/REAL/TEXT, nullability),
``CHECK (c IN (...))`` columns become enums and foreign-key columns become enums of the parent's
existing keys, so the grammar itself keeps most rows valid. The prompt shows each parent key with a
label (its first text column and status-like columns) so child rows can agree with their parents, and a few
parent tuples of each earlier sibling's rows (a table naming two or more of the same parents: the prescriptions'
(patient, medication) in the orders' prompt, ``maker.sibling_tuples``), which the table is asked after.

The prompt names the table's natural key (no two rows may share its values). A row whose only fault is a
value already taken in a UNIQUE column set (two people with one phone number) gets the nearest unused value
by code (:func:`make_unique`: digits counted up, same shape) and the change is recorded, instead of the row
being refused or the model asked again. Rows are inserted through sqlite-utils, one savepoint each, into a scratch database with foreign
keys on. A call in which fewer than half of the rows insert is rolled back and the exact SQLite
errors go back to the LLM (bounded by ``max_attempts``); rows refused in an accepted call, and
exact duplicates, are dropped and recorded as a Rejection. A table left with fewer than
``rows_min`` rows fails the stage. The output rows are read back from SQLite in rowid order, with
the generated integer keys filled in.

With ``row_generators`` the LLM's rows are examples that set the tone: after them code adds rows at scale from
generators the LLM picks per column (``pipeline.stages.rows.generators``), and each table's ``SeedRows.plan`` records how.
Once every table is filled, a parent's counter is set from its children (``counts``) and a parent's amount that its
children's lines add up to, from those lines (``totals``: an order's total).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

import sqlite_utils
from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.arguments import variants
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.ddl import row_order, rows_of, scratch_db
from pipeline.dbmodel.examples import MAX_REF_VALUES
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import findings as semantic
from pipeline.meaning import relations
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, render_section, user
from pipeline.stages.rows import counts, timeline, totals
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.maker import sibling_tuples, unique_sets

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings

STAGE = "seed_data"
MAX_LABEL = 48


class _Rollback(Exception):
    pass


def _py_type(col: Column, choices: tuple[Any, ...] | None) -> Any:
    if choices:
        base: Any = Literal.__getitem__(tuple(choices))  # type: ignore[attr-defined]
    elif col.type in ("INTEGER", "INT"):
        base = int
    elif col.type == "REAL":
        base = float
    elif col.type == "TEXT":
        base = str
    else:
        base = Union[str, int, float]  # noqa: UP007 (a runtime type expression)
    nullable = not col.notnull and not col.pk
    return Optional[base] if nullable else base  # noqa: UP007, UP045


def rows_model(table: str, cols: list[Column], choices: dict[str, tuple[Any, ...]], n: int) -> type[BaseModel]:
    """``{"rows": [[v1, v2, ...], ...]}`` with exactly ``n`` rows, one typed position per column."""
    row_type = tuple.__class_getitem__(tuple(_py_type(c, choices.get(c.name)) for c in cols))
    return create_model(f"Rows_{table}", rows=(list[row_type], Field(min_length=n, max_length=n)),  # type: ignore[valid-type]
                        __base__=BaseModel)


def _label_columns(cols: list[Column]) -> tuple[str | None, list[str]]:
    text = next((c.name for c in cols if c.type == "TEXT" and not c.pk and c.ref is None), None)
    flags = [c.name for c in cols if c.enum and c.name != text][:2]
    return text, flags


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= MAX_LABEL else s[: MAX_LABEL - 3] + "..."


def parent_choices(conn: sqlite3.Connection, parent: ir.Table, key: str) -> tuple[tuple[Any, ...], str]:
    """The first ``MAX_REF_VALUES`` keys of ``parent`` and a prompt line labelling each: its first text column and
    status-like columns, then every date column (by its values) named, so that a child can fit its parent's time
    (a fine on a loan whose due date is past: shown only the loan's start, the model fined loans made today)."""
    pcols = table_columns(conn, parent)
    text, flags = _label_columns(pcols)
    extra = [c for c in [text, *flags] if c and c != key]
    order = row_order(conn, parent.name)
    cur = conn.execute(f'SELECT * FROM "{parent.name}" ORDER BY {order} LIMIT {MAX_REF_VALUES}')
    names = [d[0] for d in cur.description]
    full = [dict(zip(names, r, strict=True)) for r in cur]
    dated = [c for c in relations.date_columns({n: [r[n] for r in full] for n in names}) if c != key]
    if dated:
        extra = [c for c in extra if c not in dated]
    rows = [(r[key], *(r[c] for c in extra)) for r in full]
    values = tuple(dict.fromkeys(r[0] for r in rows if r[0] is not None))
    parts = []
    for r, whole in zip(rows, full, strict=True):
        desc = " ".join(_short(v) for v in r[1:] if v is not None)
        when = ", ".join(f"{c} {whole[c]}" for c in dated if whole[c] is not None)
        desc = f"{desc} ({when})" if desc and when else desc or when
        parts.append(f"{json.dumps(r[0])} = {desc}" if desc else json.dumps(r[0]))
    return values, "; ".join(parts)


def _format_failures(failures: list[tuple[list[Any], str]]) -> str:
    """One line per distinct error (its first row), at most six."""
    firsts: dict[str, list[Any]] = {}
    for row, err in failures:
        firsts.setdefault(err, row)
    return "\n".join(f"- {json.dumps(row, ensure_ascii=False)}: {err}" for err, row in list(firsts.items())[:6])


# ------------------------------------------------------------------ UNIQUE collisions, repaired by code


def make_unique(conn: sqlite3.Connection, table: str, names: list[str], values: list[Any],
                cols: list[Column], batch: Sequence[Sequence[Any]] = ()) -> list[Any]:
    """``values`` with a colliding value of a UNIQUE column set changed to the nearest unused one (the last
    column of the set that is neither a reference nor a CHECK-listed value), unused also by the other rows of
    ``batch`` (the rows still to be inserted). Only a collision is repaired: whatever else is wrong with the row
    is left for SQLite to report."""
    out = list(values)
    by_name = {c.name: c for c in cols}
    for key in unique_sets(conn, table):
        if any(k not in names for k in key):
            continue
        idx = [names.index(k) for k in key]
        if any(out[i] is None for i in idx):
            continue
        cond = " AND ".join(f'"{k}" = ?' for k in key)
        if not conn.execute(f'SELECT 1 FROM "{table}" WHERE {cond} LIMIT 1', [out[i] for i in idx]).fetchone():
            continue
        free = [i for i in idx if by_name.get(names[i]) is not None and by_name[names[i]].ref is None
                and not by_name[names[i]].enum]
        if not free:
            continue
        pos = free[-1]
        pending = {tuple(r[i] for i in idx) for r in batch}
        for candidate in variants(out[pos]):
            trial = [candidate if i == pos else out[i] for i in idx]
            if tuple(trial) not in pending and \
                    not conn.execute(f'SELECT 1 FROM "{table}" WHERE {cond} LIMIT 1', trial).fetchone():
                out[pos] = candidate
                break
    return out


def _ask_batch(
    client: LLMClientProtocol, settings: BuildSettings, db: sqlite_utils.Database, table: ir.Table, cols: list[Column],
    choices: dict[str, tuple[Any, ...]], prompt: str, n: int,
) -> tuple[Any, list[tuple[list[Any], str]], list[dict[str, Any]]]:
    """One call for ``n`` rows with its feedback loop; returns (outcome, rows dropped from the kept call)."""
    names = [c.name for c in cols]
    quoted = ", ".join(f'"{c}"' for c in names)
    attempt = [0]
    dropped: list[tuple[list[Any], str]] = []
    renamed: list[dict[str, Any]] = []

    def check(reply: Any) -> tuple[int | None, str | None]:
        attempt[0] += 1
        last = attempt[0] >= settings.max_attempts
        seen = {tuple(r) for r in db.conn.execute(f'SELECT {quoted} FROM "{table.name}"').fetchall()}
        ok: list[list[Any]] = []
        failures: list[tuple[list[Any], str]] = []
        try:
            with db.atomic():
                for row in reply.rows:
                    values = list(row)
                    if tuple(values) in seen:
                        failures.append((values, "exact duplicate of another row"))
                        continue
                    seen.add(tuple(values))
                    fixed = make_unique(db.conn, table.name, names, values, cols, reply.rows)
                    if fixed != values:
                        renamed.append({"row": values, "now": fixed})
                        values = fixed
                    try:
                        with db.atomic():
                            db.table(table.name).insert(dict(zip(names, values, strict=True)))
                        ok.append(values)
                    except sqlite3.Error as err:
                        failures.append((values, str(err)))
                if failures and 2 * len(ok) < len(reply.rows) and not last:
                    raise _Rollback
        except _Rollback:
            renamed.clear()
            return None, render_section("seed_data", "feedback", failed=len(failures), total=len(reply.rows),
                                        errors=_format_failures(failures), n=n)
        dropped.extend(failures)
        return len(ok), None

    out = ask_with_feedback(
        client, rows_model(table.name, cols, choices, n), user(prompt), check, stage=STAGE,
        max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature,
        max_tokens=max(settings.max_tokens_rows, n * (8 + 12 * len(cols))), feedback=lambda e: e,
    )
    return out, dropped, renamed


@dataclass(frozen=True)
class _TableAsk:
    """What every request for one table's rows holds: its columns, the allowed values (enums, and the parents'
    keys for references: the parent tables must be seeded first), the reference lines, label and key."""

    cols: list[Column]
    choices: dict[str, tuple[Any, ...]]
    ref_lines: list[str]
    label: str | None
    key: str

    def prompt(self, scenario: ir.Scenario, table: ir.Table, settings: BuildSettings, n: int, existing: str) -> str:
        return render_section(
            "seed_data", "ask", name=scenario.name, description=scenario.description,
            today=settings.clock[:10], ddl=table.ddl, refs="\n".join(self.ref_lines), n=n, table=table.name,
            columns=", ".join(c.name for c in self.cols), existing=existing, key=self.key,
        )


def _before(table: ir.Table, by_name: dict[str, ir.Table], conn: sqlite3.Connection,
            examples: Mapping[str, int]) -> list[tuple[ir.Table, int]]:
    """The tables before ``table`` (in ``by_name``'s order) that have rows, each with its example-row count
    (``examples``; every row when it has none there: rows the LLM wrote)."""
    out = []
    for name, other in by_name.items():
        if name == table.name:
            break
        n = examples.get(name) or conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0]
        if n:
            out.append((other, n))
    return out


def _table_ask(table: ir.Table, by_name: dict[str, ir.Table], conn: sqlite3.Connection,
               examples: Mapping[str, int] | None = None) -> _TableAsk:
    """The parents' keys and labels, and of each earlier sibling (a table naming two or more of the same parents,
    ``maker.sibling_tuples``) some of its rows' tuples, so that rows of this table can name those the domain
    pairs (an order for a prescribed medicine); ``examples``: the earlier tables' example-row counts."""
    cols = [c for c in table_columns(conn, table) if not c.auto_id]
    choices: dict[str, tuple[Any, ...]] = {c.name: c.enum for c in cols if c.enum}
    ref_lines = []
    for c in cols:
        if c.ref and c.ref[0] in by_name and c.ref[0] != table.name:
            values, line = parent_choices(conn, by_name[c.ref[0]], c.ref[1])
            if values:
                choices[c.name] = values
                ref_lines.append(render_section("seed_data", "refs", column=c.name, parent=c.ref[0], values=line))
    for other, columns, tuples in sibling_tuples(conn, table, table_columns(conn, table),
                                                 _before(table, by_name, conn, examples or {})):
        pairs = ", ".join("(" + ", ".join(json.dumps(v, ensure_ascii=False) for v in t) + ")" for t in tuples)
        ref_lines.append(render_section("seed_data", "sibling", columns=", ".join(columns), sibling=other,
                                        values=pairs))
    label, _ = _label_columns(table_columns(conn, table))
    key = ("\n" + render_section("seed_data", "key", columns=", ".join(table.natural_key))
           if table.natural_key else "")
    return _TableAsk(cols, choices, ref_lines, label, key)


def _parents(table: ir.Table, by_name: dict[str, ir.Table], conn: sqlite3.Connection) -> set[str]:
    return {c.ref[0] for c in table_columns(conn, table) if c.ref and c.ref[0] in by_name and c.ref[0] != table.name}


def _waits(table: ir.Table, by_name: dict[str, ir.Table], conn: sqlite3.Connection) -> set[str]:
    """The tables whose rows ``table``'s prompt shows: its parents, and the tables before it naming two or more of
    them (its earlier siblings, :func:`_table_ask`)."""
    parents = _parents(table, by_name, conn)
    out = set(parents)
    for name, other in by_name.items():
        if name == table.name:
            break
        if len(parents & _parents(other, by_name, conn)) >= 2:
            out.add(name)
    return out


def prefetch_first_rows(scenario: ir.Scenario, tables: Sequence[ir.Table], done: set[str],
                        by_name: dict[str, ir.Table], conn: sqlite3.Connection, client: LLMClientProtocol,
                        settings: BuildSettings, sent: set[str], examples: Mapping[str, int] | None = None) -> None:
    """The first request of every table in ``tables`` whose parents and earlier siblings are all seeded (``done``;
    ``examples``: their example-row counts), sent ahead (``LLMClient.prefetch``): its prompt holds only their
    rows, which no longer change, so the loop finds the reply ready when it reaches the table."""
    if not getattr(client, "prefetches", False):
        return
    calls = []
    for table in tables:
        if table.name in sent or not _waits(table, by_name, conn) <= done:
            continue
        sent.add(table.name)
        ask = _table_ask(table, by_name, conn, examples)
        n = min(settings.rows_per_call, settings.rows_per_table)
        if n < 1:
            continue
        calls.append(functools.partial(
            client.structured_reply, rows_model(table.name, ask.cols, ask.choices, n),
            user(ask.prompt(scenario, table, settings, n, "")), stage=STAGE,
            max_tokens=max(settings.max_tokens_rows, n * (8 + 12 * len(ask.cols)))))
    client.prefetch(calls)


def _seed_table(
    scenario: ir.Scenario, table: ir.Table, by_name: dict[str, ir.Table], db: sqlite_utils.Database,
    client: LLMClientProtocol, settings: BuildSettings, examples: Mapping[str, int] | None = None,
) -> tuple[int, list[ir.Rejection], int]:
    """Fill one table (``examples``: the earlier tables' example-row counts); returns (rows inserted, rejections,
    LLM attempts)."""
    conn = db.conn
    ask = _table_ask(table, by_name, conn, examples)
    cols, choices, label = ask.cols, ask.choices, ask.label
    names = [c.name for c in cols]
    rejections: list[ir.Rejection] = []
    attempts_total = 0
    target = settings.rows_per_table
    calls = -(-target // settings.rows_per_call)
    inserted_total = 0
    for _ in range(calls):
        n = min(settings.rows_per_call, target - inserted_total)
        if n < 1:
            break
        existing = ""
        if inserted_total and label:
            vals = [r[0] for r in conn.execute(f'SELECT "{label}" FROM "{table.name}" ORDER BY rowid LIMIT 30')]
            existing = "\n" + render_section("seed_data", "existing", values="; ".join(_short(v) for v in vals))
        prompt = ask.prompt(scenario, table, settings, n, existing)
        out, dropped, renamed = _ask_batch(client, settings, db, table, cols, choices, prompt, n)
        attempts_total += out.attempts
        if out.value is None:
            rejections.append(ir.Rejection(stage=STAGE, item=table.name, reason=f"no rows from one call: {out.error}",
                                           evidence={"attempts": out.attempts, "rows_asked": n}))
            continue
        inserted_total += out.value
        if renamed:
            rejections.append(ir.Rejection(
                stage=STAGE, item=table.name,
                reason=f"{len(renamed)} generated rows repeated a value of a UNIQUE column: made unique by code",
                evidence={"columns": names, "rows": renamed[:10]}))
        if dropped:
            rejections.append(ir.Rejection(
                stage=STAGE, item=table.name, reason=f"{len(dropped)} generated rows refused and dropped",
                evidence={"columns": names, "rows": [{"row": r, "error": e} for r, e in dropped[:10]]}))
    return inserted_total, rejections, attempts_total


def generate_seed(
    scenario: ir.Scenario, tables: tuple[ir.Table, ...], client: LLMClientProtocol, settings: BuildSettings
) -> StageResult[tuple[ir.SeedRows, ...]]:
    conn = _empty_db(tables)
    db = sqlite_utils.Database(conn)
    by_name = {t.name: t for t in tables}
    rejections: list[ir.Rejection] = []
    attempts = 0
    sent: set[str] = set()
    plans: dict[str, ir.RowPlan] = {}
    known: dict[str, list[str]] = {}  # every table's example texts so far, to compare a column's values with
    most: int | None = None  # the most rows a table without foreign keys may hold (a UNIQUE list ended short)
    try:
        for i, table in enumerate(tables):
            shown_so_far = {t: p.examples for t, p in plans.items()}
            prefetch_first_rows(scenario, tables[i:], {t.name for t in tables[:i]}, by_name, conn, client,
                                settings, sent, shown_so_far)
            count, rej, n_att = _seed_table(scenario, table, by_name, db, client, settings, shown_so_far)
            rejections.extend(rej)
            attempts += n_att
            if count < settings.rows_min:
                rejections.append(ir.Rejection(
                    stage=STAGE, item=table.name,
                    reason=f"table {table.name} has {count} valid rows, at least {settings.rows_min} needed"))
                return StageResult(None, tuple(rejections), attempts)
            if settings.row_generators:
                locale = next((p.locale for p in plans.values()), None)
                shown = counts.shown_most(conn, tables, {t: p.examples for t, p in plans.items()}, table.name,
                                          _similarity)
                made = rowgen.fill_table(scenario, table, conn, client, settings, locale, known, shown,
                                         [(by_name[t], p.examples) for t, p in plans.items()], most,
                                         rowgen.shown_kinds(plans.items()))
                plans[table.name] = made.plan
                rejections.extend(made.rejections)
                attempts += made.attempts
                if made.short is not None:
                    cap = balance_most(settings, made.short)
                    most = cap if most is None else min(most, cap)
                    rejections.extend(trim_to(conn, tables[:i], tables, most, plans))
                left = conn.execute(f'SELECT COUNT(*) FROM "{table.name}"').fetchone()[0]
                if left < settings.rows_min:  # its placeholder example rows dropped (rowgen.name_placeholders)
                    rejections.append(ir.Rejection(
                        stage=STAGE, item=table.name,
                        reason=f"table {table.name} has {left} rows once its placeholder examples were dropped, "
                               f"at least {settings.rows_min} needed"))
                    return StageResult(None, tuple(rejections), attempts)
        moved = timeline.respread(conn, tables, {t: p.examples for t, p in plans.items()},
                                  date.fromisoformat(settings.clock[:10]))
        rejections.extend(timeline.rejections(moved, STAGE))
        settled = counts.settle(conn, tables, {t: p.examples for t, p in plans.items()}
                                if settings.row_generators else {}, _similarity)
        rejections.extend(counts.rejections(settled, STAGE))
        summed = totals.settle(conn, tables, {t: p.examples for t, p in plans.items()}) if settings.row_generators \
            else []
        rejections.extend(totals.rejections(summed, STAGE))
        plans = {t: totals.noted(t, timeline.noted(counts.noted(t, p, settled), moved.get(t)), summed)
                 for t, p in plans.items()}
        seed = [rows_of(conn, table, plans.get(table.name)) for table in tables]
    finally:
        conn.close()
    return StageResult(tuple(seed), tuple(rejections), attempts)


def balance_most(settings: BuildSettings, short: int) -> int:
    """The most rows a table without foreign keys may hold beside one whose UNIQUE list ended at ``short`` rows: the
    spread ``entity_rows`` allows between two such tables (its high over its low), so that a library whose titles
    ran out has no twenty members a book."""
    low, high = settings.entity_rows
    return max(short, -(-short * high // max(1, low)))


def trim_to(conn: sqlite3.Connection, done: Sequence[ir.Table], tables: Sequence[ir.Table], most: int,
            plans: dict[str, ir.RowPlan]) -> list[ir.Rejection]:
    """Hold each table of ``done`` without foreign keys to ``most`` rows: its code-made rows (after its examples)
    that no row of any table names are deleted, the last first. Returns a rejection per table trimmed (kind
    ``balanced``)."""
    out = []
    for t in done:
        cols = table_columns(conn, t)
        plan = plans.get(t.name)
        if plan is None or any(c.ref is not None and c.ref[0] != t.name for c in cols) or not _has_rowid(conn, t.name):
            continue
        n = conn.execute(f'SELECT COUNT(*) FROM "{t.name}"').fetchone()[0]
        if n <= most:
            continue
        named = [(o.name, c.name, c.ref[1]) for o in tables for c in table_columns(conn, o)
                 if c.ref is not None and c.ref[0] == t.name]
        free = " AND ".join(f'NOT EXISTS (SELECT 1 FROM "{o}" x WHERE x."{c}" = t."{k}")' for o, c, k in named)
        gone = [r[0] for r in conn.execute(
            f'SELECT rowid FROM "{t.name}" t WHERE rowid NOT IN (SELECT rowid FROM "{t.name}" ORDER BY rowid '
            f'LIMIT {int(plan.examples)}){" AND " + free if free else ""} ORDER BY rowid DESC LIMIT {n - most}')]
        for rowid in gone:
            conn.execute(f'DELETE FROM "{t.name}" WHERE rowid = ?', (rowid,))
        if gone:
            out.append(ir.Rejection(
                stage=STAGE, item=t.name,
                reason=f"{t.name} held to {n - len(gone)} of its {n} rows: another table's UNIQUE list ended short "
                       f"({most} rows at most here)", evidence={"kind": "balanced", "most": most}))
    return out


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    return bool(conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                             (table,)).fetchone()[0])


def _similarity(names: Sequence[str], others: Sequence[str]) -> list[list[float]]:
    """MiniLM cosine similarities of ``names`` x ``others`` (``pipeline.stages.rows.generators``' vectors, loaded on
    first use); all zero when the model cannot load (a counter is then found from the example rows alone)."""
    vectors = rowgen._vectors()
    if vectors is None:
        return [[0.0] * len(others) for _ in names]
    return (vectors(list(names)) @ vectors(list(others)).T).tolist()  # type: ignore[no-any-return]


def generate_seed_for(scenario: ir.Scenario, env: ir.Environment, table: ir.Table, client: LLMClientProtocol,
                      settings: BuildSettings) -> ir.SeedRows | None:
    """Write the rows of one ``table`` of ``env`` again, every other table keeping its seed rows (the data
    fixer of the verify loop). None when fewer than ``settings.rows_min`` valid rows came back.

    A table is made again the way it was made, whatever ``settings.row_generators`` says: one whose rows were
    made at scale (``SeedRows.plan``) gets as many example rows as before from the LLM, then code rows from
    generators chosen again (the scenario given carries the reviewer's complaint); one whose rows the LLM wrote
    gets LLM rows only (code rows added to it alone would leave it unlike the rest of the environment)."""
    seeded = next((s for s in env.seed if s.table == table.name), None)
    if seeded is not None and seeded.plan is not None:
        settings = settings.model_copy(update={"rows_per_table": seeded.plan.examples, "row_generators": True})
    elif seeded is not None and seeded.rows:
        settings = settings.model_copy(update={"row_generators": False})
    conn = _empty_db(env.tables)
    try:
        db = sqlite_utils.Database(conn)
        for s in env.seed:
            if s.table != table.name and s.rows:
                db.table(s.table).insert_all(s.rows)
        count, _, _ = _seed_table(scenario, table, {t.name: t for t in env.tables}, db, client, settings,
                                  {s.table: s.plan.examples for s in env.seed if s.plan is not None})
        if count < settings.rows_min:
            return None
        examples = {s.table: s.plan.examples for s in env.seed if s.plan is not None and s.table != table.name}
        if not settings.row_generators:
            counts.settle(conn, env.tables, examples, _similarity, parents={table.name})
            return rows_of(conn, table)
        locale = next((s.plan.locale for s in env.seed if s.plan is not None), None)
        known = {f"{s.table}.{c}": texts for s in env.seed if s.plan is not None and s.table != table.name
                 for c, texts in semantic.text_columns(
                     {c: [r.get(c) for r in s.rows[: s.plan.examples]] for c in (s.rows[0] if s.rows else {})
                      if not any(g.column == c and g.kind == "reference" for g in s.plan.generators)}).items()}
        shown = counts.shown_most(conn, env.tables, examples, table.name, _similarity)
        before = [t for t in env.tables[:[t.name for t in env.tables].index(table.name)] if t.name in examples]
        plan = rowgen.fill_table(scenario, table, conn, client, settings, locale, known, shown,
                                 [(t, examples[t.name]) for t in before],  # follows only what it followed
                                 drawn_as=rowgen.shown_kinds((s.table, s.plan) for s in env.seed
                                                             if s.plan is not None and s.table != table.name)).plan
        if conn.execute(f'SELECT COUNT(*) FROM "{table.name}"').fetchone()[0] < settings.rows_min:
            return None  # its placeholder example rows dropped (rowgen.name_placeholders)
        # its own examples only: the other tables' moved when the environment was seeded
        moved = timeline.respread(conn, (table,), {table.name: plan.examples}, date.fromisoformat(settings.clock[:10]))
        settled = counts.settle(conn, env.tables, {**examples, table.name: plan.examples}, _similarity,
                                parents={table.name})
        return rows_of(conn, table, timeline.noted(counts.noted(table.name, plan, settled), moved.get(table.name)))
    finally:
        conn.close()


def _empty_db(tables: Sequence[ir.Table]) -> sqlite3.Connection:
    conn = scratch_db(tuple(tables))
    conn.isolation_level = None  # autocommit: sqlite-utils' atomic() blocks manage the transactions
    return conn


