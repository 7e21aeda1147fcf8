"""What a domain expert expects of a schema's shape, checked by structure, in any language: every table linked to
another, and every event between records dated. Fed back to the schema's model like SQLite's own errors.

Two faults no seeded row can repair (the reader's audit of 2026-11-29, ``benchmarks/results/
reader_audit_2026-11-29_outside.md``):

- **Islands** (:func:`islands`): a table that references no other table and that no other table references, in a
  schema of more than one table. A clinical-trials schema held ``eligibility_criteria`` and ``study_protocols`` that
  belonged to no study and no participant: lists that no request can tie to anything. The model is asked which row
  of which table each row belongs to, with a foreign key (in the island, or in the table whose rows belong to one of
  it), or to drop it (``prompts/schema.md`` ``unlinked``). A schema of two linked groups that are not linked to each
  other is left alone: each table says whose it is, and a link between the groups would have to be invented (a
  library's staff rota and its loans).
- **Undated events** (:func:`undated_events`): a table that references two or more other tables (a fact between
  records: a consultant's hours on a project, a loan of a book to a member) with no column that can hold a date.
  A billing schema logged hours with no day they were worked, so no rule or request could say when. The model is
  asked to give it the date it happens (``undated``), keeping its columns and references.

Reading a column as a date. The schema has no rows yet and names are words of some language, so no name is read.
The project writes dates as TEXT ``'YYYY-MM-DD'`` (``prompts/schema.md``; ``DATE``/``DATETIME``/``TIMESTAMP`` are
mapped onto TEXT by ``pipeline.dbmodel.ddl.normalise_ddl``) and the later stages read dates from TEXT columns only
(``pipeline.dbmodel.paging.iso_date_columns``); so a column can hold a date when it is TEXT, not a key, not a
reference and not a ``CHECK (... IN (...))`` list of values other than dates. A table with none has no date for
certain (in any language); a table with a free TEXT column (a note) passes, dated or not: this check never trips
on a dated table, and leaves the values to the rows stage, which sees the model's example rows.

When the model's retries fail, the table stays as it was and a Rejection says why (``report.json``'s
``build.rejections``): the stage's "best reply kept". Not dropped: for an island, no check that reads no names can
tell an orphan list (eligibility criteria of no study) from a list the whole application shares, which a domain
expert accepts (a leave tracker's public holidays, ``benchmarks/results/reader_audit_2026-11-29_hr_leave.md``:
its content was faulted, not its standing alone), and dropping it would drop what the
scenario's goals ask for ("view the public holiday schedule"); the model may still drop it at its word (its reply
``{"ddl": ""}``), which is recorded too. An undated event is the core of its domain (the hours, the loans): dropping
it would drop what the schema is for. Neither refuses the environment.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import connect, ddl_table_name, normalise_ddl
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.stages.feedback import ask_with_feedback, render_section, user

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings

STAGE = "schema"

Validate = Callable[[dict[str, str]], tuple[dict[str, str], dict[str, str | None]]]
"""The schema stage's check of a whole schema (name -> DDL): the schema with its references written as created,
and per table its SQLite error or None (``tables.validate``)."""


class LinkFix(BaseModel):
    ddl: str
    """One CREATE TABLE statement, or "" to drop the table asked about (islands only)."""


def _created(tables: dict[str, str]) -> tuple[sqlite3.Connection, list[str]]:
    """A scratch database holding ``tables`` (name -> DDL; statements SQLite refuses are left out) and the names
    created, in order."""
    conn = connect()
    made = []
    for name, ddl in tables.items():
        try:
            conn.execute(ddl)
        except sqlite3.Error:
            continue
        made.append(name)
    return conn, made


def parents(tables: dict[str, str]) -> dict[str, set[str]]:
    """Per table of ``tables``, the other tables it references (by their names in ``tables``; a reference to
    itself or to a table not in ``tables`` does not count)."""
    conn, made = _created(tables)
    by_lower = {n.lower(): n for n in made}
    try:
        out = {}
        for name in made:
            refs = {str(fk[2]).lower() for fk in conn.execute(f'PRAGMA foreign_key_list("{name}")').fetchall()}
            out[name] = {by_lower[r] for r in refs if r in by_lower and r != name.lower()}
    finally:
        conn.close()
    return out


def islands(tables: dict[str, str]) -> list[str]:
    """The tables of ``tables`` that reference no other table and that no other table references, in order; none
    in a schema of one table."""
    refs = parents(tables)
    if len(refs) < 2:
        return []
    linked = {p for ps in refs.values() for p in ps} | {n for n, ps in refs.items() if ps}
    return [n for n in refs if n not in linked]


def date_columns(tables: dict[str, str], name: str) -> list[str]:
    """The columns of table ``name`` that can hold a date: TEXT, not a key, not a reference, and not a CHECK-listed
    column unless every listed value is an ISO date (read from the DDL: the schema has no rows yet)."""
    conn, made = _created(tables)
    try:
        if name not in made:
            return []
        cols = table_columns(conn, ir.Table(name=name, ddl=tables[name]))
    finally:
        conn.close()
    return [c.name for c in cols if c.type == "TEXT" and not c.pk and c.ref is None
            and (c.enum is None or all(isinstance(v, str) and _iso_date(v) for v in c.enum))]


def _iso_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text[:10])
    except ValueError:
        return False
    return len(text) == 10 or text[10] in "T "


def undated_events(tables: dict[str, str]) -> list[str]:
    """The tables of ``tables`` that reference two or more other tables and have no column that can hold a date
    (:func:`date_columns`), in order."""
    return [n for n, ps in parents(tables).items() if len(ps) >= 2 and not date_columns(tables, n)]


def island_problem(table: str) -> str:
    return (f"table {table} is linked to no other table: say which row of which table each {table} belongs to, "
            f"with a foreign key, or drop it")


def undated_problem(table: str) -> str:
    return f"each {table} records something that happens: give it the date it happens"


def _listing(tables: dict[str, str]) -> str:
    return "\n".join(tables.values())


def _statement(reply: LinkFix) -> tuple[str, str | None]:
    """The reply's statement repaired as the stage repairs every statement, and the table it creates."""
    ddl = normalise_ddl(reply.ddl)
    return ddl, ddl_table_name(ddl)


