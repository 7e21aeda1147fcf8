"""Rows dated against the clock as their state says (issue 40, ``pipeline.stages.rows.tense``), with a scripted model.

The outside builds of 2026-11-30: the laundry's four example orders were dated around today (one the day before, two
on it, one after), so its order dates were drawn from the clock -90..+90 days and its 'closed' orders lay next month
as often as last month; the dental clinic's examples were on and after today, so its range ran from today on and
every 'completed' visit lay in the future. The model, asked for each state whether such a row's dates are in the
past or the future, says a closed order's and a completed visit's are past: the range then reaches the sides the
states need, and a row whose date its state forbids gets another state (its dates unmoved)."""

from __future__ import annotations

import random
import sqlite3
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.llm import fake_client
from pipeline.settings import BuildSettings
from pipeline.stages.rows import tense
from pipeline.stages.rows.maker import ValueMaker, child_relations, fill, key_sets, table_shape

TODAY = date(2026, 1, 15)
SCENARIO = ir.Scenario(name="Laundry pickup", description="Customers order laundry pickups.")
ORDERS = ir.Table(name="orders", ddl=(
    "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer TEXT NOT NULL, order_date TEXT NOT NULL, "
    "delivery_date TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('open', 'closed'))) STRICT"))
VISITS = ir.Table(name="besuche", ddl=(  # the dental clinic's visits, in other words (no name is read)
    "CREATE TABLE besuche (nr INTEGER PRIMARY KEY, patient TEXT NOT NULL, beginn TEXT NOT NULL, ende TEXT NOT NULL, "
    "stand TEXT NOT NULL CHECK (stand IN ('offen', 'geplant', 'erledigt'))) STRICT"))


def _day(days: int) -> str:
    return (TODAY + timedelta(days=days)).isoformat()


def _build(table: ir.Table, rows: list[tuple[Any, ...]], gens: list[ir.ColumnGenerator],
           reply: list[dict[str, Any]] | None) -> tuple[sqlite3.Connection, list[tense.Tense], Any]:
    """The table's example rows, then code-made rows from ``gens``, with the model's answer ``reply`` (None: not
    asked, as before the question existed); returns the database, the answers used and the fake client."""
    conn = scratch_db((table,))
    cols = table_columns(conn, table)
    names = [c.name for c in cols if not c.auto_id]
    for r in rows:
        conn.execute(f'INSERT INTO "{table.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in names)})', r)
    examples = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    client = fake_client(reply or [])
    tenses: list[tense.Tense] = []
    if reply is not None:
        tenses, calls, notes = tense.ask_tenses(client, SCENARIO, table, cols, gens, examples)
        assert (calls, notes) == (len(reply), [])
        gens = tense.crossed(gens, tenses, TODAY)
    rel = child_relations(conn, table.name, cols, examples, {g.column for g in gens}, TODAY)
    sets = key_sets(conn, table, names)
    settings = BuildSettings(entity_rows=(200, 200))
    shape = table_shape(conn, table, cols, sets, len(rows), settings, random.Random(3))
    maker = ValueMaker("en_US", 3, gens, cols, examples)
    maker.relate(rel, TODAY)
    maker.dated_by(tenses)
    fill(conn, table, cols, maker, shape, sets)
    return conn, tenses, client


def _sides(conn: sqlite3.Connection, table: str, state: str, day: str) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for s, d in conn.execute(f'SELECT "{state}", "{day}" FROM "{table}" WHERE rowid > 4'):  # code-made rows
        side = "after" if date.fromisoformat(d) > TODAY else "before" if date.fromisoformat(d) < TODAY else "on"
        out[(s, side)] = out.get((s, side), 0) + 1
    return out


LAUNDRY_ROWS = [("Neil Miller", _day(0), _day(2), "open"), ("Jason Church", _day(-1), _day(3), "closed"),
                ("Gregory Cabrera", _day(1), _day(4), "open"), ("Barbara Brown", _day(0), _day(5), "open")]
