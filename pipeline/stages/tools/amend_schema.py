"""Amending the schema for a tool that needs something the schema lacks, instead of retrying the tool.

A tool's SQL is read by a parser (sqlglot) against the schema: a write storing a value that a
``CHECK (column IN (...))`` list does not allow (``UPDATE permits SET status = 'revoked'`` when the list says
'pending', 'approved'), or a statement naming a column its table lacks (``INSERT INTO kegs (..., filled_on)``,
a guard of a write tool reading ``batches.abv``) are :class:`Amendment` s: allow the value, add the column (nullable, typed like
the argument or literal it meets). :func:`apply` makes them in SQLite itself (``ALTER TABLE ... ADD COLUMN``; the
CHECK list gets the value) and returns the new DDL; the caller rebuilds its scratch database and inserts the
seeded rows again. Only what the statement names unambiguously is amended; anything else is left to feedback.
Once every tool is written, :func:`shown` makes the read tools that return every other column of a table by an
explicit list return the columns added to it as well.
"""

from __future__ import annotations

import difflib
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel.columns import _CHECK_IN, check_enums
from pipeline.dbmodel.ddl import scratch_db
from pipeline.runtime.sqlshape import parse as _parse
from pipeline.runtime.state import TableInfo, table_infos

MAX_PER_TOOL = 3
_SQL_TYPE = {"string": "TEXT", "integer": "INTEGER", "number": "REAL", "boolean": "INTEGER"}


@dataclass(frozen=True)
class Amendment:
    table: str
    column: str
    kind: Literal["allow_value", "add_column"]
    value: Any
    """The value to allow, or the SQLite type of the new column."""

    def describe(self) -> str:
        if self.kind == "allow_value":
            return f"{self.table}.{self.column} may also be {self.value!r} (added to its CHECK list)"
        return f"column {self.table}.{self.column} {self.value} added"


def _literal(node: exp.Expr) -> Any:
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        try:
            return int(node.this)
        except ValueError:
            return float(node.this)
    return None


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def _type_of(node: exp.Expr | None, params: Mapping[str, str]) -> str:
    """The SQLite type of a column a statement sets to (or compares with) ``node``: a parameter's, a literal's; a sum
    or difference is a number (``stock = stock - :quantity``: the tools stage had typed the added ``stock`` TEXT,
    and a pharmacy's stock was text), INTEGER when every typed operand is a whole number, else REAL."""
    if isinstance(node, exp.Paren):
        return _type_of(node.this, params)
    if isinstance(node, exp.Placeholder) and node.name in params:
        return _SQL_TYPE[params[node.name]]
    if isinstance(node, exp.Literal):
        v = _literal(node)
        return "TEXT" if isinstance(v, str) else "INTEGER" if isinstance(v, int) else "REAL"
    if isinstance(node, _ARITHMETIC):
        sides = [_type_of(side, params) for side in (node.left, node.right)
                 if isinstance(side, (exp.Placeholder, exp.Literal, exp.Paren, *_ARITHMETIC))]
        numbers = [t for t in sides if t in ("INTEGER", "REAL")]
        return "INTEGER" if numbers and all(t == "INTEGER" for t in numbers) and not isinstance(node, exp.Div) \
            else "REAL"
    return "TEXT"


def _targets(tree: exp.Expr, infos: dict[str, TableInfo]) -> list[tuple[str, str, exp.Expr | None]]:
    """(table, column, value expression) for each column a write statement sets."""
    out: list[tuple[str, str, exp.Expr | None]] = []
    if isinstance(tree, exp.Insert):
        schema = tree.this
        if isinstance(schema, exp.Schema) and isinstance(schema.this, exp.Table):
            table = schema.this.name
            cols = [c.name for c in schema.expressions]
            values = tree.expression
            rows = values.expressions if isinstance(values, exp.Values) else []
            first = rows[0].expressions if rows else []
            for i, c in enumerate(cols):
                out.append((table, c, first[i] if i < len(first) else None))
    elif isinstance(tree, exp.Update) and isinstance(tree.this, exp.Table):
        table = tree.this.name
        for eq in tree.args.get("expressions") or []:
            if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
                out.append((table, eq.left.name, eq.right))
    return [(t, c, v) for t, c, v in out if t in infos]


