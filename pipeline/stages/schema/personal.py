"""Personal characteristics out of the schema: columns the schema stage's LLM classified as recording one are
dropped before any later stage sees them.

The schema reply's ``personal`` lists, per table, the columns that record a personal characteristic of someone
(gender, ethnicity, religion, nationality, marital status, disability, pregnancy): the model's classification,
in whatever language the columns are named; code holds no word list. An environment has no need to store one:
the rows the small model makes for them are nonsense (a pharmacy whose patients were 78% "pregnant", 75 of them
men) and they invite discriminatory rules and requests. So :func:`withhold_personal` drops each classified column
from its ``CREATE TABLE`` (SQLite's own ``ALTER TABLE ... DROP COLUMN``, with any CHECK elsewhere that names it,
``pipeline.dbmodel.ddl.drop_column``) and from the table's declared natural key, and records
``ir.Table.withheld`` (so the tools stage never adds it back) and one note per column in the stage's rejections
(``report.json``'s ``build.rejections``). A classified column that is part of a key stays (the primary key, a
foreign key, a UNIQUE constraint or index, or a column another table references: the schema depends on it),
classified in ``ir.Table.personal``, so no rule turns on it (``pipeline.stages.policy.candidates``); so does one
SQLite will not drop (a generated column reads it), with the reason noted.

The model's classification is not the last word: on the example's regenerated pharmacy it listed none of
``patients.gender CHECK (gender IN ('male', 'female'))``, which then stayed and was drawn at random against the
names. So code classifies too (:func:`found_by_meaning`: MiniLM similarity of each column's name, and its
CHECK-listed values, with short definitions of the characteristics, ``pipeline.meaning.personal``), and the columns
withheld are the union of both; each note's evidence says which check found the column (``found_by``: ``llm``,
``minilm`` or both) and, for MiniLM, its score and nearest characteristic. MiniLM reads English names only (the
benchmark in ``benchmarks/results/personal_columns.md``): a German, Spanish or French name is left to the model.
A yes/no question to the model per column was tried for those and removed (2026-11-28: it caught 6 of 6
characteristics and dropped 6 of 8 ordinary columns, ``benchmarks/results/personal_columns.md``).

MiniLM reads a column's name, not whose it is: an animal shelter's ``pets.gender`` scores like a person's (issue
40). So when MiniLM classifies a column the model did not list, the model is asked once per schema whose rows are
people (:func:`ask_people`: for each table, an example row and whether it is a human being; the table a choice
among the schema's own names), and a column MiniLM alone classified in a table the model says holds no people
stays, out of ``ir.Table.personal``, so rules may turn on it (:func:`whose`). The answer is taken only when it is
consistent; a failed call, an answer that names no people, or a table it leaves out keeps every finding, so a
person's gender is never kept on a doubtful answer. The model's own classification always counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import drop_column, scratch_db
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning.personal import Encode, Finding, default_encode, personal_columns
from pipeline.stages.feedback import budget, render_section, user

STAGE = "schema"

CHECKS = {"llm": "the schema's LLM", "minilm": "MiniLM"}
"""Who may classify a column, as the notes name them."""

NOT_PEOPLE = "not a person's"
"""A note's ``evidence["personal"]`` for a column MiniLM alone classified in a table the model says holds no
people: kept, and rules may turn on it."""

People = Callable[[list[ir.Table]], "dict[str, bool] | str"]
"""Tables -> whether one row of each is a person (the model's answer, :func:`ask_people`; a table it did not
answer for is left out), or why there is no usable answer."""

ROW_TEXT = 40
"""Characters of the example row the model writes before each verdict (the grammar cuts it there)."""


@cache
def people_model(names: tuple[str, ...]) -> type[BaseModel]:
    """``{"tables": [{"table": <one of names>, "row": str, "human": bool}, ...]}``, one item per table: the table
    is a choice among the schema's own names; the model writes an example row before it judges (measured on eight
    schemas with the 1.5B model, 2026-11-30: a bare list of the tables whose rows are people named the animals'
    tables too, pets, horses and dogs, in 5 of 5; with a row written first, no people table was called
    otherwise and the animals' tables were told apart)."""
    fields: dict[str, Any] = {"table": (Literal[names], ...), "row": (str, Field(max_length=ROW_TEXT)),
                              "human": (bool, ...)}
    item = create_model("TableRows", **fields, __base__=BaseModel)  # type: ignore[call-overload]
    return create_model("PeopleTables", tables=(list[item], Field(min_length=len(names), max_length=len(names))),  # type: ignore[valid-type]
                        __base__=BaseModel)