LAUNDRY_GENS = [ir.ColumnGenerator(column="customer", kind="person_name"),
                ir.ColumnGenerator(column="order_date", kind="date", by="fallback", start=_day(-90), end=_day(90)),
                ir.ColumnGenerator(column="delivery_date", kind="date_after", after="order_date", min=2, max=5),
                ir.ColumnGenerator(column="status", kind="enum", values=["open", "closed"], weights=[1, 1])]
LAUNDRY_REPLY = [{"so_far": "picked up, not yet returned", "dates": "either"},  # open
                 {"so_far": "washed and delivered back", "dates": "past"}]  # closed

DENTAL_ROWS = [("Jeffrey Warren", _day(0), _day(2), "offen"), ("Christopher Delacruz", _day(1), _day(3), "geplant"),
               ("Randall Glenn", _day(0), _day(2), "offen"), ("Mitchell Kerr", _day(1), _day(3), "geplant")]
DENTAL_GENS = [ir.ColumnGenerator(column="patient", kind="person_name"),
               ir.ColumnGenerator(column="beginn", kind="date", by="fallback", start=_day(0), end=_day(180)),
               ir.ColumnGenerator(column="ende", kind="date_after", after="beginn", min=0, max=0),
               ir.ColumnGenerator(column="stand", kind="enum", values=["offen", "geplant", "erledigt"],
                                  weights=[0.3, 0.4, 0.3])]
DENTAL_REPLY = [{"so_far": "angefragt", "dates": "either"}, {"so_far": "Termin steht", "dates": "future"},
                {"so_far": "behandelt", "dates": "past"}]  # offen, geplant, erledigt


def test_closed_orders_are_not_dated_in_the_future() -> None:
    conn, _, _ = _build(ORDERS, LAUNDRY_ROWS, LAUNDRY_GENS, None)  # as built on 2026-11-30
    before = _sides(conn, "orders", "status", "delivery_date")
    assert before.get(("closed", "after"), 0) > 30  # closed orders delivered next month: the fault measured
    conn, (answer,), client = _build(ORDERS, LAUNDRY_ROWS, LAUNDRY_GENS, LAUNDRY_REPLY)
    prompts = [r[0]["content"] for r in client.requests]
    assert all("in the past, in the future, or either" in p for p in prompts)
    assert ["whose status is \"open\"" in prompts[0], "whose status is \"closed\"" in prompts[1]] == [True, True]
    assert answer.sides["closed"] == {"order_date": "before"}  # the row's first date (delivery follows it)
    assert not _sides(conn, "orders", "status", "order_date").get(("closed", "after"))  # none placed after today
    after = _sides(conn, "orders", "status", "delivery_date")
    # a closed order's delivery lies where its order day puts it: no more than its 2..5 days after today
    late = [d for (d,) in conn.execute("SELECT delivery_date FROM orders WHERE rowid > 4 AND status = 'closed' "
                                       "AND delivery_date > ?", (TODAY.isoformat(),))]
    assert all(d <= _day(5) for d in late) and len(late) < 10
    assert after.get(("closed", "before"), 0) > 30 and after.get(("open", "after"), 0) > 20
    assert answer.redrawn > 0 and answer.unfit == 0
    # the range reaches back three quarters of its days (closed orders past, open ones on either side)
    assert answer.crossed == {"order_date": (_day(-90), _day(90))}
    start, end = conn.execute("SELECT MIN(order_date), MAX(order_date) FROM orders WHERE rowid > 4").fetchone()
    assert _day(-140) <= start <= _day(-125) and _day(40) <= end <= _day(45)


