"""No planned task lost to wording (``[stages.tasks] template_fallback``): how the lint reads written values, its
refusal of text about the request itself, and requests written by code when the LLM's wording keeps failing."""

from __future__ import annotations

import re
import shutil

import pytest

from pipeline import prompts
from pipeline.ir import ToolCall
from pipeline.llm import fake_client
from pipeline.prompts import render_section
from pipeline.runtime.replay import fresh
from pipeline.settings import TaskSettings, VerifySettings
from pipeline.stages.tasks.bank import generate_tasks, lint_request, revise_task
from pipeline.stages.tasks.code_wording import (
    Fixed,
    _Words,
    numbers,
    request_from_plan,
    speaks_about_itself,
    state_columns,
    stated,
)
from pipeline.stages.tasks.planner import Chain, Goal, plan_chains
from tests.fixtures.brewery import brewery_env
from tests.fixtures.library import library_env

BAD = {"user_request": "Please handle the batch brewed on January 14th for me, thanks a lot."}


def _must(messages) -> str:
    return re.search(r"exactly as written: (.*)", messages[1]["content"]).group(1)


def echo(messages) -> dict:
    return {"user_request": f"Please do this for me, about {_must(messages)}."}


@pytest.mark.parametrize(("text", "value"), [
    ("Which kegs came from the batch of January 14, 2026?", "2026-01-14"),
    ("Which kegs came from the batch of 14 January 2026?", "2026-01-14"),
    ("Which kegs came from the batch of Jan 14th, 2026?", "2026-01-14"),
    ("Which kegs came from the batch of the 14th of January, 2026?", "2026-01-14"),
    ("Which kegs came from the batch of 2026-01-14?", "2026-01-14"),
    ("It was borrowed on January 10, 2026 at 11:00.", "2026-01-10T11:00:00"),
    ("The batch holds 1,250 liters.", 1250),
    ("The batch holds 1250.00 liters.", 1250),
    ("The order total is $1,250.00.", 1250.0),
    ("Set the price to 12.50 please.", 12.5),
    ("The code on the label reads 1,250.", "1250"),
    ("The price tag says 12.50.", "12.5"),
])
def test_an_equivalent_written_form_states_the_value(text: str, value) -> None:
    assert stated(text, value)


@pytest.mark.parametrize(("text", "value"), [
    ("Which kegs came from the batch of January 14th?", "2026-01-14"),  # no year: not recoverable
    ("Which kegs came from the batch of January 15, 2026?", "2026-01-14"),
    ("It was borrowed on January 10, 2026.", "2026-01-10T11:00:00"),  # the time is left out
    ("It was borrowed on January 10, 2026 at 12:00.", "2026-01-10T11:00:00"),
    ("The batch holds 1,251 liters.", 1250),
    ("Room 7 please.", "007"),  # a text value that is not a plain number must be written as it is
    ("The price tag says 12.5.", "12.50"),
    ("Which kegs came from the batch of January 14, 2026?", 14),  # numbers inside a date are not numbers
])
def test_a_form_that_does_not_give_the_value_back_exactly_does_not_state_it(text: str, value) -> None:
    assert not stated(text, value)


def test_numbers_leave_out_dates() -> None:
    assert numbers("On 14 January 2026 we brewed 900 liters, on 2026-01-21 another 1,100.") == [900.0, 1100.0]


@pytest.mark.parametrize("text", [
    "How many loans does Alice Park have? Please note that the request must state '2026-01-08' exactly as written.",
    "¿Cuántos préstamos tiene Alice Park? (as written)",
    "Wie viele Ausleihen hat Alice Park? The message must include 'Alice Park'.",
    "Combien d'emprunts a Alice Park ? Le user_request doit nommer 'Alice Park'.",
])
def test_text_about_the_request_itself_is_refused_in_any_language(text: str) -> None:
    assert speaks_about_itself(text)
    env = library_env()
    with fresh(env) as run:
        chain = plan_chains(env, run, 12, {1: 0.3, 2: 0.4, 3: 0.3})[0]
    assert "speaks about the request itself" in lint_request(env, chain, text, plain=True)


