"""Stage 2, schema: SQLite tables (STRICT, primary and foreign keys, NOT NULL/CHECK constraints).

``generate_schema(scenario, intents, client, settings) -> StageResult[tuple[ir.Table, ...]]``.

One call writes every table's ``CREATE TABLE`` and its natural key (the column(s) a user names a row by:
a code, a number, a plate, a name, or a combination such as name + date; never the generated id, never only
references), which fills ``ir.Table.natural_key`` (an unusable declaration is left empty and recorded; the
seeded rows must then make it unique, see ``dbmodel.keys.settle_natural_keys``), and the columns that record a
personal characteristic, which are dropped unless a key relies on them (``personal.withhold_personal``, after the
tables are checked). Each statement gets
deterministic repairs that need no LLM round trip (non-STRICT type names such as ``VARCHAR(80)``/``DATE``/
``BOOLEAN`` become ``TEXT``/``INTEGER``/``REAL``; a missing ``STRICT`` is appended; CHECKs against calendar
dates, and CHECKs and DEFAULTs that read the wall clock or call ``random()``, found by parsing, are dropped;
``pipeline.dbmodel.ddl``),
then is executed in a scratch SQLite database with ``PRAGMA foreign_keys=ON`` and checked: one statement
creating the named table, ``static_checks.check_ddl`` (the authorizer: no clock or random SQL, no PRAGMA...), a
primary key, foreign keys that point at existing tables and key columns (``PRAGMA foreign_key_check``). A failing table gets its own fix conversation carrying the exact SQLite error,
at most ``max_attempts - 1`` times; a table still failing is dropped with a Rejection (and so is any
table that references a dropped one). The tables come out parents first.

Also the schema introspection the later stages share: :func:`scratch_db`, :func:`table_columns`.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.ddl import connect, ddl_table_name, normalise_ddl, paren_balance, scratch_db  # noqa: F401 (scratch_db re-exported)
from pipeline.dbmodel.keynames import fix_key_names
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.runtime import static_checks
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_min, ask_with_feedback, budget, render_section, user
from pipeline.stages.schema.personal import ask_personal, withhold_personal

if TYPE_CHECKING:
    from pipeline.ir import Intent
    from pipeline.settings import BuildSettings

STAGE = "schema"


class TableItem(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    ddl: str
    natural_key: list[str] = Field(min_length=1, max_length=3)
    """The column(s) a user names a row by: a code, a number, a plate, a name, or a combination."""
    personal: list[str] = Field(default_factory=list, max_length=10)
    """Columns that record a personal characteristic of someone (gender, ethnicity, religion, nationality, marital
    status, disability, pregnancy): the model's classification; code drops them (``personal.withhold_personal``) but
    for a key, on which no rule then turns."""


class DdlFix(BaseModel):
    ddl: str


@cache
def reply_model(lo: int, hi: int) -> type[BaseModel]:
    return create_model("SchemaReply", tables=(list[TableItem], Field(min_length=lo, max_length=hi)),
                        __base__=BaseModel)


# ------------------------------------------------------------------ deterministic repairs

# ------------------------------------------------------------------ checking in SQLite


def check_tables(items: list[tuple[str, str]]) -> dict[str, str | None]:
    """Execute every ``(name, ddl)`` in a fresh SQLite database and check it; name -> error or None.

    A table whose foreign key points at a table of ``items`` that itself failed gets no error here
    (it is not at fault); :func:`settle` drops it if that parent is dropped for good.
    """
    conn = connect()
    errors: dict[str, str | None] = {}
    try:
        for name, ddl in items:
            errors[name] = _create(conn, name, ddl)
        made = {n for n, e in errors.items() if e is None}
        failed = {n for n, e in errors.items() if e is not None}
        for name in [n for n, _ in items if n in made]:
            errors[name] = _check_created(conn, name, made, failed)
    finally:
        conn.close()
    return errors


def _create(conn: sqlite3.Connection, name: str, ddl: str) -> str | None:
    if ";" in ddl:
        return "the ddl must be exactly one CREATE TABLE statement (no ';', no other statements)"
    got = ddl_table_name(ddl)
    if got is None:
        return "the ddl must start with CREATE TABLE"
    if got != name:
        return f"the statement creates table {got!r} but the table is named {name!r}"
    try:
        conn.execute(ddl)
    except sqlite3.Error as e:
        extra = -paren_balance(ddl)
        hint = f" (the statement has {extra} more ')' than '(': a ')' closes the column list early)" \
            if extra > 0 else ""
        return str(e) + hint
    conn.execute(f'DROP TABLE "{name}"')  # check_ddl wants the tables it may reference, not its own
    problems = ddl_problems(conn, ddl)
    conn.execute(ddl)
    return "; ".join(problems) if problems else None


def ddl_problems(conn: sqlite3.Connection, ddl: str) -> list[str]:
    """What SQLite's authorizer finds wrong with ``ddl`` (``static_checks.check_ddl``: wall-clock or random SQL,
    PRAGMA, ATTACH...), on ``conn`` holding the tables ``ddl`` may reference."""
    return list(static_checks.check_ddl(conn, ddl))


def _check_created(conn: sqlite3.Connection, name: str, made: set[str], failed: set[str]) -> str | None:
    info = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
    if not any(r[5] for r in info):
        return f"table {name} has no PRIMARY KEY"
    strict = conn.execute("SELECT strict FROM pragma_table_list WHERE name = ?", (name,)).fetchone()
    if not strict or not strict[0]:
        return f"table {name} is not STRICT"
    for fk in conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall():
        parent, col, to = fk[2], fk[3], fk[4]
        if parent in failed:
            continue
        if parent not in made:
            return (f"FOREIGN KEY {name}.{col} references table {parent}, which does not exist "
                    f"(tables: {', '.join(sorted(made))})")
        pcols = [r[1] for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall()]
        if to is not None and to not in pcols:
            return f"FOREIGN KEY {name}.{col} references column {parent}.{to}, which does not exist"
    if not any(fk[2] in failed for fk in conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall()):
        try:
            conn.execute(f'PRAGMA foreign_key_check("{name}")').fetchall()
        except sqlite3.Error as e:
            return str(e) + _mismatch_hint(conn, name)
    return None


def _key_sets(conn: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    """Column sets a foreign key may point at: the primary key and each UNIQUE index."""
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    out = [tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))]
    for idx in conn.execute(f'PRAGMA index_list("{table}")').fetchall():
        if idx[2]:
            out.append(tuple(r[2] for r in conn.execute(f'PRAGMA index_info("{idx[1]}")').fetchall()))
    return [k for k in out if k]


def _mismatch_hint(conn: sqlite3.Connection, name: str) -> str:
    """Which foreign key SQLite's terse 'foreign key mismatch' is about, and what it must point at."""
    groups: dict[int, list[tuple]] = {}
    for fk in conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall():
        groups.setdefault(fk[0], []).append(fk)
    for rows in groups.values():
        parent = rows[0][2]
        src = tuple(r[3] for r in rows)
        dst = tuple(r[4] for r in rows)
        keys = _key_sets(conn, parent)
        if None in dst or set(dst) in [set(k) for k in keys]:
            continue
        pk = ", ".join(keys[0]) if keys else "its PRIMARY KEY"
        return (f" (FOREIGN KEY ({', '.join(src)}) REFERENCES {parent}({', '.join(dst)}): the referenced "
                f"column(s) must be the PRIMARY KEY or a UNIQUE column of {parent}, e.g. {parent}({pk}))")
    return ""


