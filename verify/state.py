"""Database state as verification sees it: tables with their keys, keyed snapshots, row-level diffs,
and the SQL literals assertions are written with.

A row is identified by its declared primary key, or by ``rowid`` when the table has none. A diff
lists every inserted, updated and deleted row with its values before and after; that is what
verifiers are derived from, what the checker shows for every tool call, and what proofs compare.

Snapshots, ``query_value`` and ``jsonable`` are those of :mod:`verify.reward` (the stdlib-only module the
exports vendor): one implementation.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any, Literal

import sqlite_utils

from verify import reward
from verify.reward import jsonable as jsonable
from verify.reward import query_value as query_value

Key = tuple[Any, ...]
Row = dict[str, Any]
Snapshot = dict[str, dict[Key, Row]]


@dataclass(frozen=True)
class TableInfo:
    name: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    key: tuple[str, ...]
    """The columns identifying a row: the primary key, or ``("rowid",)``."""
    int_pk: bool
    """The key is an ``INTEGER PRIMARY KEY`` (an alias of rowid, assigned by SQLite on insert)."""
    foreign_keys: tuple[tuple[str, str, str], ...]
    """(column, parent table, parent column); an implicit ``REFERENCES parent`` names the parent's key column
    (``""`` only when it cannot be told)."""

    def column_type(self, col: str) -> str:
        return self.types[self.columns.index(col)].upper() if col in self.columns else ""


def qi(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lit(value: Any) -> str:
    """A SQL literal for a SQLite value (None, int, float, str, bytes)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write the non-finite number {value!r} as a SQL literal")
        return repr(value)
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    return "'" + str(value).replace("'", "''") + "'"


def equals(col: str, value: Any) -> str:
    """A condition that ``col`` holds exactly ``value`` (NULL-safe; REAL compared with a tolerance)."""
    c = qi(col)
    if value is None:
        return f"{c} IS NULL"
    if isinstance(value, float):
        return f"abs({c} - {lit(value)}) < 1e-9"
    return f"{c} = {lit(value)}"


def sqlite_type(value: Any) -> str:
    """What SQLite's ``typeof()`` says for a value read from it."""
    if value is None:
        return "null"
    if isinstance(value, bool | int):
        return "integer"
    if isinstance(value, float):
        return "real"
    if isinstance(value, bytes):
        return "blob"
    return "text"


def table_infos(conn: sqlite3.Connection) -> dict[str, TableInfo]:
    """Every user table of ``conn`` with its columns, key and foreign keys (read through sqlite-utils)."""
    db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
    out = {}
    for name in sorted(n for n in db.table_names() if not n.startswith("sqlite_")):
        table = db.table(name)
        cols = table.columns
        columns = tuple(c.name for c in cols)
        types = tuple(str(c.type or "") for c in cols)
        key = tuple(table.pks)  # the primary key in declaration order, or ("rowid",)
        try:
            conn.execute(f"SELECT rowid FROM {qi(name)} LIMIT 0").fetchall()
            has_rowid = True
        except sqlite3.OperationalError:  # WITHOUT ROWID
            has_rowid = False
        int_pk = has_rowid and not table.use_rowid and len(key) == 1 and types[columns.index(key[0])].upper() == "INTEGER"
        fks = tuple((col, fk.other_table, other or "") for fk in table.foreign_keys
                    for col, other in zip(fk.columns, fk.other_columns, strict=True))
        out[name] = TableInfo(name, columns, types, key, int_pk, fks)
    return out


def snapshot(conn: sqlite3.Connection, infos: dict[str, TableInfo]) -> Snapshot:
    """Every row of every table, by key: ``{table: {key: {column: value}}}`` (:func:`verify.reward.snapshot`)."""
    return reward.snapshot(conn, {name: (info.columns, info.key) for name, info in infos.items()})