def _consistent(validate: Validate, trial: dict[str, str], name: str) -> tuple[dict[str, str], str | None]:
    """``trial`` (with table ``name`` replaced) as ``validate`` writes it, and why it is not valid SQLite for the
    stage (or None)."""
    trial, errors = validate(trial)
    if errors.get(name):
        return trial, errors[name]
    broken = [f"{n}: {e}" for n, e in errors.items() if e]
    return trial, f"the change breaks other tables: {'; '.join(broken)}" if broken else None


def _link_island(client: LLMClientProtocol, settings: BuildSettings, conv: list[dict[str, Any]],
                 current: dict[str, str], island: str, validate: Validate) -> tuple[tuple[str, str] | None, str | None, int]:
    """The conversation that links ``island``: ``((table, DDL) to replace, or ("", "") to drop the island), the last
    error, LLM attempts)``."""
    before = set(islands(current))

    def ask(problem: str) -> str:
        return render_section("schema", "unlinked", problem=problem, table=island, tables=_listing(current))

    def check(reply: LinkFix) -> tuple[tuple[str, str] | None, str | None]:
        if not reply.ddl.strip():
            if len(current) - 1 < settings.tables_min:
                return None, (f"the schema needs at least {settings.tables_min} tables, so {island} cannot be "
                              f"dropped: say which row of which table each {island} belongs to, with a foreign key")
            return ("", ""), None
        ddl, name = _statement(reply)
        own = {n.lower(): n for n in current}.get((name or "").lower())
        if own is None:
            return None, (f"the statement creates table {name or '(none)'}, which is not one of your tables; "
                          f"write {island} or the table whose rows belong to one {island}")
        trial, error = _consistent(validate, {**current, own: ddl}, own)
        if error is not None:
            return None, error
        still = set(islands(trial))
        if island in still:
            return None, island_problem(island)
        new = sorted(still - before)
        if new:
            return None, f"the change leaves table {new[0]} linked to no other table: keep its foreign keys"
        return (own, trial[own]), None

    out = ask_with_feedback(client, LinkFix, conv + user(ask(island_problem(island))), check, stage=STAGE,
                            max_attempts=settings.max_attempts - 1, retry_temperature=settings.retry_temperature,
                            max_tokens=settings.max_tokens_schema, feedback=ask)
    return out.value, out.error, out.attempts


