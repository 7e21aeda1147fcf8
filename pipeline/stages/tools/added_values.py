"""Values for the seeded rows of a column the tools stage added (``amend_schema``: ``ALTER TABLE ... ADD COLUMN``).

A column added for a tool is NULL in every seeded row, and NULL is never equal or unequal to anything: a guard
``status = 'available'`` or ``status != 'returned'`` then refuses every seeded row, a rule over the column never
applies and a task about it reads nothing. :func:`fill` gives those rows values taken from what the tools themselves
say about the column, read from their SQL by a parser (no names, no words):

- what a guard lets through (``accept``): ``c = v`` / ``c IN (...)`` in a guard that must exist or in a write's own
  ``WHERE`` (the write changes only such rows), ``c != v`` / ``c NOT IN (...)`` in a guard that must not exist;
- what a guard refuses (``refuse``): the converse (``c != v`` in a guard that must exist, ``c = v`` in one that must
  not exist);
- what the tools write or compare it with otherwise (``known``): literals in ``SET c = v`` / ``INSERT (c) VALUES (v)``
  and in a read's comparisons, the ``enum`` of a parameter written into or compared with it, a ``CHECK (c IN ...)``
  list; and the column's ``DEFAULT``.

Values whose type the column's declared type refuses are ignored. A row's initial state is a value the guards
accept (the 'before' state, so the write tools work on seeded rows): the accepted values that no guard refuses,
else the DEFAULT, else every known value no guard refuses. When other known values exist (the states a guard
refuses, the values a write leaves behind), about a quarter of the rows (:data:`OTHER_SHARE`, at least one) take
them, so a guard or rule that refuses some rows has rows to refuse. Those rows are the ones no child table refers to
when there are enough: a row other rows depend on (a loan with renewals, a book with loans) keeps a state the
guards accept, so writes on its dependants are not refused for a state the seed alone gave it. Values are dealt
in turn over a shuffled row order, each list in the order the tools name them, the shuffle seeded by the table and
column (deterministic). When the tools name no value, or only values their guards refuse, the column stays NULL
and a note says so.

A column that repeats a child table's state is filled from the children instead (:func:`mirror`, issue 40: the
library's ``books.status``, added for ``change_book_status`` and described as 'pending' or 'returned', the values
of ``loans.status``, was dealt at random, and a reader rejected 9 of 12 books: 'returned' books out on a loan,
'pending' books never lent). When the values the tools name (at least two) are all in the ``CHECK (c IN ...)`` list
of a column of a table with one reference to this one, each row takes the value of its latest child that has one
(by the child's first ISO-date column, then its key); a row with no child takes the column's DEFAULT, else stays
NULL, and the note says how many. Read from the schema and the rows (no names, no words).

A column the tools keep as a running amount (:func:`amounts`: a write sets it to itself plus or minus a move,
``SET stock = stock - :quantity``) and name no value of is filled with amounts instead of staying NULL (issue 40: the
pharmacy's ``medications.stock``, added for ``fill_prescription``, was NULL in all 51 rows, and ``NULL - 2`` is NULL:
no fill ever changed it). The move is read from the rows: the values the same tool writes the same parameter into
elsewhere (a prescription's ``quantity``), else the literal moved, else 1. An amount drawn down starts at
:data:`DRAWN_DOWN` moves (several writes fit before it runs out), one counted up at :data:`COUNTED_UP` (the moves made
so far); whole when every move is whole or the column is an INTEGER.
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel.columns import check_enums
from pipeline.dbmodel.ddl import row_order
from pipeline.dbmodel.paging import iso_date_columns
from pipeline.runtime.sqlshape import literal_value
from pipeline.runtime.state import TableInfo, qi, table_infos

OTHER_SHARE = 0.25
"""The share of rows given a known value other than the 'before' state, when the tools name one."""
DRAWN_DOWN = (5, 20)
"""A running amount the tools draw down starts between these many of its typical move (:func:`amounts`)."""
COUNTED_UP = (0, 5)
"""A running amount the tools count up starts between these many of its typical move."""
MOVES_KEPT = 12
"""The distinct moves a note's evidence lists (the smallest)."""


