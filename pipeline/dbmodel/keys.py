"""Natural keys: how a user names a row (a code, a plate, a name, or a combination such as name + date).

A request may state natural-key values, never a surrogate id (an ``INTEGER PRIMARY KEY`` or a foreign key
to one). Each table's key is the one its schema declares (``Table.natural_key``) when the seeded rows make
it unique, else the best unique combination code finds in the data: columns declared UNIQUE first, then
text columns, then combinations of up to three columns, where a foreign-key column stands for the parent
row's own natural key ("Alice Park's loan of Emma from 2026-01-02"). No word lists, no English forms.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from pipeline import ir
from pipeline.ir import Environment
from pipeline.runtime.state import TableInfo, qi

MAX_KEY_COLUMNS = 3


@dataclass(frozen=True)
class NaturalKey:
    table: str
    columns: tuple[str, ...]
    declared: bool
    """The schema declared it (else code found it in the data)."""
    partial: bool = False
    """No combination is unique over the whole table (payments, readings, fines: a parent's children alike but for
    an amount or a date): these columns name the rows they single out, and :func:`describe` names no other row."""


def surrogate_columns(info: TableInfo) -> set[str]:
    """The integer primary key and the foreign-key columns (values users do not know)."""
    out = {c for c, _, _ in info.foreign_keys}
    if info.int_pk:
        out.add(info.key[0])
    return out


def surrogates(infos: Mapping[str, TableInfo]) -> set[tuple[str, str]]:
    """Every (table, column) of :func:`surrogate_columns`: what a request written by code must not state."""
    return {(t, c) for t, info in infos.items() for c in surrogate_columns(info)}


def _unique_columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    out = []
    for idx in conn.execute(f"PRAGMA index_list({qi(table)})").fetchall():
        if idx[2]:  # unique
            cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({qi(idx[1])})").fetchall())
            if all(cols):
                out.append(cols)
    return out


def is_unique(conn: sqlite3.Connection, table: str, cols: tuple[str, ...]) -> bool:
    c = ", ".join(qi(x) for x in cols)
    nulls = " OR ".join(f"{qi(x)} IS NULL" for x in cols)
    total, distinct, missing = conn.execute(
        f"SELECT (SELECT COUNT(*) FROM {qi(table)}), (SELECT COUNT(*) FROM (SELECT DISTINCT {c} FROM {qi(table)})), "
        f"(SELECT COUNT(*) FROM {qi(table)} WHERE {nulls})").fetchone()
    return total > 0 and total == distinct and missing == 0


def _rank(info: TableInfo, cols: tuple[str, ...], unique_decl: list[tuple[str, ...]], searchable: set[str]) -> tuple:
    fks = {c for c, _, _ in info.foreign_keys}
    type_rank = {"TEXT": 0, "INTEGER": 1, "INT": 1, "REAL": 2}
    return (len(cols), -sum(c in searchable for c in cols),
            tuple(sorted(cols)) not in {tuple(sorted(u)) for u in unique_decl},
            sum(c in fks for c in cols), sum(type_rank.get(info.column_type(c), 3) for c in cols),
            [info.columns.index(c) for c in cols])


def natural_keys(env: Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
                 searchable: set[tuple[str, str]] | None = None, partial: bool = False,
                 amounts_last: bool = False) -> dict[str, NaturalKey]:
    """Each table's natural key. ``searchable``: the (table, column) pairs some read tool filters by;
    among unique candidates of the same size those come first (that is how users of this app name rows).
    ``partial``: a table with no unique combination gets the one that singles out most of its rows (at least
    :data:`PARTIAL_MIN_SHARE`), marked ``partial``. ``amounts_last`` (how a person names a row in a request, the
    task planner's): a combination holding an amount (:func:`amounts`: "the order of Paula Nash with quantity 1")
    comes after every one without, and a single reference to a parent (the loan a fine is on, when no loan has two)
    names a row when nothing else but an amount would; a combination of a reference and a date still comes first.
    With ``partial`` too, a unique combination only with an amount gives way to a partial one without (those rows
    are named, the others left to no request) when one singles out enough rows."""
    declared = {t.name: tuple(t.natural_key) for t in env.tables if getattr(t, "natural_key", None)}
    out: dict[str, NaturalKey] = {}
    for name, info in infos.items():
        d = declared.get(name)
        if d and all(c in info.columns for c in d) and is_unique(conn, name, d):
            out[name] = NaturalKey(name, d, True)
            continue
        pk = info.key[0] if info.int_pk else None
        fks = {c for c, _, _ in info.foreign_keys}
        cands = [c for c in info.columns if c != pk and info.column_type(c) != "BLOB" and c != "rowid"]
        plain = [c for c in cands if c not in fks]
        unique_decl = _unique_columns(conn, name)
        found = {c for t, c in (searchable or set()) if t == name}
        money = amounts(info, unique_decl) if amounts_last else set()
        lead = 2 if amounts_last else 0  # (an amount, a lone reference) before whether users search by it
        best: tuple[str, ...] | None = None
        best_rank: tuple | None = None
        for size in range(1, MAX_KEY_COLUMNS + 1):
            pool = (cands if amounts_last else plain) if size == 1 else cands
            for cols in itertools.combinations(pool, size):  # references name a row too: a member's loan of a book
                first = (bool(set(cols) & money), size == 1 and cols[0] in fks) if amounts_last else ()
                rank = (*first, not (set(cols) & found)) + _rank(info, cols, unique_decl, found)
                if best_rank is not None and rank >= best_rank:
                    continue
                if is_unique(conn, name, cols):
                    best, best_rank = cols, rank
            if best is not None and best_rank is not None and not any(best_rank[:lead + 1]):
                break  # a key users can search by (and no amount, no lone reference): no longer key will be better
        if best and money & set(best) and partial and (
                alt := _partial_key(conn, info, name, cands, plain, unique_decl, found, money)) and not money & set(alt):
            out[name] = NaturalKey(name, alt, False, partial=True)  # the rows natural columns tell apart, not all
        elif best:
            out[name] = NaturalKey(name, best, False)
        elif partial and (cols_ := _partial_key(conn, info, name, cands, plain, unique_decl, found, money)):
            out[name] = NaturalKey(name, cols_, False, partial=True)
    return out


PARTIAL_MIN_SHARE = 0.3
"""A partial key must single out at least this share of a table's rows."""

_NUMERIC = ("INTEGER", "INT", "REAL", "NUMERIC", "FLOAT", "DOUBLE")


def amounts(info: TableInfo, unique_decl: Sequence[tuple[str, ...]] = ()) -> set[str]:
    """The columns of ``info`` that hold an amount: numeric by their declared type, neither the primary key nor a
    reference, nor declared UNIQUE alone (a room number, a badge number label a row; a quantity, a price, a year do
    not). From the schema alone: no column's name."""
    fks = {c for c, _, _ in info.foreign_keys}
    labels = {u[0] for u in unique_decl if len(u) == 1}
    return {c for c in info.columns if info.column_type(c) in _NUMERIC and c not in info.key and c not in fks
            and c not in labels and c != "rowid"}


def _partial_key(conn: sqlite3.Connection, info: TableInfo, name: str, cands: list[str], plain: list[str],
                 unique_decl: list[tuple[str, ...]], found: set[str], money: Set[str] = frozenset()
                 ) -> tuple[str, ...] | None:
    """The combination of up to two columns that singles out most rows, one with a reference to a parent first
    ("the fine on Bob's loan of *Emma*", "the 12.50 fine on ..."), then the shorter (ties: ``natural_keys``'s
    order); one holding an amount of ``money`` after every one without ("the order of Paula Nash from January 14",
    not "... with quantity 1")."""
    fks = {c for c, _, _ in info.foreign_keys}
    total = conn.execute(f"SELECT COUNT(*) FROM {qi(name)}").fetchone()[0]
    if not total:
        return None
    best: tuple[str, ...] | None = None
    best_rank: tuple | None = None
    for size in (1, 2):
        for cols in itertools.combinations(cands, size):
            c = ", ".join(qi(x) for x in cols)
            alone = conn.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {qi(name)} WHERE "
                                 + " AND ".join(f"{qi(x)} IS NOT NULL" for x in cols)
                                 + f" GROUP BY {c} HAVING COUNT(*) = 1)").fetchone()[0]
            if alone < PARTIAL_MIN_SHARE * total:
                continue
            rank = (bool(set(cols) & money), not (set(cols) & fks), size, -alone) + _rank(info, cols, unique_decl,
                                                                                         found)
            if best_rank is None or rank < best_rank:
                best, best_rank = cols, rank
    return best


