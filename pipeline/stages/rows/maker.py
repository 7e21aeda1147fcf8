"""The row maker of ``pipeline.stages.rows.generators``: values from checked column generators, rows inserted with every
constraint kept.

Values come from Faker (people, companies, places, phones, in one locale) and from one ``random.Random``, both
seeded from the scenario and the table (:func:`derive_seed`): same inputs, same rows, byte for byte. A table
without foreign keys gets a row count drawn in ``entity_rows``; a table with foreign keys gets, for each row of
its first parent, a count drawn in ``child_fanout`` (small counts likelier: some parents get none, a few get
many; at most one where a key or the examples show one child per parent, :func:`one_each`), its other references drawn from a skewed popularity so some parents are seldom or never named.

Rows are inserted one by one into the scratch database (foreign keys on): a row that repeats a UNIQUE set or the
table's natural key, or that SQLite refuses (a CHECK, a type), is drawn again, at most ``RETRIES`` times; a row
still refused is dropped and counted by reason (the caller records a Rejection).

Time across tables (:func:`child_relations`, from the example rows' values, never from names): a child's date
within the dates of the parent its reference names, on the examples' side of the clock; a child only for the parents
the examples' children all had on one side of the clock (a fine only on a loan already due). A child that no
parent's dates can hold is dropped (:class:`Unplaceable`), never written against them. A row in the state every
example is in (the values of a drawn list its examples hold: a loan 'pending') has its dates under way at the clock
where every example has them so (:meth:`ValueMaker.under_way`: issued by today, due after it; a 'returned' loan,
which no example shows, may lie anywhere in the past). Where the examples hold every value of the list (two 'open'
and two 'closed' prescriptions, all under way), every row is in their state.

Sibling tables (two tables naming the same parents, :mod:`pipeline.meaning.siblings`): the later one's rows take their
parent tuple from the earlier one's where the examples share tuples beyond chance (:func:`sibling_follow`), and name
none of them where the examples share none (:func:`sibling_apart`, :func:`apart_examples`: no prescription for a pair
an allergy names).
"""

from __future__ import annotations

import math
import random
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pipeline import ir
from pipeline.dbmodel.arguments import variants
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.ddl import row_order
from pipeline.dbmodel.draws import FAKER_KINDS, code_value, derived_value, faker_value, made_of_row
from pipeline.dbmodel.examples import listed_keys
from pipeline.hashing import content_hash
from pipeline.meaning import relations, siblings
from pipeline.settings import BuildSettings

if TYPE_CHECKING:
    from pipeline.stages.rows.tense import Tense

RETRIES = 6
ALIGNED = ("integer", "amount", "enum")
"""Kinds whose generator, with ``after`` naming a tuple's key column and ``values`` aligned with its pool, draws the
row's tuple's value (``pipeline.stages.rows.generators.row_mates``: a book's year with its title)."""
STOP_AFTER = 40
"""Consecutive rows dropped after which a table stops growing (its generators cannot give more distinct rows)."""
NULL_SHARE = 0.1
"""Share of nulls in a nullable reference other than the first parent (an optional link is sometimes unset)."""


def derive_seed(scenario: ir.Scenario, table: str) -> int:
    """The seed of a table's draws: a content hash of the scenario and the table name."""
    return int(content_hash({"scenario": scenario.scenario_id, "table": table}, 15), 16)


def unique_sets(conn: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    """The column sets SQLite keeps unique in ``table`` (UNIQUE constraints and indexes, a non-integer
    PRIMARY KEY)."""
    out = []
    for idx in conn.execute(f'PRAGMA index_list("{table}")').fetchall():
        if idx[2]:
            cols = tuple(r[2] for r in conn.execute(f'PRAGMA index_info("{idx[1]}")').fetchall())
            if cols and all(cols):
                out.append(cols)
    return out


def key_sets(conn: sqlite3.Connection, table: ir.Table, names: list[str]) -> list[tuple[str, ...]]:
    """The UNIQUE sets of ``table`` and its natural key (when all its columns are among ``names``)."""
    sets = unique_sets(conn, table.name)
    if table.natural_key and all(c in names for c in table.natural_key):
        sets.append(tuple(table.natural_key))
    return list(dict.fromkeys(sets))


# ------------------------------------------------------------------ the shape of a table: how many rows, whose


@dataclass(frozen=True)
class Shape:
    """The rows code adds to one table: ``fixed`` holds, per row, the values decided before drawing (the first
    parent's key); ``refs`` the keys each reference column may take."""

    fixed: list[dict[str, Any]]
    refs: dict[str, list[Any]] = field(default_factory=dict)
    primary: str | None = None
    per_parent: tuple[int, int] | None = None
    """The range each first parent's count of rows was drawn in (``child_fanout``, or at most one)."""


def parent_keys(conn: sqlite3.Connection, parent: str, key: str) -> list[Any]:
    return [r[0] for r in conn.execute(f'SELECT DISTINCT "{key}" FROM "{parent}" WHERE "{key}" IS NOT NULL '
                                       f'ORDER BY "{key}"')]


def fanout(rng: random.Random, low: int, high: int) -> int:
    """A count in [low, high], small counts likelier (weight 1/(1+k-low))."""
    ks = list(range(low, high + 1))
    return rng.choices(ks, weights=[1 / (1 + k - low) for k in ks])[0]


MIN_ONE_EACH = 2
"""Example rows naming a parent needed before their one child per parent is kept (one row shows no count)."""


def one_each(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], sets: list[tuple[str, ...]],
             primary: str, shown: Mapping[str, int] | None = None) -> bool:
    """Whether ``table``'s rows are details of one parent row each, as its examples show: at least
    :data:`MIN_ONE_EACH` example rows (the rows already in the table) name a parent through ``primary`` and no two
    name the same one (an invoice per billing record), ``primary`` is the table's only reference to another table,
    and no UNIQUE set or natural key of its own names the row. A row linking two parents (a loan of a book to a
    member, a billing record of a consultant on a project) is an event between them, which repeats per parent; a
    row with a unique name of its own (a project of a client) is a thing of its own, of which a parent may own
    several; the examples' distinct parents say nothing against either (the embedded model names different
    parents in its example rows of every table), nor does a parent's count of them that its example rows show above
    one (``shown``: reference column -> the most children a parent's counter shows, a loan renewed 3 times). Read
    from the keys, constraints and values, never from names."""
    if (shown or {}).get(primary, 0) > 1:
        return False
    if any(c.ref is not None and c.ref[0] != table.name and c.name != primary for c in cols):
        return False
    if any(s != (primary,) for s in sets):
        return False
    named = [r[0] for r in conn.execute(f'SELECT "{primary}" FROM "{table.name}" WHERE "{primary}" IS NOT NULL')]
    return len(named) >= MIN_ONE_EACH and len(set(named)) == len(named)


