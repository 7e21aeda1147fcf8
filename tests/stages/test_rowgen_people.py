"""A person's name split over two columns, against the embedded model's real replies of the outside photo print shop
(2026-11-30, /work/out/o15, print_order_management_f9b7585c56): the model's example customers were "John Doe",
"Jane Smith", ... with "123-456-7890" phones and "john.doe@example.com" addresses, and it chose a list for every
column. Its placeholder row survived, 108 customers shared 24 names continued as a list, and each e-mail was made
of the first name with another example's surname after it (issue 40)."""

from __future__ import annotations

import re

from pipeline import ir
from pipeline.dbmodel.draws import derived_value, name_part, sources_of
from pipeline.meaning import relations, vocab
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings, scripted

SCENARIO = ir.Scenario(name="Print Order Management", description=(
    "A photo print shop allows customers to upload orders for prints, choose sizes and track fulfilment. Customers "
    "can view their order status, payment history, and shipping details."))
CUSTOMERS = ir.Table(name="customers", natural_key=["email"], ddl=(
    "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL, last_name TEXT NOT NULL, "
    "email TEXT UNIQUE NOT NULL, phone_number TEXT) STRICT"))

# the model's replies, as the run's cache holds them
CUSTOMER_ROWS = {"rows": [["John", "Doe", "john.doe@example.com", "123-456-7890"],
                          ["Jane", "Smith", "jane.smith@example.com", "098-765-4321"],
                          ["Alice", "Johnson", "alice.johnson@example.com", "111-222-3333"],
                          ["Bob", "Brown", "bob.brown@example.com", None]]}
CUSTOMER_GENERATORS = {"locale": "en_US", "columns": {
    "first_name": {"kind": "text_pool", "values": ["John", "Jane", "Alice", "Bob", "Charlie", "David", "Eve", "Frank",
                                                   "Grace", "Hannah"], "weights": [1] * 10},
    "last_name": {"kind": "text_pool", "values": ["Doe", "Smith", "Johnson", "Brown", "Wilson", "Taylor", "Anderson",
                                                  "Thomas", "Jackson", "White"], "weights": [1] * 10},
    "email": {"kind": "text_pool", "values": ["john.doe@example.com", "jane.smith@example.com",
                                              "alice.johnson@example.com", "bob.doe@example.com"], "weights": [1] * 4},
    "phone_number": {"kind": "text_pool", "values": ["123-456-7890", "098-765-4321", "111-222-3333",
                                                     "222-333-4444"], "weights": [1] * 4}}}
PAIRS = {  # its continuation of (first_name, last_name) as rows, had it been asked (the old build asked 3 times)
    "first_name": ["Michael", "Emily", "David", "Sarah", "James", "Olivia", "Daniel", "Riley", "Eve", "Grace"],
    "last_name": ["Johnson", "Williams", "Brown", "Davis", "Miller", "Wilson", "Taylor", "Anderson", "Brown", "Davis"]}
PLACEHOLDER_PHONES = ("123-456-7890", "098-765-4321", "111-222-3333")


def test_split_name_columns_are_the_person_generators_parts() -> None:
    assert name_part(["John", "Jane", "Alice", "Bob"], "en_US") == "first_name"
    assert name_part(["Doe", "Smith", "Johnson", "Brown"], "en_US") == "last_name"  # "Doe" is no surname there
    assert name_part(["Hans", "Grete", "Jürgen", "Anna"], "de_DE") == "first_name"
    assert name_part(["Müller", "Schmidt", "Schneider", "Fischer"], "de_DE") == "last_name"
    assert name_part(["Pierre", "Marie", "Jean", "Claire"], "fr_FR") == "first_name"  # 3 of 4 surnames too
    # no part of a name: medicines, breeds, colours, pets (one of four a given name), whole names
    for texts in (["Aspirin", "Ibuprofen", "Paracetamol"], ["Labrador", "Poodle", "Beagle", "Boxer"],
                  ["Red", "Blue", "Green", "Black"], ["Max", "Bella", "Charlie", "Luna"],
                  ["George Orwell", "Jane Austen", "Mark Twain"], ["John"]):
        assert name_part(texts, "en_US") is None, texts


