"""Foreign-key columns named for the key they hold, fixed by code in the schema stage (``[stages.build]
fix_key_names``).

A column ``commission_records.artist_name REFERENCES artists(artist_id)`` holds artist ids under a name that
says names: every later stage (rows, tools, requests) then calls an id a name. The rule reads only the names'
``_``/camelCase segments, never words of a language: a column referencing ``parent.key`` is well named when its
segments end with the key's (``author_id`` for ``id``, ``borrower_member_id`` for ``member_id``), or, for a key
of several segments, when it ends with the key's last segment (``supervisor_id`` for ``employee_id``,
``origin_code`` for ``airport_code``: it holds that kind of value). Otherwise it is renamed: the segments
before its last one are kept and the key's name appended, overlapping where they meet (``artist_name`` ->
``artist_id``, ``borrower_name`` -> ``borrower_member_id``, ``author`` -> ``author_id``), with a numbered
variant (``artist_2_id``) when the name is taken. The DDL is rewritten token by token (the column's
definition, its constraints, and the ``REFERENCES t(column)`` lists of other tables), checked in SQLite, and
each rename is recorded as a note of the schema stage.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db

STAGE = "schema"

_SEGMENT = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/"
                    r"|[A-Za-z_][A-Za-z0-9_]*|\s+|.", re.S)
_NAMING_WORDS = {"REFERENCES", "TABLE", "EXISTS", "CONSTRAINT"}
"""SQL keywords after which an identifier names a table or a constraint, never a column."""


def segments(name: str) -> list[str]:
    """The lower-cased segments of an identifier (``_`` and camelCase boundaries)."""
    return [s.lower() for part in name.split("_") for s in _SEGMENT.findall(part)]


def key_name_ok(column: str, key: str) -> bool:
    """Whether ``column`` (a foreign key) is named for ``key``, the parent column it holds (see module doc)."""
    col, k = segments(column), segments(key)
    if not col or not k:
        return True
    if col[-len(k):] == k:
        return True
    return len(k) > 1 and len(col) > 1 and col[-1] == k[-1]


def key_column_name(column: str, key: str, taken: set[str]) -> str:
    """The name ``column`` gets for holding ``key``: its segments but the last, the key appended (overlapping
    where they meet), numbered when ``taken`` (lower-case names) has it."""
    col, k = segments(column), segments(key)
    prefix = col[:-1] if len(col) > 1 else col
    overlap = max((j for j in range(min(len(prefix), len(k)) + 1) if prefix[len(prefix) - j:] == k[:j]), default=0)
    parts = prefix + k[overlap:]
    name = "_".join(parts)
    n = 2
    while name.lower() in taken:
        name = "_".join([*parts[:-1], str(n), parts[-1]] if len(parts) > 1 else [*parts, str(n)])
        n += 1
    return name


def _unquote(token: str) -> str:
    if token[:1] in "\"`[" and len(token) >= 2:
        return token[1:-1].replace('""', '"') if token[0] == '"' else token[1:-1]
    return token


def _requote(token: str, new: str) -> str:
    return f'"{new}"' if token[:1] in "\"`[" else new


def rewrite_ddl(ddl: str, own: dict[str, str], refs: dict[str, dict[str, str]]) -> str:
    """``ddl`` with column ``own`` renames (lower-case old -> new) applied to every identifier that names a
    column, and ``refs`` (lower-case table -> renames) applied inside ``REFERENCES table (...)`` lists."""
    out: list[str] = []
    prev = ""  # the previous significant token (keywords upper-cased)
    ref_table: str | None = None  # the table of the REFERENCES clause being read
    after_table = in_list = False
    for m in _TOKEN.finditer(ddl):
        tok = m.group(0)
        if tok.isspace() or tok.startswith(("--", "/*")):
            out.append(tok)
            continue
        ident = tok[:1].isalpha() or tok[:1] in "_\"`["
        if after_table:  # right after ``REFERENCES table``: its column list, or none
            after_table = False
            in_list = tok == "("
        elif in_list:
            if tok == ")":
                in_list = False
            elif ident:
                new = refs.get(ref_table or "", {}).get(_unquote(tok).lower())
                tok = _requote(tok, new) if new else tok
        elif ident and prev == "REFERENCES":
            ref_table, after_table = _unquote(tok).lower(), True
        elif ident and prev not in _NAMING_WORDS:
            new = own.get(_unquote(tok).lower())
            tok = _requote(tok, new) if new else tok
        out.append(tok)
        prev = tok.upper() if tok[:1].isalpha() else tok
    return "".join(out)


def _foreign_keys(conn: sqlite3.Connection, table: str) -> list[tuple[str, str, str]]:
    """(column, parent, parent column) of each single-column reference (``REFERENCES p`` names p's key)."""
    groups: dict[int, list[tuple]] = {}
    for fk in conn.execute(f'PRAGMA foreign_key_list("{table}")').fetchall():
        groups.setdefault(fk[0], []).append(fk)
    out = []
    for rows in groups.values():
        for fk in rows:
            parent, col, to = fk[2], fk[3], fk[4]
            if to is None:
                pk = [r for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall() if r[5]]
                if len(pk) != len(rows):
                    continue
                to = sorted(pk, key=lambda r: r[5])[fk[1]][1]
            out.append((col, parent, to))
    return out


def fix_key_names(tables: list[ir.Table], keys: dict[str, list[str]],
                  check_tables: Callable[[list[tuple[str, str]]], dict[str, str | None]]
                  ) -> tuple[list[ir.Table], dict[str, list[str]], list[ir.Rejection]]:
    """Rename the foreign-key columns of ``tables`` (valid, created in this order) that are named for something
    other than the key they hold; ``keys`` (the declared natural keys) follow. A rewrite that ``check_tables``
    (the schema stage's check: name -> error or None) refuses is not made. Returns (tables, keys, one note per
    rename)."""
    conn = scratch_db(tables)
    renames: dict[str, dict[str, str]] = {}
    notes: list[ir.Rejection] = []
    try:
        for t in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{t.name}")').fetchall()]
            taken = {c.lower() for c in columns}
            for col, parent, to in _foreign_keys(conn, t.name):
                if key_name_ok(col, to) or col.lower() in renames.get(t.name.lower(), {}):
                    continue
                new = key_column_name(col, to, taken - {col.lower()})
                if not re.fullmatch(ir.IDENT.pattern, new) or new.lower() == col.lower():
                    continue
                taken.add(new.lower())
                renames.setdefault(t.name.lower(), {})[col.lower()] = new
                notes.append(ir.Rejection(
                    stage=STAGE, item=f"{t.name}.{col}",
                    reason=f"foreign-key column {t.name}.{col} renamed {new}: it holds {parent}.{to}",
                    evidence={"table": t.name, "column": col, "renamed": new, "references": f"{parent}.{to}"}))
    finally:
        conn.close()
    if not renames:
        return tables, keys, []
    out = [t.model_copy(update={"ddl": rewrite_ddl(t.ddl, renames.get(t.name.lower(), {}), renames)})
           for t in tables]
    if any(e is not None for e in check_tables([(t.name, t.ddl) for t in out]).values()) or not _renamed(out, renames):
        return tables, keys, []
    new_keys = {name: [renames.get(name.lower(), {}).get(c.lower(), c) for c in cols] for name, cols in keys.items()}
    return out, new_keys, notes


def _renamed(tables: list[ir.Table], renames: dict[str, dict[str, str]]) -> bool:
    """Whether every table now has each renamed column under its new name."""
    conn = scratch_db(tables)
    try:
        for t in tables:
            have = {r[1] for r in conn.execute(f'PRAGMA table_info("{t.name}")').fetchall()}
            if not set(renames.get(t.name.lower(), {}).values()) <= have:
                return False
    finally:
        conn.close()
    return True


_ID_NAME = re.compile(r"(?:^|_)id$", re.I)


def id_named(column: str) -> bool:
    """Whether a column's name says it holds an id (``id``, ``court_id``): a key or a reference even where the
    schema declares none (a foreign key dropped with the table it named), never a quantity."""
    return bool(_ID_NAME.search(column))


def singular(word: str) -> str:
    """An English plural's singular by its ending ("batches" -> "batch", "categories" -> "category")."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