def singled_out(conn: sqlite3.Connection, table: str, cols: tuple[str, ...], row: dict[str, Any]) -> bool:
    """Whether no other row of ``table`` has ``row``'s values in ``cols`` (none of them NULL)."""
    if any(row.get(c) is None for c in cols):
        return False
    where = " AND ".join(f"{qi(c)} = ?" for c in cols)
    n = conn.execute(f"SELECT COUNT(*) FROM {qi(table)} WHERE {where}", tuple(row[c] for c in cols)).fetchone()[0]
    return bool(n == 1)


def describe(conn: sqlite3.Connection, infos: dict[str, TableInfo], keys: dict[str, NaturalKey], table: str,
             row: dict[str, Any], depth: int = 0) -> list[tuple[str, Any]] | None:
    """The facts that name ``row`` for a user: ``[(\"table.column\", value), ...]``, foreign keys replaced
    by the parent row's own facts. None when the table has no natural key, or a partial one that does not
    single the row out."""
    nk = keys.get(table)
    if nk is None or depth > 2 or (nk.partial and not singled_out(conn, table, nk.columns, row)):
        return None
    info = infos[table]
    fks = {c: (p, pc) for c, p, pc in info.foreign_keys}
    out: list[tuple[str, Any]] = []
    for col in nk.columns:
        if col in fks and row.get(col) is not None:
            parent, pcol = fks[col]
            pinfo = infos.get(parent)
            if pinfo is None:
                return None
            prow = conn.execute(f"SELECT * FROM {qi(parent)} WHERE {qi(pcol or pinfo.key[0])} = ?",
                                (row[col],)).fetchone()
            if prow is None:
                return None
            sub = describe(conn, infos, keys, parent, dict(zip(pinfo.columns, prow, strict=True)), depth + 1)
            if sub is None:
                return None
            out.extend(sub)
        else:
            out.append((f"{table}.{col}", row.get(col)))
    return out