@dataclass
class Evidence:
    """What the tools say about one column (values in the order the tools name them)."""

    accept: list[Any] = field(default_factory=list)
    refuse: list[Any] = field(default_factory=list)
    known: list[Any] = field(default_factory=list)
    default: Any = None

    def add(self, kind: str, values: Sequence[Any]) -> None:
        bucket: list[Any] = getattr(self, kind)
        for v in values:
            if v not in bucket:
                bucket.append(v)

    def vocabulary(self) -> list[Any]:
        extra = [self.default] if self.default is not None else []
        return list(dict.fromkeys([*self.accept, *self.refuse, *self.known, *extra]))

    def before(self) -> list[Any]:
        """The values a seeded row starts in (see the module docstring); empty when none is told."""
        accepted = [v for v in self.accept if v not in self.refuse]
        if accepted:
            return accepted
        if self.default is not None and self.default not in self.refuse:
            return [self.default]
        return [v for v in self.vocabulary() if v not in self.refuse]

    def as_json(self) -> dict[str, Any]:
        return {"accept": list(self.accept), "refuse": list(self.refuse), "known": list(self.known),
                "default": self.default}


def _literal(node: exp.Expr) -> Any:
    """A literal's value (``pipeline.runtime.sqlshape.literal_value``; TRUE/FALSE as 1/0), else None."""
    if isinstance(node, exp.Boolean):
        return int(bool(node.this))
    ok, value = literal_value(node)
    return value if ok else None


def _values(node: exp.Expr | None, enums: dict[str, list[Any]]) -> list[Any]:
    """The values an expression stands for: a literal, or a parameter's enum."""
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return _values(node.this, enums)
    if isinstance(node, exp.Placeholder):
        return list(enums.get(node.name, []))
    v = _literal(node)
    return [] if v is None else [v]


def _fits(value: Any, declared: str) -> bool:
    """Whether a column of SQLite type ``declared`` holds ``value`` as it is (STRICT tables refuse the rest)."""
    t = declared.upper()
    if "INT" in t:
        return isinstance(value, int) and not isinstance(value, bool)
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return isinstance(value, str)
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def _owner(col: exp.Column, tree: exp.Expr, infos: dict[str, TableInfo]) -> str | None:
    """The table a column reference belongs to, when the statement tells it unambiguously."""
    aliases = {t.alias_or_name.lower(): t.name for t in tree.find_all(exp.Table)}
    if col.table:
        table = aliases.get(col.table.lower())
        return table if table in infos and col.name in infos[table].columns else None
    owners = {t.name for t in tree.find_all(exp.Table) if t.name in infos and col.name in infos[t.name].columns}
    return owners.pop() if len(owners) == 1 else None


def _negated(node: exp.Expr) -> bool:
    """Whether ``node`` sits under an odd number of NOTs."""
    flips, cur = 0, node.parent
    while cur is not None:
        if isinstance(cur, exp.Not):
            flips += 1
        cur = cur.parent
    return flips % 2 == 1


