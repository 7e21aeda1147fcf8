"""A parent's amount that its children's lines add up to (issue 40: in the outside photo print shop no order's total
equalled its lines, 0 of 23). Found from the foreign keys, the types and the example rows' values, never from names:
the tables here are the print shop's as the seed stage saw them, with the embedded model's example rows (its
``seed_data`` replies in /work/out/o15/llm_cache.sqlite), whose totals (39.99 for five prints at 25.49) were written
before any line existed."""

from __future__ import annotations

import sqlite3
from typing import Any

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.settings import BuildSettings
from pipeline.stages.rows import totals
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import scripted

ORDERS = ir.Table(name="orders", ddl="CREATE TABLE orders (order_id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, "
                                     "total_amount REAL NOT NULL CHECK (total_amount > 0)) STRICT")
PRODUCTS = ir.Table(name="products", ddl="CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT NOT NULL "
                                         "UNIQUE, price REAL NOT NULL CHECK (price > 0)) STRICT")
LINES = ir.Table(name="order_details", ddl="CREATE TABLE order_details (detail_id INTEGER PRIMARY KEY, order_id "
                                           "INTEGER NOT NULL REFERENCES orders(order_id), product_id INTEGER NOT NULL "
                                           "REFERENCES products(product_id), quantity INTEGER CHECK (quantity >= 0))"
                                           " STRICT")
PAYMENTS = ir.Table(name="payments", ddl="CREATE TABLE payments (payment_id INTEGER PRIMARY KEY, order_id INTEGER "
                                         "NOT NULL REFERENCES orders(order_id), paid_on TEXT NOT NULL) STRICT")
SHOP = (ORDERS, PRODUCTS, LINES, PAYMENTS)

# the model's example rows (o15's seed_data replies)
EX_ORDERS = [("2026-01-15", 39.99), ("2026-01-14", 79.99), ("2026-01-13", 59.99), ("2026-01-12", 89.99)]
EX_PRODUCTS = [("Real Photo", 10.99), ("Art Print", 25.49), ("Canvas Art", 30.79), ("Photography Frame", 15.99)]
EX_LINES = [(1, 2, 5), (2, 3, 3), (3, 1, 7), (4, 4, 2)]
EXAMPLES = {"orders": 4, "products": 4, "order_details": 4, "payments": 0}


def _shop(orders: list[tuple[Any, ...]], lines: list[tuple[int, int, int]],
          payments: tuple[int, ...] = ()) -> sqlite3.Connection:
    conn = scratch_db(SHOP)
    conn.executemany("INSERT INTO orders (order_date, total_amount) VALUES (?, ?)", orders)
    conn.executemany("INSERT INTO products (name, price) VALUES (?, ?)", EX_PRODUCTS)
    conn.executemany("INSERT INTO order_details (order_id, product_id, quantity) VALUES (?, ?, ?)", lines)
    conn.executemany("INSERT INTO payments (order_id, paid_on) VALUES (?, '2026-01-10')", [(k,) for k in payments])
    return conn


def _line_sums(conn: sqlite3.Connection) -> dict[int, float]:
    return {k: round(s, 2) for k, s in conn.execute(
        "SELECT d.order_id, SUM(d.quantity * p.price) FROM order_details d JOIN products p USING (product_id) "
        "GROUP BY d.order_id")}


def test_the_print_shops_totals_are_set_from_their_lines() -> None:
    # code-made orders 5..8 (totals drawn in the examples' range); 5 and 6 have lines, 7 none, 8 none but a payment
    orders = [*EX_ORDERS, ("2025-10-07", 108.0), ("2025-11-06", 98.0), ("2025-07-20", 91.0), ("2025-08-09", 32.0)]
    lines = [*EX_LINES, (1, 1, 2), (5, 3, 6), (6, 2, 1), (6, 4, 4)]
    conn = _shop(orders, lines, payments=(8,))
    found = totals.shown(conn, SHOP, EXAMPLES)
    assert [(t.parent, t.column, t.child, t.quantity, t.price_table, t.price, t.shown) for t in found] == [
        ("orders", "total_amount", "order_details", "quantity", "products", "price", "nearest")]
    settled = totals.settle(conn, SHOP, EXAMPLES)
    got = dict(conn.execute("SELECT order_id, total_amount FROM orders").fetchall())
    assert got == {1: 149.43, 2: 92.37, 3: 76.93, 4: 31.98, 5: 184.74, 6: 89.45, 8: 32.0}
    assert {k: got[k] for k in _line_sums(conn)} == _line_sums(conn)
    assert [p for (p,) in conn.execute("SELECT price FROM products")] == [p for _, p in EX_PRODUCTS]
    assert (settled[0].changed, settled[0].deleted, settled[0].childless) == (6, 1, 1)
    reasons = [r.reason for r in totals.rejections(settled, "seed_data")]
    assert len(reasons) == 2 and all(r.evidence["kind"] == "total" for r in totals.rejections(settled, "seed_data"))