def test_completed_visits_lie_in_the_past_and_the_range_crosses_the_clock() -> None:
    conn, _, _ = _build(VISITS, DENTAL_ROWS, DENTAL_GENS, None)
    before = _sides(conn, "besuche", "stand", "beginn")
    assert before.get(("erledigt", "after"), 0) > 30 and not before.get(("erledigt", "before"))
    conn, (answer,), _ = _build(VISITS, DENTAL_ROWS, DENTAL_GENS, DENTAL_REPLY)
    after = _sides(conn, "besuche", "stand", "beginn")
    assert not after.get(("erledigt", "after")) and not after.get(("geplant", "before"))
    # the range reaches back as far as completed visits weigh (0.3, and half of the open ones' 0.3)
    start, end = conn.execute("SELECT MIN(beginn), MAX(beginn) FROM besuche WHERE rowid > 4").fetchone()
    assert answer.crossed == {"beginn": (_day(0), _day(180))}
    assert _day(-81) <= start <= _day(-70) and _day(90) <= end <= _day(99)
    assert after.get(("erledigt", "before"), 0) > 20
    notes = tense.notes(VISITS, [answer])
    assert notes[0].evidence["kind"] == "tense" and notes[0].evidence["redrawn"] == answer.redrawn > 0


def test_an_answer_that_never_validates_changes_nothing() -> None:
    conn = scratch_db((ORDERS,))
    cols = table_columns(conn, ORDERS)
    examples = {"order_date": [r[1] for r in LAUNDRY_ROWS], "delivery_date": [r[2] for r in LAUNDRY_ROWS]}
    client = fake_client([{"dates": "soon"}] * 6)
    tenses, calls, notes = tense.ask_tenses(client, SCENARIO, ORDERS, cols, LAUNDRY_GENS, examples)
    assert (tenses, calls) == ([], 2) and notes[0].evidence == {"kind": "tense"}
    assert tense.crossed(LAUNDRY_GENS, tenses, TODAY) == LAUNDRY_GENS


def test_only_a_state_drawn_on_its_own_is_asked_and_only_with_a_date() -> None:
    conn = scratch_db((ORDERS,))
    cols = table_columns(conn, ORDERS)
    tuple_field = LAUNDRY_GENS[3].model_copy(update={"after": "customer"})  # a state drawn with its row's tuple
    assert tense.state_columns(cols, [*LAUNDRY_GENS[:3], tuple_field]) == []
    client = fake_client([])
    undated = [LAUNDRY_GENS[0], LAUNDRY_GENS[3]]
    assert tense.ask_tenses(client, SCENARIO, ORDERS, cols, undated, {}) == ([], 0, [])
    assert client.requests == []


DELIVERIES = ir.Table(name="lieferungen", ddl=(  # the laundry's deliveries, in other words (no name is read)
    "CREATE TABLE lieferungen (nr INTEGER PRIMARY KEY, kunde TEXT NOT NULL, tag TEXT NOT NULL, "
    "stand TEXT NOT NULL CHECK (stand IN ('offen', 'zugestellt', 'storniert'))) STRICT"))
DELIVERY_ROWS = [("Neil Miller", _day(0), "offen"), ("Jason Church", _day(2), "zugestellt"),
                 ("Gregory Cabrera", _day(4), "storniert"), ("Barbara Brown", _day(5), "offen")]
DELIVERY_GENS = [ir.ColumnGenerator(column="kunde", kind="person_name"),
                 ir.ColumnGenerator(column="tag", kind="date", by="code", start=_day(0), end=_day(180)),
                 ir.ColumnGenerator(column="stand", kind="enum", values=["offen", "zugestellt", "storniert"],
                                    weights=[0.3, 0.4, 0.3])]
DELIVERY_REPLY = [{"so_far": "wartet", "dates": "either"}, {"so_far": "zugestellt", "dates": "past"},
                  {"so_far": "abgesagt", "dates": "past"}]  # offen, zugestellt, storniert


def _days_before(conn: sqlite3.Connection, state: str) -> list[int]:
    return [(TODAY - date.fromisoformat(d)).days for (d,) in conn.execute(
        "SELECT tag FROM lieferungen WHERE rowid > 4 AND stand = ?", (state,))]


