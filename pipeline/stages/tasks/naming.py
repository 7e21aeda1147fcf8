"""A write's row named as a person knows it, not picked as a database picks it.

Issue 40's reader audit (2026-11-29): "Please mark the latest loan of the book Moby-Dick as returned" picks a row
by its date, as a query does; a clerk with the book in hand names the borrower. A write the planner aims at the
row chosen by a date (``decide_update`` or ``decide_delete`` with ``latest`` or ``earliest``) is asked for by the
rows it points at instead ("the loan of the book Moby-Dick for the member Amy Garcia") whenever those name it
alone in the database (:func:`by_parents`): the same calls, the same row, the parents' names stated. A choice by an
amount ("the invoice with the largest amount") is a choice people make and stays. Likewise a write on a row that
its own date or number alone names ("I'm bringing back the book on October 19, 2025", the library's renewal, seen
2026-11-29) is asked for with the names of the rows it points at too (:func:`parents_too`: "the renewal of the book
The Hobbit for the member Laura Brown on October 19, 2025") when they and the date still name it alone.
Language-neutral: the schema's foreign keys, the rows and the values' types.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Any

from pipeline.dbmodel.keys import NaturalKey, describe
from pipeline.runtime.state import TableInfo, qi
from pipeline.stages.tasks.planner.chains import Chain, Goal, Named, by_name, row_parts

RECENCY = ("latest", "earliest")


def parents_naming(conn: sqlite3.Connection, infos: dict[str, TableInfo], keys: dict[str, NaturalKey], table: str,
                   key: tuple[Any, ...]) -> tuple[tuple[str, Any], ...] | None:
    """The facts that name the row of ``table`` whose primary key is ``key`` by the rows it points at (each by its
    own name: "the book Moby-Dick", "the member Amy Garcia"), when no other row of ``table`` points at the same
    rows; None otherwise (a member with two loans of one book, a parent without a name of its own)."""
    info = infos.get(table)
    if info is None or len(key) != len(info.key) or not info.foreign_keys:
        return None
    where = " AND ".join(f"{qi(k)} = ?" for k in info.key)
    r = conn.execute(f"SELECT * FROM {qi(table)} WHERE {where}", key).fetchone()
    if r is None:
        return None
    row = dict(zip(info.columns, r, strict=True))
    fks = [(c, p, pc) for c, p, pc in info.foreign_keys if p != table and p in infos and row.get(c) is not None]
    if len({c for c, _, _ in fks}) != len(fks) or len(fks) < 2:
        return None  # one parent names a row among its many (a book's loans): not the person's fact
    out: list[tuple[str, Any]] = []
    for c, p, pc in fks:
        pinfo = infos[p]
        pr = conn.execute(f"SELECT * FROM {qi(p)} WHERE {qi(pc or pinfo.key[0])} = ?", (row[c],)).fetchone()
        desc = describe(conn, infos, keys, p, dict(zip(pinfo.columns, pr, strict=True))) if pr else None
        if not desc or not by_name(desc):
            return None
        out.extend(desc)
    same = " AND ".join(f"{qi(c)} = ?" for c, _, _ in fks)
    n = conn.execute(f"SELECT COUNT(*) FROM {qi(table)} WHERE {same}", [row[c] for c, _, _ in fks]).fetchone()[0]
    return tuple(out) if n == 1 else None


def _parent_names(conn: sqlite3.Connection, infos: dict[str, TableInfo], keys: dict[str, NaturalKey], table: str,
                  value: Any, pcol: str | None) -> list[tuple[str, Any]] | None:
    """The facts by which a person names the row of ``table`` whose ``pcol`` is ``value``: its name ("the book
    Moby-Dick"), else its own parents' names when they name it alone (:func:`parents_naming`: "the loan of the book
    Moby-Dick for the member Amy Garcia"); None when neither does."""
    info = infos[table]
    r = conn.execute(f"SELECT * FROM {qi(table)} WHERE {qi(pcol or info.key[0])} = ?", (value,)).fetchone()
    if r is None:
        return None
    row = dict(zip(info.columns, r, strict=True))
    desc = describe(conn, infos, keys, table, row)
    if desc and by_name(desc):
        return list(desc)
    key = tuple(row[k] for k in info.key)
    by = parents_naming(conn, infos, keys, table, key) if info.key else None
    return list(by) if by else None


def parents_too(conn: sqlite3.Connection, infos: dict[str, TableInfo], keys: dict[str, NaturalKey], table: str,
                key: tuple[Any, ...], named: Named) -> tuple[tuple[str, Any], ...] | None:
    """``named`` with the names of the rows the row of ``table`` (primary key ``key``) points at put first, when
    ``named`` is the row's own facts and none of them a name (a date, an amount: no one names a renewal by its date
    alone) and the parents' names (:func:`_parent_names`) with those facts still name it alone; None otherwise."""
    own, parents = row_parts(table, named)
    info = infos.get(table)
    if parents or not own or any(by_name([p]) for p in own) or info is None or len(key) != len(info.key):
        return None
    where = " AND ".join(f"{qi(k)} = ?" for k in info.key)
    r = conn.execute(f"SELECT * FROM {qi(table)} WHERE {where}", key).fetchone()
    if r is None:
        return None
    row = dict(zip(info.columns, r, strict=True))
    fks = [(c, p, pc) for c, p, pc in info.foreign_keys if p != table and p in infos and row.get(c) is not None]
    if not fks or len({c for c, _, _ in fks}) != len(fks):
        return None
    out: list[tuple[str, Any]] = []
    for c, p, pc in fks:
        names = _parent_names(conn, infos, keys, p, row[c], pc)
        if names is None:
            return None
        out.extend(names)
    cols = [ref.rpartition(".")[2] for ref, _ in own]
    if any(col not in info.columns for col in cols):
        return None
    same = " AND ".join([*(f"{qi(c)} = ?" for c, _, _ in fks), *(f"{qi(col)} IS ?" for col in cols)])
    n = conn.execute(f"SELECT COUNT(*) FROM {qi(table)} WHERE {same}",
                     [*(row[c] for c, _, _ in fks), *(row[col] for col in cols)]).fetchone()[0]
    return (*out, *own) if n == 1 else None


def by_parents(conn: sqlite3.Connection, infos: dict[str, TableInfo], keys: dict[str, NaturalKey],
               chain: Chain) -> Chain:
    """``chain`` with each write on a row chosen by a date said as a write on the row its parents name
    (:func:`parents_naming`), and each write on a row its own date or amount alone names said with its parents' names
    too (:func:`parents_too`), their names added to what the request must state; ``chain`` itself when none is."""
    goals: list[Goal] = []
    must = list(chain.must_state)
    changed = False
    for g in chain.goals:
        named = (parents_naming(conn, infos, keys, g.items, g.key)
                 if g.kind in ("decide_update", "decide_delete") and g.which in RECENCY and g.items and g.key else None)
        if named is not None:
            goals.append(Goal(g.kind.removeprefix("decide_"), g.items, named, values=g.values, key=g.key))
        elif g.kind in ("update", "delete") and g.key and g.named and not g.owner:
            named = parents_too(conn, infos, keys, g.table, g.key, g.named)
            goals.append(replace(g, named=named) if named is not None else g)
        else:
            goals.append(g)
        if named is None:
            continue
        changed = True
        must += [v for _, v in named if v not in must and v not in chain.hidden]
    return replace(chain, goals=goals, must_state=must) if changed else chain
