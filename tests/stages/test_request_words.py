"""Requests a person would say (issue 40, the reader's audit of 2026-11-28c, sections 1.4 and 2.4): no tool
description in the words the phrasing model is given or in the request it writes (the pharmacy's "Set the quantity
of an order; returns the updated order details ..."), no quotes around the names and dates a request states ("the
medication 'Cetirizine'"), a new row's parent named as the user knows it (not "for this member"), a loan chosen by
its own date said as "the latest loan of ...", a count over a fixed list that no tool sets by itself not said as a
state ("How many medications are daily?"). Scripted fake LLM, no real model."""

from __future__ import annotations

import re

import pytest

from pipeline.dbmodel.keys import surrogates
from pipeline.ir import ColumnGenerator, Param, Returns, RowPlan, Step, Table, Tool
from pipeline.llm import fake_client
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.bank import (
    TaskSettings,
    chain_messages,
    copied_description,
    generate_tasks,
    lint_request,
    revise_task,
)
from pipeline.stages.tasks.code_wording import (
    Fixed,
    copied_clause,
    quoted_value,
    request_from_plan,
    state_columns,
    unquoted,
)
from pipeline.stages.tasks.planner import plan_chains
from pipeline.stages.tasks.planner.chains import Chain, Goal
from pipeline.stages.tasks.templates import Template, fill, slotted, unquote_slots
from tests.stages.test_person_words import lending_env
from verify.derive import derive_verifier

# the example's pharmacy (generated/quickstart, 2026-11-28): the tool, and what the model wrote after its first
# copy of the description was refused
QUANTITY = "Set the quantity of one order; returns the order as changed."
T8 = ("Set the quantity of an order; returns the updated order details for a specific patient's order, identified "
      "by the patient's name 'Kenneth Howard' and the order date '2025-10-03'. The updated quantity should be 4.")


def counter_env():
    """The lending desk with a write that sets a loan's due date and states a new value, described in a sentence
    of two clauses as the example's tools are."""
    env = lending_env()
    tools = [t if t.name != "move_due_date" else t.model_copy(update={
        "description": "Set the due date of one loan; returns the loan as changed."}) for t in env.tools]
    return env.model_copy(update={"tools": tools})


def _chains(env, n=60):
    with fresh(env) as run:
        return plan_chains(env, run, n, {1: 0.3, 2: 0.4, 3: 0.3}), surrogates(run.infos)


# ---------------------------------------------------------------- 1. the tool's description


def test_a_write_that_states_its_new_value_is_planned_without_the_tools_description() -> None:
    env = counter_env()
    chains, _ = _chains(env)
    moved = [c for c in chains if any(call.tool == "move_due_date" for call in c.calls)]
    assert moved, "the planner finds writes of the due date"
    desc = reward.normalize_text("Set the due date of one loan")
    for c in moved:
        prompt = reward.normalize_text(chain_messages(env, c)[1]["content"])
        assert desc not in prompt, c.facts  # before: "Set the due date of one loan; returns the loan as changed, for"
        assert "returns the loan as changed" not in prompt


def test_a_clause_of_a_description_but_for_one_word_is_a_copy() -> None:
    assert copied_clause(T8, QUANTITY) == "set the quantity of an order"
    assert copied_clause("Please set the quantity of Kenneth Howard's order from October 3, 2025 to 4.", QUANTITY) is None
    assert copied_clause("Kenneth Howard would like 4 of his order from October 3, 2025.", QUANTITY) is None
    # any language: words and punctuation only
    assert copied_clause("Ändere die Menge einer Bestellung; für Kenneth Howard.",
                         "Ändere die Menge einer einzigen Bestellung; gibt sie zurück.") == "ändere die menge einer bestellung"


def test_the_lint_and_a_revision_refuse_the_pharmacys_leaked_request() -> None:
    env = counter_env()
    chains, _ = _chains(env)
    chain = next(c for c in chains if c.calls[-1].tool == "move_due_date")
    leaked = ("Set the due date of a loan; returns the updated loan details for the member " +
              ", ".join(str(v) for v in chain.must_state) + ".")
    why = lint_request(env, chain, leaked)
    assert why is not None and "description of tool move_due_date" in why
    assert copied_description(env, leaked) is not None
    said = "Please move the due date for " + ", ".join(str(v) for v in chain.must_state) + "."
    assert copied_description(env, said) is None


