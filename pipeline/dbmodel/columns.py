"""A table's columns as every stage reads them: type, keys, defaults, ``CHECK (col IN (...))`` lists and
foreign-key targets (:func:`table_columns`), from the database SQLite built from the DDL.

(Moved out of the schema stage, which still uses it: the rows, tools and policy stages read it too.)
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass

from pipeline import ir


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    notnull: bool
    pk: int
    has_default: bool
    enum: tuple[str | int | float, ...] | None
    ref: tuple[str, str] | None

    @property
    def auto_id(self) -> bool:
        """An INTEGER PRIMARY KEY alone: SQLite assigns it (the rowid)."""
        return self.pk == 1 and self.type.upper() == "INTEGER"


_CHECK_IN = re.compile(r"CHECK\s*\(\s*[\"`\[]?([A-Za-z_][A-Za-z0-9_]*)[\"`\]]?\s+IN\s*\(([^()]*)\)\s*\)", re.I)


_LITERAL = re.compile(r"\s*(?:'((?:[^']|'')*)'|(-?\d+(?:\.\d+)?))\s*(?:,|$)")


def check_enums(ddl: str) -> dict[str, tuple[str | int | float, ...]]:
    """Columns constrained by ``CHECK (col IN (literal, ...))`` and their allowed values."""
    out: dict[str, tuple[str | int | float, ...]] = {}
    for m in _CHECK_IN.finditer(ddl):
        body, pos = m.group(2), 0
        vals: list[str | int | float] = []
        while pos < len(body):
            lm = _LITERAL.match(body, pos)
            if not lm or lm.end() == pos:
                vals = []
                break
            if lm.group(1) is not None:
                vals.append(lm.group(1).replace("''", "'"))
            else:
                num = lm.group(2)
                vals.append(float(num) if "." in num else int(num))
            pos = lm.end()
        if vals:
            out[m.group(1)] = tuple(dict.fromkeys(vals))
    return out


def table_columns(conn: sqlite3.Connection, table: ir.Table) -> list[Column]:
    """Columns of ``table`` (as created in ``conn``) with CHECK-IN enums and foreign-key targets."""
    enums = check_enums(table.ddl)
    refs: dict[str, tuple[str, str]] = {}
    for fk in conn.execute(f'PRAGMA foreign_key_list("{table.name}")').fetchall():
        parent, col, to = fk[2], fk[3], fk[4]
        if to is None:
            pk = [r[1] for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall() if r[5]]
            to = pk[0] if pk else "rowid"
        refs[col] = (parent, to)
    pk_count = sum(1 for r in conn.execute(f'PRAGMA table_info("{table.name}")').fetchall() if r[5])
    cols = []
    for _cid, name, typ, notnull, dflt, pk in conn.execute(f'PRAGMA table_info("{table.name}")').fetchall():
        cols.append(Column(name=name, type=(typ or "ANY").upper(), notnull=bool(notnull),
                           pk=pk if pk_count == 1 else (2 if pk else 0), has_default=dflt is not None,
                           enum=enums.get(name), ref=refs.get(name)))
    return cols