def test_the_feedback_sent_to_the_model_cannot_be_copied_into_a_request() -> None:
    env = library_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 12, {2: 1.0}) if c.shape == "lookup")
    problem = lint_request(env, chain, "When is my book due?", plain=True)
    assert problem and "must state" not in problem and "as written" not in problem
    feedback = render_section("wording", "feedback", error=problem)
    copied = "When is it due for " + ", ".join(map(str, chain.must_state)) + "? " + feedback
    assert "speaks about the request itself" in lint_request(env, chain, copied, plain=True)


def test_a_date_in_words_passes_the_plain_lint_only_with_its_year() -> None:
    env = brewery_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 30, {1: 0.3, 2: 0.4, 3: 0.3})
                     if c.shape == "create" and any(re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(v)) for v in c.must_state))
    day = next(str(v) for v in chain.must_state if re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(v)))
    said = _Words("en").value(day)  # as people write it: "January 7, 2026"
    assert re.fullmatch(r"[A-Z][a-z]+ \d{1,2}, \d{4}", said), said
    words = [said if str(v) == day else str(v) for v in chain.must_state]  # a person writes no quotes
    assert lint_request(env, chain, "Please record this new batch: " + ", ".join(words) + ".", plain=True) is None
    no_year = [w.replace(said, said.rsplit(",", 1)[0] + "th") for w in words]
    assert f"leaves out '{day}'" in lint_request(env, chain, "Please record: " + ", ".join(no_year) + ".",
                                                 plain=True)


@pytest.mark.parametrize("make_env", [library_env, brewery_env])
def test_a_wording_that_keeps_failing_ends_as_a_template_that_passes_the_lint(make_env) -> None:
    env = make_env()
    settings = TaskSettings(max_attempts=2, template_fallback=True)
    res = generate_tasks(env, fake_client([BAD] * 200), n=8, settings=settings)
    assert len(res.value) == 8, res.rejections
    with fresh(env) as run:
        # the plan generate_tasks made (8 tasks * overplan; spread over the environment by default)
        chains = plan_chains(env, run, 12, settings.tiers, spread=settings.spread_bank)
    for t in res.value:
        assert t.metadata["worded_by"] == "template"
        assert t.provenance["llm_replies"] >= 1
        assert not any(tool.name in t.instruction for tool in env.tools)
        assert not any(table.name in t.instruction for table in env.tables if "_" in table.name)
        assert not speaks_about_itself(t.instruction)
        chain = chains[int(re.match(r"task (\d+) ", t.provenance["plan"]).group(1)) - 1]
        assert chain.calls == list(t.reference_solution)
        # the same lint as the LLM's words: every value stated, no id, not the answer
        assert lint_request(env, chain, t.instruction, plain=True) is None, t.instruction
    # without the switch the same replies keep no task: every plan is lost to wording
    off = TaskSettings(max_attempts=2, template_fallback=False)
    assert generate_tasks(env, fake_client([BAD] * 200), n=8, settings=off).value == []


def test_a_wording_the_lint_accepts_stays_the_llms() -> None:
    env = library_env()
    res = generate_tasks(env, fake_client([echo] * 40), n=4,
                         settings=TaskSettings(max_attempts=1, template_fallback=True))
    assert len(res.value) == 4 and {t.metadata["worded_by"] for t in res.value} == {"llm"}
    assert all(t.instruction.startswith("Please do this for me") for t in res.value)
    # rewording a task by the LLM makes it the LLM's
    template = generate_tasks(env, fake_client([BAD] * 40), n=1,
                              settings=TaskSettings(max_attempts=1, template_fallback=True)).value[0]
    revised, err = revise_task(env, template, "the tester misread it", fake_client(
        [{"user_request": template.instruction + " Thank you!"}]), settings=TaskSettings(template_fallback=True))
    assert revised is not None, err
    assert revised.metadata["worded_by"] == "llm"


def test_without_the_switch_tasks_carry_no_worded_by_and_settings_dump_as_before() -> None:
    env = library_env()
    off = TaskSettings(max_attempts=1, template_fallback=False, spread_bank=False)
    res = generate_tasks(env, fake_client([echo] * 10), n=2, settings=off)
    assert len(res.value) == 2 and all("worded_by" not in t.metadata for t in res.value)
    # off (as every report made before them), a dump leaves them out and reads as before; on (the default), it says so
    dumped = VerifySettings().model_dump(mode="json")["tasks"]
    assert dumped["template_fallback"] is True and dumped["spread_bank"] is True
    assert "template_language" not in dumped
    assert TaskSettings().template_fallback and TaskSettings().spread_bank
    assert not {"template_fallback", "template_language", "spread_bank"} & set(off.model_dump(mode="json"))