def table_shape(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], sets: list[tuple[str, ...]],
                examples: int, settings: BuildSettings, rng: random.Random,
                shown: Mapping[str, int] | None = None) -> Shape:
    """How many rows code adds and, for a table with foreign keys, to which row of the first parent each
    belongs. A first parent named alone by a UNIQUE set or the natural key gets at most one row, and so does one
    whose example rows each name another parent in a table of details (:func:`one_each`)."""
    refs = {c.name: parent_keys(conn, c.ref[0], c.ref[1]) for c in cols
            if c.ref is not None and c.ref[0] != table.name}
    firsts = [c for c in cols if c.ref is not None and c.ref[0] != table.name and c.notnull] or \
             [c for c in cols if c.ref is not None and c.ref[0] != table.name]
    if not firsts:
        low, high = settings.entity_rows
        return Shape(fixed=[{} for _ in range(max(0, rng.randint(low, high) - examples))], refs=refs)
    primary = firsts[0].name
    low, high = settings.child_fanout
    used: set[Any] = set()
    if (primary,) in sets or one_each(conn, table, cols, sets, primary, shown):
        # one row per parent at most; parents the examples name already have theirs
        low, high = min(low, 1), min(high, 1)
        used = {r[0] for r in conn.execute(f'SELECT "{primary}" FROM "{table.name}"')}
    counts = [0 if key in used else fanout(rng, low, high) for key in refs[primary]]
    while sum(counts) > settings.child_rows_max:
        i = rng.randrange(len(counts))
        counts[i] = max(0, counts[i] - 1)
    fixed = [{primary: key} for key, n in zip(refs[primary], counts, strict=True) for _ in range(n)]
    rng.shuffle(fixed)  # children in no parent's order, as rows arrive in a real table
    return Shape(fixed=fixed, refs=refs, primary=primary, per_parent=(low, high))


# ------------------------------------------------------------------ time across tables


Bound = tuple[str, str, dict[Any, date], bool, int]
"""(child's date column, reference column, parent key -> parent's date, after (else before), days)."""


class Unplaceable(ValueError):
    """No value of a child's date fits its parent's dates and the clock: the row is drawn again or dropped."""


def parent_rows(conn: sqlite3.Connection, parent: str, key: str) -> dict[Any, dict[str, Any]]:
    cur = conn.execute(f'SELECT * FROM "{parent}"')
    names = [d[0] for d in cur.description]
    return {r[names.index(key)]: dict(zip(names, r, strict=True)) for r in cur}


@dataclass
class ChildRelations:
    """What a child table's example rows show about time across tables: date bounds per parent (``bounds``), the
    parent keys each reference may name (``allowed``; a reference absent names any), each own date column's side
    of the clock (``clock``), and what was inferred (``notes``, for the plan's record)."""

    bounds: list[Bound] = field(default_factory=list)
    allowed: dict[str, set[Any]] = field(default_factory=dict)
    clock: dict[str, Literal["past", "future"]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    current: list[relations.Current] = field(default_factory=list)
    """Pairs of the row's own dates (both drawn) that every example has under way at the clock
    (:func:`pipeline.meaning.relations.currents`), for the rows in the examples' state to keep."""


def child_relations(conn: sqlite3.Connection, table: str, cols: list[Column], examples: dict[str, list[Any]],
                    drawn: set[str], today: date) -> ChildRelations:
    """Infer, from the example rows already in ``conn`` (their values: ``examples``) and their parents' rows, the
    relations code holds when drawing the rest: :func:`pipeline.meaning.relations.parent_orders` for the date
    columns code draws (``drawn``), :func:`pipeline.meaning.relations.parent_clocks` for which parents a child may
    name, and :func:`pipeline.meaning.relations.clock_side` of each drawn date column."""
    out = ChildRelations(current=[c for c in relations.currents(examples, today) if {c.first, c.second} <= drawn])
    for name in drawn:
        side = relations.clock_side(examples.get(name, []), today) if name in relations.date_columns(
            {name: examples.get(name, [])}) else None
        if side is not None:
            out.clock[name] = side
    for c in cols:
        if c.ref is None or c.ref[0] == table:
            continue
        parent, key = c.ref
        parents = parent_rows(conn, parent, key)
        for po in relations.parent_orders(examples, c.name, parents):
            if po.column not in drawn:
                continue
            dates = {k: d for k, r in parents.items() for d in [relations.as_date(r.get(po.parent_column))]
                     if d is not None}
            out.bounds.append((po.column, c.name, dates, po.after, po.min_days + int(po.strict)))  # never on the
            # parent's day when no example is (a renewal after its loan's day: 8 of 18 seeded renewals were on it)
            if po.same_day:  # on it, as every example (an order's line on its order's day, not months after)
                out.bounds.append((po.column, c.name, dates, not po.after, 0))
        for pc in relations.parent_clocks(examples, c.name, parents, today, listed_keys(conn, parent, key)):
            ok = {k for k, r in parents.items() if pc.holds(r, today)}
            out.allowed[c.name] = out.allowed.get(c.name, ok) & ok
            when = f"its {pc.until} (today where it has none)" if pc.until else "today"
            out.notes.append(f"{c.name}: only {parent} rows whose {pc.parent_column} is "
                             f"{'on or before' if pc.side == 'past' else 'on or after'} {when}, as every example")
    return out


# ------------------------------------------------------------------ sibling tables: one follows the other


@dataclass(frozen=True)
class Follow:
    """A table whose rows take their parent tuple (``columns``) from a sibling's rows (``source``, its columns
    ``source_columns``): every order for a (patient, medication) pair that has a prescription
    (:mod:`pipeline.meaning.siblings`). ``tuples``: the source's rows' tuples, one per row."""

    source: str
    columns: tuple[str, ...]
    source_columns: tuple[str, ...]
    tuples: list[tuple[Any, ...]]
    sharing: siblings.Sharing
    rows: list[dict[str, Any]] = field(default_factory=list)
    """The source's rows, in the order of :attr:`tuples`."""
    orders: list[relations.ParentOrder] = field(default_factory=list)
    """Date orders every shared example shows between this table's row and the source row it follows (an order
    on or after its prescription's start), via :data:`FOLLOWED`."""

    def indices(self, row: Mapping[str, Any]) -> list[int]:
        """The source rows whose tuples agree with the parents ``row`` already names."""
        fixed = [(i, row[c]) for i, c in enumerate(self.columns) if row.get(c) is not None]
        return [k for k, t in enumerate(self.tuples) if all(t[i] == v for i, v in fixed)]

    def bounds(self) -> list[Bound]:
        """:attr:`orders` as the maker's bounds, the source row named by the row's :data:`FOLLOWED` index."""
        out: list[Bound] = []
        for po in self.orders:
            dates = {i: d for i, r in enumerate(self.rows) for d in [relations.as_date(r.get(po.parent_column))]
                     if d is not None}
            out.append((po.column, FOLLOWED, dates, po.after, po.min_days + int(po.strict)))
            if po.same_day:
                out.append((po.column, FOLLOWED, dates, not po.after, 0))
        return out

    def placeable(self, row: Mapping[str, Any]) -> bool:
        return bool(self.indices(row))


FOLLOWED = "\x00follows"
"""The key under which a drawn row holds the index of the sibling row it follows (never a column)."""


def _sibling(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], other: ir.Table, n: int
             ) -> tuple[list[tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]],
                        list[dict[str, Any]], list[tuple[Any, ...]]]:
    """The column tuples ``table`` and its earlier sibling ``other`` (``n`` example rows) share
    (:func:`pipeline.meaning.siblings.common_parents`, widest first), ``other``'s rows, and the tuples of them over
    the widest set that ``table``'s seed_data prompt shows (:func:`pipeline.meaning.siblings.shown`)."""
    mine = [(c.name, c.ref) for c in cols if c.ref is not None and c.ref[0] != table.name]
    theirs = [(c.name, c.ref) for c in table_columns(conn, other) if c.ref is not None and c.ref[0] != other.name]
    sets = siblings.common_parents(mine, theirs)  # type: ignore[arg-type]
    if not sets:
        return [], [], []
    cur = conn.execute(f'SELECT * FROM "{other.name}" ORDER BY {row_order(conn, other.name)}')
    full = [dict(zip([d[0] for d in cur.description], r, strict=True)) for r in cur]
    widest = [tuple(r[c] for c in sets[0][1]) for r in full]
    listings = [listed_keys(conn, p, k) for p, k in sets[0][2]]
    return sets, full, siblings.shown(widest, widest[:n], listings)