def _statement(sql: str, role: str, table: str, column: str, infos: dict[str, TableInfo],
               enums: dict[str, list[Any]], ev: Evidence) -> None:
    """Add what one statement says about ``table.column`` to ``ev``. ``role``: 'exist' / 'not_exist' (a guard),
    'write' (a write statement) or 'read' (anything else)."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except Exception:
        return
    if tree is None:
        return
    assigned: set[int] = set()
    if isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema) and isinstance(tree.this.this, exp.Table):
        if tree.this.this.name == table:
            cols = [c.name for c in tree.this.expressions]
            rows = tree.expression.expressions if isinstance(tree.expression, exp.Values) else []
            for row in rows:
                for c, v in zip(cols, row.expressions, strict=False):
                    if c == column:
                        ev.add("known", _values(v, enums))
    if isinstance(tree, exp.Update) and isinstance(tree.this, exp.Table):
        for eq in tree.args.get("expressions") or []:
            if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
                assigned.add(id(eq))
                if tree.this.name == table and eq.left.name == column:
                    ev.add("known", _values(eq.right, enums))
    for cmp in tree.find_all(exp.EQ, exp.NEQ, exp.In):
        if id(cmp) in assigned:
            continue
        if isinstance(cmp, exp.In):
            col, sides = cmp.this, list(cmp.expressions)
            positive = True
        elif isinstance(cmp, (exp.EQ, exp.NEQ)):
            col, other = (cmp.left, cmp.right) if isinstance(cmp.left, exp.Column) else (cmp.right, cmp.left)
            sides, positive = [other], isinstance(cmp, exp.EQ)
        else:
            continue
        values = [v for e in sides for v in _values(e, enums)]
        if not isinstance(col, exp.Column) or col.name != column or _owner(col, tree, infos) != table or not values:
            continue
        if _negated(cmp):
            positive = not positive
        if role == "read" or any(isinstance(e, exp.Placeholder) for e in sides):
            ev.add("known", values)  # a filter, or a parameter's enum: values, not a state the write needs
            continue
        if role == "not_exist":
            positive = not positive
        ev.add("accept" if positive else "refuse", values)


_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,40})'(?!\w)|(?<!\w)\"([^\"\n]{1,40})\"(?!\w)|‘([^’\n]{1,40})’"
                     r"|“([^”\n]{1,40})”|„([^“”\n]{1,40})[“”]|«\s*([^»\n]{1,40}?)\s*»")
"""A value quoted in a text: between straight quotes that open and close no word (the apostrophe of "book's" is
none), or between typographic quotes and guillemets of any language."""


def quoted(text: str) -> list[str]:
    """The values ``text`` quotes, in order, each once ("The new status ('pending' or 'returned')" gives
    ['pending', 'returned']); read by the quote characters alone, no word."""
    found = [next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(text or "")]
    return list(dict.fromkeys(v for v in found if v))


def _read(tools: Sequence[ir.Tool], table: ir.Table, column: str, infos: dict[str, TableInfo], ev: Evidence,
          said: bool = False) -> None:
    """Add what the SQL of ``tools`` says about ``table.column`` to ``ev``; a parameter stands for its enum, or with
    ``said`` (no enum) for the values its description quotes."""
    for tool in tools:
        enums = {p.name: list(p.enum) if p.enum else quoted(p.description) if said else []
                 for p in tool.params if p.enum or said}
        for step in tool.steps:
            role = (step.must or "exist") if step.kind == "guard" else \
                "write" if step.kind == "write" and tool.kind == "write" else "read"
            _statement(step.sql, role, table.name, column, infos, enums, ev)
        if tool.returns is not None:
            _statement(tool.returns.sql, "read", table.name, column, infos, enums, ev)


def evidence(tools: Sequence[ir.Tool], table: ir.Table, column: str, conn: sqlite3.Connection) -> Evidence:
    """What ``tools`` say about ``table.column`` (the schema and rows on ``conn``). When neither their SQL, a
    parameter's enum, a CHECK list nor a DEFAULT names a value, the values quoted in the description of a parameter
    the SQL writes into the column or compares it with ("The new status ('pending' or 'returned')", :func:`quoted`):
    the tool's own words for what the column holds (issue 40: the library's books.status, added for
    change_book_status, stayed NULL in all 11 rows)."""
    infos = table_infos(conn)
    ev = Evidence()
    _read(tools, table, column, infos, ev)
    ev.add("known", check_enums(table.ddl).get(column, ()))
    for _cid, name, _typ, _nn, dflt, _pk in conn.execute(f"PRAGMA table_info({qi(table.name)})"):
        if name == column and dflt is not None:
            try:
                ev.default = _literal(sqlglot.parse_one(str(dflt), read="sqlite"))
            except Exception:
                ev.default = None
    declared = infos[table.name].column_type(column)
    if not [v for v in ev.vocabulary() if _fits(v, declared)]:
        _read(tools, table, column, infos, ev, said=True)
    for kind in ("accept", "refuse", "known"):
        setattr(ev, kind, [v for v in getattr(ev, kind) if _fits(v, declared)])
    if ev.default is not None and not _fits(ev.default, declared):
        ev.default = None
    return ev


def _referenced(conn: sqlite3.Connection, table: str, infos: dict[str, TableInfo]) -> set[int]:
    """The rowids of ``table``'s rows that some row of another table refers to."""
    out: set[int] = set()
    for child, info in infos.items():
        for col, parent, pcol in info.foreign_keys:
            if parent != table or child == table:
                continue
            target = pcol or (infos[table].key[0] if infos[table].key else "rowid")
            out |= {r[0] for r in conn.execute(
                f"SELECT rowid FROM {qi(table)} WHERE {qi(target)} IN (SELECT {qi(col)} FROM {qi(child)})")}
    return out


