"""Time against the clock and across tables, as the example rows show it (issue 40), read from values only:

- rows under way at the clock: the model's example loans were issued today and due a month later, 'pending' (out
  now, not yet due). The library of 2026-11-29 (generated/quickstart, book_lending_system) moved them wholly into the
  past (loan 2025-09-14 due 2025-10-15, still pending) and drew its other pending loans anywhere in the past months:
  11 of 11 open loans were overdue, not one book out and current. The examples' relation to the clock survives the
  move (``timeline.respread``), and the code-made rows in the examples' state keep it (``maker.ValueMaker``);
- a child after its parent began: the model's renewals were written on their loan's day (both today), and moved with
  their loans they sat on each loan's issue day. A child dated on its parent's start, where the examples are all on
  one day (the model's habit) and the parent has a start and an end, is after the start, within the parent's dates.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import relations
from pipeline.settings import BuildSettings
from pipeline.stages.rows import timeline
from pipeline.stages.rows.maker import ValueMaker, child_relations, fill, key_sets, table_shape

TODAY = date(2026, 1, 15)
LOANS = ir.Table(name="loans", ddl=(
    "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book TEXT NOT NULL, loan_date TEXT NOT NULL, "
    "due_date TEXT NOT NULL, status TEXT CHECK (status IN ('pending', 'returned'))) STRICT"))
RENEWALS = ir.Table(name="renewals", ddl=(
    "CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), "
    "renewal_date TEXT NOT NULL) STRICT"))
# the same tables in other words (no name is read)
WYP = ir.Table(name="wyp", ddl=(
    "CREATE TABLE wyp (nr INTEGER PRIMARY KEY, tytul TEXT NOT NULL, od TEXT NOT NULL, do_kiedy TEXT NOT NULL, "
    "stan TEXT CHECK (stan IN ('otwarte', 'zamkniete'))) STRICT"))
PRZ = ir.Table(name="prz", ddl=(
    "CREATE TABLE prz (id INTEGER PRIMARY KEY, wyp_nr INTEGER NOT NULL REFERENCES wyp(nr), kiedy TEXT NOT NULL) "
    "STRICT"))


def _day(days: int) -> str:
    return (TODAY + timedelta(days=days)).isoformat()


def _insert(conn: sqlite3.Connection, table: ir.Table, rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    names = [c.name for c in table_columns(conn, table) if not c.auto_id]
    for r in rows:
        conn.execute(f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in names)})', r)
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def _fill(conn: sqlite3.Connection, table: ir.Table, examples: dict[str, list[Any]],
          gens: list[ir.ColumnGenerator], seed: int = 5) -> Any:
    cols = table_columns(conn, table)
    names = [c.name for c in cols if not c.auto_id]
    refs = [ir.ColumnGenerator(column=c.name, kind="reference", by="code", parent=c.ref[0], key=c.ref[1])
            for c in cols if c.ref is not None]
    gens = [*refs, *gens]
    rel = child_relations(conn, table.name, cols, examples, {g.column for g in gens if g.kind != "reference"}, TODAY)
    sets = key_sets(conn, table, names)
    settings = BuildSettings(entity_rows=(60, 60), child_fanout=(0, 2), child_rows_max=200)
    shape = table_shape(conn, table, cols, sets, len(examples[names[0]]), settings, random.Random(seed))
    maker = ValueMaker("en_US", seed, gens, cols, examples)
    maker.relate(rel, TODAY)
    return fill(conn, table, cols, maker, shape, sets)


def _loan_gens(start: str, end: str, state: str, values: list[str], title: str = "book") -> list[ir.ColumnGenerator]:
    return [ir.ColumnGenerator(column=title, kind="text_pool", pool=[f"t{i}" for i in range(50)]),
            ir.ColumnGenerator(column=start, kind="date", start=_day(-180), end=_day(0)),
            ir.ColumnGenerator(column=end, kind="date_after", after=start, min=31, max=31),
            ir.ColumnGenerator(column=state, kind="enum", values=values, weights=[1, 1])]


def _library(table: ir.Table = LOANS, child: ir.Table = RENEWALS) -> tuple[sqlite3.Connection, list[str]]:
    """The library as the build makes it: four example loans the model wrote (issued today, due in 31 days,
    pending), code-made loans, four example renewals the model wrote on loans 1-4 today, code-made renewals."""
    conn = scratch_db((table, child))
    lc = [c.name for c in table_columns(conn, table) if not c.auto_id]
    state = table_columns(conn, table)[-1].enum
    assert state is not None
    ex = _insert(conn, table, [(f"b{i}", _day(0), _day(31), state[0]) for i in range(4)])
    _fill(conn, table, ex, _loan_gens(lc[1], lc[2], lc[3], list(state), lc[0]))
    cc = [c.name for c in table_columns(conn, child) if not c.auto_id]
    ren = _insert(conn, child, [(k, _day(0)) for k in (1, 2, 3, 4)])
    _fill(conn, child, ren, [ir.ColumnGenerator(column=cc[1], kind="date", start=_day(-180), end=_day(0))])
    return conn, lc


def _all(conn: sqlite3.Connection, table: str) -> list[tuple[Any, ...]]:
    return conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()


# ------------------------------------------------------------------ inference (relations.py)


def test_pairs_under_way_and_the_state_the_examples_hold() -> None:
    ex = {"a": [_day(0)] * 4, "b": [_day(31)] * 4, "s": ["pending"] * 4, "kind": ["x", "y", "x", "y"]}
    assert relations.currents(ex, TODAY) == [relations.Current("a", "b")]
    assert relations.currents({"a": [_day(-60)] * 4, "b": [_day(-29)] * 4}, TODAY) == []  # all overdue: not
    assert relations.currents({"a": [_day(-60), _day(0)], "b": [_day(-29), _day(31)]}, TODAY) == []  # straddle
    got = relations.states(ex, {"s": ["pending", "returned"], "kind": ["x", "y"]})
    assert got == {"s": frozenset({"pending"})}  # every value drawn is in the examples: no state
    assert relations.in_state({"s": "pending"}, got) and not relations.in_state({"s": "returned"}, got)
    assert not relations.in_state({"s": "pending"}, {})  # no state column: no row is in the examples' state
    cur = relations.Current("a", "b")
    assert cur.shift({"a": _day(-90), "b": _day(-59)}, TODAY) == (60, 90)  # issued by today, due after it
    assert cur.holds({"a": _day(-5), "b": _day(26)}, TODAY) and not cur.holds({"a": _day(-40), "b": _day(-9)}, TODAY)


def test_a_child_on_its_parents_start_is_after_it_when_the_examples_are_all_on_one_day() -> None:
    parents = {k: {"id": k, "a": _day(0), "b": _day(31)} for k in (1, 2, 3, 4)}
    parents.update({k: {"id": k, "a": _day(-k), "b": _day(31 - k)} for k in range(5, 40)})
    habit = {"p": [1, 2, 3, 4], "d": [_day(0)] * 4}  # the model's renewals and loans, all today
    got = {(o.parent_column, o.after, o.strict) for o in relations.parent_orders(habit, "p", parents)}
    assert got == {("a", True, True), ("b", False, True)}
    # on the parent's day, on days of their own: that relation is the examples' (a stay checked in on its first day)
    own = {k: {"id": k, "a": _day(-3 * k), "b": _day(31 - 3 * k)} for k in range(1, 40)}
    days = {"p": [1, 2, 3, 4], "d": [_day(-3 * k) for k in (1, 2, 3, 4)]}
    assert ("a", True, False) in {(o.parent_column, o.after, o.strict) for o in relations.parent_orders(days, "p", own)}
    # one day, but the parent's date starts nothing (no end after it): left as the examples show
    lone = {k: {"id": k, "a": _day(0 if k < 5 else -k)} for k in range(1, 40)}
    assert {(o.after, o.strict) for o in relations.parent_orders(habit, "p", lone)} == {(True, False)}


# ------------------------------------------------------------------ code-made rows (maker.py)


def test_code_made_rows_in_the_examples_state_are_under_way_at_the_clock() -> None:
    conn, _ = _library()
    rows = _all(conn, "loans")[4:]
    pending = [r for r in rows if r[4] == "pending"]
    returned = [r for r in rows if r[4] == "returned"]
    assert len(pending) > 15 and len(returned) > 15
    assert all(r[2] <= _day(0) < r[3] for r in pending), [r for r in pending if not r[2] <= _day(0) < r[3]]
    assert len({r[2] for r in pending}) > 10  # spread over the month before today, not all today
    assert all((date.fromisoformat(r[3]) - date.fromisoformat(r[2])).days == 31 for r in rows)  # gaps kept
    assert any(r[3] < _day(0) for r in returned)  # a state no example shows: anywhere in the past


PATIENTS = ir.Table(name="patients", ddl=(
    "CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT"))
PRESCRIPTIONS = ir.Table(name="prescriptions", ddl=(
    "CREATE TABLE prescriptions (prescription_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES "
    "patients(patient_id), quantity INTEGER CHECK (quantity >= 0), status TEXT NOT NULL CHECK (status IN ('open', "
    "'closed')), start_date TEXT NOT NULL, end_date TEXT NOT NULL CHECK (end_date >= start_date)) STRICT"))


def test_every_value_of_the_list_under_way_keeps_every_row_under_way() -> None:
    # the pharmacy of 2026-11-29 (generated/quickstart, community_pharmacy): the model's four prescriptions, two
    # 'open' and two 'closed', all written today and ending 15 to 171 days later; the start drawn in the half year
    # before today (a fallback date), the end after it. No value of the list is the examples' own, and 43 of 98 open
    # prescriptions had ended before the clock.
    ex = {"a": [_day(0)] * 4, "b": [_day(15), _day(30), _day(87), _day(171)], "s": ["open", "closed"] * 2}
    choices = {"s": ["open", "closed"]}
    assert relations.states(ex, choices) == {} and relations.every_state(ex, choices)
    assert not relations.every_state({**ex, "s": ["open"] * 4}, choices)  # a state of their own: in_state's
    assert not relations.every_state(ex, {})  # no list: no state to speak of
    assert not relations.every_state({**ex, "f": ["d", "d", "w", "w"]}, {**choices, "f": ["d", "w", "m"]})
    conn = scratch_db((PATIENTS, PRESCRIPTIONS))
    for i in range(120):
        conn.execute("INSERT INTO patients (name) VALUES (?)", (f"p{i}",))
    rows = [(k, 5 + k, s, a, b) for k, (a, b, s) in enumerate(zip(ex["a"], ex["b"], ex["s"], strict=True), 1)]
    written = _insert(conn, PRESCRIPTIONS, rows)
    _fill(conn, PRESCRIPTIONS, written, [
        ir.ColumnGenerator(column="quantity", kind="integer", min=0, max=100),
        ir.ColumnGenerator(column="status", kind="enum", values=["open", "closed"], weights=[0.5, 0.5]),
        ir.ColumnGenerator(column="start_date", kind="date", start=_day(-180), end=_day(0)),
        ir.ColumnGenerator(column="end_date", kind="date_after", after="start_date", min=15, max=171)])
    made = _all(conn, "prescriptions")[4:]
    assert len([r for r in made if r[3] == "open"]) > 10 and len([r for r in made if r[3] == "closed"]) > 10
    assert [r for r in made if not r[4] <= _day(0) < r[5]] == []  # open or closed, under way as every example
    assert len({r[4] for r in made}) > 10  # spread before today, not all today
    assert all(15 <= (date.fromisoformat(r[5]) - date.fromisoformat(r[4])).days <= 171 for r in made)


def test_no_state_column_leaves_code_made_rows_as_drawn() -> None:
    plain = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book TEXT NOT NULL, "
                                       "loan_date TEXT NOT NULL, due_date TEXT NOT NULL) STRICT")
    conn = scratch_db((plain,))
    ex = _insert(conn, plain, [(f"b{i}", _day(0), _day(31)) for i in range(4)])
    _fill(conn, plain, ex, _loan_gens("loan_date", "due_date", "x", [])[:3])
    rows = _all(conn, "loans")[4:]
    assert sum(r[3] < _day(0) for r in rows) > len(rows) // 2  # the history of past loans, drawn as before


# ------------------------------------------------------------------ the model's rows moved (timeline.py)


def test_the_examples_stay_under_way_and_their_children_after_their_parents_began() -> None:
    conn, _ = _library()
    before = _all(conn, "loans")[4:]
    moved = timeline.respread(conn, (LOANS, RENEWALS), {"loans": 4, "renewals": 4}, TODAY)
    loans = _all(conn, "loans")
    assert loans[4:] == before  # code-made rows: left
    ex = loans[:4]
    assert all(r[2] <= _day(0) < r[3] for r in ex), ex  # out now and not yet due, as the model wrote them
    assert len({r[2] for r in ex}) == 4 and sorted(moved["loans"].days) == [0, 1, 2, 3]
    assert all((date.fromisoformat(r[3]) - date.fromisoformat(r[2])).days == 31 for r in ex)
    # every open loan is out now: none overdue
    assert [r for r in loans if r[4] == "pending" and r[3] < _day(0)] == []
    by_id = {r[0]: r for r in loans}
    ren = _all(conn, "renewals")
    for rid, loan, day in ren:
        start, due = by_id[loan][2], by_id[loan][3]
        assert start < day <= min(due, _day(0)), (rid, loan, day, start, due)
    assert moved["renewals"].with_parent == {0, 1, 2, 3}


def test_the_same_in_other_words() -> None:
    conn, lc = _library(WYP, PRZ)
    timeline.respread(conn, (WYP, PRZ), {"wyp": 4, "prz": 4}, TODAY)
    rows = _all(conn, "wyp")
    assert [r for r in rows if r[4] == "otwarte" and not r[2] <= _day(0) < r[3]] == []
    by_id = {r[0]: r for r in rows}
    assert all(by_id[p][2] < d <= min(by_id[p][3], _day(0)) for _, p, d in _all(conn, "prz"))


def test_without_the_clock_the_move_is_as_before() -> None:
    conn, _ = _library()
    timeline.respread(conn, (LOANS, RENEWALS), {"loans": 4, "renewals": 4})
    loans = {r[0]: r for r in _all(conn, "loans")}
    # the quantiles of every code-made day, most of them months back: the model's open loans overdue
    assert any(loans[k][3] < _day(0) for k in (1, 2, 3, 4))


def test_a_chain_of_dates_moves_whole() -> None:
    # ordered, shipped a day later, delivered 4 days after that; the examples all shipped and on their way
    parcels = ir.Table(name="parcels", ddl=(
        "CREATE TABLE parcels (id INTEGER PRIMARY KEY, a TEXT NOT NULL, b TEXT NOT NULL, c TEXT NOT NULL, "
        "s TEXT NOT NULL CHECK (s IN ('x', 'y', 'z'))) STRICT"))
    conn = scratch_db((parcels,))
    ex = _insert(conn, parcels, [(_day(-2), _day(-1), _day(3), "x")] * 2 + [(_day(-3), _day(-2), _day(2), "x")] * 2)
    assert relations.Current("b", "c") in relations.currents(ex, TODAY)
    _fill(conn, parcels, ex, [ir.ColumnGenerator(column="a", kind="date", start=_day(-90), end=_day(0)),
                              ir.ColumnGenerator(column="b", kind="date_after", after="a", min=1, max=1),
                              ir.ColumnGenerator(column="c", kind="date_after", after="b", min=4, max=4),
                              ir.ColumnGenerator(column="s", kind="enum", values=["x", "y", "z"])])
    rows = _all(conn, "parcels")[4:]
    on_way = [r for r in rows if r[4] == "x"]
    assert len(on_way) > 10 and all(r[2] <= _day(0) < r[3] for r in on_way)
    gaps = {((date.fromisoformat(r[2]) - date.fromisoformat(r[1])).days,
             (date.fromisoformat(r[3]) - date.fromisoformat(r[2])).days) for r in rows}
    assert gaps == {(1, 4)}  # the whole chain moved, from its first date
    assert any(r[3] < _day(0) for r in rows if r[4] != "x")