def sibling_tuples(conn: sqlite3.Connection, table: ir.Table, cols: list[Column],
                   before: Sequence[tuple[ir.Table, int]]) -> list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]]:
    """What ``table``'s seed_data prompt shows of each earlier sibling of ``before`` (the tables made before it,
    with their example-row counts): (its name, ``table``'s columns naming the parents both name, the tuples)."""
    out = []
    for other, n in before:
        if other.name == table.name:
            continue
        sets, _, seen = _sibling(conn, table, cols, other, n)
        if seen:
            out.append((other.name, sets[0][0], seen))
    return out


def _sharings(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], examples: Mapping[str, list[Any]],
              other: ir.Table, n: int) -> Iterator[tuple[tuple[str, ...], tuple[str, ...], list[dict[str, Any]],
                                                         list[tuple[Any, ...]], siblings.Sharing | None]]:
    """For each column tuple ``table`` and its earlier sibling ``other`` (``n`` example rows) share, widest first:
    (my columns, their columns, their rows, their rows' tuples, :func:`pipeline.meaning.siblings.shared` of this
    table's ``examples`` against their first ``n`` rows and the tuples ``table``'s prompt showed)."""
    sets, full, seen = _sibling(conn, table, cols, other, n)
    for my_cols, their_cols, parents in sets:
        listings = [listed_keys(conn, p, k) for p, k in parents]
        a = [tuple(r) for r in zip(*(examples.get(c, []) for c in my_cols), strict=True)]
        rows = [tuple(r[c] for c in their_cols) for r in full]
        at = [sets[0][1].index(c) for c in their_cols]
        yield my_cols, their_cols, full, rows, siblings.shared(
            a, rows[:n] + [tuple(t[i] for i in at) for t in seen], listings)


def sibling_follow(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], examples: Mapping[str, list[Any]],
                   made: Sequence[tuple[ir.Table, int]]) -> tuple[Follow | None, list[str]]:
    """The sibling ``table``'s rows follow (:func:`pipeline.meaning.siblings.shared` on the example rows: this
    table's ``examples``, and of each table of ``made``, the tables already filled, its first ``n`` rows and the
    tuples of its rows ``table``'s prompt showed, :func:`sibling_tuples`), and notes on a sharing in the other
    direction (that table is made already: not held)."""
    notes: list[str] = []
    for other, n in made:
        if other.name == table.name or n < 1:
            continue
        for my_cols, their_cols, full, rows, got in _sharings(conn, table, cols, examples, other, n):
            if got is None:
                continue
            if got.follows:
                a = [tuple(r) for r in zip(*(examples.get(c, []) for c in my_cols), strict=True)]
                kept = [i for i, t in enumerate(rows) if None not in t]
                firsts = {t: i for i, t in reversed(list(enumerate(rows)))}
                via = {**examples, FOLLOWED: [firsts.get(t) for t in a]}
                near = set(range(min(n, len(full)))) | {i for i in via[FOLLOWED] if i is not None}
                orders = relations.parent_orders(via, FOLLOWED, {i: full[i] for i in sorted(near)})
                return Follow(other.name, my_cols, their_cols, [rows[i] for i in kept], got,
                              [full[i] for i in kept], orders), notes
            notes.append(f"{other.name} ({', '.join(their_cols)}) would follow {table.name} "
                         f"({', '.join(my_cols)}): {got.shared} of its {got.theirs} example and shown tuples are among "
                         f"{table.name}'s, but {other.name} is made first: not held")
            break
    return None, notes


@dataclass(frozen=True)
class Apart:
    """A table whose rows name no parent tuple (``columns``) that an earlier sibling's rows (``source``, its columns
    ``source_columns``) hold, the examples showing no sharing between them (:func:`sibling_apart`): a prescription
    for no (patient, medication) pair that an allergy names. ``taken``: the source's tuples."""

    source: str
    columns: tuple[str, ...]
    source_columns: tuple[str, ...]
    taken: frozenset[tuple[Any, ...]]

    def holds(self, row: Mapping[str, Any]) -> bool:
        t = tuple(row.get(c) for c in self.columns)
        return None in t or t not in self.taken