@dataclass(frozen=True)
class Mirror:
    """A child table whose state column an added column repeats: ``child.ref`` refers to the parent's ``target``,
    ``child.state`` is CHECK-listed, and a parent's latest child is the first by ``order`` (SQL, descending)."""

    child: str
    ref: str
    target: str
    state: str
    order: str
    by: str
    """The child's column or key that tells the latest (for the note)."""


def mirror(conn: sqlite3.Connection, tables: Sequence[ir.Table], table: str, ev: Evidence,
           infos: dict[str, TableInfo]) -> Mirror | None:
    """The child table whose state ``table``'s added column repeats, or None: the values the tools name (at least
    two; the DEFAULT aside, it is the value of a row with no child) are all in the ``CHECK (c IN ...)`` list of a
    column of a table that refers to ``table`` by exactly one column. Of several, the smallest list, then the
    first table."""
    named = list(dict.fromkeys([*ev.accept, *ev.refuse, *ev.known]))
    if len(named) < 2 or table not in infos:
        return None
    found: list[tuple[int, int, Mirror]] = []
    for i, child in enumerate(tables):
        info = infos.get(child.name)
        if info is None or child.name == table:
            continue
        refs = [(c, pc) for c, parent, pc in info.foreign_keys if parent == table]
        if len(refs) != 1:
            continue
        ref, pcol = refs[0]
        target = pcol or (infos[table].key[0] if infos[table].key else "rowid")
        for col, listed in check_enums(child.ddl).items():
            if col == ref or col not in info.columns or not set(named) <= set(listed):
                continue
            dates = iso_date_columns(conn, info, {col, ref})
            keys = [k for k in info.key if k]
            order = ", ".join(f"c.{qi(k)} DESC" for k in [*dates[:1], *keys])
            found.append((len(listed), i, Mirror(child.name, ref, target, col, order,
                                                 (dates[:1] or keys or ["rowid"])[0])))
    return min(found, key=lambda f: f[:2])[2] if found else None


def _mirrored(conn: sqlite3.Connection, table: str, rowids: Sequence[int], m: Mirror) -> dict[int, Any]:
    """Each row's value: the ``m.state`` of its latest ``m.child`` row that has one (None when it has none)."""
    sql = (f"SELECT p.rowid, (SELECT c.{qi(m.state)} FROM {qi(m.child)} AS c WHERE c.{qi(m.ref)} = p.{qi(m.target)} "
           f"AND c.{qi(m.state)} IS NOT NULL ORDER BY {m.order or 'c.rowid DESC'} LIMIT 1) FROM {qi(table)} AS p")
    got = dict(conn.execute(sql).fetchall())
    return {r: got.get(r) for r in rowids}


def _update(conn: sqlite3.Connection, table: str, column: str, rowids: Sequence[int],
            values: dict[int, Any]) -> tuple[dict[Any, int], int]:
    """Set ``column`` of each row in ``values`` (by rowid; the others are left alone), each in a savepoint: how
    many rows took each value, and how many a constraint refused (left NULL)."""
    counts: dict[Any, int] = {}
    refused = 0
    for rowid in rowids:
        if rowid not in values:
            continue
        try:
            conn.execute("SAVEPOINT fill_added")
            conn.execute(f"UPDATE {qi(table)} SET {qi(column)} = ? WHERE rowid = ?", (values[rowid], rowid))
            conn.execute("RELEASE fill_added")
            counts[values[rowid]] = counts.get(values[rowid], 0) + 1
        except sqlite3.DatabaseError:
            conn.execute("ROLLBACK TO fill_added")
            conn.execute("RELEASE fill_added")
            refused += 1
    return counts, refused


