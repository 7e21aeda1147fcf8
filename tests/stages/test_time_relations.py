"""Time across tables, inferred from example rows' values (never from names) and held by the row maker: a child
only for the parents the examples' children had on one side of the clock (a fine only on a loan already due), a
child's date within its parent's dates and on its examples' side of the clock, a child no parent fits dropped."""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import relations
from pipeline.settings import BuildSettings
from pipeline.stages.rows.maker import (
    ValueMaker,
    child_relations,
    fill,
    key_sets,
    table_shape,
)

TODAY = date(2026, 1, 15)


def _loans(n: int = 30) -> dict[int, dict[str, Any]]:
    """Loans made over the 60 days before today, due 21 days later: about a third not yet due."""
    out = {}
    for k in range(1, n + 1):
        start = TODAY - timedelta(days=2 * k)
        out[k] = {"loan_id": k, "loan_date": start.isoformat(), "due_date": (start + timedelta(days=21)).isoformat()}
    return out


# ------------------------------------------------------------------ inference (relations.py)


def test_children_only_on_parents_past_a_date_when_every_example_child_is() -> None:
    loans = _loans()
    due = [k for k, r in loans.items() if r["due_date"] <= TODAY.isoformat()]
    examples = {"loan_id": due[2:6], "fine_amount": [5.0, 3.5, 4.0, 6.0]}
    got = relations.parent_clocks(examples, "loan_id", loans, TODAY, listed=list(loans)[:40])
    # the due date: examples' loans all due by today, other loans not yet; the start: every loan began by today
    assert got == [relations.ParentClock("loan_id", "due_date", "past")]
    assert got[0].holds(loans[due[0]], TODAY) and not got[0].holds(loans[1], TODAY)


def test_no_relation_from_children_that_straddle_the_clock_or_from_too_few_parents() -> None:
    loans = _loans()
    mixed = {"loan_id": [1, 2, 20, 25], "fine_amount": [1.0, 2.0, 3.0, 4.0]}  # loans 1, 2 not yet due
    assert relations.parent_clocks(mixed, "loan_id", loans, TODAY) == []
    two = {"loan_id": [20, 25, 20], "fine_amount": [1.0, 2.0, 3.0]}
    assert relations.parent_clocks(two, "loan_id", loans, TODAY) == []


def test_children_naming_the_first_parents_shown_show_nothing() -> None:
    # the 2026-11-28 library: its 4 example fines named loans 1, 2, 3, 4, the first keys its prompt listed (all
    # due after today); taken as a relation, every fine would sit on a loan not yet due
    loans = {k: {"loan_date": "2026-01-15", "due_date": "2026-02-15"} for k in range(1, 5)}
    loans.update({k: {"loan_date": "2025-11-01", "due_date": "2025-12-01"} for k in range(5, 30)})
    examples = {"loan_id": [1, 2, 3, 4], "fine_amount": [5.0, 3.5, 4.0, 6.0]}
    assert relations.positional(examples["loan_id"], list(range(1, 41)))
    assert relations.parent_clocks(examples, "loan_id", loans, TODAY, listed=list(range(1, 41))) == []
    assert relations.parent_clocks(examples, "loan_id", loans, TODAY) != []  # the same, when no listing is known
    assert not relations.positional([1, 2, 5], list(range(1, 41)))


def test_names_are_not_read() -> None:
    # the same values under other names (Polish-like and meaningless): the same relation, named by the new names
    loans = _loans()
    renamed = {k: {"nr": k, "kolumna_a": r["loan_date"], "zzz": r["due_date"]} for k, r in loans.items()}
    due = [k for k, r in loans.items() if r["due_date"] <= TODAY.isoformat()]
    examples = {"wypozyczenie": due[:4], "kwota": [5.0, 3.5, 4.0, 6.0]}
    assert relations.parent_clocks(examples, "wypozyczenie", renamed, TODAY) == [
        relations.ParentClock("wypozyczenie", "zzz", "past")]


# ------------------------------------------------------------------ the maker holds them (maker.py)

LOANS = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, loan_date TEXT NOT NULL, "
                                   "due_date TEXT NOT NULL) STRICT")
FINES = ir.Table(name="fines", ddl="CREATE TABLE fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL "
                                   "REFERENCES loans(loan_id), fine_amount REAL NOT NULL CHECK (fine_amount > 0)) "
                                   "STRICT")
RENEWALS = ir.Table(name="renewals", ddl="CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER "
                                         "NOT NULL REFERENCES loans(loan_id), renewal_date TEXT NOT NULL) STRICT")
# the same pair, in another language's words
KSIAZKI = ir.Table(name="wypozyczenia", ddl="CREATE TABLE wypozyczenia (nr INTEGER PRIMARY KEY, od TEXT NOT NULL, "
                                            "termin TEXT NOT NULL) STRICT")
