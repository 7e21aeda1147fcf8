"""A create tool's key and result: the key a row gets from the database is never asked of the caller, and the tool
answers with the row it inserted.

A write tool's reply is read with a parser (sqlglot) against the schema before it is mapped onto ``ir.Tool``
(``pipeline.stages.tools.replies.to_tool``). Its *create* is its last plain ``INSERT`` (no ``OR ...``, no
``ON CONFLICT``) into a table whose key is an ``INTEGER PRIMARY KEY`` (an alias of rowid: SQLite assigns it, and the
engine binds it to ``:last_id`` after the insert). Four slips of a small model are repaired, none by reading names:

- a statement storing a built-in (``:last_id``, ``:now``...) into a column named like it that its table lacks
  (``UPDATE employees SET last_id = :last_id``): the model keeping the new id somewhere; the statement is dropped
  (an amendment would otherwise add the column, NULL in every seeded row);
- the INSERT giving the key a parameter's value (``INSERT INTO t (t_id, ...) VALUES (:t_id, ...)``) when nothing
  before it reads the parameter: the key is left to the database, the parameter read after it is ``:last_id``;
- a placeholder compared with the key after the insert that the model did not declare (or declared and reads only in
  the result): ``:last_id`` (it was the new row's key, which no caller can know), not a new required parameter;
- a result that reads the inserted table alone and does not surely find the new row (by its key ``= :last_id``, or
  by the values the insert stored into the columns of a UNIQUE constraint), or reads a column the table lacks
  (``SELECT last_id FROM employees WHERE name = :name``): the inserted row, ``SELECT * FROM t WHERE key = :last_id``
  (``SELECT * FROM renewals WHERE loan_id = :loan_id`` answers with the loan's first renewal, not the new one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from pipeline.ir import RESERVED_PARAMS
from pipeline.runtime import engine
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import TableInfo, qi


@dataclass(frozen=True)
class Program:
    """The SQL of a write tool's reply: guards, writes, result (``None``: the engine's ``{changes, last_id}``)."""

    guards: tuple[str, ...]
    writes: tuple[str, ...]
    returns: str | None
    one: bool
    declared: frozenset[str]
    """The parameters the reply declares."""
    unique: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    """Each table's UNIQUE constraints (their columns)."""


def _placeholders(sql: str) -> set[str]:
    return set(engine.placeholders(sql))


def _sub(sql: str, name: str, by: str) -> str:
    return re.sub(rf":{re.escape(name)}\b", f":{by}", sql)


def _stores_a_builtin(tree: exp.Expr | None, infos: Mapping[str, TableInfo]) -> bool:
    """An UPDATE whose every assignment stores into a column its table lacks and that is named like a built-in."""
    if not isinstance(tree, exp.Update) or not isinstance(tree.this, exp.Table) or tree.this.name not in infos:
        return False
    sets = [eq for eq in tree.args.get("expressions") or [] if isinstance(eq, exp.EQ)]
    cols = infos[tree.this.name].columns
    return bool(sets) and all(isinstance(eq.left, exp.Column) and eq.left.name in RESERVED_PARAMS
                              and eq.left.name not in cols for eq in sets)


def _create(writes: Sequence[str], infos: Mapping[str, TableInfo]) -> tuple[int, str, str] | None:
    """(index, table, key column) of the last plain INSERT into a table keyed by an INTEGER PRIMARY KEY."""
    for i in range(len(writes) - 1, -1, -1):
        if engine.leading_keyword(writes[i]) not in ("INSERT", "REPLACE", "WITH"):
            continue
        tree = _parse(writes[i])
        if not isinstance(tree, exp.Insert) or tree.args.get("alternative") or tree.args.get("conflict") \
                or tree.args.get("ignore"):
            return None  # the last insert may insert nothing, or replace a row: its key is not surely new
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if not isinstance(target, exp.Table) or target.name not in infos:
            return None
        info = infos[target.name]
        return (i, target.name, info.key[0]) if info.int_pk and len(info.key) == 1 else None
    return None


def _resolves_to(col: exp.Column, tree: exp.Expr, table: str, infos: Mapping[str, TableInfo]) -> bool:
    """Whether ``col`` is a column of ``table`` in ``tree`` (by its qualifier, or the only table that has it)."""
    tables = list(tree.find_all(exp.Table))
    if col.table:
        return any(t.alias_or_name.lower() == col.table.lower() and t.name == table for t in tables)
    having = {t.name for t in tables if t.name in infos and col.name in infos[t.name].columns}
    return having == {table}


def _compared_with_key(sql: str, table: str, key: str, infos: Mapping[str, TableInfo]) -> set[str]:
    """The placeholders ``sql`` compares (``=``) with ``table.key``."""
    tree = _parse(sql)
    if tree is None:
        return set()
    out = set()
    for eq in tree.find_all(exp.EQ):
        for a, b in ((eq.left, eq.right), (eq.right, eq.left)):
            if isinstance(a, exp.Column) and a.name == key and isinstance(b, exp.Placeholder) and b.name \
                    and _resolves_to(a, tree, table, infos):
                out.add(b.name)
    return out


