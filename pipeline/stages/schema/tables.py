"""Stage 2, schema: SQLite tables (STRICT, primary and foreign keys, NOT NULL/CHECK constraints).

``generate_schema(scenario, intents, client, settings) -> StageResult[tuple[ir.Table, ...]]``.

One call writes every table's ``CREATE TABLE`` and its natural key (the column(s) a user names a row by:
a code, a number, a plate, a name, or a combination such as name + date; never the generated id, never only
references), which fills ``ir.Table.natural_key`` (an unusable declaration is left empty and recorded; the
seeded rows must then make it unique, see ``dbmodel.keys.settle_natural_keys``), and the columns that record a
personal characteristic, which are dropped unless a key relies on them (``personal.withhold_personal``, after the
tables are checked; with one more call, ``personal.ask_people``, when MiniLM classifies a column the model did not:
whose rows are people). Each statement gets
deterministic repairs that need no LLM round trip (non-STRICT type names such as ``VARCHAR(80)``/``DATE``/
``BOOLEAN`` become ``TEXT``/``INTEGER``/``REAL``; a missing ``STRICT`` is appended; CHECKs against calendar
dates, and CHECKs and DEFAULTs that read the wall clock or call ``random()``, found by parsing, are dropped;
``pipeline.dbmodel.ddl``),
then is executed in a scratch SQLite database with ``PRAGMA foreign_keys=ON`` and checked: one statement
creating the named table, ``static_checks.check_ddl`` (the authorizer: no clock or random SQL, no PRAGMA...), a
primary key, foreign keys that point at existing tables and key columns (``PRAGMA foreign_key_check``). A failing table gets its own fix conversation carrying the exact SQLite error,
at most ``max_attempts - 1`` times; a table still failing is dropped with a Rejection (and so is any
table that references a dropped one). Then the schema's shape (``links``): a table linked to no other, and an event
between records with no date, each get a conversation that mends them. The tables come out parents first.

A table the reply references but did not write (``billing_records.consultant_id REFERENCES consultants`` with no
consultants table) gets one more call that writes it (``prompts/schema.md`` ``missing``: the scenario's kinds of
record and the referencing table, continuing the schema conversation), checked like the others, while the schema
has fewer than ``tables_max`` tables; otherwise the link is dropped (the column stays) and a Rejection names the
table, the column and the missing table. References are resolved as SQLite does, without regard to case or quotes.

The ask lists the scenario's kinds of record (``Scenario.entities``) and asks a table for each. An entity no table
keeps (MiniLM similarity of the entity with the tables' names, one entity per table: ``pipeline.meaning.kinds``)
gets one more call that writes its table (``prompts/schema.md`` ``kind``, continuing the schema conversation),
checked in SQLite with the other tables, while the schema has fewer than ``tables_max`` tables; an entity left
without a table gets a Rejection naming it and why.

Also the schema introspection the later stages share: :func:`scratch_db`, :func:`table_columns`.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.ddl import connect, ddl_table_name, normalise_ddl, paren_balance, scratch_db  # noqa: F401 (scratch_db re-exported)
from pipeline.dbmodel.keynames import fix_key_names
from pipeline.embed import EmbeddingError
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import kinds
from pipeline.meaning.assign import similarities
from pipeline.meaning.goals import words
from pipeline.runtime import static_checks
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_min, ask_with_feedback, budget, render_section, user
from pipeline.stages.schema.links import islands, parents, settle_links
from pipeline.stages.schema.personal import ask_people, withhold_personal

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
_OPEN, _CLOSE = r"[\"`\[]?", r"[\"`\]]?"
_AFTER_NAME = r"(?![A-Za-z0-9_])"


def _foreign_keys(ddl: str, name: str) -> list[tuple[Any, ...]] | None:
    """``PRAGMA foreign_key_list`` of ``ddl`` created alone (SQLite accepts a REFERENCES to a missing table at
    CREATE time), or None when SQLite refuses the statement (the fix conversation handles that)."""
    conn = connect()
    try:
        conn.execute(ddl)
        return list(conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall())
    except sqlite3.Error:
        return None
    finally:
        conn.close()


class Dangling(NamedTuple):
    """A foreign key to a table the schema does not have: ``table(columns) REFERENCES parent(to)``."""

    table: str
    columns: tuple[str, ...]
    parent: str
    to: tuple[str | None, ...]

    def sql(self) -> str:
        to = "" if None in self.to else f"({', '.join(str(c) for c in self.to)})"
        return f"{self.table}({', '.join(self.columns)}) REFERENCES {self.parent}{to}"


def dangling_references(current: dict[str, str]) -> list[Dangling]:
    """The foreign keys of ``current`` (name -> DDL) to tables it does not have, in table order. SQLite resolves
    table names without regard to case or quotes, and so does this: ``REFERENCES "Members"`` is not dangling
    when ``members`` exists (:func:`canonical_references` then writes it as ``members``)."""
    have = {n.lower() for n in current}
    out: list[Dangling] = []
    for name, ddl in current.items():
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for fk in _foreign_keys(ddl, name) or []:
            if str(fk[2]).lower() not in have:
                groups.setdefault(fk[0], []).append(fk)
        for _, rows in sorted(groups.items(), reverse=True):  # SQLite lists the last one written first
            out.append(Dangling(name, tuple(r[3] for r in rows), rows[0][2], tuple(r[4] for r in rows)))
    return out


def canonical_references(current: dict[str, str]) -> dict[str, str]:
    """Write each REFERENCES to a table of ``current`` with the table's and its columns' names as created:
    ``REFERENCES "Members"(Member_ID)`` becomes ``REFERENCES members(member_id)`` when ``members(member_id)``
    exists. SQLite accepts either; the checks here and the later stages compare names exactly."""
    by_lower = {n.lower(): n for n in current}
    columns: dict[str, dict[str, str]] = {}
    conn = connect()
    try:
        for n, ddl in current.items():
            try:
                conn.execute(ddl)
            except sqlite3.Error:
                continue
            columns[n] = {r[1].lower(): r[1] for r in conn.execute(f'PRAGMA table_info("{n}")').fetchall()}
    finally:
        conn.close()
    out = dict(current)
    for name, ddl in current.items():
        written = {str(fk[2]) for fk in _foreign_keys(ddl, name) or []}
        new = ddl
        for parent in sorted(written):
            canon = by_lower.get(parent.lower())
            if canon is None:
                continue
            cols = columns.get(canon, {})

            def fix(m: re.Match[str], canon: str = canon, cols: dict[str, str] = cols) -> str:
                names = None if m.group(4) is None else [c.strip() for c in m.group(4).split(",")]
                fixed = None if names is None else [cols.get(c.strip('"`[]').lower(), c) for c in names]
                if m.group(2) == canon and fixed == names:
                    return m.group(0)  # as created already: the statement keeps its bytes
                return m.group(1) + canon + ("" if fixed is None else f"{m.group('gap')}({', '.join(fixed)})")

            new = re.sub(rf"(\bREFERENCES\s+){_OPEN}({re.escape(parent)}){_CLOSE}{_AFTER_NAME}"
                         rf"(?:(?P<gap>\s*)\(([^)]*)\))?", fix, new, flags=re.I)
        if new != ddl:
            out[name] = new
    return out


def drop_dangling_references(current: dict[str, str]) -> dict[str, str]:
    """Remove foreign keys to tables the schema does not have (``orders.customer_name REFERENCES customers``
    when no customers table was written): the column stays, the link goes. Without this the table fails and
    is dropped, and with it often the application's central table (seen from the 1.5B model). The stage first
    asks for each missing table once (:func:`write_missing_tables`) and records every link it drops
    (:func:`dangling_notes`)."""
    out = dict(current)
    have = {n.lower() for n in current}
    for name, ddl in current.items():
        fks = _foreign_keys(ddl, name)
        if fks is None:
            continue
        missing = sorted({str(fk[2]) for fk in fks if str(fk[2]).lower() not in have})
        new = ddl
        for parent in missing:
            p = re.escape(parent)
            new = re.sub(rf",\s*(?:CONSTRAINT\s+\w+\s+)?FOREIGN\s+KEY\s*\([^)]*\)\s*REFERENCES\s+{_OPEN}{p}{_CLOSE}"
                         rf"{_AFTER_NAME}\s*(?:\([^)]*\))?{_FK_ACTIONS}", "", new, flags=re.I)
            new = re.sub(rf"\s+REFERENCES\s+{_OPEN}{p}{_CLOSE}{_AFTER_NAME}\s*(?:\([^)]*\))?{_FK_ACTIONS}", "", new,
                         flags=re.I)
        if new != ddl:
            out[name] = new
    return out


def dangling_notes(current: dict[str, str], why: dict[str, str]) -> list[ir.Rejection]:
    """One rejection per foreign key :func:`drop_dangling_references` is about to drop, naming the table, the
    column and the missing table; ``why`` (missing table, lower case -> text) says why it was not written."""
    out = []
    for d in dangling_references(current):
        reason = why.get(d.parent.lower(), "no table was asked for it")
        out.append(ir.Rejection(
            stage=STAGE, item=f"{d.table}.{', '.join(d.columns)}",
            reason=(f"foreign key {d.sql()} dropped, the column kept without its link: the schema has no table "
                    f"{d.parent} ({reason})"),
            evidence={"table": d.table, "column": ", ".join(d.columns), "missing_table": d.parent}))
    return out


def _link_error(tables: dict[str, str], child: str, parent: str) -> str | None:
    """Why ``child``'s foreign keys to ``parent`` do not point at a key of ``parent`` (its PRIMARY KEY or a UNIQUE
    column set), or None; ``tables`` (name -> DDL) are created together."""
    conn = connect()
    try:
        for ddl in tables.values():
            try:
                conn.execute(ddl)
            except sqlite3.Error:
                continue
        pcols = {r[1].lower() for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall()}
        keys = [{c.lower() for c in k} for k in _key_sets(conn, parent)]
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for fk in conn.execute(f'PRAGMA foreign_key_list("{child}")').fetchall():
            if str(fk[2]).lower() == parent.lower():
                groups.setdefault(fk[0], []).append(fk)
        for rows in groups.values():
            dst = [r[4] for r in rows]
            if None in dst:
                if not keys or len(keys[0]) != len(rows):
                    return f"{child}({', '.join(r[3] for r in rows)}) REFERENCES {parent}: its PRIMARY KEY does not match"
                continue
            absent = [d for d in dst if d.lower() not in pcols]
            if absent:
                return f"{parent} has no column {', '.join(absent)}, which {child} references"
            if {d.lower() for d in dst} not in keys:
                return (f"{child} references {parent}({', '.join(dst)}), which must be the PRIMARY KEY or a UNIQUE "
                        f"column of {parent}")
    finally:
        conn.close()
    return None


def _write_missing(
    client: LLMClientProtocol, settings: BuildSettings, scenario: ir.Scenario, conv: list[dict[str, Any]],
    current: dict[str, str], parent: str, refs: list[Dangling],
) -> tuple[tuple[str, TableItem] | None, str | None]:
    """One LLM call for the missing table ``parent``, continuing the schema conversation; the table (its name as
    created, the reply with the repaired DDL) or why not. Validated in SQLite with the other tables: its own
    checks, and every reference to it points at a key of it."""
    key = {", ".join(str(c) for c in r.to) for r in refs if None not in r.to}
    kinds = render_section("schema", "missing_kinds", entities=", ".join(scenario.entities)) \
        if scenario.entities else ""
    prompt = render_section(
        "schema", "missing", table=parent, references="\n".join(r.sql() for r in refs),
        referencing="\n".join(dict.fromkeys(current[r.table] for r in refs)), kinds=kinds,
        key=" / ".join(sorted(key)) if key else "PRIMARY KEY")
    try:
        reply, _raw = client.structured_reply(TableItem, conv + user(prompt), stage=STAGE,
                                              max_tokens=budget(settings.max_tokens_schema, 300, 1))
    except LLMUnavailable:
        raise
    except LLMError as e:
        return None, f"the call that was to write it gave no usable reply: {e}"
    ddl = normalise_ddl(reply.ddl)
    name = ddl_table_name(ddl)
    if name is None or name.lower() != parent.lower():
        return None, f"the call that was to write it wrote {name or 'no CREATE TABLE'} instead: {reply.ddl}"
    trial = drop_dangling_references(canonical_references({**current, name: ddl}))
    error = check_tables(list(trial.items()))[name]
    for r in refs:
        error = error or _link_error(trial, r.table, name)
    if error is not None:
        return None, f"the table its call wrote failed: {error}; {ddl}"
    return (name, reply.model_copy(update={"ddl": ddl})), None


def write_missing_tables(
    client: LLMClientProtocol, settings: BuildSettings, scenario: ir.Scenario, conv: list[dict[str, Any]],
    current: dict[str, str],
) -> tuple[list[tuple[str, TableItem]], dict[str, str], int]:
    """For each table the schema references but does not have (``billing_records.consultant_id REFERENCES
    consultants`` with no consultants table: the domain's consultants would be bare numbers), one more call
    writes it, while the schema has fewer than ``tables_max`` tables. Returns the tables written (name, reply
    with the repaired DDL), why each other missing table was not written (lower-case name -> text, for
    :func:`dangling_notes`), and the LLM calls made."""
    refs = dangling_references(current)
    parents: dict[str, list[Dangling]] = {}
    for r in refs:
        parents.setdefault(r.parent.lower(), []).append(r)
    added: list[tuple[str, TableItem]] = []
    why: dict[str, str] = {}
    calls = 0
    for low, mine in parents.items():
        have = len(current) + len(added)
        if have >= settings.tables_max:
            why[low] = f"the schema already has {have} tables, its tables_max, so none was asked for"
            continue
        calls += 1
        table, error = _write_missing(client, settings, scenario, conv,
                                      {**current, **{n: t.ddl for n, t in added}}, mine[0].parent, mine)
        if table is None:
            why[low] = error or ""
        else:
            added.append(table)
    return added, why, calls


def _write_kind(
    client: LLMClientProtocol, settings: BuildSettings, conv: list[dict[str, Any]], current: dict[str, str],
    entity: str,
) -> tuple[tuple[str, TableItem] | None, str | None]:
    """One LLM call for the table of ``entity`` (a kind of record no table keeps), continuing the schema
    conversation; the table (its name as created, the reply with the repaired DDL) or why not. Validated in SQLite
    with the other tables (its references to them included); it must be a new table."""
    prompt = render_section("schema", "kind", entity=entity)
    try:
        reply, _raw = client.structured_reply(TableItem, conv + user(prompt), stage=STAGE,
                                              max_tokens=budget(settings.max_tokens_schema, 300, 1))
    except LLMUnavailable:
        raise
    except LLMError as e:
        return None, f"the call that was to write its table gave no usable reply: {e}"
    ddl = normalise_ddl(reply.ddl)
    name = ddl_table_name(ddl)
    if name is None:
        return None, f"the call that was to write its table wrote no CREATE TABLE: {reply.ddl}"
    if name.lower() in {n.lower() for n in current}:
        return None, f"the call that was to write its table wrote {name}, which the schema has already"
    trial = drop_dangling_references(canonical_references({**current, name: ddl}))
    error = check_tables(list(trial.items()))[name]
    if error is not None:
        return None, f"the table its call wrote failed: {error}; {ddl}"
    return (name, reply.model_copy(update={"ddl": ddl})), None


def write_kind_tables(
    client: LLMClientProtocol, settings: BuildSettings, scenario: ir.Scenario, conv: list[dict[str, Any]],
    current: dict[str, str], encode: kinds.Encode | None = kinds.default_encode,
) -> tuple[list[tuple[str, TableItem]], list[ir.Rejection], int, list[str]]:
    """For each of the scenario's kinds of record (``Scenario.entities``) that no table keeps (MiniLM similarity of
    the entity with the tables' names, one entity per table: ``pipeline.meaning.kinds``), one more call writes its
    table, while the schema has fewer than ``tables_max`` tables (the bike sharing's docks and rides, the parking
    garage's spaces and permits, were left out and "orders" and "visits" written instead), or in place of a table
    that keeps no kind and that no table references (:func:`spare_table`) when the schema has ``tables_max``.
    Returns the tables written, a Rejection for each entity left without a table (why) and for each table given up,
    the LLM calls made, and the names of the tables given up. ``encode=None``, or MiniLM that cannot load, checks
    nothing (a note says why)."""
    if not scenario.entities or encode is None:
        return [], [], 0, []
    try:
        missing = kinds.missing_kinds(scenario.entities, list(current), encode)
    except EmbeddingError as e:
        return [], [ir.Rejection(stage=STAGE, item=scenario.name,
                                 reason=f"the kinds of record were not checked against the tables: {e}")], 0, []
    added: list[tuple[str, TableItem]] = []
    dropped: list[str] = []
    notes: list[ir.Rejection] = []
    calls = 0
    for entity in missing:
        remaining = {n: d for n, d in current.items() if n not in dropped}
        have = len(remaining) + len(added)
        spare = spare_table(remaining, scenario.entities, encode) if have >= settings.tables_max else None
        if have >= settings.tables_max and spare is None:
            why = f"the schema already has {have} tables, its tables_max, so none was asked for"
        else:
            calls += 1
            kept = {n: d for n, d in remaining.items() if n != spare}
            table, error = _write_kind(client, settings, conv, {**kept, **{n: t.ddl for n, t in added}}, entity)
            if table is not None:
                added.append(table)
                if spare is not None:
                    dropped.append(spare)
                    notes.append(ir.Rejection(
                        stage=STAGE, item=spare, evidence={"entity": entity, "tables_max": settings.tables_max},
                        reason=f"table {spare!r} dropped for the scenario's kind of record {entity!r}: the schema had "
                               f"{have} tables, its tables_max, and {spare!r} keeps none of the scenario's kinds and "
                               "no table references it"))
                continue
            why = error or ""
        notes.append(ir.Rejection(
            stage=STAGE, item=entity,
            reason=f"the scenario's kind of record {entity!r} has no table ({why})",
            evidence={"entity": entity, "tables": [*(n for n in current if n not in dropped), *(n for n, _ in added)]}))
    return added, notes, calls, dropped


def spare_table(current: dict[str, str], entities: list[str], encode: kinds.Encode) -> str | None:
    """A table of ``current`` that may give its place to a kind of record the schema lacks, or None: one that keeps
    none of the scenario's ``entities`` (``pipeline.meaning.kinds``) and that no other table references (dropping it
    breaks no reference): first one whose removal leaves no table linked to nothing, then the least like any entity;
    a car rental's ``orders`` (copied from the ask's key example) beside its customers, branches, vehicles and rental
    agreements, when its damages have no table (the real model, 2026-11-30: its customers, linked to ``orders``
    alone, were then dropped as an island by the link step)."""
    matches = kinds.match_kinds(entities, list(current), encode)
    keeping = {m.table for m in matches if m.table is not None}
    referenced = {p for ps in parents(current).values() for p in ps}
    free = [n for n in current if n not in keeping and n not in referenced]
    if not free:
        return None
    before = set(islands(current))

    def new_islands(gone: str) -> int:
        return len(set(islands({n: d for n, d in current.items() if n != gone})) - before)

    likeness = similarities(encode, [words(n) for n in free], list(entities))
    return min(zip(free, likeness, strict=True), key=lambda f: (new_islands(f[0]), max(f[1], default=0.0)))[0]


def validate(current: dict[str, str]) -> tuple[dict[str, str], dict[str, str | None]]:
    """``current`` (name -> DDL) with its references written as created, and per table its error or None."""
    current = canonical_references(current)
    return current, check_tables(list(current.items()))


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
    scenario: ir.Scenario, intents: tuple[Intent, ...], client: LLMClientProtocol, settings: BuildSettings,
    encode: kinds.Encode | None = kinds.default_encode,
) -> StageResult[tuple[ir.Table, ...]]:
    listed = render_section("schema", "ask_kinds", entities=", ".join(scenario.entities)) + "\n" \
        if scenario.entities else ""
    prompt = render_section(
        "schema", "ask", name=scenario.name, description=scenario.description,
        intents="\n".join(f"- {i.goal} ({i.kind})" for i in intents), kinds=listed,
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

    conv = messages + [{"role": "assistant", "content": raw.content}]
    current = canonical_references(current)
    added, why, calls = write_missing_tables(client, settings, scenario, conv, current)
    attempts += calls
    for name, item in added:
        current[name] = item.ddl
        keys[name] = list(item.natural_key)
        personal[name] = list(item.personal)
    current = canonical_references(current)
    added, kind_notes, calls, spared = write_kind_tables(client, settings, scenario, conv, current, encode)
    attempts += calls
    rejections.extend(kind_notes)
    for name in spared:
        current.pop(name, None)
        keys.pop(name, None)
        personal.pop(name, None)
    for name, item in added:
        current[name] = item.ddl
        keys[name] = list(item.natural_key)
        personal[name] = list(item.personal)
    current = canonical_references(current)
    rejections.extend(dangling_notes(current, why))
    current = drop_dangling_references(current)
    errors = check_tables(list(current.items()))
    if settings.max_attempts >= 2:
        for name in list(current):
            if errors.get(name) is None:
                continue
            fixed, n = _fix_table(client, settings, conv, current, errors, name)
            attempts += n
            if fixed is not None:
                current[name] = fixed
                errors = check_tables(list(current.items()))

    kept, dropped = settle(current)
    for name, ddl, reason in dropped:
        rejections.append(ir.Rejection(stage=STAGE, item=name, reason=reason,
                                       evidence={"ddl": ddl, "attempts": settings.max_attempts}))
    kept, link_notes, calls = settle_links(client, settings, conv, kept, validate)  # islands linked, events dated
    rejections.extend(link_notes)
    attempts += calls
    tables = order_tables([ir.Table(name=n, ddl=d) for n, d in kept.items()])
    if settings.fix_key_names:
        tables, keys, renamed = fix_key_names(tables, keys, check_tables)
        rejections.extend(renamed)
        personal = _follow_renames(personal, renamed)
    asked: list[int] = []

    def people(ts: list[ir.Table]) -> dict[str, bool] | str:
        asked.append(1)
        return ask_people(client, ts)

    tables, keys, personal_notes = withhold_personal(tables, personal, keys, check_tables, people=people)
    attempts += len(asked)
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