@pytest.fixture
def french_prompts(tmp_path, monkeypatch):
    """The prompts with a French template for lookups (``lookup_fr``; the other keys fall back to English)."""
    for p in prompts.PROMPTS_DIR.glob("*.md"):
        shutil.copy(p, tmp_path / p.name)
    with open(tmp_path / "wording.md", "a", encoding="utf-8") as f:
        f.write("\n## lookup_fr\nQuel est le champ $asked de $what ?\n\n## what_fr\nla fiche $thing avec $named\n")
    monkeypatch.setattr(prompts, "PROMPTS_DIR", tmp_path)
    prompts.load.cache_clear()
    yield
    prompts.load.cache_clear()


def test_a_scenario_in_another_language_overrides_the_templates(french_prompts) -> None:
    env = library_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 12, {1: 1.0}) if c.shape == "lookup" and c.steps == 1)
    text = request_from_plan(chain, language="fr")
    assert text is not None and text.startswith("Quel est le champ ") and "la fiche " in text
    assert lint_request(env, chain, text, plain=True) is None
    assert request_from_plan(chain).startswith("What is the ")


def test_the_plain_lint_refuses_rows_in_the_singular_too() -> None:
    env = brewery_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 12, {1: 1.0}) if c.shape == "lookup")
    values = ", ".join(map(str, chain.must_state))
    assert "speaks of batches rows" in lint_request(env, chain, f"Which batch row is it, for {values}?", plain=True)
    # the database's own words ("row", "table", "record"...: prompts/tasks.md database_words) either way
    assert "speaks of 'row', the database's word" in lint_request(env, chain, f"Which batch row is it, for {values}?")
    assert "speaks of 'table'" in lint_request(env, chain, f"Which beer in the beers table is {values}?")
    assert lint_request(env, chain, f"When was batch {values} brewed?") is None


def _asking(goal: Goal, answer: str | None = None) -> Chain:
    return Chain(goal.kind, [ToolCall(tool="t", arguments={})], [], [v for _, v in goal.named + goal.where],
                 answer={"type": answer, "value": 1} if answer else None, goals=[goal])


HARBOR = (("beers.name", "Harbor Stout"),)
HS0107 = (("batches.batch_code", "HS-0107"),)


@pytest.mark.parametrize(("goal", "answer", "text"), [
    (Goal("lookup", "renewals", (("books.title", "The Hobbit"), ("members.name", "Zoe Johnson")), asked="renewal_date"),
     "date", "What is the renewal date of the renewal of the book The Hobbit for the member Zoe Johnson?"),
    (Goal("count", "loans", (("books.title", "The Hobbit"), ("members.name", "Zoe Johnson")), asked="*",
          items="overdue_fines"), "number",
     "How many overdue fines does the loan of the book The Hobbit for the member Zoe Johnson have?"),
    (Goal("count", "members", (("members.name", "Zoe Johnson"),), asked="*", items="loans"), "number",
     "How many loans does the member Zoe Johnson have?"),
    (Goal("lookup", "fines", (("members.name", "Zoe Johnson"), ("fines.due_date", "2026-01-14")), asked="amount"),
     "number", "What is the amount of the fine of the member Zoe Johnson, with due date January 14, 2026?"),
    (Goal("create", "loans", refs=(("book_id", "books", (("books.title", "Emma"),)),
                                   ("member_id", "members", (("members.name", "Bob Stone"),))),
          values=(("due_date", "2026-02-01"),)), None,
     "Please add a new loan for the book Emma and the member Bob Stone, with due date February 1, 2026."),
])
def test_a_row_is_named_by_its_name_or_its_parents_never_by_ids(goal: Goal, answer: str | None, text: str) -> None:
    """A loan is the loan of a book and a member; a member is named by their name; no id column and no table's
    name as the schema writes it (issue 40: "the renewal with book title ... and member name ...")."""
    assert request_from_plan(_asking(goal, answer)) == text