def singular_forms(table: str) -> set[str]:
    """``loans`` -> {loans, loan}; ``categories`` -> {categories, category}."""
    t = table.lower()
    out = {t}
    for suffix, repl in (("ies", "y"), ("ses", "s"), ("es", ""), ("s", "")):
        if t.endswith(suffix):
            out.add(t[: -len(suffix)] + repl)
    return out


def singular(word: str) -> str:
    """An English plural's singular by its ending ("batches" -> "batch", "categories" -> "category"): how code
    names one row of a table (``pipeline.stages.wording``, the planner's intents)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def id_table(infos: dict[str, TableInfo], param: str) -> str | None:
    """The table an ``<entity>_id`` parameter points at (``member_id`` -> ``members``), if any."""
    if not param.lower().endswith("_id"):
        return None
    stem = param[:-3].lower()
    for name, info in infos.items():
        if stem in singular_forms(name) and len(info.key) == 1:
            return name
    return None


def sort_key(value: Any) -> tuple:
    """Order SQLite values of mixed types without errors (NULL < numbers < text < blobs)."""
    if isinstance(value, tuple):
        return tuple(sort_key(v) for v in value)
    rank = {type(None): 0, bool: 1, int: 1, float: 1, str: 2, bytes: 3}
    return (rank.get(type(value), 4), 0 if value is None else value)


@dataclass(frozen=True)
class Change:
    table: str
    op: Literal["insert", "update", "delete"]
    key: Key
    before: Row | None
    after: Row | None

    @property
    def changed_columns(self) -> tuple[str, ...]:
        if self.before is None or self.after is None:
            return ()
        return tuple(c for c in self.after if self.before.get(c) != self.after.get(c) or
                     type(self.before.get(c)) is not type(self.after.get(c)))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"table": self.table, "op": self.op, "key": [jsonable(k) for k in self.key]}
        if self.op == "update":
            assert self.before is not None and self.after is not None
            d["set"] = {c: jsonable(self.after[c]) for c in self.changed_columns}
            d["was"] = {c: jsonable(self.before[c]) for c in self.changed_columns}
        elif self.op == "insert":
            d["row"] = {c: jsonable(v) for c, v in (self.after or {}).items()}
        else:
            d["row"] = {c: jsonable(v) for c, v in (self.before or {}).items()}
        return d


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    """Row-level changes from ``before`` to ``after``, ordered by table then key."""
    out: list[Change] = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, {}), after.get(table, {})
        if old is new:  # the same rows (a table a run did not write keeps its initial snapshot's)
            continue
        found: list[Change] = []
        for key in set(old) | set(new):
            a, b = old.get(key), new.get(key)
            if a is None and b is not None:
                found.append(Change(table, "insert", key, None, b))
            elif b is None and a is not None:
                found.append(Change(table, "delete", key, a, None))
            elif a is not None and b is not None and _row_differs(a, b):
                found.append(Change(table, "update", key, a, b))
        out += sorted(found, key=lambda c: sort_key(c.key))  # by key: only the changed rows are sorted
    return out


def _row_differs(a: Row, b: Row) -> bool:
    if a is b:
        return False
    if a == b:  # equal values, same columns: only a type can differ (1 and 1.0)
        return any(type(v) is not type(b[c]) for c, v in a.items())
    return any(a.get(c) != b.get(c) or type(a.get(c)) is not type(b.get(c)) for c in set(a) | set(b))


def summarize(changes: list[Change], limit: int = 12) -> str:
    """A short human-readable account of a diff (for prompts and evidence)."""
    if not changes:
        return "no rows changed"
    lines = []
    for c in changes[:limit]:
        d = c.to_json()
        if c.op == "update":
            lines.append(f"{c.table} {d['key']}: updated {d['was']} -> {d['set']}")
        else:
            lines.append(f"{c.table} {d['key']}: {c.op} {d['row']}")
    if len(changes) > limit:
        lines.append(f"... and {len(changes) - limit} more row changes")
    return "\n".join(lines)