def _date_event(client: LLMClientProtocol, settings: BuildSettings, conv: list[dict[str, Any]],
                current: dict[str, str], table: str, validate: Validate) -> tuple[str | None, str | None, int]:
    """The conversation that dates ``table``: (its new DDL or None, the last error, LLM attempts)."""
    linked = parents(current)[table]

    def ask(problem: str) -> str:
        return render_section("schema", "undated", problem=problem, table=table, ddl=current[table])

    def check(reply: LinkFix) -> tuple[str | None, str | None]:
        ddl, name = _statement(reply)
        if (name or "").lower() != table.lower():
            return None, f"the statement creates table {name or '(none)'}, not {table}"
        trial, error = _consistent(validate, {**current, table: ddl}, table)
        if error is not None:
            return None, error
        lost = sorted(linked - parents(trial)[table])
        if lost:
            return None, f"{table} no longer references {', '.join(lost)}: keep its references"
        if not date_columns(trial, table):
            return None, undated_problem(table)
        return trial[table], None

    out = ask_with_feedback(client, LinkFix, conv + user(ask(undated_problem(table))), check, stage=STAGE,
                            max_attempts=settings.max_attempts - 1, retry_temperature=settings.retry_temperature,
                            max_tokens=settings.max_tokens_schema, feedback=ask)
    return out.value, out.error, out.attempts


def _note(item: str, reason: str, **evidence: Any) -> ir.Rejection:
    return ir.Rejection(stage=STAGE, item=item, reason=reason, evidence=evidence)


def settle_links(client: LLMClientProtocol, settings: BuildSettings, conv: list[dict[str, Any]],
                 current: dict[str, str], validate: Validate) -> tuple[dict[str, str], list[ir.Rejection], int]:
    """Ask the model to link each island and to date each undated event of ``current`` (name -> DDL, all valid),
    continuing the schema conversation ``conv``, one conversation per table, each reply checked by ``validate`` (at most ``max_attempts - 1``
    replies). Returns the tables (mended, or as they were, or without an island the model dropped), a Rejection per
    table the model did not mend or dropped, and the LLM calls made."""
    tables = dict(current)
    notes: list[ir.Rejection] = []
    calls = 0
    asked: set[str] = set()
    asking = settings.max_attempts >= 2
    while (left := [n for n in islands(tables) if n not in asked]):
        island = left[0]
        asked.add(island)
        fixed: tuple[str, str] | None = None
        error: str | None = island_problem(island)
        if asking:
            fixed, error, n = _link_island(client, settings, conv, tables, island, validate)
            calls += n
        if fixed is not None and fixed[0]:
            tables[fixed[0]] = fixed[1]
        elif fixed is not None:
            notes.append(_note(island, f"table {island} dropped at the model's word: it was linked to no other "
                                       f"table", ddl=tables.pop(island)))
        else:
            notes.append(_note(island, f"table {island} kept, linked to no other table: {error}", ddl=tables[island]))
    for table in undated_events(tables):
        dated: str | None = None
        error = undated_problem(table)
        if asking:
            dated, error, n = _date_event(client, settings, conv, tables, table, validate)
            calls += n
        if dated is not None:
            tables[table] = dated
        else:
            notes.append(_note(table, f"table {table} kept without a date: {error}", ddl=tables[table]))
    return tables, notes, calls

