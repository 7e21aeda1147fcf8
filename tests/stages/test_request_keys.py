"""Requests a person would say (issue 40; the fifteenth reader's audit, 2026-11-30): the planner names the row a
request is about by what a person knows of it, never by an amount when a date, a text or a parent tells it apart,
never by the column the request changes ("For the order of the patient Paula Nash, with quantity 1, please change
the quantity to 4"), and it counts a parent's children that move through states only in one stated state ("How many
loans does the member Darlene Rivera have?": the tester's 0 current against the verifier's 2 ever).

The environment: the committed example's pharmacy in small (patients, their orders, a charge on some orders, notes
on patients), its tools as the build makes them (a finder by name, paged listers with a status filter, an update of
an order's quantity, one of its status and one of its date). Each patient has four orders, quantities 1 to 4, two of them on one day:
(patient, quantity) is unique, (patient, order date) names two orders of four."""

from __future__ import annotations

from typing import Any

from pipeline import ir
from pipeline.dbmodel.keys import amounts, surrogates
from pipeline.runtime.replay import fresh
from pipeline.runtime.state import TableInfo
from pipeline.stages.tasks.code_wording import request_from_plan, state_columns
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner.aggregates import aggregates
from pipeline.stages.tasks.planner.chains import Goal
from pipeline.stages.tasks.planner.shapes import changes_naming

NAMES = ["Paula Nash", "Kristin Lee", "Erica Boyle", "Robin George", "Craig Reynolds", "Jane Greer", "Todd Ruiz",
         "Lisa Hunter"]
DAYS = ["2026-01-02", "2026-01-05", "2026-01-09", "2026-01-12", "2026-01-14"]


def _param(name: str, kind: str = "integer", required: bool = True, enum: list[str | int] | None = None) -> ir.Param:
    return ir.Param.model_validate({"name": name, "type": kind, "description": f"the {name}", "required": required,
                                    "enum": enum})


def _paged(name: str, table: str, by: str, status: bool) -> ir.Tool:
    where = f'"{by}" = :{by}' + (' AND (:status IS NULL OR "status" = :status)' if status else "")
    params = [_param(by)] + ([_param("status", "string", False, ["open", "closed"])] if status else [])
    return ir.Tool(name=name, kind="read", description=f"List the {table} with the given {by}.",
                   params=[*params, _param("limit", required=False), _param("offset", required=False)],
                   returns=ir.Returns(mode="all", sql=f'SELECT COUNT(*) OVER () AS total_matched, * FROM "{table}" '
                                                      f'WHERE {where} ORDER BY 2 LIMIT COALESCE(:limit, 20) '
                                                      "OFFSET COALESCE(:offset, 0)"))


def _update(column: str, kind: str = "integer", enum: list[str | int] | None = None) -> ir.Tool:
    return ir.Tool(name=f"update_orders_{column}", kind="write", description=f"Set the {column} of one order.",
                   params=[_param("order_id"), _param(column, kind, enum=enum)],
                   steps=[ir.Step(kind="write", sql=f'UPDATE "orders" SET "{column}" = :{column} '
                                                    'WHERE "order_id" = :order_id')],
                   returns=ir.Returns(mode="one", sql='SELECT * FROM "orders" WHERE "order_id" = :order_id'))


def pharmacy_env() -> ir.Environment:
    orders: list[dict[str, Any]] = []
    charges: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for p in range(1, len(NAMES) + 1):
        for q in range(1, 5):
            oid = len(orders) + 1
            day = DAYS[(p + max(q - 2, 0)) % len(DAYS)]  # the first two orders of a patient on one day
            orders.append({"order_id": oid, "patient_id": p, "quantity": q, "order_date": day,
                           "status": "open" if q <= 2 else "closed"})
            if q == 3:
                charges.append({"charge_id": len(charges) + 1, "order_id": oid, "amount": 5.0})
        for k in range(3):
            notes.append({"note_id": len(notes) + 1, "patient_id": p, "written_on": DAYS[k]})
    tables = [
        ir.Table(name="patients", ddl="CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL "
                                      "UNIQUE) STRICT"),
        ir.Table(name="orders", ddl="CREATE TABLE orders (order_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL "
                                    "REFERENCES patients(patient_id), quantity INTEGER CHECK (quantity >= 0), status "
                                    "TEXT NOT NULL CHECK (status IN ('open', 'closed')), order_date TEXT NOT NULL) "
                                    "STRICT"),
        ir.Table(name="charges", ddl="CREATE TABLE charges (charge_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL "
                                     "REFERENCES orders(order_id), amount REAL NOT NULL CHECK (amount > 0)) STRICT"),
        ir.Table(name="notes", ddl="CREATE TABLE notes (note_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL "
                                   "REFERENCES patients(patient_id), written_on TEXT NOT NULL) STRICT"),
    ]
    tools = [
        ir.Tool(name="find_patient_by_name", kind="read", description="Find a patient by name.",
                params=[_param("patient_name", "string")],
                returns=ir.Returns(mode="one", sql="SELECT * FROM patients WHERE name = :patient_name")),
        _paged("list_orders_by_patient_id", "orders", "patient_id", True),
        _paged("list_notes_by_patient_id", "notes", "patient_id", False),
        ir.Tool(name="find_charge_by_order_id", kind="read", description="The charge on an order.",
                params=[_param("order_id")],
                returns=ir.Returns(mode="one", sql="SELECT * FROM charges WHERE order_id = :order_id")),
        _update("quantity"),
        _update("status", "string", ["open", "closed"]),
        _update("order_date", "string"),
    ]
    seed = [ir.SeedRows(table="patients", rows=[{"patient_id": i + 1, "name": n} for i, n in enumerate(NAMES)]),
            ir.SeedRows(table="orders", rows=orders), ir.SeedRows(table="charges", rows=charges),
            ir.SeedRows(table="notes", rows=notes)]
    return ir.Environment(scenario=ir.Scenario(name="Pharmacy", description="A community pharmacy's orders.",
                                               seed="pharmacy", entities=["patient", "order"], goals=["fill orders"]),
                          tables=tables, tools=tools, seed=seed, clock="2026-01-15T09:00:00")