KARY = ir.Table(name="kary", ddl="CREATE TABLE kary (id INTEGER PRIMARY KEY, wyp INTEGER NOT NULL REFERENCES "
                                 "wypozyczenia(nr), kwota REAL NOT NULL CHECK (kwota > 0)) STRICT")


def _db(parent: ir.Table, child: ir.Table, loans: dict[int, dict[str, Any]]) -> Any:
    conn = scratch_db([parent, child])
    for r in loans.values():
        conn.execute(f'INSERT INTO "{parent.name}" VALUES (?, ?, ?)', (r["loan_id"], r["loan_date"], r["due_date"]))
    return conn


def _fill(conn: Any, table: ir.Table, examples_sql: list[tuple[Any, ...]], gens: list[ir.ColumnGenerator]
          ) -> tuple[Any, Any]:
    cols = table_columns(conn, table)
    names = [c.name for c in cols if not c.auto_id]
    for row in examples_sql:
        conn.execute(f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in names)})',
                     row)
    examples = {n: [r[i] for r in examples_sql] for i, n in enumerate(names)}
    ref = next(c for c in cols if c.ref is not None)
    assert ref.ref is not None
    gens = [ir.ColumnGenerator(column=ref.name, kind="reference", by="code", parent=ref.ref[0], key=ref.ref[1]),
            *gens]
    drawn = {g.column for g in gens if g.kind != "reference"}
    rel = child_relations(conn, table.name, cols, examples, drawn, TODAY)
    sets = key_sets(conn, table, names)
    settings = BuildSettings(child_fanout=(1, 3), child_rows_max=200)
    shape = table_shape(conn, table, cols, sets, len(examples_sql), settings, random.Random(5))
    maker = ValueMaker("en_US", 5, gens, cols, examples)
    maker.relate(rel, TODAY)
    return rel, fill(conn, table, cols, maker, shape, sets)


def _fine_examples(loans: dict[int, dict[str, Any]]) -> list[tuple[Any, ...]]:
    due = [k for k, r in loans.items() if r["due_date"] < TODAY.isoformat()]
    return [(due[3], 5.0), (due[7], 3.5), (due[1], 4.0), (due[9], 6.0)]


def test_fines_only_on_loans_already_due() -> None:
    loans = _loans()
    conn = _db(LOANS, FINES, loans)
    amount = ir.ColumnGenerator(column="fine_amount", kind="amount", min=1, max=20)
    rel, filled = _fill(conn, FINES, _fine_examples(loans), [amount])
    assert set(rel.allowed) == {"loan_id"} and rel.notes
    rows = conn.execute("SELECT f.loan_id, l.due_date FROM fines f JOIN loans l USING (loan_id)").fetchall()
    assert len(rows) > 15
    assert all(d <= TODAY.isoformat() for _, d in rows), [r for r in rows if r[1] > TODAY.isoformat()]
    assert filled.dropped and not filled.stopped  # the children planned for loans not yet due: dropped


def test_the_same_pair_in_other_words() -> None:
    loans = _loans()
    conn = _db(KSIAZKI, KARY, loans)
    amount = ir.ColumnGenerator(column="kwota", kind="amount", min=1, max=20)
    _, filled = _fill(conn, KARY, _fine_examples(loans), [amount])
    rows = conn.execute("SELECT w.termin FROM kary k JOIN wypozyczenia w ON w.nr = k.wyp").fetchall()
    assert len(rows) > 15 and all(d <= TODAY.isoformat() for (d,) in rows)
    assert filled.inserted == len(rows) - 4


def test_fines_anywhere_when_the_examples_show_no_choice() -> None:
    loans = _loans()
    conn = _db(LOANS, FINES, loans)
    amount = ir.ColumnGenerator(column="fine_amount", kind="amount", min=1, max=20)
    rel, _ = _fill(conn, FINES, [(1, 5.0), (2, 3.5), (3, 4.0), (4, 6.0)], [amount])  # the first loans listed
    assert rel.allowed == {}


def test_renewals_within_their_loan_and_by_today_and_none_for_a_loan_not_begun() -> None:
    loans = _loans()
    loans[31] = {"loan_id": 31, "loan_date": "2026-01-20", "due_date": "2026-02-10"}  # begins after today
    conn = _db(LOANS, RENEWALS, loans)
    examples = [(k, (date.fromisoformat(loans[k]["loan_date"]) + timedelta(days=1)).isoformat()) for k in (3, 5, 8)]
    day = ir.ColumnGenerator(column="renewal_date", kind="date", start="2025-06-01", end=TODAY.isoformat())
    rel, filled = _fill(conn, RENEWALS, examples, [day])
    assert {(b[0], b[3]) for b in rel.bounds} == {("renewal_date", True), ("renewal_date", False)}
    assert rel.clock == {"renewal_date": "past"}
    rows = conn.execute("SELECT r.loan_id, r.renewal_date, l.loan_date, l.due_date FROM renewals r "
                        "JOIN loans l USING (loan_id)").fetchall()
    # one renewal per loan (its examples each name another loan: maker.one_each), on every loan not yet due but begun
    assert len(rows) == len({r[0] for r in rows}) == 10
    for loan, d, start, due in rows:
        assert start <= d <= min(due, TODAY.isoformat()), (loan, d, start, due)
    assert 31 not in {r[0] for r in rows}
    assert not filled.stopped


