"""DDL text repairs that need no LLM round trip, made to a reply's ``CREATE TABLE`` before SQLite sees it:
non-STRICT type names (``VARCHAR(80)``, ``DATE``, ``BOOLEAN``) become STRICT ones, a missing ``STRICT`` is
appended, CHECKs against calendar dates and CHECKs/DEFAULTs that read the wall clock or call ``random()``
(found by parsing) are dropped; a column is dropped from a statement (:func:`drop_column`). Used by the schema stage
(``pipeline.stages.schema``)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence

import sqlglot
from sqlglot import exp

from pipeline import ir

_TYPE_MAP = [
    (r"(?:N?VARCHAR|CHARACTER\s+VARYING|N?CHAR|CHARACTER|STRING|CLOB|UUID|TEXT)\s*(?:\(\s*\d+\s*\))?", "TEXT"),
    (r"DATETIME|TIMESTAMP|DATE|TIME", "TEXT"),
    (r"BOOLEAN|BOOL|BIGINT|SMALLINT|TINYINT|MEDIUMINT|INT(?:EGER)?\s*(?:\(\s*\d+\s*\))?", "INTEGER"),
    (r"DECIMAL|NUMERIC|FLOAT|DOUBLE(?:\s+PRECISION)?|MONEY|REAL", "REAL"),
]
_TYPES = "|".join(f"(?P<t{i}>(?:{pat})(?:\\s*\\(\\s*\\d+\\s*(?:,\\s*\\d+\\s*)?\\))?)" for i, (pat, _) in
                  enumerate(_TYPE_MAP))
# A type sits right after a column name, which follows "(" or "," at the top of the column list.
_COLTYPE = re.compile(r"([(,]\s*[\"`\[]?[A-Za-z_][A-Za-z0-9_]*[\"`\]]?\s+)(?:" + _TYPES + r")(?=[\s,)])", re.I)
_CREATE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?[\"`\[]?([A-Za-z_][A-Za-z0-9_]*)[\"`\]]?",
                     re.I)


_OPTIONS = re.compile(r"(?:\s*,?\s*(?:STRICT|WITHOUT\s+ROWID))*\s*$", re.I)
_STRING = re.compile(r"'(?:[^']|'')*'")


_DATE_LITERAL = re.compile(r"'\d{4}-\d{2}-\d{2}[^']*'")
_CHECK_START = re.compile(r"(,\s*)?(CONSTRAINT\s+\w+\s+)?\bCHECK\s*\(", re.I)
_VOLATILE_NODES = (exp.CurrentDate, exp.CurrentTime, exp.CurrentTimestamp, exp.Rand)


def is_nondeterministic(sql_expr: str) -> bool:
    """Whether an SQL expression reads the wall clock (CURRENT_DATE, ``date('now')``) or calls ``random()``,
    decided by parsing it (sqlglot), not by its spelling."""
    try:
        tree = sqlglot.parse_one(f"SELECT {sql_expr}", read="sqlite")
    except Exception:
        return bool(re.search(r"\bCURRENT_(?:DATE|TIME|TIMESTAMP)\b|'now'|\brandom(?:blob)?\s*\(", sql_expr, re.I))
    for node in tree.walk():
        if isinstance(node, _VOLATILE_NODES):
            return True
        if isinstance(node, exp.Literal) and node.is_string and node.this.strip().lower() == "now":
            return True
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("random", "randomblob"):
            return True
    return False


_DEFAULT_KEYWORD = re.compile(r"\s+DEFAULT\s+CURRENT_(?:DATE|TIME|TIMESTAMP)\b", re.I)
_DEFAULT_OPEN = re.compile(r"\s+DEFAULT\s*\(", re.I)


def drop_nondeterministic_defaults(ddl: str) -> str:
    """Remove ``DEFAULT CURRENT_TIMESTAMP`` / ``DEFAULT (datetime('now'))`` / ``DEFAULT (random())``: an
    environment runs on a fixed clock and must be reproducible; the tools store such values from ``:now``."""
    s = _DEFAULT_KEYWORD.sub("", ddl)
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), s)
    out, pos = [], 0
    for m in _DEFAULT_OPEN.finditer(bare):
        if m.start() < pos:
            continue
        end = _close(bare, m.end() - 1)
        if end is None or not is_nondeterministic(s[m.end() - 1:end]):
            continue
        out.append(s[pos:m.start()])
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _close(bare: str, open_at: int) -> int | None:
    """The index after the parenthesis closing the one at ``open_at`` (string literals blanked)."""
    depth = 0
    for i in range(open_at, len(bare)):
        depth += {"(": 1, ")": -1}.get(bare[i], 0)
        if depth == 0:
            return i + 1
    return None


def drop_date_literal_checks(ddl: str) -> str:
    """Remove CHECK constraints that compare with a calendar date literal (``CHECK (due_date < '2024-01-01')``)
    or that are not deterministic (``CHECK (start_date >= CURRENT_DATE)``, ``date('now')``, ``random()``).

    The model pins dates to the year it imagines, or to the wall clock; the seeded rows and every later write
    use dates around the environment's fixed clock, so such a constraint refuses realistic data (a whole
    table's rows, seen from the 1.5B model; every permit of a permit office). Checks between columns
    (``CHECK (due_date >= loan_date)``) are kept."""
    return drop_checks(ddl, lambda body: bool(_DATE_LITERAL.search(body) or is_nondeterministic(body)))[0]


def drop_checks(ddl: str, drop: Callable[[str], bool]) -> tuple[str, list[str]]:
    """``ddl`` without the CHECK constraints (column or table constraints) whose expression ``drop`` says to drop,
    and the removed constraints' text. Found by scanning with string literals blanked, so a ``'CHECK ('`` inside a
    DEFAULT is no constraint."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), ddl)  # same offsets, no parentheses inside strings
    out, pos, removed = [], 0, []
    for m in _CHECK_START.finditer(bare):
        if m.start() < pos:
            continue
        depth, end = 0, None
        for i in range(m.end() - 1, len(bare)):
            depth += {"(": 1, ")": -1}.get(bare[i], 0)
            if depth == 0:
                end = i + 1
                break
        body = ddl[m.end():end - 1] if end is not None else ""
        if end is None or not drop(body):
            continue
        removed.append(ddl[m.start():end].lstrip(", "))
        start = m.start()
        if m.group(1) is None:  # a column constraint (or a table's first item): drop the spaces before it
            while start > pos and ddl[start - 1] == " ":
                start -= 1
            if bare[:start].endswith("("):  # it was the first item: its trailing comma goes too
                end += len(bare[end:]) - len(bare[end:].lstrip(", "))
        out.append(ddl[pos:start])
        pos = end
    out.append(ddl[pos:])
    return "".join(out), removed


_NAME_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|[A-Za-z_][A-Za-z0-9_]*")


def names_column(sql: str, column: str) -> bool:
    """Whether the SQL text names ``column`` (bare or quoted, in any case; a string literal names nothing)."""
    for m in _NAME_TOKEN.finditer(sql):
        tok = m.group(0)
        if tok[0] == "'":
            continue
        name = tok[1:-1] if tok[0] in "\"`[" else tok
        if name.lower() == column.lower():
            return True
    return False


def column_items(ddl: str) -> list[str]:
    """The top-level items of a ``CREATE TABLE``'s column list (column definitions and table constraints), as
    written, split at the commas outside parentheses and string literals."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), ddl)
    open_at = bare.find("(")
    if open_at < 0:
        return []
    items, depth, start = [], 0, open_at + 1
    for i in range(open_at, len(bare)):
        depth += {"(": 1, ")": -1}.get(bare[i], 0)
        if depth == 1 and bare[i] == ",":
            items.append(ddl[start:i].strip())
            start = i + 1
        elif depth == 0:
            items.append(ddl[start:i].strip())
            break
    return [item for item in items if item]


def drop_column(ddl: str, table: str, column: str) -> tuple[str, list[str]] | str:
    """``ddl`` (the ``CREATE TABLE`` of ``table``) without ``column``, by SQLite's own ``ALTER TABLE ... DROP
    COLUMN`` (the column's definition goes with its own constraints; the rest of the text is kept as written),
    after the CHECK constraints that name it elsewhere (``CHECK (pregnant = 0 OR sex = 'f')``) are removed; with
    those constraints' text. Or why SQLite refuses (the column is a key, UNIQUE, indexed, in a generated
    column...)."""
    conn = sqlite3.connect(":memory:")  # the table alone, no foreign-key enforcement: only its text changes
    try:
        conn.execute(ddl)
        removed: list[str] = []
        try:
            conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
        except sqlite3.Error:
            trimmed, removed = drop_checks(ddl, lambda body: names_column(body, column))
            conn.execute(f'DROP TABLE "{table}"')
            conn.execute(trimmed)
            conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
            own = [item for item in column_items(ddl) if names_column(item.split(None, 1)[0], column)]
            removed = [c for c in removed if not any(c in item for item in own)]  # its own went with it anyway
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    except sqlite3.Error as e:
        return str(e)
    finally:
        conn.close()
    return row[0], removed


def normalise_ddl(ddl: str) -> str:
    """Strip fences/semicolons, map non-STRICT type names onto STRICT ones, drop CHECKs against calendar date
    literals, drop a comma left before a closing parenthesis, close the column list when closing parentheses are
    missing, drop the reply's other fields written into the column list, a ``STRICT`` written inside it, a
    FOREIGN KEY constraint with no REFERENCES or naming a column the table lacks, end with ``STRICT``."""
    s = ddl.strip().strip("`").strip()
    s = re.sub(r"^sql\s+", "", s, flags=re.I).strip().rstrip(";").strip()

    def sub(m: re.Match[str]) -> str:
        for i, (_, target) in enumerate(_TYPE_MAP):
            if m.group(f"t{i}") is not None:
                return m.group(1) + target
        return m.group(0)

    s = _COLTYPE.sub(sub, s)
    s = drop_date_literal_checks(s)
    s = drop_nondeterministic_defaults(s)
    m = _OPTIONS.search(s)
    cut = m.start() if m else len(s)
    body, options = s[:cut].rstrip(), s[cut:]
    early = _early_close(body)
    if early is not None:  # a stray ')' closed the column list before its end: move it to the end
        body = body[:early] + body[early + 1 :]
    missing = paren_balance(body)
    if missing > 0:  # small models often drop the closing parenthesis of the column list
        body += ")" * missing
    body = _drop_trailing_commas(body)
    body = _drop_items(body, _reply_fields)
    body = _drop_inner_options(body)
    body = _drop_items(body, _unreferenced_keys)
    body = _drop_items(body, _keys_of_unknown_columns)
    rowid = " WITHOUT ROWID," if re.search(r"WITHOUT\s+ROWID", options, re.I) else ""
    return f"{body}{rowid} STRICT"


def _drop_trailing_commas(sql: str) -> str:
    """``sql`` without a comma that only whitespace separates from a closing parenthesis, outside string literals:
    "end_time TEXT NOT NULL,) STRICT" (a movie theatre's showtimes ended "...)), ": once its calendar CHECKs were
    dropped and the stray ')' moved to the end, a comma stood before it; the 1.5B model, told SQLite's "near ')':
    syntax error", never mended it and the whole scenario was rejected)."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), sql)
    drop = {m.start() for m in re.finditer(r",(?=\s*\))", bare)}
    return "".join(ch for i, ch in enumerate(sql) if i not in drop) if drop else sql