def sibling_apart(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], examples: Mapping[str, list[Any]],
                  made: Sequence[tuple[ir.Table, int]]) -> list[Apart]:
    """The earlier siblings (tables of ``made`` naming two or more of ``table``'s parents) whose parent tuples
    ``table``'s code-made rows keep clear of: those whose examples share no tuple with ``table``'s beyond habit and
    chance, in either direction and over any common set of parents (:func:`pipeline.meaning.siblings.shared`), over
    their widest common set. Disjoint unless the examples show sharing: two kinds of record about the same pair
    (an allergy and a prescription of one medication to one patient) are apart unless the model's rows say
    otherwise; drawn independently, 10 of the pharmacy's 79 prescriptions named a pair its allergies listed
    (2026-11-30). Values only, never names."""
    out: list[Apart] = []
    for other, n in made:
        if other.name == table.name or n < 1:
            continue
        found = list(_sharings(conn, table, cols, examples, other, n))
        if not found or any(got is not None for *_, got in found):
            continue
        my_cols, their_cols, _, rows, _ = found[0]
        taken = frozenset(t for t in rows if None not in t)
        if taken:
            out.append(Apart(other.name, my_cols, their_cols, taken))
    return out


def apart_examples(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], apart: Sequence[Apart],
                   examples: dict[str, list[Any]]) -> dict[str, int]:
    """The example rows of ``table`` (its rows in ``conn`` so far, ``examples`` their values, updated here) whose
    parent tuple an earlier sibling it keeps apart from holds (:class:`Apart`): the tuple's last reference moved to
    the next key of its parent (in key order, round) that makes a tuple none of those siblings holds. Such a tuple
    is the model's habit or chance, as the test that set them apart found (the pharmacy's example prescriptions
    (1, 2) and (3, 4), on the diagonal its allergies were written along too); moved before any child or later
    prompt sees the rows, as timeline moves the dates the model wrote on one day. Returns, per sibling, the rows
    moved."""
    out: dict[str, int] = {}
    if not apart or not conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                                     (table.name,)).fetchone()[0]:
        return out
    by_name = {c.name: c for c in cols}
    rowids = [r[0] for r in conn.execute(f'SELECT rowid FROM "{table.name}" ORDER BY rowid')]
    n = min(len(rowids), min((len(v) for v in examples.values()), default=0))
    for ap in apart:
        last = by_name.get(ap.columns[-1])
        if last is None or last.ref is None:
            continue
        keys = parent_keys(conn, last.ref[0], last.ref[1])
        for i in range(n):
            row = {c: examples[c][i] for c in ap.columns if c in examples}
            if ap.holds(row) or row[last.name] not in keys:
                continue
            at = keys.index(row[last.name])
            for step in range(1, len(keys)):
                new = {**row, last.name: keys[(at + step) % len(keys)]}
                if not all(a.holds(new) for a in apart):
                    continue
                try:
                    conn.execute("SAVEPOINT apart")
                    conn.execute(f'UPDATE "{table.name}" SET "{last.name}" = ? WHERE rowid = ?',
                                 (new[last.name], rowids[i]))
                    conn.execute("RELEASE apart")
                except sqlite3.Error:
                    conn.execute("ROLLBACK TO apart")
                    conn.execute("RELEASE apart")
                    continue
                examples[last.name][i] = new[last.name]
                out[ap.source] = out.get(ap.source, 0) + 1
                break
    return out


def followed(shape: Shape, follow: Follow | None) -> tuple[Shape, int]:
    """``shape`` without the rows whose fixed parent has no row of the sibling they follow (a patient with no
    prescription gets no order), and how many were left out."""
    if follow is None:
        return shape, 0
    kept = [f for f in shape.fixed if follow.placeable(f)]
    return Shape(fixed=kept, refs=shape.refs, primary=shape.primary, per_parent=shape.per_parent), \
        len(shape.fixed) - len(kept)


# ------------------------------------------------------------------ values


def _date(text: str) -> date:
    return date.fromisoformat(str(text)[:10])


def time_format(examples: list[Any]) -> tuple[str, bool]:
    """The separator between date and time, and whether seconds are shown, as the example values write them
    (default: ISO ``T`` with seconds, as the environment's clock)."""
    for v in examples:
        m = re.fullmatch(r"\d{4}-\d{2}-\d{2}([T ])\d{2}:\d{2}(:\d{2})?.*", str(v))
        if m:
            return m.group(1), m.group(2) is not None
    return "T", True