def test_a_revision_that_paraphrases_a_description_is_refused_and_its_quotes_taken_away() -> None:
    env = counter_env()
    client = fake_client([lambda m: {"user_request": "Please " + _values_of(m, quote=True) + "."}] * 30)
    res = generate_tasks(env, client, n=4, settings=TaskSettings(max_attempts=1, tiers={2: 1.0}))
    task = next(t for t in res.value if t.reference_solution[-1].tool == "move_due_date")
    stated = [v for v in _stated_values(task)]
    leaked = "Set the due date of a loan; returns the loan as updated, for " + ", ".join(f"'{v}'" for v in stated)
    fixed = "Could you move the due date for " + " and ".join(f"\u201c{v}\u201d" for v in stated) + ", please?"
    client2 = fake_client([{"user_request": leaked}, {"user_request": fixed}])
    revised, err = revise_task(env, task, "the tester could not tell which loan", client2,
                               settings=TaskSettings(max_attempts=2))
    assert err is None and revised is not None
    feedback = client2.requests[1][-1]["content"]
    assert "description of tool move_due_date" in feedback  # the paraphrase was refused
    assert not re.search("[\u201c\u201d']", revised.instruction), revised.instruction  # quotes taken away
    for v in stated:
        assert str(v) in revised.instruction


# ---------------------------------------------------------------- 2. quotes around stated values


def _values_of(messages, quote: bool) -> str:
    must = re.search(r"exactly as written: (.*)", messages[1]["content"]).group(1)
    values = [v.strip() for v in must.split(";") if v.strip()]
    return "about " + " and ".join(f"'{v}'" if quote else v for v in values)


def _stated_values(task):
    out = []
    for call, src in zip(task.reference_solution, task.metadata["sources"], strict=True):
        for arg, how in src.items():
            if how == "stated" and call.arguments[arg] not in out:
                out.append(call.arguments[arg])
    return out


def test_quotes_around_stated_values_are_taken_away_and_the_model_is_shown_none() -> None:
    env = lending_env()
    client = fake_client([lambda m: {"user_request": "Please help me " + _values_of(m, quote=True) + "."}] * 30)
    res = generate_tasks(env, client, n=4, settings=TaskSettings(max_attempts=1))
    assert len(res.value) == 4, res.rejections
    for t in res.value:
        for v in _stated_values(t):
            if isinstance(v, str):
                assert v in t.instruction
                assert f"'{v}'" not in t.instruction, t.instruction  # before: "about 'Zoe Johnson' and ..."
    for messages in client.requests:
        shown = messages[1]["content"]
        assert not re.search(r"'(?:Zoe Johnson|Pamela Johnson|Omar Haddad|The Hobbit|Emma|Dune|Beloved)'", shown), shown


def test_the_lint_refuses_a_quoted_value_of_any_script_but_not_a_list() -> None:
    env = lending_env()
    chains, _ = _chains(env)
    chain = next(c for c in chains if any(v == "Zoe Johnson" for v in c.must_state))
    others = ", ".join(str(v) for v in chain.must_state if v != "Zoe Johnson")
    for q in ("'{}'", "\u201c{}\u201d", "\u00ab{}\u00bb", "\u300c{}\u300d"):
        text = f"Please see to this for {q.format('Zoe Johnson')}: {others}."
        assert quoted_value(text, chain.must_state) == "Zoe Johnson"
        why = lint_request(env, chain, text, plain=True)
        assert why is not None and "in quotes" in why, text
        assert unquoted(text, chain.must_state) == f"Please see to this for Zoe Johnson: {others}."
    assert quoted_value("Zoe Johnson's loan", ["Zoe Johnson"]) is None  # a possessive is no quote
    assert quoted_value("the patient 'aspirin, ibuprofen'", ["aspirin, ibuprofen"]) is None  # a list keeps them