_FK_ITEM = re.compile(r"^(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY\b", re.I)
_REFERENCES = re.compile(r"\bREFERENCES\b", re.I)


def _unreferenced_keys(items: list[str]) -> list[bool]:
    """Marks a table constraint ``FOREIGN KEY (...)`` that names no ``REFERENCES``: "FOREIGN KEY (book_id) ON
    DELETE CASCADE" after an inline ``REFERENCES books(book_id)`` (the example library's loans, renewals and fines,
    2026-11-30: the 1.5B model, told SQLite's 'near "ON": syntax error', gave it back three times and the library
    kept only books and members)."""
    return [bool(_FK_ITEM.match(i) and not _REFERENCES.search(_STRING.sub("''", i))) for i in items]


def _rebuild(body: str, items: list[str]) -> str:
    """``body`` (a ``CREATE TABLE`` up to its closing parenthesis) with its column list made of ``items``."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), body)
    return f"{body[:bare.find('(') + 1]}{', '.join(items)}{body[bare.rfind(')'):]}"


def _drop_items(body: str, drop: Callable[[list[str]], list[bool]]) -> str:
    """``body`` without the column-list items ``drop`` marks (one flag per item); the text is kept as written
    when none is marked, and when every item would go."""
    items = column_items(body)
    flags = drop(items)
    keep = [i for i, f in zip(items, flags, strict=True) if not f]
    return body if len(keep) == len(items) or not keep else _rebuild(body, keep)


_FIELD_ITEM = re.compile(r"^[\"'`\[]?[A-Za-z_][A-Za-z0-9_]*[\"'`\]]?\s*[:=]")


def _reply_fields(items: list[str]) -> list[bool]:
    """The items from the first one shaped ``name: ...`` or ``name = ...`` on: the reply's other fields written
    into the statement after its column list closed ("...)), natural_key = ['showtime_id'], personal = []" from a
    movie theatre's showtimes, "...)), natural_key: [" from a parking garage's reservations; the 1.5B model,
    2026-11). No column definition or table constraint has that shape: a column's name is followed by its type
    or a constraint, never by ':' or '='."""
    first = next((k for k, item in enumerate(items) if _FIELD_ITEM.match(item)), len(items))
    return [k >= first for k in range(len(items))]


_INNER_OPTION = re.compile(r"\s+(?:STRICT|WITHOUT\s+ROWID)\b", re.I)


def _drop_inner_options(body: str) -> str:
    """``body`` without a table option (``STRICT``, ``WITHOUT ROWID``) written after a column's constraints, inside
    the column list: "box_date TEXT NOT NULL CHECK (box_date >= CURRENT_DATE) STRICT, quantity ..." (a subscription
    box service's monthly boxes, skips and cancellations; the 1.5B model, told SQLite's 'near "STRICT": syntax
    error', gave them back three times and the tables were lost). SQLite allows those words only after the column
    list. Only words at the top of the column list and after an item's first word go: a column *named* strict, a
    ``strict`` inside a CHECK's parentheses or a string literal stays."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), body)
    open_at = bare.find("(")
    if open_at < 0:
        return body
    depth = [0] * len(bare)
    d = 0
    for i, ch in enumerate(bare):
        d += ch == "("
        depth[i] = d
        d -= ch == ")"
    cut = []
    for m in _INNER_OPTION.finditer(bare, open_at + 1):
        if depth[m.start()] != 1:
            continue
        item_start = max([open_at] + [i for i in range(open_at, m.start()) if bare[i] == "," and depth[i] == 1]) + 1
        if bare[item_start:m.start()].strip():  # not the item's first word (a column's name)
            cut.append((m.start(), m.end()))
    for a, b in reversed(cut):
        body = body[:a] + body[b:]
    return body


_CONSTRAINT_ITEM = re.compile(r"^(?:CONSTRAINT|PRIMARY\s+KEY|UNIQUE|CHECK|FOREIGN\s+KEY)\b", re.I)
_FK_COLUMNS = re.compile(r"\bFOREIGN\s+KEY\s*\(([^)]*)\)", re.I)


def _unquote(name: str) -> str:
    return name.strip().strip('"`[]').lower()


def _keys_of_unknown_columns(items: list[str]) -> list[bool]:
    """Marks a ``FOREIGN KEY (col) REFERENCES ...`` table constraint naming a column the table does not define:
    "FOREIGN KEY (garage_id) REFERENCES garages(garage_id)" in a users table with no garage_id (a parking
    garage; the 1.5B model asked to link an island table), SQLite's 'unknown column "garage_id" in foreign key
    definition'. The link goes, the table stays."""
    columns = {_unquote(item.split(None, 1)[0]) for item in items if not _CONSTRAINT_ITEM.match(item)}
    out = []
    for item in items:
        m = _FK_COLUMNS.search(_STRING.sub("''", item)) if _FK_ITEM.match(item) else None
        out.append(m is not None and any(_unquote(c) not in columns for c in m.group(1).split(",")))
    return out


def _early_close(body: str) -> int | None:
    """Index of a ')' that closes the column list while more column text follows, else None."""
    bare = _STRING.sub(lambda m: "_" * len(m.group(0)), body)
    depth, opened = 0, False
    for i, ch in enumerate(bare):
        if ch == "(":
            depth, opened = depth + 1, True
        elif ch == ")":
            depth -= 1
            if opened and depth == 0:
                return i if bare[i + 1 :].strip() else None
    return None


def paren_balance(sql: str) -> int:
    """How many more '(' than ')' the statement has, outside string literals."""
    bare = _STRING.sub("''", sql)
    return bare.count("(") - bare.count(")")


def ddl_table_name(ddl: str) -> str | None:
    m = _CREATE.match(ddl)
    return m.group(1) if m else None


def connect() -> sqlite3.Connection:
    """An empty in-memory database with foreign keys on."""
    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def scratch_db(tables: Sequence[ir.Table]) -> sqlite3.Connection:
    """An in-memory database with ``tables`` created and foreign keys on."""
    conn = connect()
    for t in tables:
        conn.execute(t.ddl)
    return conn


def row_order(conn: sqlite3.Connection, table: str) -> str:
    """The ``ORDER BY`` that reads ``table``'s rows in insertion order: rowid, else its primary key."""
    has_rowid = conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                             (table,)).fetchone()[0]
    if has_rowid:
        return "rowid"
    pks = [r[1] for r in sorted(conn.execute(f'PRAGMA table_info("{table}")').fetchall(), key=lambda r: r[5])
           if r[5]]
    return ", ".join(f'"{c}"' for c in pks) or "1"


def rows_of(conn: sqlite3.Connection, table: ir.Table, plan: ir.RowPlan | None = None) -> ir.SeedRows:
    """``table``'s rows in ``conn`` as seed rows (in :func:`row_order`), with the plan that made them."""
    cur = conn.execute(f'SELECT * FROM "{table.name}" ORDER BY {row_order(conn, table.name)}')
    cols = [d[0] for d in cur.description]
    return ir.SeedRows(table=table.name, rows=[dict(zip(cols, r, strict=True)) for r in cur], plan=plan)
