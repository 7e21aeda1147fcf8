"""Small environments for verify tests, next to the shared library fixture.

* ``shop_env``: orders and order items with a foreign key, ids assigned by SQLite, a random order
  code (``randomblob``) and a ``:now`` stamp — for derivation of unpredictable values;
* ``broken_library_env``: the library with ``return_book`` missing its ``WHERE`` (it returns every
  loan at once) — the tool the checker must flag;
* ``sql_error_library_env``: ``update_member_email`` writes a column that does not exist.
"""

from __future__ import annotations

from pipeline.ir import Environment, Param, Returns, Scenario, SeedRows, Step, Table, Tool
from tests.fixtures.library import library_env

ORDERS = """CREATE TABLE orders (
  id INTEGER PRIMARY KEY,
  customer TEXT NOT NULL,
  code TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'shipped', 'complete')),
  created_at TEXT NOT NULL
) STRICT"""

ITEMS = """CREATE TABLE items (
  id INTEGER PRIMARY KEY,
  order_id INTEGER NOT NULL REFERENCES orders(id),
  sku TEXT NOT NULL,
  qty INTEGER NOT NULL CHECK (qty > 0)
) STRICT"""


def shop_env() -> Environment:
    return Environment(
        scenario=Scenario(name="Tiny shop", description="Customers place orders of items."),
        tables=[Table(name="orders", ddl=ORDERS), Table(name="items", ddl=ITEMS)],
        seed=[
            SeedRows(table="orders", rows=[
                {"id": 1, "customer": "Ada", "code": "A1", "status": "complete", "created_at": "2026-01-02T10:00:00"},
                {"id": 2, "customer": "Ben", "code": "B2", "status": "open", "created_at": "2026-01-03T11:00:00"},
            ]),
            SeedRows(table="items", rows=[{"id": 1, "order_id": 1, "sku": "PEN", "qty": 2}]),
        ],
        tools=[
            Tool(name="create_order", description="Open an order for a customer.", kind="write",
                 params=[Param(name="customer", type="string")],
                 steps=[Step(kind="write", sql="INSERT INTO orders (customer, code, created_at) VALUES "
                             "(:customer, lower(hex(randomblob(6))), :now)")],
                 returns=Returns(sql="SELECT id, customer, status FROM orders WHERE id = :last_id", mode="one")),
            Tool(name="add_item", description="Add an item to an open order.", kind="write",
                 params=[Param(name="order_id", type="integer"), Param(name="sku", type="string"),
                         Param(name="qty", type="integer", minimum=1)],
                 steps=[Step(kind="guard", sql="SELECT 1 FROM orders WHERE id = :order_id AND status = 'open'",
                             must="exist", error="order {order_id} is not open"),
                        Step(kind="write", sql="INSERT INTO items (order_id, sku, qty) VALUES (:order_id, :sku, :qty)")]),
            Tool(name="get_order", description="An order by customer name.", kind="read",
                 params=[Param(name="customer", type="string")],
                 returns=Returns(sql="SELECT id, customer, status FROM orders WHERE customer = :customer", mode="all")),
        ],
    )


def _replace_tool(env: Environment, name: str, **changes: object) -> Environment:
    tools = [t.model_copy(update=changes) if t.name == name else t for t in env.tools]
    return env.model_copy(update={"tools": tools})


def broken_library_env() -> Environment:
    env = library_env()
    steps = list(env.tool("return_book").steps)
    steps[-1] = Step(kind="write", sql="UPDATE loans SET returned_at = :now")
    return _replace_tool(env, "return_book", steps=steps)


def sql_error_library_env() -> Environment:
    env = library_env()
    steps = list(env.tool("update_member_email").steps)
    steps[-1] = Step(kind="write", sql="UPDATE members SET mail = :email WHERE id = :member_id")
    return _replace_tool(env, "update_member_email", steps=steps)