def test_an_unplaceable_child_is_dropped_not_moved() -> None:
    loans = {1: {"loan_id": 1, "loan_date": "2026-01-20", "due_date": "2026-02-10"}}
    conn = _db(LOANS, RENEWALS, loans)
    cols = table_columns(conn, RENEWALS)
    g = ir.ColumnGenerator(column="renewal_date", kind="date", start="2025-06-01", end=TODAY.isoformat())
    maker = ValueMaker("en_US", 1, [g], cols, {})
    rel = child_relations(conn, "renewals", cols, {"loan_id": [1, 1, 1],
                                                      "renewal_date": ["2026-01-21", "2026-01-22", "2026-01-23"]},
                          {"renewal_date"}, TODAY)
    rel.clock["renewal_date"] = "past"  # dated by today, as examples of another table would show
    maker.relate(rel, TODAY)
    try:
        maker.bound("renewal_date", "2026-01-10", {"loan_id": 1}, g)
    except ValueError as e:
        assert "no day" in str(e)
    else:
        raise AssertionError("a renewal dated by today on a loan that begins after it was placed")


def test_a_range_of_the_clock_day_alone_spreads_onto_the_examples_side() -> None:
    # the 2026-11-28 n1 library: every example loan and renewal dated today, the model's range today..today: every
    # one of 37 loans and 35 renewals on one day
    day = TODAY
    assert relations.clock_side(["2026-01-15"] * 4, TODAY) == "past"
    assert relations.clock_range(day, day, "past", TODAY) == (TODAY - timedelta(days=relations.CLOCK_SPAN), TODAY)
    ahead = relations.clock_range(date(2026, 3, 1), date(2026, 3, 1), "future", TODAY)
    assert ahead == (date(2026, 3, 1), date(2026, 3, 1) + timedelta(days=relations.CLOCK_SPAN))
    # a range already on its side and wider than a day: kept; one across the clock: cut at today
    assert relations.clock_range(date(2025, 12, 1), date(2026, 1, 10), "past", TODAY) is None
    assert relations.clock_range(date(2025, 12, 1), date(2026, 6, 1), "past", TODAY) == (
        TODAY - timedelta(days=relations.CLOCK_SPAN), TODAY)
    assert relations.clock_range(day, day, None, TODAY) is None


def test_a_child_prompt_shows_its_parents_dates() -> None:
    # shown only each loan's start, the model fined the loans made today; every date column is shown, by its values
    from pipeline.stages.rows.populate import parent_choices

    loans = _loans(3)
    conn = _db(KSIAZKI, KARY, loans)
    values, line = parent_choices(conn, KSIAZKI, "nr")
    assert values == (1, 2, 3)
    assert line.split("; ")[0] == f"1 = od {loans[1]['loan_date']}, termin {loans[1]['due_date']}"


# ------------------------------------------------------------------ a child on its parent's day (issue 40)

ORDERS = ir.Table(name="orders", ddl="CREATE TABLE orders (order_id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, "
                                     "total REAL) STRICT")
LINES = ir.Table(name="lines", ddl="CREATE TABLE lines (line_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL "
                                   "REFERENCES orders(order_id), qty INTEGER, day TEXT NOT NULL) STRICT")
# the same pair in meaningless words: nothing is read from names
ZAM = ir.Table(name="zz", ddl="CREATE TABLE zz (k INTEGER PRIMARY KEY, d1 TEXT NOT NULL, t REAL) STRICT")
POZ = ir.Table(name="yy", ddl="CREATE TABLE yy (j INTEGER PRIMARY KEY, kk INTEGER NOT NULL REFERENCES zz(k), "
                              "q INTEGER, d2 TEXT NOT NULL) STRICT")


def _orders(n: int = 30) -> dict[int, tuple[Any, ...]]:
    """The 2026-11-29 print shop's orders: the model's 4 dated 2026-01-12..15, the rest spread over the six months
    before today."""
    out = {k: (k, (TODAY - timedelta(days=k - 1)).isoformat(), 10.0) for k in range(1, 5)}
    out.update({k: (k, (TODAY - timedelta(days=7 * k - 20)).isoformat(), 10.0) for k in range(5, n + 1)})
    return out