def ask_people(client: LLMClientProtocol, tables: list[ir.Table]) -> dict[str, bool] | str:
    """One call: whether one row of each of ``tables`` is a person (``prompts/schema.md`` ``people``, with the
    tables' DDL). Table name -> the verdict, for the tables the reply answers for (one answered twice, once each
    way, is taken for people); or why there is no answer (a reply that never validated). An endpoint that fails
    raises, as every stage's call does."""
    names = tuple(t.name for t in tables)
    prompt = render_section("schema", "people", tables="\n".join(t.ddl for t in tables))
    try:
        reply: Any = client.structured(people_model(names), user(prompt), stage=STAGE,
                                       max_tokens=budget(96, 64, len(names)))
    except LLMUnavailable:
        raise
    except LLMError as e:
        return str(e)
    out: dict[str, bool] = {}
    for item in reply.tables:
        out[item.table] = out.get(item.table, False) or bool(item.human)
    return {n: out[n] for n in names if n in out}


def _name(raw: str) -> str:
    return raw.strip().strip('"`[]').lower()


def classified(tables: list[ir.Table], declared: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per table, the reply's ``personal`` names as the table's own column names (read in any case, quotes
    stripped; a name that is no column of the table says nothing about one and is left out)."""
    conn = scratch_db(tables)
    try:
        out = {}
        for t in tables:
            cols = {r[1].lower(): r[1] for r in conn.execute(f'PRAGMA table_info("{t.name}")').fetchall()}
            out[t.name] = list(dict.fromkeys(cols[_name(n)] for n in declared.get(t.name, []) if _name(n) in cols))
    finally:
        conn.close()
    return out


def found_by_meaning(tables: list[ir.Table], encode: Encode = default_encode
                     ) -> tuple[dict[str, dict[str, Finding]], list[ir.Rejection]]:
    """Per table, the columns whose meaning is a personal characteristic (``pipeline.meaning.personal``: the
    column's name as words, with its CHECK-listed values), by their own names; and a note when MiniLM cannot load
    (then only the model's classification counts)."""
    from pipeline.embed import EmbeddingError

    conn = scratch_db(tables)
    try:
        cols = [(t.name, c.name, c.enum or ()) for t in tables for c in table_columns(conn, t)]
    finally:
        conn.close()
    try:
        found = personal_columns(cols, encode)
    except EmbeddingError as e:
        return {}, [ir.Rejection(stage=STAGE, item="personal", reason=f"columns not checked for personal "
                                 f"characteristics by meaning (only the schema's LLM classified them): {e}")]
    out: dict[str, dict[str, Finding]] = {}
    for f in found:
        out.setdefault(f.table, {})[f.column] = f
    return out, []


def key_roles(conn: sqlite3.Connection, tables: list[ir.Table]) -> dict[tuple[str, str], str]:
    """(table, lower-case column) -> the key it is part of, for every column the schema's keys rely on: a primary
    key, a foreign key, a UNIQUE constraint or an index, a column another table's foreign key points at."""
    roles: dict[tuple[str, str], str] = {}
    for t in tables:
        for r in conn.execute(f'PRAGMA table_info("{t.name}")').fetchall():
            if r[5]:
                roles.setdefault((t.name, r[1].lower()), "the primary key")
        for fk in conn.execute(f'PRAGMA foreign_key_list("{t.name}")').fetchall():
            parent, col, to = fk[2], fk[3], fk[4]
            roles.setdefault((t.name, col.lower()), f"a foreign key to {parent}")
            if to is not None:
                roles.setdefault((parent, to.lower()), f"referenced by {t.name}.{col}")
        for idx in conn.execute(f'PRAGMA index_list("{t.name}")').fetchall():
            what = "a UNIQUE constraint" if idx[2] else f"the index {idx[1]}"
            for info in conn.execute(f'PRAGMA index_info("{idx[1]}")').fetchall():
                if info[2] is not None:
                    roles.setdefault((t.name, info[2].lower()), what)
    return roles


def whose(tables: list[ir.Table], llm: dict[str, list[str]], meaning: dict[str, dict[str, Finding]], people: People
          ) -> tuple[dict[str, dict[str, Finding]], list[ir.Rejection]]:
    """MiniLM's findings without those it alone made in a table whose rows the model says are not people (an
    animal's sex: MiniLM reads a column's name, not whose it is), and a note on each such column (kept, and rules
    may turn on it) or on an answer not taken.

    ``people`` is asked once, and only when MiniLM classified a column the schema's LLM did not list. Its answer
    is taken only when it is consistent: it names at least one table whose rows are people (a schema in which
    MiniLM found a person's characteristic and the model no person is not believed), and none of the tables it
    says hold no people has a column the schema's LLM and MiniLM both classified. Otherwise (and when the call
    gives no usable reply, or leaves a table out) every finding counts, as without the question: a person's
    gender is withheld whenever the model's answer does not say plainly that the table holds no people. The
    schema's LLM's own classification always counts."""
    alone = {t.name: [c for c in meaning.get(t.name, {}) if c not in llm[t.name]] for t in tables}
    if not any(alone.values()):
        return meaning, []
    answer = people(tables)
    if isinstance(answer, str):
        why = f"the question of which tables hold people got no usable reply ({answer})"
    elif not any(answer.values()):
        why = "the model says no table holds people"
    else:
        both = [t.name for t in tables if answer.get(t.name) is False
                and any(c in meaning.get(t.name, {}) for c in llm[t.name])]
        why = "" if not both else (
            f"the model says {', '.join(both)} holds no people, yet its schema classified a column there as a "
            f"personal characteristic that MiniLM found too")
    if why:
        return meaning, [ir.Rejection(
            stage=STAGE, item="personal", reason=f"every column MiniLM classified as a personal characteristic "
                                                 f"counts: {why}",
            evidence={"people": answer if isinstance(answer, dict) else None})]
    assert isinstance(answer, dict)
    humans = [n for n, h in answer.items() if h]
    out = {t: dict(found) for t, found in meaning.items()}
    notes = []
    for t in tables:
        if answer.get(t.name) is not False:
            continue
        for col in alone[t.name]:
            f = out[t.name].pop(col)
            notes.append(ir.Rejection(
                stage=STAGE, item=f"{t.name}.{col}",
                reason=f"column {t.name}.{col} kept: MiniLM classified it as a personal characteristic (MiniLM: "
                       f"{f.score:.2f} with \"{f.concept}\"), but the model says a row of {t.name} is not a "
                       f"person (people: {', '.join(humans)}); rules may turn on it",
                evidence={"table": t.name, "column": col, "personal": NOT_PEOPLE, "found_by": ["minilm"],
                          "similarity": f.score, "concept": f.concept, "people": humans}))
    return out, notes


def withhold_personal(
    tables: list[ir.Table], declared: dict[str, list[str]], keys: dict[str, list[str]],
    check: Callable[[list[tuple[str, str]]], dict[str, str | None]], encode: Encode | None = default_encode,
    people: People | None = None,
) -> tuple[list[ir.Table], dict[str, list[str]], list[ir.Rejection]]:
    """Drop the columns the reply or code classified as personal characteristics (see the module doc).

    ``tables`` are valid (created in this order), ``declared`` the reply's ``personal`` per table, ``keys`` the
    declared natural keys, ``check`` the schema stage's check (name -> error or None), ``encode`` MiniLM's
    (:func:`found_by_meaning`; None: the reply's classification alone), ``people`` the model's answer on which
    tables' rows are people (:func:`ask_people`; asked only when MiniLM alone classified a column, see
    :func:`whose`; None: not asked, every finding counts). Returns the tables (their DDL without the dropped
    columns, ``personal`` = the classified columns kept, ``withheld`` = the dropped ones), the natural keys without
    the dropped columns, and one note per classified column."""
    llm = classified(tables, declared)
    meaning, notes = found_by_meaning(tables, encode) if encode is not None else ({}, [])
    if people is not None:
        meaning, said_not = whose(tables, llm, meaning, people)
        notes.extend(said_not)
    said = {t.name: list(dict.fromkeys(llm[t.name] + list(meaning.get(t.name, {})))) for t in tables}
    conn = scratch_db(tables)
    try:
        roles = key_roles(conn, tables)
    finally:
        conn.close()
    out: list[ir.Table] = []
    dropped: dict[str, list[str]] = {}

    def by(table: str, col: str) -> tuple[str, str, dict[str, object]]:
        """Who classified the column (words for the note's start), MiniLM's say (words for its end), and the
        evidence."""
        finding = meaning.get(table, {}).get(col)
        found_by = (["llm"] if col in llm[table] else []) + (["minilm"] if finding is not None else [])
        evidence: dict[str, object] = {"found_by": found_by}
        who = " and ".join(CHECKS[k] for k in found_by) + " classified it"
        if finding is None:
            return who, "", evidence
        evidence.update(similarity=finding.score, concept=finding.concept)
        return who, f" (MiniLM: {finding.score:.2f} with \"{finding.concept}\")", evidence

    for t in tables:
        ddl, kept, gone = t.ddl, [], []
        for col in said[t.name]:
            item = f"{t.name}.{col}"
            who, said_so, found = by(t.name, col)
            role = roles.get((t.name, col.lower()))
            if role is not None:
                kept.append(col)
                notes.append(ir.Rejection(
                    stage=STAGE, item=item,
                    reason=f"column {item} kept though {who} as a personal characteristic: it is {role}; "
                           f"no rule turns on it{said_so}",
                    evidence={"table": t.name, "column": col, "personal": "kept", "key": role, **found}))
                continue
            result = drop_column(ddl, t.name, col)
            if isinstance(result, str):
                kept.append(col)
                notes.append(ir.Rejection(
                    stage=STAGE, item=item,
                    reason=f"column {item} kept though {who} as a personal characteristic: SQLite does not "
                           f"drop it ({result}); no rule turns on it{said_so}",
                    evidence={"table": t.name, "column": col, "personal": "kept", "error": result, **found}))
                continue
            ddl, checks = result
            gone.append(col)
            evidence: dict[str, object] = {"table": t.name, "column": col, "personal": "dropped", **found}
            if checks:
                evidence["checks_dropped"] = checks
            notes.append(ir.Rejection(
                stage=STAGE, item=item,
                reason=f"column {item} dropped: {who} as a personal characteristic, which "
                       f"an environment does not store" + (f" (with {len(checks)} CHECK naming it)" if checks else "")
                       + said_so,
                evidence=evidence))
        dropped[t.name] = gone
        out.append(t.model_copy(update={"ddl": ddl, "personal": kept, "withheld": gone}))
    if not any(dropped.values()):
        return out, keys, notes
    errors = check([(t.name, t.ddl) for t in out])
    bad = {n: e for n, e in errors.items() if e is not None}
    if bad:  # dropping only removes what nothing else names: not expected, but never leave a schema that fails
        restored = [t.model_copy(update={"personal": said[t.name], "withheld": []}) for t in tables]
        why = "; ".join(f"{n}: {e}" for n, e in sorted(bad.items()))
        return restored, keys, [n for n in notes if n.evidence.get("personal") in (None, NOT_PEOPLE)] + [ir.Rejection(
            stage=STAGE, item=f"{t.name}.{c}",
            reason=f"column {t.name}.{c} kept though {by(t.name, c)[0]} as a personal characteristic: the schema "
                   f"without it does not build ({why}); no rule turns on it{by(t.name, c)[1]}",
            evidence={"table": t.name, "column": c, "personal": "kept", "error": why, **by(t.name, c)[2]})
            for t in tables for c in said[t.name]]
    new_keys = {name: [c for c in cols if _name(c) not in {d.lower() for d in dropped.get(name, [])}]
                for name, cols in keys.items()}
    return out, new_keys, notes