def test_an_ending_that_holds_another_columns_value_is_made_of_it_too() -> None:
    examples = {"first_name": ["John", "Jane", "Alice", "Bob"], "last_name": ["Doe", "Smith", "Johnson", "Brown"],
                "email": ["john.doe@example.com", "jane.smith@example.com", "alice.johnson@example.com",
                          "bob.brown@example.com"]}
    got = {d.column: d for d in relations.derived_columns(examples, list(examples))}
    assert set(got) == {"email"}
    d = got["email"]
    assert (d.source, d.also, d.recipe, d.tails) == ("first_name", ("last_name",), "{0}.{-1}", ("@example.com",))
    # made of the first name alone where the endings do not hold the row's surname ("bob.doe" for Bob Brown)
    loose = {**examples, "email": ["john.x@example.com", "jane.x@example.com", "alice.x@example.com",
                                   "bob.x@example.com"]}
    d = next(d for d in relations.derived_columns(loose, list(loose)) if d.column == "email")
    assert (d.source, d.also, d.recipe) == ("first_name", (), "{0}")
    g = ir.ColumnGenerator(column="email", kind="derived", after="first_name", also=["last_name"], pattern="{0}.{-1}",
                           pool=["@shop.com"])
    assert sources_of(g, [g]) == ["first_name", "last_name"]
    import random

    row = {"first_name": "Émile", "last_name": "Zola"}
    assert derived_value(g, row, random.Random(1), None) == "emile.zola@shop.com"


def test_made_up_numbers_are_placeholders() -> None:
    for t in PLACEHOLDER_PHONES + ("222-333-4444", "555-0000", "(987) 654-3210"):
        assert vocab.dummy_number(t), t
    for t in ("227-672-7148", "9780451524935", "BK-0001", "BK-12", "2026-01-15", "+49 30 1234567"):
        assert not vocab.dummy_number(t), t
    assert vocab.dummy_numbers([*PLACEHOLDER_PHONES, "227-672-7148"])
    assert not vocab.dummy_numbers(["227-672-7148", "489-134-4160", "123-456-7890"])


def test_print_shop_customers_are_people_whose_emails_match_their_names() -> None:
    client = scripted([CUSTOMER_ROWS, CUSTOMER_GENERATORS], PAIRS)
    res = generate_seed(SCENARIO, (CUSTOMERS,), client, gen_settings(entity_rows=(108, 108)))
    assert res.ok, res.rejections
    seed = res.value[0]
    assert seed.plan is not None
    gens = {g.column: g for g in seed.plan.generators}
    assert gens["first_name"].kind == "first_name" and gens["last_name"].kind == "last_name"
    assert gens["email"].kind == "derived" and sources_of(gens["email"], seed.plan.generators) == [
        "first_name", "last_name"]
    rows = seed.rows
    assert len(rows) >= 100
    people = [(r["first_name"], r["last_name"]) for r in rows]
    # the model's placeholder people and numbers seed nothing: its example rows were drawn again
    assert ("John", "Doe") not in people and ("Jane", "Smith") not in people
    assert not any(r["phone_number"] in PLACEHOLDER_PHONES for r in rows)
    assert not any(vocab.dummy_number(r["phone_number"]) for r in rows if r["phone_number"])
    assert len(set(people)) >= 0.9 * len(rows)  # a person generator, not 24 names continued as a list
    for r in rows:  # each address made of its own row's first and last name
        local, domain = r["email"].split("@")
        assert local == relations.derive("{0}.{-1}", f"{r['first_name']} {r['last_name']}"), r
        assert not relations.reserved_domain("@" + domain), r
        assert r["phone_number"] is None or re.fullmatch(r"\d{3}-\d{3}-\d{4}", r["phone_number"]), r
