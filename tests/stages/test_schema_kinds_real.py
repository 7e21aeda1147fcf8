"""Issue 40 with the real embedded model: the schema keeps the scenario's kinds of record. Two domains of
seeds/domains.txt whose kinds the old ask (a menu "such as an order or a visit") left out: a car rental (vehicle
classes, branches, rental agreements, damages) and a pet adoption shelter (animals, adopter applications, visits,
adoptions). The built schema must keep every entity by ``pipeline.meaning.kinds`` (asked in the first reply or
written by the one more call per kind)."""

from __future__ import annotations

import time

import pytest

from pipeline import ir
from pipeline.ir import Intent

CAR = ir.Scenario(
    name="Car rental", description="A car rental company rents vehicles by class from its branches: customers pick "
    "a car up at one branch and drop it off at another under a rental agreement; damages found on return are recorded.",
    entities=["vehicle class", "branch", "rental agreement", "damage"],
    goals=["Rent a car", "Return a car at a branch", "Report damage on a returned car"])
CAR_INTENTS = (Intent(goal="Rent a car of a class at a branch", kind="write"),
               Intent(goal="Return a rented car at a branch", kind="write"),
               Intent(goal="Record damage found on a returned car", kind="write"),
               Intent(goal="List the cars available at a branch", kind="read"))
SHELTER = ir.Scenario(
    name="Pet adoption shelter", description="An animal shelter takes in animals and finds them homes: people apply "
    "to adopt, visit the animals, and an approved application ends in an adoption.",
    entities=["animal", "adopter application", "visit", "adoption"],
    goals=["Apply to adopt an animal", "Book a visit with an animal", "Complete an adoption"])
SHELTER_INTENTS = (Intent(goal="Submit an application to adopt an animal", kind="write"),
                   Intent(goal="Schedule a visit with an animal", kind="write"),
                   Intent(goal="Complete the adoption of an animal", kind="write"),
                   Intent(goal="Find the animals available for adoption", kind="read"))


@pytest.mark.real_llm
@pytest.mark.parametrize(("scenario", "intents"), [(CAR, CAR_INTENTS), (SHELTER, SHELTER_INTENTS)],
                         ids=["car-rental", "pet-adoption"])
def test_real_schema_keeps_every_kind_of_record(real_llm, scenario: ir.Scenario, intents: tuple[Intent, ...]) -> None:
    from pipeline.meaning.kinds import match_kinds
    from pipeline.settings import BuildSettings
    from pipeline.stages.schema.tables import generate_schema

    start = time.monotonic()
    res = generate_schema(scenario, intents, real_llm, BuildSettings())
    assert res.ok, res.rejections
    names = [t.name for t in res.value]
    matches = match_kinds(scenario.entities, names)
    print(f"\n{scenario.name}: tables {names}, calls {res.attempts}, {time.monotonic() - start:.0f}s;",
          {m.entity: (m.table, m.nearest, m.score) for m in matches}, [r.reason for r in res.rejections])
    assert [m.entity for m in matches if m.table is None] == []
