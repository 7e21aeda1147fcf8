"""The schema keeps the scenario's kinds of record (issue 40): the ask lists them, and an entity no table keeps
(MiniLM, ``pipeline.meaning.kinds``) gets one more call that writes its table, within ``tables_max``, or a
Rejection naming it."""

from __future__ import annotations

import json

import pytest

from pipeline.llm import fake_client
from pipeline.meaning.kinds import match_kinds, missing_kinds
from pipeline.stages.schema.tables import generate_schema
from tests.stages.library_replies import BOOKS_DDL, SCENARIO, SCHEMA, small_settings
from tests.stages.test_schema import BROKEN_BOOKS, INTENTS

HOLDS_DDL = ("CREATE TABLE holds (hold_id INTEGER PRIMARY KEY, member_id INTEGER NOT NULL REFERENCES "
             "members(member_id), book_id INTEGER NOT NULL REFERENCES books(book_id), placed_on TEXT NOT NULL) STRICT")
HOLDS_ITEM = {"name": "holds", "ddl": HOLDS_DDL, "natural_key": ["member_id", "book_id"], "personal": []}
WITH_HOLDS = SCENARIO.model_copy(update={"entities": ["Member", "Book", "Loan", "Hold"]})
COVERED = SCENARIO.model_copy(update={"entities": ["Member", "Book", "Loan"]})


@pytest.mark.parametrize(("entities", "tables", "missing"), [
    (["Docks", "Bikes", "Rides"], ["bikes", "users", "membership_plans", "orders", "visits"], ["Docks", "Rides"]),
    (["garage", "space", "time-slot reservation", "permit"], ["garages", "reservations", "users"],
     ["space", "permit"]),
    (["Patient", "Medication", "Allergy"], ["patients", "medications", "prescriptions", "orders"], ["Allergy"]),
    (["book", "member", "loan", "renewal", "overdue fine"], ["books", "members", "loans", "renewals", "overdue_fines"],
     []),
    (["Treatment Plan"], ["treatment_plan"], []),  # the exact name, whatever the score
], ids=["bike", "garage", "pharmacy", "library", "exact"])
def test_the_kinds_no_table_keeps_are_found_one_entity_per_table(entities, tables, missing) -> None:
    """The outside builds of session 17: Rides is near bikes by name (0.633), but bikes is the Bikes' table."""
    assert missing_kinds(entities, tables) == missing
    if entities[0] == "Docks":
        assert {m.entity: m.table for m in match_kinds(entities, tables)}["Bikes"] == "bikes"


def test_the_ask_lists_the_kinds_of_record_and_no_menu_of_events() -> None:
    client = fake_client([SCHEMA])
    res = generate_schema(COVERED, INTENTS, client, small_settings())
    said = client.requests[0][0]["content"]
    assert "The kinds of record it keeps: Member, Book, Loan (a table for each)." in said
    assert "order or a visit" not in said
    assert res.ok and res.rejections == () and len(client.requests) == 1  # every kind kept: no extra call
    client = fake_client([SCHEMA])
    generate_schema(SCENARIO, INTENTS, client, small_settings())
    assert "kinds of record" not in client.requests[0][0]["content"]


def test_a_kind_no_table_keeps_gets_one_call_that_writes_its_table() -> None:
    client = fake_client([SCHEMA, HOLDS_ITEM])
    res = generate_schema(WITH_HOLDS, INTENTS, client, small_settings(tables_max=4))
    assert res.ok and res.rejections == () and res.attempts == 2 and len(client.requests) == 2
    assert [t.name for t in res.value] == ["members", "books", "loans", "holds"]
    assert res.value[3].ddl == HOLDS_DDL and res.value[3].natural_key == ["member_id", "book_id"]
    ask = client.requests[1]
    assert ask[:2] == [client.requests[0][0], {"role": "assistant", "content": json.dumps(SCHEMA)}]
    assert "The application keeps Hold records, and none of your tables holds them." in ask[-1]["content"]


def test_no_call_beyond_tables_max_and_the_kind_is_reported() -> None:
    client = fake_client([SCHEMA])
    res = generate_schema(WITH_HOLDS, INTENTS, client, small_settings(tables_max=3))
    assert res.ok and len(client.requests) == 1 and res.attempts == 1
    (note,) = res.rejections
    assert (note.stage, note.item) == ("schema", "Hold")
    assert note.reason == ("the scenario's kind of record 'Hold' has no table (the schema already has 3 tables, its "
                           "tables_max, so none was asked for)")
    assert note.evidence == {"entity": "Hold", "tables": ["members", "books", "loans"]}