def _lines(parent: ir.Table, child: ir.Table, examples: list[tuple[Any, ...]]) -> tuple[Any, Any, Any]:
    """``child`` filled as the print shop's lines were: their date drawn from the examples' dates continued as a
    list (a ``text_pool``), the order each names drawn by code."""
    conn = scratch_db([parent, child])
    for r in _orders().values():
        conn.execute(f'INSERT INTO "{parent.name}" VALUES (?, ?, ?)', r)
    cols = table_columns(conn, child)
    qty, day = (c.name for c in cols if c.ref is None and not c.pk)
    gens = [ir.ColumnGenerator(column=qty, kind="integer", min=1, max=9),
            ir.ColumnGenerator(column=day, kind="text_pool", pool=[r[-1] for r in examples])]
    rel, filled = _fill(conn, child, examples, gens)
    return conn, rel, filled


SHOP_LINES = [(1, 5, "2026-01-15"), (2, 3, "2026-01-14"), (3, 7, "2026-01-13"), (4, 2, "2026-01-12")]
"""The print shop's example lines (the model's seed_data reply): each on its order's day, on four days."""


def test_a_child_every_example_dates_on_its_parents_day_is_on_it() -> None:
    orders = {k: {"order_id": k, "order_date": r[1]} for k, r in _orders().items()}
    examples = {"order_id": [1, 2, 3, 4], "day": ["2026-01-15", "2026-01-14", "2026-01-13", "2026-01-12"]}
    got = relations.parent_orders(examples, "order_id", orders)
    assert got == [relations.ParentOrder("day", "order_id", "order_date", True, 0, same_day=True)]
    assert got[0].holds("2025-08-09", "2025-08-09") and not got[0].holds("2026-01-12", "2025-08-09")
    # all on one day (the model dating every example today, its parents too): no day of their own, no same day
    one = {k: {"order_id": k, "order_date": "2026-01-15"} for k in range(1, 5)}
    habit = relations.parent_orders({"order_id": [1, 2, 3, 4], "day": ["2026-01-15"] * 4}, "order_id", one)
    assert habit and not any(o.same_day for o in habit)
    # a day or more after it in one example: after, not on
    later = relations.parent_orders({**examples, "day": ["2026-01-15", "2026-01-15", "2026-01-13", "2026-01-12"]},
                                    "order_id", orders)
    assert later and not any(o.same_day for o in later)


def test_lines_on_their_orders_day_never_months_after_nor_after_the_clock() -> None:
    # the print shop of 2026-11-29: drawn on or after their order's day from the examples' four January days,
    # lines of August orders were dated in January and lines of today's order up to a month after today
    conn, rel, filled = _lines(ORDERS, LINES, SHOP_LINES)
    assert any(b[3] for b in rel.bounds) and any(not b[3] for b in rel.bounds)
    rows = conn.execute("SELECT l.day, o.order_date FROM lines l JOIN orders o USING (order_id)").fetchall()
    assert len(rows) > 20 and not filled.stopped
    assert all(d == od for d, od in rows), [r for r in rows if r[0] != r[1]][:5]
    assert all(d <= TODAY.isoformat() for d, _ in rows)


def test_the_same_lines_in_meaningless_words() -> None:
    conn, _, _ = _lines(ZAM, POZ, SHOP_LINES)
    rows = conn.execute("SELECT yy.d2, zz.d1 FROM yy JOIN zz ON zz.k = yy.kk").fetchall()
    assert len(rows) > 20 and all(d == od for d, od in rows)


def test_a_date_drawn_from_a_list_stays_on_its_examples_side_of_the_clock() -> None:
    # lines a day after their order or on it (no same day): a line of today's order drawn from the examples' list
    # before its order's day moves after it, never past today (2026-01-27 and 2026-02-14 on a shop of 2026-01-15)
    examples = [(1, 5, "2026-01-15"), (2, 3, "2026-01-15"), (3, 7, "2026-01-14"), (4, 2, "2026-01-13")]
    conn, rel, _ = _lines(ORDERS, LINES, examples)
    assert rel.clock == {"day": "past"} and not any(not b[3] for b in rel.bounds)
    cols = table_columns(conn, LINES)
    g = ir.ColumnGenerator(column="day", kind="text_pool", pool=[r[-1] for r in examples])
    maker = ValueMaker("en_US", 3, [g], cols, {n: [r[i] for r in examples] for i, n in
                                                 enumerate(["order_id", "qty", "day"])})
    maker.relate(rel, TODAY)
    got = {maker.bound("day", "2026-01-13", {"order_id": 1}, g) for _ in range(20)}
    assert got == {TODAY.isoformat()}, got
    rows = conn.execute("SELECT l.day, o.order_date FROM lines l JOIN orders o USING (order_id)").fetchall()
    assert len(rows) > 20 and all(od <= d <= TODAY.isoformat() for d, od in rows)