def _partner(col: exp.Column) -> exp.Expr | None:
    parent = col.parent
    if isinstance(parent, exp.Binary):
        return parent.right if parent.left is col else parent.left
    return None


def _missing_reads(tree: exp.Expr, infos: dict[str, TableInfo], params: Mapping[str, str],
                   skip: set[int]) -> list[tuple[str, str, str]]:
    """(table, column, type) for column references no table of the statement has, when the table they belong
    to is unambiguous (qualified by a table or alias, or the statement reads one table)."""
    aliases: dict[str, str] = {}
    for t in tree.find_all(exp.Table):
        aliases[t.alias_or_name.lower()] = t.name
    tables = list(dict.fromkeys(t.name for t in tree.find_all(exp.Table) if t.name in infos))
    defined = {a.alias.lower() for a in tree.find_all(exp.Alias)} | {c.alias.lower() for c in tree.find_all(exp.CTE)}
    out = []
    for col in tree.find_all(exp.Column):
        if id(col) in skip or not col.name or isinstance(col.this, exp.Star):
            continue
        name = col.name
        if col.table:
            table = aliases.get(col.table.lower())
            if table not in infos or name in infos[table].columns:
                continue
        else:
            if name.lower() in defined or name.lower() == "rowid" or any(name in infos[t].columns for t in tables):
                continue
            if len(tables) != 1:
                continue
            table = tables[0]
        out.append((table, name, _type_of(_partner(col), params)))
    return out


def _near(name: str, columns: Sequence[str]) -> str | None:
    """An existing column ``name`` is probably a slip for (``emial`` for ``email``, ``phone`` for
    ``phone_number``), by spelling distance or containment."""
    low = name.lower()
    hits = difflib.get_close_matches(low, [c.lower() for c in columns], n=1, cutoff=0.8)
    if hits:
        return hits[0]
    return next((c for c in columns if len(low) >= 3 and (low in c.lower() or c.lower() in low)), None)


def propose(tool: ir.Tool, tables: Sequence[ir.Table], conn: sqlite3.Connection) -> list[Amendment]:
    """The amendments ``tool`` needs from the schema on ``conn`` (at most ``MAX_PER_TOOL``; none when the tool
    needs more than that, names a column that is a slip for an existing one, one named like a built-in parameter
    (``last_id``: the id the database gives after an insert), or one the schema stage dropped as a personal
    characteristic (``ir.Table.withheld``): then the tool is wrong)."""
    infos = table_infos(conn)
    enums = {t.name: check_enums(t.ddl) for t in tables}
    params = {p.name: p.type for p in tool.params}
    found: list[Amendment] = []
    sqls = [s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else [])
    for sql in sqls:
        tree = _parse(sql)
        if tree is None:
            continue
        skip: set[int] = set()
        for table, col, value in _targets(tree, infos):
            if col not in infos[table].columns:
                found.append(Amendment(table, col, "add_column", _type_of(value, params)))
            lit = _literal(value) if value is not None else None
            allowed = enums.get(table, {}).get(col)
            if lit is not None and allowed and lit not in allowed and isinstance(lit, type(allowed[0])):
                found.append(Amendment(table, col, "allow_value", lit))
        if isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema):
            skip = {id(c) for c in tree.this.find_all(exp.Column)} | {id(c) for c in tree.this.expressions}
        if isinstance(tree, exp.Update):
            skip = {id(eq.left) for eq in tree.args.get("expressions") or [] if isinstance(eq, exp.EQ)}
        if tool.kind == "write":  # a read tool naming a missing column has the wrong column: feedback fixes it
            for table, col, typ in _missing_reads(tree, infos, params, skip):
                found.append(Amendment(table, col, "add_column", typ))
    withheld = {(t.name, c.lower()) for t in tables for c in t.withheld}
    out: list[Amendment] = []
    for a in found:
        if a.kind == "add_column" and a.column.lower() in ir.RESERVED_PARAMS:
            return []  # a built-in (:last_id, :now...) written as a column: the database gives it, the tool is wrong
        if a.kind == "add_column" and _near(a.column, infos[a.table].columns):
            return []
        if a.kind == "add_column" and (a.table, a.column.lower()) in withheld:
            return []  # a personal characteristic the schema stage dropped: the tool is wrong, not the schema
        if not any((b.table, b.column, b.kind) == (a.table, a.column, a.kind) and (a.kind == "add_column" or
                                                                                   b.value == a.value) for b in out):
            out.append(a)
    return out if len(out) <= MAX_PER_TOOL else []