ORDERS_DDL = ("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, member_id INTEGER NOT NULL REFERENCES "
              "members(member_id), placed_on TEXT NOT NULL) STRICT")


def test_at_tables_max_a_table_that_keeps_no_kind_and_nothing_references_gives_its_place() -> None:
    """The car rental of tests/stages/test_schema_kinds_real.py (2026-11-30): five tables, one an ``orders`` copied
    from the ask's key example, and its damages left without a table. ``orders`` keeps no kind and no table refers
    to it: the kind's table takes its place. ``loans`` is referenced by nothing either, but keeps the Loan kind."""
    with_orders = {"tables": [*SCHEMA["tables"], {"name": "orders", "ddl": ORDERS_DDL, "natural_key": ["placed_on"]}]}
    client = fake_client([with_orders, HOLDS_ITEM])
    res = generate_schema(WITH_HOLDS, INTENTS, client, small_settings(tables_max=4))
    assert res.ok and res.attempts == 2 and len(client.requests) == 2
    assert [t.name for t in res.value] == ["members", "books", "loans", "holds"]
    (note,) = res.rejections
    assert note.item == "orders" and note.reason.startswith("table 'orders' dropped for the scenario's kind of record "
                                                            "'Hold': the schema had 4 tables, its tables_max")
    client = fake_client([with_orders])  # every table keeps a kind or is referenced: nothing gives its place
    res = generate_schema(WITH_HOLDS.model_copy(update={"entities": ["Member", "Book", "Loan", "Order", "Hold"]}),
                          INTENTS, client, small_settings(tables_max=4))
    assert len(client.requests) == 1 and [t.name for t in res.value] == ["members", "books", "loans", "orders"]


def test_the_spare_table_is_one_whose_removal_leaves_no_table_linked_to_nothing() -> None:
    """``orders`` is the one link of ``customers`` (the real car rental lost its customers as an island once its
    ``orders`` gave its place): ``book_reviews``, though nearer a kind by name (0.60 with Book against 0.36), goes."""
    customers = ("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT")
    orders = ("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES "
              "customers(customer_id), placed_on TEXT NOT NULL) STRICT")
    reviews = ("CREATE TABLE book_reviews (review_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES "
               "books(book_id), stars INTEGER NOT NULL) STRICT")
    reply = {"tables": [*SCHEMA["tables"], {"name": "customers", "ddl": customers, "natural_key": ["name"]},
                        {"name": "orders", "ddl": orders, "natural_key": ["placed_on"]},
                        {"name": "book_reviews", "ddl": reviews, "natural_key": ["book_id", "stars"]}]}
    client = fake_client([reply, HOLDS_ITEM])
    res = generate_schema(WITH_HOLDS, INTENTS, client, small_settings(tables_max=6))
    assert res.ok and len(client.requests) == 2
    assert sorted(t.name for t in res.value) == ["books", "customers", "holds", "loans", "members", "orders"]
    assert [r.item for r in res.rejections if r.reason.startswith("table ")] == ["book_reviews"]


@pytest.mark.parametrize(("reply", "why"), [
    ({**HOLDS_ITEM, "ddl": BROKEN_BOOKS.replace("books", "holds")}, "the table its call wrote failed: "),
    ({**HOLDS_ITEM, "name": "books", "ddl": BOOKS_DDL}, "wrote books, which the schema has already"),
    ({**HOLDS_ITEM, "ddl": "holds: member, book"}, "wrote no CREATE TABLE"),
    ({"name": "holds"}, "the call that was to write its table gave no usable reply: "),
], ids=["fails", "existing", "no-ddl", "unusable"])
def test_a_bad_reply_for_a_kind_is_reported_and_the_schema_kept(reply, why) -> None:
    client = fake_client([SCHEMA, reply], validation_retries=0)
    res = generate_schema(WITH_HOLDS, INTENTS, client, small_settings(tables_max=4))
    assert res.ok and [t.name for t in res.value] == ["members", "books", "loans"]
    assert len(client.requests) == 2 and res.attempts == 2
    (note,) = res.rejections
    assert note.item == "Hold" and note.reason.startswith("the scenario's kind of record 'Hold' has no table (")
    assert why in note.reason, note.reason