class ValueMaker:
    """Draws one row's values from the column generators (Faker for people, companies and places)."""

    def __init__(self, locale: str, seed: int, gens: list[ir.ColumnGenerator], cols: list[Column],
                 examples: dict[str, list[Any]]) -> None:
        from faker import Faker  # a heavy import (also in pipeline.dbmodel.draws, which draws its values)

        self.fake = Faker(locale)
        self.fake.seed_instance(seed)
        self.rng = random.Random(seed)
        self.by_col = {c.name: c for c in cols}
        self.gens = order_generators(gens)
        self.formats = {g.column: time_format(examples.get(g.column, [])) for g in gens}
        self.date_only = {g.column: bool(examples.get(g.column)) and all(
            re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(v)) for v in examples[g.column] if v is not None) for g in gens}
        self.popularity: dict[str, list[float]] = {}
        self.unused: dict[str, list[Any]] = {}
        """Per column of a UNIQUE list: its items not yet drawn (drawn without replacement, last first)."""
        self.bounds: list[Bound] = []
        """(column, reference column, parent key -> parent's date, after, days): set by the caller."""
        self.allowed: dict[str, set[Any]] = {}
        """Reference column -> the parent keys it may name (:func:`child_relations`); absent: any."""
        self.clock: dict[str, Literal["past", "future"]] = {}
        """Date column -> the side of ``today`` its examples are on, held with :attr:`bounds`."""
        self.today: date | None = None
        self.current: list[relations.Current] = []
        """Pairs of dates a row in the examples' state (:attr:`states`) has under way at :attr:`today`."""
        choices = {g.column: [0, 1] if g.kind == "boolean" else self.by_col[g.column].enum or g.values or []
                   for g in gens if g.kind in ("enum", "boolean") and g.column in self.by_col}
        self.states = relations.states(examples, choices)
        """Column -> the values its examples hold, where they hold some of the values drawn and not all (a loan
        'pending', never 'returned'): :func:`pipeline.meaning.relations.states`."""
        self.every_state = relations.every_state(examples, choices)
        """Whether the examples hold every value drawn of a list and narrow none (prescriptions 'open' and 'closed'):
        every row is in their state (:func:`pipeline.meaning.relations.every_state`)."""
        self.tenses: list[Tense] = []
        """Per state column, the side of the clock a row in each state is dated on (:meth:`dated_by`)."""
        self.follow: Follow | None = None
        """The sibling whose rows' parent tuples this table's rows take (:func:`sibling_follow`); set by the caller."""
        self.apart: list[Apart] = []
        """The siblings whose rows' parent tuples this table's rows never name (:func:`sibling_apart`); set by the
        caller."""
        self.choices = choices
        self.single = SingleOpen()
        """The references whose parent holds one row in the examples' state at a time (:class:`SingleOpen`)."""
        self.drawn: dict[str, int] = {}
        """Per list column: the index of its pool item drawn last (the row's tuple, for the columns continued
        with it: a ``text_pool`` whose ``after`` names it draws the same index of its own aligned pool)."""
        self.nulls: dict[str, float] = {
            g.column: share for g in gens if g.kind != "reference" and g.column in self.by_col
            and not self.by_col[g.column].notnull and not self.by_col[g.column].pk
            for share in [relations.null_share(examples.get(g.column, []))] if share is not None}
        """Nullable column -> the share of rows left NULL, as its examples (:func:`pipeline.meaning.relations.
        null_share`: 2 of 4 employees without a termination date, half the rows; 1 of 4 invoices without an amount:
        none). A reference keeps :data:`NULL_SHARE`."""
        self.ends: set[str] = {
            g.column for g in gens if g.kind == "date_after" and g.column in self.by_col
            and not self.by_col[g.column].notnull and relations.some_null(examples.get(g.column, []))}
        """Later dates of the row that some examples leave NULL (a return date): NULL where no day on their
        examples' side of the clock fits (:meth:`_ended`; a loan still out), even when one NULL example sets no
        share."""
        self.pool_weights: dict[str, list[float]] = {
            g.column: w for g in gens if g.kind == "text_pool" and g.pool and not g.pattern
            for w in [relations.share_weights(g.pool, relations.repeated_shares(examples.get(g.column, [])))]
            if w is not None}
        """List column -> weights over its pool: a value its examples repeat keeps their share ('None' in 2 of 4
        patients' allergies: half the rows, not 1 in 12 of the continued list)."""

    def relate(self, rel: ChildRelations, today: date) -> None:
        """Hold ``rel`` in every row drawn from now on."""
        self.bounds, self.allowed, self.clock, self.today = list(rel.bounds), dict(rel.allowed), dict(rel.clock), today
        self.current = list(rel.current)

    def follows(self, follow: Follow | None) -> None:
        """Draw every row's parents from ``follow``'s rows, its dates in the order the shared examples show."""
        self.follow = follow
        if follow is not None:
            self.bounds.extend(follow.bounds())

    def dated_by(self, tenses: Sequence[Tense]) -> None:
        """Hold each row's state to the side of the clock its dates are on (``pipeline.stages.rows.tense``); a date
        column drawn across the clock for it no longer keeps its examples' side (:attr:`clock`)."""
        self.tenses = list(tenses)
        gens = {g.column: g for g in self.gens}
        for t in tenses:
            for column in t.crossed:
                g = gens.get(column)
                lo, hi = (relations.as_date(g.start), relations.as_date(g.end)) if g is not None else (None, None)
                # a range still on one side of today keeps its examples' side too (a row it follows cannot take it over)
                if self.today is None or lo is None or hi is None or lo < self.today < hi:
                    self.clock.pop(column, None)

    def placeable(self, row: dict[str, Any]) -> bool:
        """Whether the references already in ``row`` name parents its child may have (:attr:`allowed`)."""
        return all(row.get(via) is None or row[via] in keys for via, keys in self.allowed.items() if via in row)

    def references(self, refs: dict[str, list[Any]]) -> None:
        """A skewed popularity per reference column: parents in a seeded order, weights 1/(rank+1)."""
        for name, keys in refs.items():
            order = list(range(len(keys)))
            self.rng.shuffle(order)
            weights = [0.0] * len(keys)
            for rank, i in enumerate(order):
                weights[i] = 1 / (rank + 1) ** 0.9
            self.popularity[name] = list(_cumulate(weights))

    def row(self, fixed: dict[str, Any], refs: dict[str, list[Any]]) -> dict[str, Any]:
        out = dict(fixed)
        if self.follow is not None:  # the parent tuple of one of the sibling's rows (an order's prescription)
            options = [k for k in self.follow.indices(out) if all(
                v in self.allowed[c] for c, v in zip(self.follow.columns, self.follow.tuples[k], strict=True)
                if c in self.allowed)]
            if not options:
                raise Unplaceable(f"no {self.follow.source} row names parents this row may have")
            k = self.rng.choice(options)
            out[FOLLOWED] = k
            out.update(zip(self.follow.columns, self.follow.tuples[k], strict=True))
        for g in self.gens:
            if g.column not in out:
                share = self.nulls.get(g.column)
                if share is not None and self.rng.random() < share:  # empty in the examples' share of rows
                    out[g.column] = None
                    continue
                out[g.column] = self.value(g, out, refs)
                if self.bounds:
                    out[g.column] = self.bound(g.column, out[g.column], out, g)
        # a state its dates allow (a 'completed' visit not dated next month; dates unmoved) before the state is read
        # below: a loan drawn 'returned' and dated next month becomes 'pending' and is then put under way today
        for t in self.tenses:
            if t.column not in fixed and self.today is not None:
                out[t.column] = t.fit(out, self.rng, self.today)
        if self.single.columns and relations.in_state(out, self.states):
            out.update(self.single.closed(out, self.states, self.choices, self.gens, self.rng))
        if self.current and (self.every_state or relations.in_state(out, self.states)):
            out.update(self.under_way(out, set(fixed)))
        for ap in self.apart:  # a tuple an earlier sibling holds (an allergy's pair): drawn again
            if not ap.holds(out):
                raise Unplaceable(f"names ({', '.join(ap.columns)}) that a row of {ap.source} names, which no "
                                  f"example of the two shares")
        return out

    def following(self, column: str) -> set[str]:
        """The dates of ``column``'s chain (``date_after``, link by link): the one it is drawn after, and so on, and
        every one drawn after those: what moves with it, the row's gaps kept (ordered, shipped, delivered)."""
        after = {g.column: g.after for g in self.gens if g.kind == "date_after" and g.after}
        for _ in self.gens:
            column = after.get(column, column)
        out = {column}
        for _ in self.gens:
            out |= {g.column for g in self.gens if g.kind == "date_after" and g.after in out}
        return out

    def under_way(self, row: dict[str, Any], fixed: set[str]) -> dict[str, Any]:
        """The dates of ``row``, a row in the examples' state (:attr:`states`: a loan 'pending'), moved together (its
        own gaps kept) to a day that has each pair of :attr:`current` under way at :attr:`today`, as every example
        has it (a pending loan out now, not overdue: 11 of 11 in the library of 2026-11-29 were overdue). Only dates
        drawn for this row move (none of ``fixed``). Raises :class:`Unplaceable` when the move breaks a parent's
        dates (:attr:`bounds`)."""
        new: dict[str, Any] = {}
        today = self.today
        if today is None:
            return new
        for cur in self.current:
            both = {**row, **new}
            span = cur.shift(both, today)
            moving = self.following(cur.first) | self.following(cur.second)
            moving = {c for c in moving if c in row}
            if span is None or cur.holds(both, today) or moving & fixed:
                continue
            days = self.rng.randint(*span)
            for c in moving:
                day = relations.as_date(both.get(c))
                if day is not None:
                    new[c] = relations.moved(both[c], day + timedelta(days=days))
        gens = {g.column: g for g in self.gens}
        for c, v in new.items():
            if self.bounds and self.bound(c, v, {**row, **new}, gens[c]) != v:
                raise Unplaceable(f"{c}: the day that has the row under way today is outside its parent's dates")
        return new

    def value(self, g: ir.ColumnGenerator, row: dict[str, Any], refs: dict[str, list[Any]]) -> Any:
        f, rng, k = self.fake, self.rng, g.kind
        col = self.by_col[g.column]
        if k == "reference":
            keys = refs.get(g.column) or []
            if g.column in self.allowed:
                keys = [k for k in keys if k in self.allowed[g.column]]
            if not keys and col.notnull and g.column in self.allowed:
                raise Unplaceable(f"no {g.parent or 'parent'} row fits the relations the example rows show")
            if not keys or (not col.notnull and rng.random() < NULL_SHARE):
                return None
            cum = self.popularity.get(g.column)
            if cum is not None and len(cum) != len(keys):  # some parents not allowed: their weights left out
                allowed = self.allowed[g.column]
                weights = [w for k, w in zip(refs[g.column], _weights(cum), strict=True) if k in allowed]
                cum = list(_cumulate(weights))
            return rng.choices(keys, cum_weights=cum)[0]
        if k in FAKER_KINDS:  # a street address with a pattern: the whole address, joined as the examples
            return faker_value(f, k, g.pattern)
        if k == "email":
            return self._email(g, row)
        if k == "derived":  # made of the row's source as a task's new row makes it (``pipeline.dbmodel.draws``)
            return derived_value(g, row, self.rng, self.fake)
        if k in ("date", "datetime"):
            start, end = _date(g.start or ""), _date(g.end or "")
            day = start + timedelta(days=rng.randint(0, (end - start).days))
            if k == "date":
                return day.isoformat()
            return self._with_time(g.column, day, rng.randrange(8 * 60, 20 * 60, 15))
        if k == "date_after":
            base = row.get(g.after or "")
            if base is None:
                return None
            day = _date(base) + timedelta(days=rng.randint(int(g.min or 0), int(g.max or 0)))
            if g.column in self.ends:  # a date that ends the row's life: on its examples' side of the clock
                ended = self._ended(g, _date(base), day)
                if ended is None:
                    return None
                day = ended
            rest = str(base)[10:]
            return day.isoformat() if self.date_only[g.column] or not rest else day.isoformat() + rest
        if k in ALIGNED and g.after and g.values and g.after in self.drawn:  # a number or state of a tuple
            i = self.drawn[g.after]
            value = g.values[i] if i < len(g.values) else rng.choice(g.values)
            return int(value) if k == "integer" and isinstance(value, int | float) else value
        if k in ("integer", "amount"):
            return self._number(g, col)
        if k == "enum":
            return rng.choices(g.values or [None], weights=g.weights or None)[0]
        if k == "boolean":
            wf, wt = (g.weights or [1.0, 1.0])[:2]
            return int(rng.random() < wt / (wf + wt))
        if k == "code":
            return code_value(rng, g.pattern or "")
        if k == "text_pool" and g.pattern and g.max:  # a list-valued column: items joined by its separator
            return self._items(g)
        if k == "text_pool" and g.after and not g.pattern and g.after in self.drawn:  # a field of a tuple
            pool = g.pool or [""]  # aligned with its key column's pool: the same tuple's value
            return pool[self.drawn[g.after]] if self.drawn[g.after] < len(pool) else rng.choice(pool)
        if k == "text_pool" and self.unused.get(g.column):
            value = self.unused[g.column].pop()
            self.drawn[g.column] = (g.pool or [value]).index(value)
            return value
        if k == "text_pool" and g.column in self.pool_weights:  # a value the examples repeat keeps their share
            i = rng.choices(range(len(self.pool_weights[g.column])), weights=self.pool_weights[g.column])[0]
            self.drawn[g.column] = i
            return (g.pool or [""])[i]
        if k == "text_pool":
            i = rng.randrange(len(g.pool)) if g.pool else 0
            self.drawn[g.column] = i
            return (g.pool or [""])[i]
        if k == "text_combo":
            return f"{rng.choice(g.pool or [''])} {rng.choice(g.pool2 or [''])}"
        raise ValueError(f"unknown generator kind {k!r}")

    def _ended(self, g: ir.ColumnGenerator, base: date, day: date) -> date | None:
        """``day``, a later date of the row that its examples leave NULL in some rows (a termination date), kept
        on the side of the clock all its set examples are on (:attr:`clock`): drawn again within ``g``'s days
        after ``base`` that are on that side, or None when none is (hired last month: no termination date yet, as
        the examples with none). Unchanged without a side or a clock."""
        side = self.clock.get(g.column)
        if side is None or self.today is None:
            return day
        if (side == "past" and day <= self.today) or (side == "future" and day >= self.today):
            return day
        low, high = base + timedelta(days=int(g.min or 0)), base + timedelta(days=int(g.max or 0))
        if side == "past":
            high = min(high, self.today)
        else:
            low = max(low, self.today)
        if high < low:
            return None
        return low + timedelta(days=self.rng.randint(0, (high - low).days))

    def _items(self, g: ir.ColumnGenerator) -> str:
        """``min``..``max`` different items of the pool joined by ``pattern`` (the separator the examples use). A
        pool written in lower case (the examples write items after the first so) starts its list upper case."""
        pool = g.pool or [""]
        k = self.rng.randint(max(1, int(g.min or 1)), max(1, min(len(pool), int(g.max or 1))))
        items = self.rng.sample(pool, k)
        if all(i[:1].islower() for i in pool if i[:1].isalpha()):
            items[0] = items[0][:1].upper() + items[0][1:]
        return (g.pattern or ", ").join(items)

    def draw_once(self, columns: set[str], taken: dict[str, set[Any]]) -> None:
        """Draw the pools of ``columns`` without replacement, skipping the values in ``taken``."""
        for g in self.gens:
            if g.column in columns and g.kind == "text_pool" and g.pool and not g.pattern:
                left = [v for v in g.pool if v not in taken.get(g.column, set())]
                self.rng.shuffle(left)
                self.unused[g.column] = left

    def bound(self, column: str, value: Any, row: dict[str, Any], g: ir.ColumnGenerator) -> Any:
        """``value`` moved to respect the parent dates the examples show (:attr:`bounds`): a child's date not
        before (or not after) its parent row's dates, all of them at once (a renewal between its loan's start and
        its due date; moved one bound after another, a date pushed before the due date fell before the start), and
        on its examples' side of the clock (:attr:`clock`, for a column drawn in a range). Raises
        :class:`Unplaceable` when no day fits (a loan that began after today for a renewal dated by today)."""
        got = _maybe_date(value)
        if got is None:
            return value
        lows: list[date] = []
        highs: list[date] = []
        for col, via, dates, after, days in self.bounds:
            base = dates.get(row.get(via)) if col == column else None
            if base is not None:
                (lows if after else highs).append(base + timedelta(days=days) if after else base - timedelta(days=days))
        if not lows and not highs:
            return value
        side = self.clock.get(column) if g.kind in DRAWN_DATES else None
        if side is not None and self.today is not None:
            (highs if side == "past" else lows).append(self.today)
        low, high = max(lows, default=None), min(highs, default=None)
        if low is not None and high is not None and high < low:
            raise Unplaceable(f"{column}: no day between {low} and {high} fits its parent's dates and the clock")
        if (low is None or got >= low) and (high is None or got <= high):
            return value
        rest = str(value)[10:]
        if low is not None and high is not None:
            day = low + timedelta(days=self.rng.randint(0, (high - low).days))
        elif low is not None:
            end = _maybe_date(g.end) if g.kind in ("date", "datetime") else None
            span = (end - low).days if end is not None and end > low else 30
            day = low + timedelta(days=self.rng.randint(0, span))
        else:
            assert high is not None
            day = high - timedelta(days=self.rng.randint(0, 30))
        return day.isoformat() + rest

    def _with_time(self, column: str, day: date, minutes: int) -> str:
        sep, seconds = self.formats.get(column, ("T", True))
        text = f"{day.isoformat()}{sep}{minutes // 60:02d}:{minutes % 60:02d}"
        return text + ":00" if seconds else text

    def _number(self, g: ir.ColumnGenerator, col: Column) -> int | float:
        lo, hi, rng = float(g.min or 0), float(g.max or 0), self.rng
        if g.distribution == "normal":
            x = min(hi, max(lo, rng.gauss((lo + hi) / 2, (hi - lo) / 6 or 1)))
        elif g.distribution == "skewed":
            x = lo + (hi - lo) * rng.random() ** 2.5
        else:
            x = rng.uniform(lo, hi)
        if g.kind == "integer" or col.type in ("INTEGER", "INT"):
            return min(math.floor(hi), max(math.ceil(lo), round(x)))
        return round(x, 2)

    def _email(self, g: ir.ColumnGenerator, row: dict[str, Any]) -> str:
        """An address made of the person ``row`` names (:func:`pipeline.dbmodel.draws.made_of_row`, as a task's new
        row makes it), else a user name's."""
        made = made_of_row(g, self.gens, row, self.rng, self.fake)
        return made if made is not None else f"{self.fake.user_name()}@{self.fake.free_email_domain()}"