def order_tables(tables: list[ir.Table]) -> list[ir.Table]:
    """Parents before children (stable: ties keep the given order; cycles keep it too)."""
    conn = scratch_db(tables)
    try:
        deps = {t.name: {r[2] for r in conn.execute(f'PRAGMA foreign_key_list("{t.name}")')} - {t.name}
                for t in tables}
    finally:
        conn.close()
    out: list[ir.Table] = []
    left = list(tables)
    while left:
        done = {t.name for t in out}
        ready = [t for t in left if deps[t.name] <= done]
        pick = ready[0] if ready else left[0]
        out.append(pick)
        left.remove(pick)
    return out


# ------------------------------------------------------------------ the stage


def _valid_listing(current: dict[str, str], errors: dict[str, str | None]) -> str:
    ok = [ddl for n, ddl in current.items() if errors.get(n) is None]
    return "\n".join(ok) if ok else "(none yet)"


_FK_ACTIONS = r"(?:\s+ON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT|RESTRICT|NO\s+ACTION))*"


def drop_dangling_references(current: dict[str, str]) -> dict[str, str]:
    """Remove foreign keys to tables the schema does not have (``orders.customer_name REFERENCES customers``
    when no customers table was written): the column stays, the link goes. Without this the table fails and
    is dropped, and with it often the application's central table (seen from the 1.5B model); asking the
    model to fix one table cannot add the missing one."""
    out = dict(current)
    conn = connect()
    try:
        for name, ddl in current.items():
            try:
                conn.execute(ddl)  # SQLite accepts a REFERENCES to a missing table at CREATE time
                fks = conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall()
                conn.execute(f'DROP TABLE "{name}"')
            except sqlite3.Error:
                continue
            missing = sorted({fk[2] for fk in fks if fk[2] not in current})
            new = ddl
            for parent in missing:
                p = re.escape(parent)
                new = re.sub(rf",\s*(?:CONSTRAINT\s+\w+\s+)?FOREIGN\s+KEY\s*\([^)]*\)\s*REFERENCES\s+[\"`]?{p}[\"`]?"
                             rf"\s*(?:\([^)]*\))?{_FK_ACTIONS}", "", new, flags=re.I)
                new = re.sub(rf"\s+REFERENCES\s+[\"`]?{p}[\"`]?\s*(?:\([^)]*\))?{_FK_ACTIONS}", "", new,
                             flags=re.I)
            if new != ddl:
                out[name] = new
    finally:
        conn.close()
    return out