def test_a_state_on_either_side_is_not_dated_in_the_days_the_range_gained_for_past_states() -> None:
    """The laundry's deliveries (outside build o16): dated today..+180 days, 'completed' and 'cancelled' past and
    'pending' either; the range crossed back to -5 months for the finished ones, and 52 pending deliveries lay more
    than a month back. A state on either side keeps to the range it had (from today) or its examples' distance
    from today (5 days): older rows are finished ones, the dates unmoved."""
    conn, (answer,), _ = _build(DELIVERIES, DELIVERY_ROWS, DELIVERY_GENS, DELIVERY_REPLY)
    assert answer.crossed == {"tag": (_day(0), _day(180))} and answer.recent == {"tag": TODAY - timedelta(days=5)}
    pending, done = _days_before(conn, "offen"), _days_before(conn, "zugestellt") + _days_before(conn, "storniert")
    assert max(pending) <= 5 and min(pending) < 0  # pending ones from five days back on, some ahead
    assert sum(d > 30 for d in done) > 30  # the range still reaches back, for the finished deliveries
    assert not any(d < 0 for d in done)  # none finished in the future (the first half, kept)
    start, end = conn.execute("SELECT MIN(tag), MAX(tag) FROM lieferungen WHERE rowid > 4").fetchone()
    assert start < _day(-120) and end > _day(20)  # 85% of the range before today (0.7 past, half of 0.3)
    assert tense.notes(DELIVERIES, [answer])[0].evidence["recent"] == {"tag": _day(-5)}


def test_a_state_on_either_side_does_not_move_a_past_range_across_the_clock() -> None:
    """The regenerated pharmacy (2026-11-30, seventeenth): orders drawn up to today, 'closed' past and 'open'
    either; 'either' weighed half on the future side, so the range was moved across today and 45 of 66 open orders
    were dated up to three weeks ahead. Either alone moves no range onto a side it does not reach."""
    answer = tense.Tense(column="status", sides={"closed": {"order_date": "before"}, "open": {"order_date": "either"}},
                         weights={"closed": 0.3, "open": 0.7})
    assert answer.side_weights("order_date", frozenset({"before"})) == (0.3 + 0.35, 0.0)
    assert answer.side_weights("order_date") == (0.3 + 0.35, 0.35)  # a range that reaches both sides: as before
    gen = ir.ColumnGenerator(column="order_date", kind="date", start=_day(-180), end=_day(0))
    (moved,) = tense.crossed([gen], [answer], TODAY)
    assert moved.end is not None and moved.end <= _day(0)


LOANS = ir.Table(name="loans", ddl=(  # the committed example's library (generated/quickstart, 2026-11-30)
    "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, member TEXT NOT NULL, loan_date TEXT NOT NULL, due_date TEXT "
    "NOT NULL, status TEXT NOT NULL CHECK (status IN ('pending', 'returned'))) STRICT"))
LOAN_ROWS = [("Neil Miller", _day(-20), _day(11), "pending"), ("Jason Church", _day(-15), _day(16), "pending"),
             ("Gregory Cabrera", _day(-10), _day(21), "pending"), ("Barbara Brown", _day(-5), _day(26), "pending")]
LOAN_GENS = [ir.ColumnGenerator(column="member", kind="person_name"),
             ir.ColumnGenerator(column="loan_date", kind="date", by="code", start=_day(-120), end=_day(30)),
             ir.ColumnGenerator(column="due_date", kind="date_after", after="loan_date", min=31, max=31),
             ir.ColumnGenerator(column="status", kind="enum", values=["pending", "returned"], weights=[1, 1])]
LOAN_REPLY = [{"so_far": "out with the member", "dates": "either"},  # pending
              {"so_far": "brought back", "dates": "past"}]  # returned


def _loan_tense(gens: list[ir.ColumnGenerator]) -> tense.Tense:
    conn = scratch_db((LOANS,))
    examples = {n: [r[i] for r in LOAN_ROWS] for i, n in enumerate(["member", "loan_date", "due_date", "status"])}
    tenses, _, _ = tense.ask_tenses(fake_client(LOAN_REPLY), SCENARIO, LOANS, table_columns(conn, LOANS), gens,
                                    examples)
    return tenses[0]