@dataclass(frozen=True)
class Counter:
    """A column the tools keep as a running amount: ``sign`` -1 when a write draws it down, +1 when it only counts it
    up; ``moves``: the amounts a write moves it by, as the rows and the tools show them; ``unit``: the typical one."""

    sign: int
    moves: tuple[Any, ...]
    unit: float
    whole: bool
    told: str
    """Where the moves come from (for the note)."""

    def describe(self) -> str:
        way = "draws it down" if self.sign < 0 else "counts it up"
        low, high = DRAWN_DOWN if self.sign < 0 else COUNTED_UP
        return f"a tool {way} by {self.told} (typically {_number(self.unit, self.whole)}): {low} to {high} of those"

    def deal(self, rowids: Sequence[int], declared: str, rng: random.Random) -> dict[int, Any]:
        """A starting amount per row (deterministic in ``rng``)."""
        low, high = DRAWN_DOWN if self.sign < 0 else COUNTED_UP
        whole = self.whole or "INT" in declared.upper()
        return {r: _number(self.unit * rng.randint(low, high), whole) for r in rowids}


def _number(value: float, whole: bool) -> Any:
    return int(round(value)) if whole else round(float(value), 2)


def self_move(expr: exp.Expr, column: str) -> tuple[int, exp.Expr] | None:
    """``(sign, move)`` when ``expr`` is ``column + move``, ``move + column`` or ``column - move``."""
    while isinstance(expr, exp.Paren):
        expr = expr.this
    if not isinstance(expr, (exp.Add, exp.Sub)):
        return None

    def itself(e: exp.Expr) -> bool:
        while isinstance(e, exp.Paren):
            e = e.this
        return isinstance(e, exp.Column) and e.name == column

    if itself(expr.left):
        return (-1 if isinstance(expr, exp.Sub) else 1), expr.right
    if isinstance(expr, exp.Add) and itself(expr.right):
        return 1, expr.left
    return None


def write_trees(tool: ir.Tool) -> Iterator[tuple[int, exp.Expr]]:
    """Each write step of ``tool`` (its index) with its parsed SQL; a step the parser refuses is left out."""
    for i, step in enumerate(tool.steps):
        if step.kind != "write":
            continue
        try:
            tree = sqlglot.parse_one(step.sql, read="sqlite")
        except Exception:
            continue
        if tree is not None:
            yield i, tree


def moves(tool: ir.Tool) -> Iterator[tuple[int, str, str, int, exp.Expr, exp.Expr | None]]:
    """``(step index, table, column, sign, move, where)`` for each column a write step of ``tool`` sets to itself plus
    (sign 1) or minus (sign -1) a move (:func:`self_move`); ``where``: the UPDATE's condition, None without one."""
    for i, tree in write_trees(tool):
        if not (isinstance(tree, exp.Update) and isinstance(tree.this, exp.Table)):
            continue
        where = tree.args.get("where")
        for eq in tree.args.get("expressions") or []:
            if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column) and \
                    (found := self_move(eq.right, eq.left.name)) is not None:
                yield i, tree.this.name, eq.left.name, found[0], found[1], where.this if where is not None else None


def _written_with(tool: ir.Tool, param: str, skip: tuple[str, str]) -> list[tuple[str, str]]:
    """The ``(table, column)`` s other than ``skip`` that ``tool``'s writes set to the parameter ``param`` itself."""
    out: list[tuple[str, str]] = []
    for _i, tree in write_trees(tool):
        pairs: list[tuple[str, str, exp.Expr]] = []
        if isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema) and \
                isinstance(tree.this.this, exp.Table) and isinstance(tree.expression, exp.Values):
            cols = [c.name for c in tree.this.expressions]
            for row in tree.expression.expressions:
                pairs += [(tree.this.this.name, c, v) for c, v in zip(cols, row.expressions, strict=False)]
        elif isinstance(tree, exp.Update) and isinstance(tree.this, exp.Table):
            pairs += [(tree.this.name, eq.left.name, eq.right) for eq in tree.args.get("expressions") or []
                      if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column)]
        out += [(t, c) for t, c, v in pairs if isinstance(v, exp.Placeholder) and v.name == param and (t, c) != skip]
    return list(dict.fromkeys(out))


