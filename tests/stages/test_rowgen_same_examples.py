"""A column whose examples are another table's people takes the generator code drew those people from (issue 40): an
outside apartment-rental build of 2026-11-30 drew its viewings' and applications' tenants from the person generator
("as the examples show") but continued a list of 24 names from the same placeholders for its leases ("John Doe",
"Jane Smith", "Alice Johnson", "Bob Brown"): 234 leases held by 24 names, Bob Brown 17, John Doe 13. Compared by the
texts themselves, no name of a column read."""

from __future__ import annotations

from pipeline import ir
from pipeline.stages.rows.generators import Context, kind_of_same_examples, shown_kinds

TENANTS = ["John Doe", "Jane Smith", "Alice Johnson", "Bob Brown"]


def plans() -> list[tuple[str, ir.RowPlan]]:
    viewings = ir.RowPlan(locale="en_US", seed=1, examples=4, generators=[
        ir.ColumnGenerator(column="tenant_name", kind="person_name", by="code"),
        ir.ColumnGenerator(column="viewing_date", kind="date", by="llm")])
    listings = ir.RowPlan(locale="en_US", seed=2, examples=4, generators=[
        ir.ColumnGenerator(column="address", kind="street_address", by="code"),
        ir.ColumnGenerator(column="owner", kind="person_name", by="llm")])  # the model's own pick: not shown
    return [("listings", listings), ("viewings", viewings)]


def ctx(others: dict[str, list[str]]) -> Context:
    return Context(rows=200, singles=frozenset(), examples={}, others=others, drawn_as=shown_kinds(plans()))


def test_only_what_code_drew_as_the_examples_showed_is_recorded() -> None:
    assert shown_kinds(plans()) == {"listings.address": "street_address", "viewings.tenant_name": "person_name"}


def test_the_same_people_in_another_table_take_the_person_generator() -> None:
    c = ctx({"viewings.tenant_name": TENANTS[:3] + ["Mike Brown"], "listings.owner": TENANTS})
    assert kind_of_same_examples(TENANTS, c) == "person_name"
    assert kind_of_same_examples(["Jane Smith", "Alice Johnson", "Ann Lee", "Tom Kay"], c) == "person_name"


def test_other_values_or_a_column_the_model_chose_for_decide_nothing() -> None:
    c = ctx({"viewings.tenant_name": TENANTS, "listings.owner": ["Pine Lodge", "Elm Court", "Oak Villa"]})
    assert kind_of_same_examples(["Pine Lodge", "Elm Court", "Oak Villa"], c) is None  # 'owner' was the model's pick
    assert kind_of_same_examples(["Studio", "Loft", "Duplex"], c) is None
    assert kind_of_same_examples(["John Doe", "Studio", "Loft"], c) is None  # one of three is no match
    assert kind_of_same_examples(["John Doe"], c) is None  # one value says nothing