@pytest.mark.parametrize(("goal", "answer", "text"), [
    (Goal("lookup", "patients", (("patients.full_name", "Ana Lima"),), asked="allergies"), "text",
     "What are the allergies of the patient Ana Lima?"),
    (Goal("lookup", "batches", HS0107, asked="volume_liters"), "number",  # one number, not a plural
     "What is the volume liters of the batch HS-0107?"),
    (Goal("lookup", "batches", HS0107, asked="brewed_on"), "date", "When was the batch HS-0107 brewed?"),
    (Goal("decide_update", "batches", HARBOR, owner="beers", asked="brewed_on", values=(("status", "packaged"),),
          items="batches", which="latest"), None,
     "Of the batches of the beer Harbor Stout, please change the status to packaged for the one brewed last."),
    (Goal("decide_delete", "loans", (("members.email", "dan@example.org"),), owner="members", asked="due_date",
          items="loans", which="earliest"), None,
     "Of the loans of the member with email dan@example.org, please remove the one with the earliest due date."),
    (Goal("count", "batches", HS0107, asked="*", items="kegs", where=(("kegs.status", "full"),)), "number",
     "How many kegs with status full does the batch HS-0107 have?"),
    (Goal("count", "kegs", asked="*", items="kegs", where=(("kegs.size_liters", 30),)), "number",
     "How many kegs with size liters 30 are there?"),
])
def test_templates_read_as_a_plain_request(goal: Goal, answer: str | None, text: str) -> None:
    assert request_from_plan(_asking(goal, answer)) == text


def test_english_forms_stay_out_of_another_language(french_prompts) -> None:
    goal = Goal("lookup", "patients", (("patients.full_name", "Ana Lima"),), asked="allergies")
    assert request_from_plan(_asking(goal, "text"), language="fr") == \
        "Quel est le champ allergies de la fiche patients avec full name Ana Lima ?"


# ---------------------------------------------------------------- values of a fixed list, as a person says them

LENDING = Fixed(frozenset({("loans", "status"), ("books", "genre")}), frozenset({("loans", "status")}))
"""loans.status is a state a tool moves a loan to; books.genre is a fixed list no tool changes."""
HOBBIT_ZOE = (("books.title", "The Hobbit"), ("members.name", "Zoe Johnson"))


def test_the_fixed_lists_and_states_come_from_the_schema_and_the_update_tools() -> None:
    fixed = state_columns(brewery_env())
    assert ("batches", "status") in fixed.states  # CHECK-listed and set by set_batch_status
    assert ("beers", "style") in fixed.lists and ("beers", "style") not in fixed.states  # no tool changes a style
    assert state_columns(brewery_env()) == fixed


@pytest.mark.parametrize(("goal", "text"), [
    (Goal("count", "loans", asked="*", items="loans", where=(("loans.status", "in_progress"),)),
     "How many in progress loans are there?"),
    (Goal("count", "members", (("members.name", "Zoe Johnson"),), asked="*", items="loans",
          where=(("loans.status", "returned"),)),
     "How many returned loans does the member Zoe Johnson have?"),
    (Goal("count", "books", asked="*", items="books", where=(("books.genre", "science_fiction"),)),
     "How many science fiction books are there?"),  # a fixed list no tool moves a row through: not "have the genre"
    (Goal("update", "loans", HOBBIT_ZOE, values=(("status", "returned"),)),
     "Please mark the loan of the book The Hobbit for the member Zoe Johnson as returned."),
    (Goal("update", "loans", HOBBIT_ZOE, values=(("status", "returned"), ("renewal_count", 4))),
     "Please mark the loan of the book The Hobbit for the member Zoe Johnson as returned, and change the renewal "
     "count to 4."),
    (Goal("create", "loans", refs=(("book_id", "books", (("books.title", "Emma"),)),),
          values=(("status", "pending"), ("due_date", "2026-02-01"))),
     "Please add a new pending loan for the book Emma, with due date February 1, 2026."),
    (Goal("decide_update", "loans", (("members.name", "Zoe Johnson"),), owner="members", asked="due_date",
          values=(("status", "returned"),), items="loans", which="latest"),
     "Of the loans of the member Zoe Johnson, please mark the one with the latest due date as returned."),
    (Goal("lookup", "projects", (("projects.name", "Project B"),), asked="start_date"),
     "What is the start date of Project B?"),  # not "the project Project B"
    (Goal("lookup", "patients", (("patients.medications", "aspirin, ibuprofen"),), asked="age"),
     "What is the age of the patient 'aspirin, ibuprofen'?"),  # a list keeps its quotes: it would run on
])
def test_a_value_of_a_fixed_list_reads_as_a_word(goal: Goal, text: str) -> None:
    """Issue 40: "How many loans have status 'pending'?", "please set status to 'returned'" are a form's words."""
    chain = _asking(goal)
    assert request_from_plan(chain, states=LENDING) == text