def amounts(tools: Sequence[ir.Tool], table: ir.Table, column: str, conn: sqlite3.Connection,
            infos: dict[str, TableInfo]) -> Counter | None:
    """The running amount ``table.column`` is to the tools, or None: a write tool's ``UPDATE table SET column =
    column - move`` (or ``+ move``). The move's values: the numbers in the seeded rows of the columns the same tool
    writes the same parameter into (a fill's ``prescriptions.quantity``), else a literal move, else the parameter's
    bounds, else 1. Read from the SQL and the rows (no names, no words)."""
    signs: list[int] = []
    sizes: list[float] = []
    told: list[str] = []
    for tool in tools:
        if tool.kind != "write":
            continue
        params = {p.name: p for p in tool.params}
        for _i, t, c, sign, move, _where in moves(tool):
            if (t, c) != (table.name, column):
                continue
            signs.append(sign)
            while isinstance(move, exp.Paren):
                move = move.this
            lit = _literal(move)
            if isinstance(lit, (int, float)) and not isinstance(lit, bool):
                sizes.append(abs(lit))
                told.append(f"{lit!r} in {tool.name}")
                continue
            if not isinstance(move, exp.Placeholder):
                continue
            seen: list[float] = []
            where = _written_with(tool, move.name, (table.name, column))
            for t, c in where:
                if t in infos and c in infos[t].columns:
                    seen += [v for (v,) in conn.execute(f"SELECT {qi(c)} FROM {qi(t)} WHERE {qi(c)} IS NOT NULL")
                             if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
            p = params.get(move.name)
            if not seen and p is not None:
                seen = [abs(b) for b in (p.minimum, p.maximum) if isinstance(b, (int, float)) and b]
            if seen:
                sizes += seen
                told.append(f"its {move.name} in {tool.name}" +
                            (f" (as {', '.join(f'{t}.{c}' for t, c in where)} hold it)" if where else ""))
    if not signs:
        return None
    positive = sorted(m for m in sizes if m > 0)
    unit = positive[len(positive) // 2] if positive else 1
    whole = all(float(m).is_integer() for m in positive)
    return Counter(sign=min(signs), moves=tuple(sorted(set(positive)))[:MOVES_KEPT], unit=unit, whole=whole,
                   told="; ".join(dict.fromkeys(told)) or "1 at a time")


def fill(conn: sqlite3.Connection, tables: Sequence[ir.Table], columns: Sequence[tuple[str, str]],
         tools: Sequence[ir.Tool], stage: str = "tools") -> list[ir.Rejection]:
    """Give the rows of each added ``(table, column)`` on ``conn`` values from what ``tools`` say about it (see the
    module docstring; from its child rows when it repeats a child table's state, :func:`mirror`), by UPDATE in
    ``conn`` (a value a constraint refuses leaves its row NULL). Returns a note per column: the values given and
    why, or why it stays NULL."""
    notes: list[ir.Rejection] = []
    by_name = {t.name: t for t in tables}
    infos = table_infos(conn)
    for table_name, column in dict.fromkeys(columns):
        table = by_name.get(table_name)
        if table is None or table_name not in infos or column not in infos[table_name].columns:
            continue
        item = f"{table_name}.{column}"
        try:
            rowids = [r[0] for r in conn.execute(
                f"SELECT rowid FROM {qi(table_name)} WHERE {qi(column)} IS NULL ORDER BY {row_order(conn, table_name)}")]
        except sqlite3.OperationalError:  # WITHOUT ROWID
            notes.append(ir.Rejection(stage=stage, item=item, reason=f"column {item} added for a tool: its seeded "
                                      "rows stay NULL (a table without rowid is not filled)"))
            continue
        if not rowids:
            continue
        ev = evidence(tools, table, column, conn)
        declared = infos[table_name].column_type(column)
        m = mirror(conn, tables, table_name, ev, infos)
        if m is not None:
            found = {r: v for r, v in _mirrored(conn, table_name, rowids, m).items() if v is not None and
                     _fits(v, declared)}
            alone = [r for r in rowids if r not in found]
            given = {**found, **({r: ev.default for r in alone} if ev.default is not None else {})}
            counts, refused = _update(conn, table_name, column, rowids, given)
            spread = ", ".join(f"{v!r} in {n}" for v, n in counts.items()) or "none"
            reason = (f"column {item} added for a tool: its {len(rowids)} seeded rows filled from their {m.child} "
                      f"rows, as the values the tools name are {m.child}.{m.state}'s: each row takes the {m.state} "
                      f"of its latest {m.child} row (by {m.by}): {spread}")
            if alone:
                reason += (f"; {len(alone)} rows with no {m.child} row take the DEFAULT {ev.default!r}"
                           if ev.default is not None else
                           f"; {len(alone)} rows with no {m.child} row stay NULL (the tools give no value for one)")
            if refused:
                reason += f"; {refused} rows stay NULL (a constraint refused the value)"
            notes.append(ir.Rejection(stage=stage, item=item, reason=reason, evidence={
                **ev.as_json(), "mirror": f"{m.child}.{m.state}", "counts": {str(v): n for v, n in counts.items()},
                "without_child": len(alone)}))
            continue
        before = ev.before()
        counter = amounts(tools, table, column, conn, infos) if not before else None
        if counter is not None:
            dealt = counter.deal(rowids, declared, random.Random(f"{table_name}.{column}"))
            counts, refused = _update(conn, table_name, column, rowids, dealt)
            low, high = min(dealt.values()), max(dealt.values())
            reason = (f"column {item} added for a tool: its {len(rowids)} seeded rows filled with amounts from "
                      f"{low!r} to {high!r}, as {counter.describe()}")
            if refused:
                reason += f"; {refused} rows stay NULL (a constraint refused the value)"
            notes.append(ir.Rejection(stage=stage, item=item, reason=reason, evidence={
                **ev.as_json(), "moves": list(counter.moves), "unit": counter.unit, "sign": counter.sign}))
            continue
        if not before:
            told = ev.vocabulary()
            why = (f"the tools name only values their guards refuse ({', '.join(map(repr, told))})" if told
                   else "no tool writes, compares or guards it with a value, and it has no DEFAULT")
            notes.append(ir.Rejection(stage=stage, item=item, reason=f"column {item} added for a tool: its "
                                      f"{len(rowids)} seeded rows stay NULL: {why}", evidence=ev.as_json()))
            continue
        others = [v for v in ev.vocabulary() if v not in before]
        rng = random.Random(f"{table_name}.{column}")
        order = list(rowids)
        rng.shuffle(order)
        k = 0
        if others and len(order) > 1:
            k = min(len(order) // 2, max(1, math.floor(len(order) * OTHER_SHARE + 0.5)))
        referenced = _referenced(conn, table_name, infos)
        free = [r for r in order if r not in referenced]
        tied = [r for r in order if r in referenced]
        other_rows = (free + tied)[:k]
        chosen = set(other_rows)
        values: dict[int, Any] = {r: others[i % len(others)] for i, r in enumerate(other_rows)}
        values.update({r: before[i % len(before)] for i, r in enumerate(r for r in order if r not in chosen)})
        counts, refused = _update(conn, table_name, column, rowids, values)
        spread = ", ".join(f"{v!r} in {n}" for v, n in counts.items())
        reason = (f"column {item} added for a tool: its {len(rowids)} seeded rows filled from what the tools say "
                  f"about it: {spread} (the guards' 'before' state: {', '.join(map(repr, before))})")
        if refused:
            reason += f"; {refused} rows stay NULL (a constraint refused the value)"
        notes.append(ir.Rejection(stage=stage, item=item, reason=reason,
                                  evidence={**ev.as_json(), "counts": {str(v): n for v, n in counts.items()}}))
    return notes