def test_a_templates_slots_lose_their_quotes_when_kept_and_when_filled() -> None:
    assert unquote_slots("What is the dosage of '{medication_name}'?") == "What is the dosage of {medication_name}?"
    assert unquote_slots("\u00ab{a}\u00bb et {b}'s") == "{a} et {b}'s"
    env = lending_env()
    chains, ids = _chains(env)
    chain = next(c for c in chains if c.shape == "lookup" and slotted(c, skip=ids) is not None)
    base = slotted(chain, skip=ids)
    quoted = re.sub(r"(\{\w+\})", r"'\1'", base.text)  # as a templates.json written before holds it
    text = fill(Template(base.key, quoted, base.slots, base.states), chain)
    assert text is not None and "'" not in text
    assert lint_request(env, chain, text, plain=True) is None


# ---------------------------------------------------------------- 3. naming the row as a person does


def desk_env():
    """The lending desk with tools that register a member and lend a book: a new member, then their loan."""
    env = counter_env()
    add_member = Tool(name="add_member", description="Register a new member.", kind="write",
                      params=[Param(name="name", type="string", max_length=80),
                              Param(name="email", type="string", max_length=120)],
                      steps=[Step(kind="write", sql="INSERT INTO members (name, email) VALUES (:name, :email)")],
                      returns=Returns(sql="SELECT member_id, name, email FROM members WHERE member_id = :last_id",
                                      mode="one"))
    lend = Tool(name="lend_book", description="Lend a book to a member.", kind="write",
                params=[Param(name="book_id", type="integer", minimum=1), Param(name="member_id", type="integer", minimum=1),
                        Param(name="loan_date", type="string", max_length=10),
                        Param(name="due_date", type="string", max_length=10)],
                steps=[Step(kind="write", sql="INSERT INTO loans (book_id, member_id, loan_date, due_date) "
                                              "VALUES (:book_id, :member_id, :loan_date, :due_date)")],
                returns=Returns(sql="SELECT loan_id FROM loans WHERE loan_id = :last_id", mode="one"))
    # the members' names come from a list the rows stage would draw from: a new member gets one no row has
    plan = RowPlan(seed=1, examples=3, generators=[ColumnGenerator(column="name", kind="text_pool", pool=[
        "Zoe Johnson", "Pamela Johnson", "Omar Haddad", "Rosa Diaz", "Ken Ito"])])
    seed = [s.model_copy(update={"plan": plan}) if s.table == "members" else s for s in env.seed]
    return env.model_copy(update={"tools": [*env.tools, add_member, lend], "seed": seed})


def test_a_new_rows_parent_is_named_by_its_key_not_this_member() -> None:
    env = desk_env()
    chains, ids = _chains(env, 80)
    pcs = [c for c in chains if c.shape == "parent_child" and c.calls[0].tool == "add_member"]
    assert pcs, "the planner registers a member, then lends them a book"
    for c in pcs:
        d = derive_verifier(env, c.calls, answer=c.answer)
        text = request_from_plan(c, d.changes, skip=ids, states=state_columns(env))
        name = c.calls[0].arguments["name"]
        assert text is not None and "this member" not in text, text  # before: "Then, for this member, add ..."
        assert f"for the member {name}" in text, text
        assert lint_request(env, c, text, plain=True) is None


LENDING = Fixed(frozenset({("loans", "status")}), frozenset({("loans", "status")}))


@pytest.mark.parametrize(("goal", "text"), [
    (Goal("decide_update", "loans", (("members.name", "Zoe Johnson"),), owner="members", asked="loan_date",
          values=(("status", "returned"),), items="loans", which="latest"),
     "Please mark the latest loan of the member Zoe Johnson as returned."),
    (Goal("decide_update", "loans", (("books.title", "Emma"),), owner="books", asked="loan_date",
          values=(("due_date", "2026-02-01"),), items="loans", which="earliest"),
     "For the earliest loan of the book Emma, please change the due date to February 1, 2026."),
    (Goal("decide_delete", "loans", (("books.title", "Emma"),), owner="books", asked="loan_date", items="loans",
          which="latest"),
     "Please remove the latest loan of the book Emma."),
    # a date that is not the row's own keeps the plain form: "the latest loan" would be another loan
    (Goal("decide_update", "loans", (("members.name", "Zoe Johnson"),), owner="members", asked="due_date",
          values=(("status", "returned"),), items="loans", which="latest"),
     "Of the loans of the member Zoe Johnson, please mark the one with the latest due date as returned."),
])
def test_a_row_chosen_by_its_own_date_is_the_latest_of_them(goal: Goal, text: str) -> None:
    chain = Chain("decide_write", [], [], must_state=[], goals=[goal])
    assert request_from_plan(chain, states=LENDING) == text