def test_a_loan_returned_early_keeps_its_state_and_one_that_began_in_the_future_does_not() -> None:
    """The library of 2026-11-30: 'returned' answered past, held to the due date too, so a loan out last week and
    due next week (returned early) was made 'pending': 16 pending loans of 20. The answer holds the row's first
    date; its due date falls where its relation puts it."""
    answer = _loan_tense(LOAN_GENS)
    assert answer.sides == {"pending": {"loan_date": "either"}, "returned": {"loan_date": "before"}}
    early = {"loan_date": _day(-10), "due_date": _day(21), "status": "returned"}
    assert answer.fit(early, random.Random(1), TODAY) == "returned"
    ahead = {"loan_date": _day(3), "due_date": _day(34), "status": "returned"}
    assert answer.fit(ahead, random.Random(1), TODAY) == "pending"
    # the same, where only the examples order the dates (the due date drawn in a range of its own)
    ranged = [*LOAN_GENS[:2], ir.ColumnGenerator(column="due_date", kind="date", by="code", start=_day(-90),
                                                 end=_day(60)), LOAN_GENS[3]]
    assert tense.first_dates(["loan_date", "due_date"], ranged, {"loan_date": [r[1] for r in LOAN_ROWS],
                                                                 "due_date": [r[2] for r in LOAN_ROWS]}) == ["loan_date"]
    assert _loan_tense(ranged).fit(early, random.Random(1), TODAY) == "returned"


def test_returned_loans_due_after_today_are_kept_and_none_began_after_it() -> None:
    conn, (answer,), _ = _build(LOANS, LOAN_ROWS, LOAN_GENS, LOAN_REPLY)
    made = "FROM loans WHERE rowid > 4 AND status = 'returned'"
    early = conn.execute(f"SELECT COUNT(*) {made} AND loan_date <= ? AND due_date > ?", (_day(0), _day(0))).fetchone()
    assert early[0] > 10  # returned early: out before today, due after it
    assert conn.execute(f"SELECT COUNT(*) {made} AND loan_date > ?", (_day(0),)).fetchone()[0] == 0
    assert answer.redrawn > 0


def test_a_state_is_fitted_before_a_row_in_the_examples_state_is_put_under_way() -> None:
    """``ValueMaker.row`` fits the state to the row's dates first, then puts a row in the examples' state (a
    pending loan) under way at the clock. The other way round, a loan drawn 'returned' and dated next week was made
    'pending' after the move had passed it by: a pending loan that began after today (the library, 2026-11-30)."""
    conn = scratch_db((LOANS,))
    cols = table_columns(conn, LOANS)
    names = ["member", "loan_date", "due_date", "status"]
    for r in LOAN_ROWS:
        conn.execute(f"INSERT INTO loans ({', '.join(names)}) VALUES (?, ?, ?, ?)", r)
    examples = {n: [r[i] for r in LOAN_ROWS] for i, n in enumerate(names)}
    gens = [LOAN_GENS[0], ir.ColumnGenerator(column="loan_date", kind="date", by="code", start=_day(3), end=_day(20)),
            LOAN_GENS[2], ir.ColumnGenerator(column="status", kind="enum", values=["returned"])]  # all drawn returned
    maker = ValueMaker("en_US", 3, gens, cols, examples)
    maker.relate(child_relations(conn, "loans", cols, examples, {g.column for g in gens}, TODAY), TODAY)
    assert [(c.first, c.second) for c in maker.current] == [("loan_date", "due_date")]
    maker.dated_by([tense.Tense(column="status", sides={"pending": {"loan_date": "either"},
                                                        "returned": {"loan_date": "before"}},
                                weights={"pending": 1.0, "returned": 1.0})])
    rows = [maker.row({}, {}) for _ in range(20)]
    assert {r["status"] for r in rows} == {"pending"}  # each began after today: not returned
    assert all(r["loan_date"] <= _day(0) < r["due_date"] for r in rows)  # and each pending loan is out now