@dataclass
class SingleOpen:
    """The reference columns whose parent holds at most one row in the examples' state at a time (a book on one
    pending loan: the model says so, ``pipeline.stages.rows.single``), and per column the parents that hold one
    already (the table's rows so far, :meth:`held`, and each row inserted, :meth:`add`). A row drawn in that state
    for a parent that holds one is put in a state the examples do not show (:meth:`closed`: the loan 'returned')."""

    columns: tuple[str, ...] = ()
    taken: dict[str, set[Any]] = field(default_factory=dict)

    def held(self, columns: Sequence[str], rows: Sequence[Mapping[str, Any]], states: Mapping[str, frozenset[Any]]
             ) -> None:
        """Hold ``columns`` from now on, the parents of ``rows`` in ``states`` taken."""
        self.columns = tuple(columns)
        self.taken = {c: {r.get(c) for r in rows if r.get(c) is not None and relations.in_state(r, states)}
                      for c in self.columns}

    def add(self, row: Mapping[str, Any], states: Mapping[str, frozenset[Any]]) -> None:
        if self.columns and relations.in_state(row, states):
            for c in self.columns:
                if row.get(c) is not None:
                    self.taken[c].add(row[c])

    def closed(self, row: Mapping[str, Any], states: Mapping[str, frozenset[Any]],
               choices: Mapping[str, Sequence[Any]], gens: Sequence[ir.ColumnGenerator], rng: random.Random
               ) -> dict[str, Any]:
        """``row``'s state columns drawn again among the values the examples do not hold (each column's generator
        weights kept among them), where a parent it names through :attr:`columns` holds a row in the examples'
        state already; nothing when none does or a column has no other value."""
        if not any(row.get(c) in self.taken.get(c, set()) for c in self.columns):
            return {}
        out: dict[str, Any] = {}
        weights = {g.column: dict(zip(g.values or [], g.weights or [], strict=False)) for g in gens}
        for c, held in states.items():
            others = [v for v in choices.get(c, []) if v not in held]
            if not others:
                return {}
            w = [weights.get(c, {}).get(v, 1.0) or 1.0 for v in others]
            out[c] = rng.choices(others, weights=w)[0]
        return out