# ---------------------------------------------------------------- 4. counts in a person's words


def test_a_fixed_list_a_tool_sets_among_other_columns_is_no_state() -> None:
    ddl = ("CREATE TABLE medications (medication_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, dosage REAL, "
           "frequency TEXT NOT NULL CHECK (frequency IN ('daily', 'weekly')), "
           "status TEXT NOT NULL CHECK (status IN ('stocked', 'withdrawn'))) STRICT")
    mid = Param(name="medication_id", type="integer", minimum=1)
    tools = [
        Tool(name="update_medication", description="Update a medication.", kind="write",
             params=[mid, Param(name="dosage", type="number"), Param(name="frequency", type="string", max_length=10)],
             steps=[Step(kind="write", sql="UPDATE medications SET dosage = :dosage, frequency = :frequency "
                                           "WHERE medication_id = :medication_id")]),
        Tool(name="withdraw", description="Set a medication's status.", kind="write",
             params=[mid, Param(name="status", type="string", max_length=10)],
             steps=[Step(kind="write", sql="UPDATE medications SET status = :status WHERE medication_id = :medication_id")]),
    ]
    env = lending_env().model_copy(update={"tables": [Table(name="medications", ddl=ddl)], "tools": tools, "seed": []})
    fixed = state_columns(env)
    assert ("medications", "frequency") in fixed.lists and ("medications", "frequency") not in fixed.states
    assert ("medications", "status") in fixed.states  # a tool moves a medication to it by itself
    count = Chain("aggregate", [], [], must_state=["daily"],
                  goals=[Goal("count", "medications", asked="*", items="medications",
                              where=(("medications.frequency", "daily"),))])
    # before: "How many medications are daily?", then "How many medications have the frequency daily?" (column-speak,
    # issue 40's audit of 2026-11-30): the value before the thing, as a new row's
    assert request_from_plan(count, states=fixed) == "How many daily medications are there?"
    stocked = Chain("aggregate", [], [], must_state=["stocked"],
                    goals=[Goal("count", "medications", asked="*", items="medications",
                                where=(("medications.status", "stocked"),))])
    assert request_from_plan(stocked, states=fixed) == "How many stocked medications are there?"


PHARMACY = Fixed(frozenset({("prescriptions", "status"), ("orders", "status"), ("medications", "frequency"),
                            ("books", "genre"), ("books", "status")}), frozenset({("orders", "status")}),
                 frozenset({("medications", "name")}))


@pytest.mark.parametrize(("goal", "text"), [
    # issue 40's audit of the example pharmacy: "... with quantity 12, status open, start date ..." (form dictation)
    (Goal("create", "prescriptions", values=(("quantity", 12), ("status", "open"), ("start_date", "2026-01-15")),
          refs=(("patient_id", "patients", (("patients.name", "Craig Reynolds"),)),)),
     "Please add a new open prescription for the patient Craig Reynolds, with quantity 12 and start date "
     "January 15, 2026."),
    # a state a tool moves the row to, as before
    (Goal("create", "orders", values=(("quantity", 3), ("status", "open")),
          refs=(("patient_id", "patients", (("patients.name", "Craig Reynolds"),)),)),
     "Please add a new open order for the patient Craig Reynolds, with quantity 3."),
    # a new row said by its name keeps that form; two listed values are said as before
    (Goal("create", "medications", values=(("name", "Aspirin"), ("frequency", "daily"))),
     "Please add Aspirin as a new medication with frequency daily."),
    (Goal("create", "books", values=(("title", "Emma"), ("genre", "Romance"), ("status", "open"))),
     "Please add a new book with title Emma, genre Romance and status open."),
])
def test_a_new_rows_one_listed_value_is_said_before_it(goal: Goal, text: str) -> None:
    chain = Chain("create", [], [], must_state=[], goals=[goal])
    assert request_from_plan(chain, states=PHARMACY) == text