def test_a_value_written_as_words_is_stated_and_the_lint_takes_it() -> None:
    assert stated("How many loans are in progress?", "in_progress")
    assert stated("How many loans are in_progress?", "in_progress")
    assert not stated("How many loans are in progress?", "in_review")
    assert not stated("Write to ana lima@example.org", "ana_lima@example.org")  # an address is no list value


def test_a_parent_and_its_child_read_as_one_request() -> None:
    goals = [Goal("create", "members", values=(("name", "Ana Lima"),)),
             Goal("child", "loans", refs=(("book_id", "books", (("books.title", "Emma"),)),),
                  values=(("status", "pending"),))]
    chain = Chain("parent_child", [ToolCall(tool="t", arguments={})], [], ["Ana Lima", "Emma", "pending"], goals=goals)
    assert request_from_plan(chain, states=LENDING) == (
        "Please add a new member with name Ana Lima. Then, for this member, add a new pending loan for the book Emma.")


def test_the_lint_refuses_a_value_of_a_fixed_list_in_quotes_in_any_language() -> None:
    """"How many loans have status 'pending'?" is the database's form of the value; the same value as a word passes.
    Read from the schema's CHECK lists and quotation marks, so it holds in any language."""
    env = brewery_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 40, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
                     if c.shape == "update" and c.calls[-1].tool == "set_batch_status")
    status = dict(chain.goals[0].values)["status"]
    text = request_from_plan(chain, states=state_columns(env))
    assert text is not None and f"as {status}" in text and lint_request(env, chain, text, plain=True) is None
    code = next(v for v in chain.must_state if v != status)
    for said in (f"For batch {code}, please set status to '{status}'.", f"Pour le lot {code}, statut « {status} ».",
                 f"Bitte Charge {code} auf „{status}“ setzen."):
        assert "in quotes" in (lint_request(env, chain, said, plain=True) or ""), said
        assert "in quotes" in (lint_request(env, chain, said) or ""), said
    assert lint_request(env, chain, f"Could batch {code} move on to {status}, please?", plain=True) is None


def test_a_clause_of_a_tools_description_in_a_request_is_refused() -> None:
    # seen in the example's pharmacy (2026-11-28): "Set the status of an order; returns the order as changed, for
    # the order of ...", a run of 5 words of the tool's description, under the 8 words the lint refused
    from pipeline.stages.tasks.code_wording import copied_clause

    desc = "Set the status of one order; returns the order as changed."
    leaked = "Set the status of an order; returns the order as changed, for the order of the patient 'Jodi Boone'."
    assert copied_clause(leaked, desc) == "returns the order as changed"
    assert copied_clause("Please close Jodi Boone's order: it has been changed as the order returns.", desc) is None
    assert copied_clause("Please set the status of Jodi Boone's order to closed.", desc) is None
    # words and punctuation only: a clause of a description in another script is found the same way
    assert copied_clause("Bitte: gibt die Bestellung geändert zurück, für Jodi.",
                         "Setzt den Status; gibt die Bestellung geändert zurück.") == "gibt die bestellung geändert zurück"
    env = brewery_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 12, {1: 1.0}) if c.shape == "lookup")
    values = ", ".join(map(str, chain.must_state))
    assert lint_request(env, chain, f"When was batch {values} brewed?") is None
    tool = env.tools[0].model_copy(update={"description": "Look up one batch; gives the batch as it is stored now."})
    env = env.model_copy(update={"tools": [tool, *env.tools[1:]]})
    problem = lint_request(env, chain, f"When was batch {values} brewed? Gives the batch as it is stored now.")
    assert problem and f"copies the words 'gives the batch as it is stored now' of the description of tool {tool.name}" in problem
    assert lint_request(env, chain, f"When was batch {values} brewed?") is None