def _planned(env: ir.Environment):
    with fresh(env) as run:
        keys = make_planner(env, run).keys
        chains = plan_chains(env, run, 60, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
        ids = surrogates(run.infos)
    fixed = state_columns(env)
    return keys, [(ch, request_from_plan(ch, skip=ids, states=fixed)) for ch in chains]


def _goals(chains) -> list[Goal]:
    return [g for ch, _ in chains for g in ch.goals]


def test_an_order_is_named_by_its_patient_and_day_never_by_its_quantity() -> None:
    keys, chains = _planned(pharmacy_env())
    assert keys["orders"].columns == ("patient_id", "order_date") and keys["orders"].partial
    named = [g for g in _goals(chains) if any(ref.startswith("orders.") for ref, _ in g.named)]
    assert named, [text for _, text in chains]
    assert not [g for g in named if any(ref == "orders.quantity" for ref, _ in g.named)]
    # the quantity is asked and changed on orders their patient and day name alone
    assert any(g.kind == "lookup" and g.asked == "quantity" for g in named)
    changed = [(ch, text) for ch, text in chains if ch.shape == "update" and ch.calls[-1].tool == "update_orders_quantity"]
    assert changed and all("January" in text and "quantity" in text for _, text in changed), changed


def test_a_charge_is_named_by_its_order_not_by_its_amount() -> None:
    """A charge per order: the order names it, where otherwise only its amount would ("the charge of 5.0")."""
    keys, chains = _planned(pharmacy_env())
    assert keys["charges"].columns == ("order_id",)
    asked = [g for g in _goals(chains) if g.table == "charges" and g.kind == "lookup"]
    assert asked and all(g.asked == "amount" for g in asked)
    assert all(not any(ref == "charges.amount" for ref, _ in g.named) for g in asked)


def test_no_write_names_its_row_by_a_column_it_changes() -> None:
    _, chains = _planned(pharmacy_env())
    writes = [g for g in _goals(chains) if g.kind in ("update", "delete") and g.values]
    assert writes
    for g in writes:
        own = {ref.rpartition(".")[2] for ref, _ in g.named if ref.rpartition(".")[0] == g.table}
        assert not own & {c for c, _ in g.values}, g
    # a status is changed on orders their day names, not by the status it has ("the open order of ..."); the day of
    # an order, which names it, is changed on none
    assert any(c == "status" for g in writes for c, _ in g.values)
    assert not any(c == "order_date" for g in writes for c, _ in g.values)


def test_changes_naming_sees_only_the_rows_own_columns() -> None:
    desc = [("patients.name", "Paula Nash"), ("orders.quantity", 1)]
    assert changes_naming("orders", desc, [("quantity", 4)])
    assert not changes_naming("orders", desc, [("status", "closed")])
    assert not changes_naming("orders", [("patients.name", "Paula Nash")], [("name", "Paula Roe")])


def test_amounts_are_numeric_columns_that_are_neither_keys_references_nor_unique_labels() -> None:
    info = TableInfo(name="rooms", columns=("room_id", "hotel_id", "number", "rate", "floor", "view"),
                     types=("INTEGER", "INTEGER", "INTEGER", "REAL", "INTEGER", "TEXT"), key=("room_id",),
                     int_pk=True, foreign_keys=(("hotel_id", "hotels", "hotel_id"),))
    assert amounts(info, [("number",)]) == {"rate", "floor"}


def test_children_with_a_state_are_counted_in_one_stated_state() -> None:
    """"How many orders does the patient Paula Nash have?" (all of them, or her open ones?) is not asked; "how many of
    her orders are open" is; notes, which have no state, are counted whole; a choice among all of a patient's
    orders still reads them all."""
    env = pharmacy_env()
    _, chains = _planned(env)
    counts = [ch.goals[0] for ch, _ in chains if ch.goals and ch.goals[0].kind == "count" and ch.goals[0].named]
    orders = [g for g in counts if g.items == "orders" or any("orders." in ref for ref, _ in g.where)]
    assert orders and all(g.where and g.where[0][0] == "orders.status" for g in orders), orders
    assert any(g.items == "notes" and not g.where for g in counts), counts
    with fresh(env) as run:
        p = make_planner(env, run)
        every = [ch.goals[0] for ch in aggregates(p, 0, every=True) if ch.goals[0].kind == "count"]
    assert any(g.items == "orders" and not g.where for g in every)