def test_an_example_order_without_lines_is_kept_as_written() -> None:
    conn = _shop([*EX_ORDERS, ("2026-01-11", 20.0)], EX_LINES)
    settled = totals.settle(conn, SHOP, {**EXAMPLES, "orders": 5})
    got = dict(conn.execute("SELECT order_id, total_amount FROM orders").fetchall())
    assert got == {1: 127.45, 2: 92.37, 3: 76.93, 4: 31.98, 5: 20.0}
    assert (settled[0].deleted, settled[0].childless) == (0, 1)


def test_examples_that_hold_the_sum_exactly_are_followed_with_the_lines_own_price() -> None:
    orders = ir.Table(name="invoices", ddl="CREATE TABLE invoices (invoice_id INTEGER PRIMARY KEY, amount REAL NOT "
                                           "NULL, issued TEXT NOT NULL) STRICT")
    lines = ir.Table(name="invoice_lines", ddl="CREATE TABLE invoice_lines (line_id INTEGER PRIMARY KEY, invoice_id "
                                               "INTEGER NOT NULL REFERENCES invoices(invoice_id), hours INTEGER NOT "
                                               "NULL, rate REAL NOT NULL, note TEXT) STRICT")
    conn = scratch_db((orders, lines))
    # examples: 2 x 40.5 + 1 x 12.25 = 93.25 and 3 x 10.0 = 30.0; code rows: invoice 3 (drawn 500.0)
    conn.executemany("INSERT INTO invoices (amount, issued) VALUES (?, '2026-01-01')", [(93.25,), (30.0,), (500.0,)])
    conn.executemany("INSERT INTO invoice_lines (invoice_id, hours, rate) VALUES (?, ?, ?)",
                     [(1, 2, 40.5), (1, 1, 12.25), (2, 3, 10.0), (3, 4, 22.5), (2, 1, 5.0)])
    found = totals.shown(conn, (orders, lines), {"invoices": 2, "invoice_lines": 3})
    assert [(t.price_table, t.price, t.price_via, t.shown) for t in found] == [
        ("invoice_lines", "rate", None, "examples")]
    totals.settle(conn, (orders, lines), {"invoices": 2, "invoice_lines": 3})
    assert conn.execute("SELECT amount FROM invoices ORDER BY invoice_id").fetchall() == [(93.25,), (35.0,), (90.0,)]


def test_no_sum_where_the_amounts_are_of_another_scale() -> None:
    # totals a hundred times the lines, and totals the size of a unit price: neither is a sum of these lines
    for scale in (100.0, 0.2):
        conn = _shop([(d, round(t * scale, 2)) for d, t in EX_ORDERS], EX_LINES)
        assert totals.shown(conn, SHOP, EXAMPLES) == []
        assert totals.settle(conn, SHOP, EXAMPLES) == []
        assert [t for (t,) in conn.execute("SELECT total_amount FROM orders")] == [round(t * scale, 2)
                                                                                     for _, t in EX_ORDERS]


def test_no_candidate_where_the_parent_has_two_amounts() -> None:
    two = ir.Table(name="orders", ddl="CREATE TABLE orders (order_id INTEGER PRIMARY KEY, order_date TEXT NOT NULL, "
                                      "total_amount REAL NOT NULL, shipping REAL NOT NULL) STRICT")
    conn = scratch_db((two, PRODUCTS, LINES))
    assert totals.candidates(conn, (two, PRODUCTS, LINES)) == []


PRINT_SHOP_REPLIES = [
    {"rows": [[d, t] for d, t in EX_ORDERS]},
    {"locale": "en_US", "columns": {"order_date": {"kind": "date", "start": "2025-07-19", "end": "2026-01-15"},
                                   "total_amount": {"kind": "integer", "min": 15, "max": 114}}},
    {"rows": [list(p) for p in EX_PRODUCTS]},
    {"columns": {"name": {"kind": "text_pool", "pool": ["Real Photo", "Art Print", "Canvas Art", "Photography Frame",
                                                        "Real Art", "Printed Photo", "Digital Art", "Photo Print"]},
                 "price": {"kind": "integer", "min": 10, "max": 50}}},
    {"rows": [list(r) for r in EX_LINES]},
    {"columns": {"quantity": {"kind": "integer", "min": 1, "max": 9}}},
]


def test_the_seed_stage_gives_every_order_the_total_of_its_lines() -> None:
    tables = (ORDERS, PRODUCTS, LINES)
    res = generate_seed(ir.Scenario(name="Print Order Management", description="Customers order photo prints."),
                        tables, scripted(PRINT_SHOP_REPLIES, pools={}),
                        BuildSettings(rows_per_table=4, rows_per_call=4, rows_min=3, row_generators=True))
    assert res.value is not None
    seed = {s.table: s for s in res.value}
    price = {r["product_id"]: r["price"] for r in seed["products"].rows}
    sums: dict[int, float] = {}
    for r in seed["order_details"].rows:
        sums[r["order_id"]] = sums.get(r["order_id"], 0.0) + r["quantity"] * price[r["product_id"]]
    orders = seed["orders"].rows
    assert len(orders) > 4  # code-made orders among them
    assert all(r["total_amount"] == round(sums[r["order_id"]], 2) for r in orders)
    note = next(g.note for g in seed["orders"].plan.generators if g.column == "total_amount")  # type: ignore[union-attr]
    assert "order_details.quantity x products.price" in (note or "")
    assert any(r.item == "orders.total_amount" for r in res.rejections)