def settle(current: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """Drop failing tables until the rest is consistent; returns (kept, [(name, ddl, reason)])."""
    kept = dict(current)
    dropped: list[tuple[str, str, str]] = []
    while True:
        errors = check_tables(list(kept.items()))
        bad = [(n, e) for n, e in errors.items() if e is not None]
        if not bad:
            return kept, dropped
        for n, e in bad:
            dropped.append((n, kept.pop(n), e or ""))
        # Children of a dropped table now fail with "references table X, which does not exist".


def _fix_table(
    client: LLMClientProtocol, settings: BuildSettings, conv: list[dict[str, Any]], current: dict[str, str],
    errors: dict[str, str | None], name: str,
) -> tuple[str | None, int]:
    """The fix conversation for one failing table: (fixed DDL or None, LLM attempts)."""
    valid = _valid_listing(current, errors)

    def ask(error: str | None) -> str:
        return render_section("schema", "fix", table=name, error=error, valid=valid)

    def check_fix(r: DdlFix) -> tuple[str | None, str | None]:
        ddl = normalise_ddl(r.ddl)
        trial = dict(current)
        trial[name] = ddl
        err = check_tables(list(trial.items()))[name]
        return (ddl, None) if err is None else (None, err)

    out = ask_with_feedback(
        client, DdlFix, conv + user(ask(errors[name])), check_fix, stage=STAGE,
        max_attempts=settings.max_attempts - 1, retry_temperature=settings.retry_temperature,
        max_tokens=settings.max_tokens_schema, feedback=ask,
    )
    return out.value, out.attempts


def natural_key_columns(conn: sqlite3.Connection, table: ir.Table, declared: list[str]) -> tuple[list[str], str | None]:
    """The declared natural key as the table's own column names, or ``([], why not)``.

    A natural key is what users know a row by; the generated integer id is a surrogate and never part of one. A
    key may combine a foreign key with the row's own values (a person + a date) or with another foreign key (the
    loan of a book to a member: both parents are named by their own keys), but one reference alone is not a key."""
    cols = table_columns(conn, table)
    by_lower = {c.name.lower(): c for c in cols}
    picked: list[Column] = []
    for raw in declared:
        col = by_lower.get(raw.strip().strip('"`[]').lower())
        if col is None:
            return [], (f"natural key column {raw!r} is not a column of {table.name} "
                        f"(columns: {', '.join(c.name for c in cols)})")
        if col.auto_id:
            return [], f"natural key column {col.name} is the generated row id, which users do not know"
        if col not in picked:
            picked.append(col)
    if not picked:
        return [], "no natural key declared"
    if len(picked) == 1 and picked[0].ref is not None:  # two references do name a row (a member's loan of a book)
        return [], f"natural key {picked[0].name} is only a reference to another row"
    return [c.name for c in picked], None


def declare_natural_keys(tables: list[ir.Table], declared: dict[str, list[str]]
                         ) -> tuple[list[ir.Table], list[ir.Rejection]]:
    """Fill ``Table.natural_key`` from the reply's declarations; an unusable one is left empty (code then finds
    a key in the seeded data) and recorded."""
    conn = scratch_db(tables)
    out, rejections = [], []
    try:
        for t in tables:
            cols, why = natural_key_columns(conn, t, declared.get(t.name, []))
            if why is not None:
                rejections.append(ir.Rejection(stage=STAGE, item=t.name, reason=f"natural key not kept: {why}",
                                               evidence={"declared": declared.get(t.name, [])}))
            out.append(t.model_copy(update={"natural_key": cols}))
    finally:
        conn.close()
    return out, rejections


def _follow_renames(personal: dict[str, list[str]], renamed: list[ir.Rejection]) -> dict[str, list[str]]:
    """The reply's ``personal`` names after ``fix_key_names`` renamed foreign-key columns (its notes' evidence)."""
    new = {(str(r.evidence["table"]), str(r.evidence["column"]).lower()): str(r.evidence["renamed"])
           for r in renamed if {"table", "column", "renamed"} <= r.evidence.keys()}
    return {t: [new.get((t, c.strip().strip('"`[]').lower()), c) for c in cols] for t, cols in personal.items()}


def generate_schema(
    scenario: ir.Scenario, intents: tuple[Intent, ...], client: LLMClientProtocol, settings: BuildSettings
) -> StageResult[tuple[ir.Table, ...]]:
    prompt = render_section(
        "schema", "ask", name=scenario.name, description=scenario.description,
        intents="\n".join(f"- {i.goal} ({i.kind})" for i in intents),
        min=ask_min(settings.tables_min, settings.tables_max), max=settings.tables_max,
    )
    messages = user(prompt)
    rejections: list[ir.Rejection] = []
    model = reply_model(ask_min(settings.tables_min, settings.tables_max), settings.tables_max)
    max_tokens = budget(settings.max_tokens_schema, 300, settings.tables_max)
    try:
        reply, raw = client.structured_reply(model, messages, stage=STAGE, max_tokens=max_tokens)
    except LLMUnavailable:
        raise
    except LLMError as e:
        rej = ir.Rejection(stage=STAGE, item=scenario.name, reason=f"no usable schema reply: {e}")
        return StageResult(None, (rej,), 1)
    attempts = 1
    current: dict[str, str] = {}
    keys: dict[str, list[str]] = {}
    personal: dict[str, list[str]] = {}
    for item in reply.tables:  # type: ignore[attr-defined]
        ddl = normalise_ddl(item.ddl)
        name = ddl_table_name(ddl) or item.name  # trust the statement over the label
        if name in current:
            rejections.append(ir.Rejection(stage=STAGE, item=name, reason="duplicate table name in the reply",
                                           evidence={"ddl": item.ddl}))
            continue
        current[name] = ddl
        keys[name] = list(item.natural_key)
        personal[name] = list(item.personal)

    current = drop_dangling_references(current)
    errors = check_tables(list(current.items()))
    if settings.max_attempts >= 2:
        for name in list(current):
            if errors.get(name) is None:
                continue
            conv = messages + [{"role": "assistant", "content": raw.content}]
            fixed, n = _fix_table(client, settings, conv, current, errors, name)
            attempts += n
            if fixed is not None:
                current[name] = fixed
                errors = check_tables(list(current.items()))

    kept, dropped = settle(current)
    for name, ddl, reason in dropped:
        rejections.append(ir.Rejection(stage=STAGE, item=name, reason=reason,
                                       evidence={"ddl": ddl, "attempts": settings.max_attempts}))
    tables = order_tables([ir.Table(name=n, ddl=d) for n, d in kept.items()])
    if settings.fix_key_names:
        tables, keys, renamed = fix_key_names(tables, keys, check_tables)
        rejections.extend(renamed)
        personal = _follow_renames(personal, renamed)
    tables, keys, personal_notes = withhold_personal(
        tables, personal, keys, check_tables,
        ask=(lambda cols: ask_personal(client, cols)) if settings.personal_question else None)
    rejections.extend(personal_notes)
    tables, key_rejections = declare_natural_keys(tables, keys)
    rejections.extend(key_rejections)
    if len(tables) < settings.tables_min:
        rejections.append(ir.Rejection(
            stage=STAGE, item=scenario.name,
            reason=f"only {len(tables)} valid tables, at least {settings.tables_min} needed",
            evidence={"valid": [t.name for t in tables]}))
        return StageResult(None, tuple(rejections), attempts)
    return StageResult(tuple(tables), tuple(rejections), attempts)