def _key_given(sql: str, key: str) -> tuple[str, str] | None:
    """The INSERT without its ``key`` column and the parameter that gave it, when a parameter gives it."""
    tree = _parse(sql)
    if not isinstance(tree, exp.Insert) or not isinstance(tree.this, exp.Schema):
        return None
    cols = [c.name for c in tree.this.expressions]
    values = tree.expression
    if key not in cols or not isinstance(values, exp.Values):
        return None
    i = cols.index(key)
    rows = values.expressions
    given = [r.expressions[i] if isinstance(r, exp.Tuple) and len(r.expressions) == len(cols) else None for r in rows]
    if len(rows) != 1 or not isinstance(given[0], exp.Placeholder) or given[0].name in RESERVED_PARAMS:
        return None
    name = given[0].name
    del tree.this.expressions[i]
    del rows[0].expressions[i]
    if name in _placeholders(tree.sql(dialect="sqlite")):
        return None  # the parameter gives another column too
    return tree.sql(dialect="sqlite"), name


def _stored(sql: str) -> dict[str, str]:
    """column -> the parameter an INSERT of one row of VALUES stores into it."""
    tree = _parse(sql)
    if not isinstance(tree, exp.Insert) or not isinstance(tree.this, exp.Schema) \
            or not isinstance(tree.expression, exp.Values) or len(tree.expression.expressions) != 1:
        return {}
    row = tree.expression.expressions[0]
    cols = [c.name for c in tree.this.expressions]
    if not isinstance(row, exp.Tuple) or len(row.expressions) != len(cols):
        return {}
    return {c: v.name for c, v in zip(cols, row.expressions, strict=True) if isinstance(v, exp.Placeholder) and v.name}


def _finds_new_row(sql: str, table: str, key: str, infos: Mapping[str, TableInfo], stored: Mapping[str, str],
                   unique: Sequence[tuple[str, ...]]) -> bool:
    """Whether a result reads ``table`` alone, naming only columns it has, and finds the inserted row: by
    ``key = :last_id``, or by the values the insert stored into the columns of a UNIQUE constraint (only the new
    row holds them), every condition joined by AND."""
    tree = _parse(sql)
    if not isinstance(tree, exp.Select) or {t.name for t in tree.find_all(exp.Table)} != {table}:
        return False
    cols = set(infos[table].columns) | {"rowid"}
    aliases = {a.alias for a in tree.find_all(exp.Alias)}
    if any(c.name and c.name not in cols and c.name not in aliases for c in tree.find_all(exp.Column)):
        return False
    if "last_id" in _compared_with_key(sql, table, key, infos):
        return True
    if next(tree.find_all(exp.Or), None) is not None:
        return False
    same = {eq.left.name for eq in tree.find_all(exp.EQ) if isinstance(eq.left, exp.Column)
            and isinstance(eq.right, exp.Placeholder) and stored.get(eq.left.name) == eq.right.name}
    return any(u and set(u) <= same for u in unique)


def _reads_table_alone(sql: str, table: str) -> bool:
    tree = _parse(sql)
    return isinstance(tree, exp.Select) and {t.name for t in tree.find_all(exp.Table)} == {table}


def repair(program: Program, infos: Mapping[str, TableInfo]) -> Program:
    """``program`` with the slips of the module's docstring repaired (unchanged when it creates no keyed row)."""
    writes = [w for w in program.writes if not _stores_a_builtin(_parse(w), infos)] or list(program.writes)
    created = _create(writes, infos)
    if created is None:
        return Program(program.guards, tuple(writes), program.returns, program.one, program.declared, program.unique)
    at, table, key = created
    returns = program.returns
    before = [*program.guards, *writes[:at]]
    used_before = set().union(*(_placeholders(s) for s in before)) if before else set()
    newkey: set[str] = set()
    given = _key_given(writes[at], key)
    if given is not None and given[1] not in used_before:
        writes[at], name = given
        newkey.add(name)
    after = writes[at + 1:]
    in_writes_after = set().union(*(_placeholders(s) for s in after)) if after else set()
    compared = set().union(*(_compared_with_key(s, table, key, infos) for s in [*after, *([returns] if returns else [])]))
    for name in compared - RESERVED_PARAMS - used_before - _placeholders(writes[at]):
        if name not in program.declared or name not in in_writes_after:  # a declared one read only by the result
            newkey.add(name)
    for name in newkey:
        writes[at + 1:] = [_sub(s, name, "last_id") for s in writes[at + 1:]]
        returns = _sub(returns, name, "last_id") if returns else returns
    one = program.one
    if returns is not None and _reads_table_alone(returns, table) and not _finds_new_row(
            returns, table, key, infos, _stored(writes[at]), program.unique.get(table, ())):
        returns, one = f"SELECT * FROM {qi(table)} WHERE {qi(key)} = :last_id", True
    return Program(program.guards, tuple(writes), returns, one, program.declared, program.unique)
