"""Requests in a customer's or clerk's words (issue 40, the eighteenth reader's audit: 4 of 10 requests per
environment a person would say): a row named by what the calls need, not every key column ("the renewal of the
member Melissa Brown for the loan with loan date November 25, 2025, with renewal date November 29, 2025"); a row's
own day said as a day ("the loan ... from January 5, 2026", not "with loan date"); a whole amount written and moved
as a whole amount ("quantity 4", "change the quantity to 103", not "4.0" or "101.5"); an e-mail address said with
its label, not as a name ("the subscriber joseph.baldwin@gmail.com")."""

from __future__ import annotations

from pipeline.ir import ToolCall
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.code_wording import number_words, request_from_plan
from pipeline.stages.tasks.planner import Chain, Goal, make_planner, plan_chains
from pipeline.stages.tasks.planner.chains import spoken
from pipeline.stages.tasks.planner.values import new_value
from pipeline.stages.tasks.templates import Template, fill, template_key
from tests.fixtures.library import library_env


def _chain(goal: Goal, answer: str | None = None) -> Chain:
    must = [v for _, v in goal.named + goal.values]
    return Chain(goal.kind, [ToolCall(tool="t", arguments={})], [], must,
                 answer={"type": answer, "value": 1} if answer else None, goals=[goal])


# ---------------------------------------------------------------- numbers


def test_a_whole_amount_is_written_without_its_point_zero() -> None:
    assert [number_words(v) for v in (4.0, 101.0, 5.5, 24.99, 7, -3.0)] == ["4", "101", "5.5", "24.99", "7", "-3"]
    goal = Goal("create", "prescriptions", refs=(("patient_id", "patients", (("patients.name", "Michael Flores"),)),),
                values=(("quantity", 4.0), ("fine_amount", 6.0)))
    text = request_from_plan(_chain(goal))
    assert text == "Please add a new prescription for the patient Michael Flores, with quantity 4 and fine amount 6."
    update = Goal("update", "medications", (("medications.name", "Metoprolol"),), values=(("quantity", 103.0),))
    assert request_from_plan(_chain(update)) == "For the medication Metoprolol, please change the quantity to 103."


def test_a_template_fills_a_whole_amount_as_people_write_it() -> None:
    goal = Goal("update", "medications", (("medications.name", "Metoprolol"),), values=(("quantity", 103.0),))
    chain = _chain(goal)
    key = template_key(chain)
    assert key is not None
    t = Template(key, "Set the stock of {medication_name} to {new_quantity}, please.",
                 {"medication_name": ("0.named.medications.name",), "new_quantity": ("0.values.quantity",)})
    assert fill(t, chain) == "Set the stock of Metoprolol to 103, please."


def test_a_whole_amount_held_as_real_moves_by_a_whole_amount() -> None:
    """A stock of 100.0 tablets becomes 103 (was 101.5); an amount with cents moves as before."""
    env = library_env()
    cost = next(p for t in env.tools if t.name == "add_book" for p in t.params if p.name == "replacement_cost")
    with fresh(env, None) as run:
        p = make_planner(env, run)
        assert new_value(p, "books", "replacement_cost", 100.0, cost, False) == 103.0
        assert new_value(p, "books", "replacement_cost", 999.0, cost, False) == 998.0  # under its maximum
        assert new_value(p, "books", "replacement_cost", 9.99, cost, False) == 11.49


# ---------------------------------------------------------------- which facts name a row


def test_a_row_is_named_by_the_facts_the_calls_state_and_its_parents() -> None:
    desc = [("members.name", "Melissa Brown"), ("loans.loan_date", "2025-11-25"), ("renewals.renewal_date", "2025-11-29")]
    # the loan's only renewal: its loan finds it, the renewal's own date is no fact the agent needs
    assert spoken("renewals", desc, ["Melissa Brown", "2025-11-25"]) == desc[:2]
    assert spoken("renewals", desc, ["Melissa Brown", "2025-11-25", "2025-11-29"]) == desc  # two renewals: stated
    allergy = [("patients.name", "Jennifer Miles"), ("medications.name", "Amoxicillin")]
    assert spoken("allergies", allergy, ["Jennifer Miles"]) == allergy  # a parent says what the row is about
    assert spoken("renewals", desc, []) == desc  # the calls state none of it: as before


def test_a_planned_request_states_no_key_column_of_its_own_row_the_calls_do_without() -> None:
    """Over the library's plan, every fact of a lookup's or a write's own row that the request states is one a call
    states (or its new value)."""
    env = library_env()
    with fresh(env, None) as run:
        chains = plan_chains(env, run, 60, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
    checked = 0
    for ch in chains:
        stated = {repr(v) for c, src in zip(ch.calls, ch.sources, strict=False)
                  for a, how in src.items() if how == "stated" for v in [c.arguments.get(a)]}
        for g in ch.goals:
            if g.kind not in ("lookup", "update", "delete") or g.owner:
                continue
            own = [(ref, v) for ref, v in g.named if ref.rpartition(".")[0] == g.table]
            if not any(repr(v) in stated for _, v in g.named):
                continue
            checked += 1
            assert all(repr(v) in stated for _, v in own), (ch.shape, g.named, [c.tool for c in ch.calls])
    assert checked


# ---------------------------------------------------------------- a row's own day; an address


def test_a_rows_own_day_is_said_as_a_day() -> None:
    lookup = Goal("lookup", "loans", (("members.name", "Robert Griffin"), ("loans.loan_date", "2026-01-05")),
                  asked="due_date")
    assert request_from_plan(_chain(lookup, "date")) == \
        "What is the due date of the loan of the member Robert Griffin from January 5, 2026?"
    mark = Goal("update", "renewals", (("members.name", "Melissa Brown"), ("loans.loan_date", "2025-11-25")),
                values=(("notes", "late"),))
    assert request_from_plan(_chain(mark)) == \
        "For the renewal of the member Melissa Brown for the loan from November 25, 2025, please change the notes to late."
    alone = Goal("lookup", "prescriptions", (("prescriptions.date", "2026-01-15"),), asked="quantity")
    assert request_from_plan(_chain(alone, "number")) == "What is the quantity of the prescription from January 15, 2026?"
    # a date named for something else (a fine's due date) keeps its label
    fine = Goal("lookup", "fines", (("members.name", "Zoe Johnson"), ("fines.due_date", "2026-01-14")), asked="amount")
    assert request_from_plan(_chain(fine, "number")) == \
        "What is the amount of the fine of the member Zoe Johnson, with due date January 14, 2026?"


def test_an_address_is_said_with_its_label_not_as_a_name() -> None:
    count = Goal("count", "subscribers", (("subscribers.email", "eric.hoover@yahoo.com"),), asked="*", items="skips")
    assert request_from_plan(_chain(count, "number")) == \
        "How many skips does the subscriber with email eric.hoover@yahoo.com have?"
    named = Goal("count", "subscribers", (("subscribers.name", "Eric Hoover"),), asked="*", items="skips")
    assert request_from_plan(_chain(named, "number")) == "How many skips does the subscriber Eric Hoover have?"