DRAWN_DATES = ("date", "datetime", "text_pool")
"""Generator kinds whose date is drawn apart from the row's other dates (a range, or the examples' dates continued
as a list), which :meth:`ValueMaker.bound` keeps on its examples' side of the clock: a line's date drawn from a
list, moved after its order's day, fell after the clock (2026-01-27 and 2026-02-14 on a shop of 2026-01-15)."""


def _maybe_date(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10]) if value is not None else None
    except ValueError:
        return None


def _weights(cum: list[float]) -> list[float]:
    """Cumulative weights back to weights."""
    return [b - a for a, b in zip([0.0, *cum[:-1]], cum, strict=True)]


def _cumulate(weights: list[float]) -> Any:
    total = 0.0
    for w in weights:
        total += w
        yield total


def order_generators(gens: list[ir.ColumnGenerator]) -> list[ir.ColumnGenerator]:
    """Generators in drawing order: an email after the names it is built from, a ``date_after`` after its base, a
    tuple's field after its key column, a value made of another column's (``derived``) after every other."""
    rank = {"reference": 0, "email": 2, "date_after": 3, "derived": 4}
    out = sorted(gens, key=lambda g: 1.5 if g.kind in ("text_pool", *ALIGNED) and g.after else rank.get(g.kind, 1))
    done: list[ir.ColumnGenerator] = [g for g in out if g.kind != "date_after"]
    left = [g for g in out if g.kind == "date_after"]
    while left:
        ready = [g for g in left if g.after in {d.column for d in done}] or left[:1]
        done.append(ready[0])
        left.remove(ready[0])
    return done