def settle_natural_keys(tables: Sequence[ir.Table], seed: Sequence[ir.SeedRows]
                        ) -> tuple[tuple[ir.Table, ...], tuple[ir.Rejection, ...]]:
    """Keep each declared natural key that the seeded rows make unique (no two rows share its values, none
    is null); clear the others, with the reason recorded (the task planner then finds a key in the data). The
    rejections are the rows stage's (``seed_data``): its rows make a key unique or not."""
    rows = {s.table: s.rows for s in seed}
    out: list[ir.Table] = []
    rejections: list[ir.Rejection] = []
    for t in tables:
        key = list(t.natural_key)
        if key:
            values = [tuple(r.get(c) for c in key) for r in rows.get(t.name, [])]
            nulls = sum(1 for v in values if any(x is None for x in v))
            repeated = sorted({v for v in values if values.count(v) > 1}, key=repr)
            if nulls or repeated:
                why = (f"{len(repeated)} value(s) of ({', '.join(key)}) name more than one row, e.g. "
                       f"{list(repeated[0])}" if repeated else f"{nulls} row(s) have no value in ({', '.join(key)})")
                rejections.append(ir.Rejection(stage="seed_data", item=t.name,
                                               reason=f"natural key {key} cleared: {why}",
                                               evidence={"natural_key": key, "repeated": [list(v) for v in repeated[:5]]}))
                t = t.model_copy(update={"natural_key": []})
        out.append(t)
    return tuple(out), tuple(rejections)