def _allow(ddl: str, column: str, value: Any) -> str | None:
    for m in _CHECK_IN.finditer(ddl):
        if m.group(1) != column:
            continue
        lit = "'" + value.replace("'", "''") + "'" if isinstance(value, str) else repr(value)
        end = m.end(2)
        return ddl[:end].rstrip() + f", {lit}" + ddl[end:]
    return None


def apply(tables: Sequence[ir.Table], amendments: Sequence[Amendment]) -> list[ir.Table] | str:
    """The tables with ``amendments`` made (checked in SQLite), or why they cannot be made."""
    out = {t.name: t for t in tables}
    for a in amendments:
        t = out.get(a.table)
        if t is None:
            return f"no table {a.table}"
        if a.kind == "allow_value":
            ddl = _allow(t.ddl, a.column, a.value)
            if ddl is None:
                return f"no CHECK ({a.column} IN (...)) list in {a.table} to extend"
        else:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.column):
                return f"{a.column!r} is not a column name"
            conn = scratch_db(list(out.values()))
            try:
                try:
                    conn.execute(f'ALTER TABLE "{a.table}" ADD COLUMN {a.column} {a.value}')
                except sqlite3.OperationalError:  # a keyword as a column name: quoted
                    conn.execute(f'ALTER TABLE "{a.table}" ADD COLUMN "{a.column}" {a.value}')
                ddl = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                   (a.table,)).fetchone()[0]
            except sqlite3.Error as e:
                return f"cannot add column {a.table}.{a.column}: {e}"
            finally:
                conn.close()
        out[a.table] = t.model_copy(update={"ddl": ddl})
    new = [out[t.name] for t in tables]
    try:
        scratch_db(new).close()
    except sqlite3.Error as e:
        return f"the amended schema does not build: {e}"
    return new


def shown(tools: Sequence[ir.Tool], columns: Mapping[str, Sequence[str]], added: Sequence[tuple[str, str]],
          stage: str = "tools") -> tuple[list[ir.Tool], list[ir.Rejection]]:
    """``tools`` with each column ``added`` to a table (``(table, column)``) also returned by the read tools that return
    every other column of that table by an explicit list (one table, no join, no ``*``): a finder written before the
    column was added (``SELECT medication_id, name, ..., quantity FROM medications WHERE name = :name``) would hide
    it. ``columns``: each table's columns now. A note per tool changed."""
    new: dict[str, list[str]] = {}
    for table, column in added:
        new.setdefault(table, []).append(column)
    out: list[ir.Tool] = []
    notes: list[ir.Rejection] = []
    for tool in tools:
        parsed = _parse(tool.returns.sql) if tool.kind == "read" and tool.returns is not None else None
        tree = parsed if isinstance(parsed, exp.Select) else None
        tables = list(tree.find_all(exp.Table)) if tree is not None else []
        if (tree is None or len(tables) != 1 or tables[0].name not in new or any(p.find(exp.Star) and not p.find(exp.AggFunc) for p in tree.selects)
                or tree.find(exp.Join, exp.Subquery, exp.Union) is not None):
            out.append(tool)
            continue
        table = tables[0].name
        listed = {(p.this if isinstance(p, exp.Alias) else p).name for p in tree.selects
                  if isinstance(p.this if isinstance(p, exp.Alias) else p, exp.Column)}
        missing = [c for c in new[table] if c not in listed]
        if not missing or not set(columns.get(table, ())) - set(new[table]) <= listed:
            out.append(tool)
            continue
        sql = tree.select(*(exp.column(c, quoted=True) for c in missing), append=True, copy=True).sql(dialect="sqlite")
        assert tool.returns is not None
        out.append(tool.model_copy(update={"returns": tool.returns.model_copy(update={"sql": sql})}))
        notes.append(ir.Rejection(stage=stage, item=tool.name, reason=(
            f"{tool.name} returns {', '.join(f'{table}.{c}' for c in missing)} too: it returns every other column of "
            f"{table}, and the tools stage added {'them' if len(missing) > 1 else 'it'}"),
            evidence={"tool": tool.name, "table": table, "columns": missing, "returns": sql}))
    return out, notes