# ------------------------------------------------------------------ inserting


@dataclass
class Filled:
    """What :func:`fill` did: rows inserted, rows dropped by reason, whether it stopped early."""

    inserted: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    stopped: bool = False


def fill(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], maker: ValueMaker, shape: Shape,
         sets: list[tuple[str, ...]], keep: frozenset[str] = frozenset()) -> Filled:
    """Insert one row per ``shape.fixed`` entry, drawing again a row that repeats a key set or that SQLite
    refuses; a row refused ``RETRIES`` times is dropped (and counted by reason). A repeated value of a column in
    ``keep`` (a vocabulary list's item) is never made unique by a suffix: the row is dropped instead."""
    names = [c.name for c in cols if not c.auto_id]
    quoted = ", ".join(f'"{n}"' for n in names)
    sql = f'INSERT INTO "{table.name}" ({quoted}) VALUES ({", ".join("?" for _ in names)})'
    taken = {s: set(taken_values(conn, table.name, s)) for s in sets}
    self_ref = {c.name: c.ref[1] for c in cols if c.ref is not None and c.ref[0] == table.name}
    maker.references(shape.refs)
    if keep:
        maker.draw_once(set(keep), {c: {r[0] for r in taken_values(conn, table.name, (c,))} for c in keep})
    refs = dict(shape.refs)
    for name, key in self_ref.items():  # a reference to the table itself: any row already in it, uniformly
        refs[name] = parent_keys(conn, table.name, key)
    out, streak = Filled(), 0
    for fixed in shape.fixed:
        error = ""
        if not maker.placeable(fixed):  # its parent is one the examples' children never had: no child drawn
            out.dropped["its parent is not one the example rows give children (the relations they show)"] += 1
            continue
        unplaced = False
        for attempt in range(RETRIES):
            try:
                row = maker.row(fixed, refs)
            except Unplaceable as e:
                error, unplaced = str(e), True
                continue
            unplaced = False
            error = _repeats(row, taken)
            if error and attempt == RETRIES - 1:  # the last draw: its repeated value made unique, as for LLM rows
                row = _bump(row, taken, cols, keep)
                error = _repeats(row, taken)
            if error:
                continue
            try:
                cur = conn.execute(sql, [row.get(n) for n in names])
            except sqlite3.Error as e:
                error = str(e)
                continue
            for s in sets:
                taken[s].add(tuple(row.get(c) for c in s))
            maker.single.add(row, maker.states)
            for name, key in self_ref.items():
                refs[name].append(cur.lastrowid if key not in row else row[key])
            out.inserted += 1
            streak = 0
            break
        else:
            out.dropped[error] += 1
            if unplaced:  # a parent no child's dates fit says nothing of the generators
                continue
            streak += 1
            if streak >= STOP_AFTER:
                out.stopped = True
                break
    return out


def taken_values(conn: sqlite3.Connection, table: str, cols: tuple[str, ...]) -> list[tuple[Any, ...]]:
    sel = ", ".join(f'"{c}"' for c in cols)
    return [tuple(r) for r in conn.execute(f'SELECT {sel} FROM "{table}"')]


def _repeats(row: dict[str, Any], taken: dict[tuple[str, ...], set[tuple[Any, ...]]]) -> str:
    for s, seen in taken.items():
        values = tuple(row.get(c) for c in s)
        if None not in values and values in seen:
            return f"repeats the values of ({', '.join(s)}), which no two rows may share"
    return ""


def _bump(row: dict[str, Any], taken: dict[tuple[str, ...], set[tuple[Any, ...]]], cols: list[Column],
          keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``row`` with the repeated value of each key set it repeats changed to the nearest unused one (the last
    column of the set that is neither a reference nor a CHECK-listed value; :func:`variants`): a number counted up,
    a text's digits moved on (a phone, a code). A text without digits is left as it is (the row is drawn again or
    dropped): a number added to it would be a uniqueness suffix ("Kathryn Evans 2")."""
    out = dict(row)
    by_name = {c.name: c for c in cols}
    for s, seen in taken.items():
        if tuple(out.get(c) for c in s) not in seen:
            continue
        free = [c for c in s if c in by_name and by_name[c].ref is None and not by_name[c].enum]
        if not free or free[-1] in keep:
            continue
        if isinstance(out[free[-1]], str) and not any(ch.isdigit() for ch in out[free[-1]]):
            continue
        for candidate in variants(out[free[-1]]):
            trial = {**out, free[-1]: candidate}
            if tuple(trial.get(c) for c in s) not in seen:
                out = trial
                break
    return out
