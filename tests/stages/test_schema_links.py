"""Schema stage, the schema's shape: islands (a table linked to no other) and undated events (a table between two or
more others with no column that can hold a date) are fed back to the model; what it does not mend is recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.dbmodel.ddl import scratch_db
from pipeline.ir import Intent, Scenario
from pipeline.llm import fake_client
from pipeline.stages.schema.links import date_columns, islands, undated_events
from pipeline.stages.schema.tables import generate_schema
from tests.stages.library_replies import SCHEMA, small_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
INTENTS = (Intent(goal="Enroll a participant", kind="write"), Intent(goal="List visits", kind="read"))

# The clinical-trials schema of the reader's audit (/work/out/u5, 2026-11-29), as the 1.5B model wrote it.
PARTICIPANTS = ("CREATE TABLE participants (participant_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL UNIQUE, "
                "age INTEGER CHECK (age >= 0), email TEXT NOT NULL UNIQUE) STRICT")
CRITERIA = ("CREATE TABLE eligibility_criteria (criteria_id INTEGER PRIMARY KEY, criteria_name TEXT NOT NULL UNIQUE, "
            "description TEXT NOT NULL) STRICT")
VISITS = ("CREATE TABLE visit_schedules (schedule_id INTEGER PRIMARY KEY, participant_id INTEGER NOT NULL REFERENCES "
          "participants(participant_id), visit_date TEXT NOT NULL, visit_type TEXT NOT NULL CHECK (visit_type IN "
          "('pre', 'post')), notes TEXT) STRICT")
PROTOCOLS = ("CREATE TABLE study_protocols (protocol_id INTEGER PRIMARY KEY, protocol_name TEXT NOT NULL UNIQUE, "
             "description TEXT NOT NULL) STRICT")
TRIALS = {"participants": PARTICIPANTS, "eligibility_criteria": CRITERIA, "visit_schedules": VISITS,
          "study_protocols": PROTOCOLS}
TRIALS_REPLY = {"tables": [{"name": n, "ddl": d, "natural_key": [k], "personal": []} for (n, d), k in zip(
    TRIALS.items(), ["email", "criteria_name", "visit_date", "protocol_name"], strict=True)]}
CRITERIA_LINKED = CRITERIA.replace("description TEXT NOT NULL)", "description TEXT NOT NULL, protocol_id INTEGER "
                                   "NOT NULL REFERENCES study_protocols(protocol_id))")
PARTICIPANTS_LINKED = PARTICIPANTS.replace("email TEXT NOT NULL UNIQUE)", "email TEXT NOT NULL UNIQUE, protocol_id "
                                           "INTEGER REFERENCES study_protocols(protocol_id))")
TRIAL = Scenario(name="Clinical trial management", description="Coordinators enrol participants in clinical trials.")

# The project-billing schema of the audit (/work/out/u4): hours with no day they were worked.
CLIENTS = "CREATE TABLE clients (client_id INTEGER PRIMARY KEY, client_name TEXT NOT NULL UNIQUE) STRICT"
PROJECTS = ("CREATE TABLE projects (project_id INTEGER PRIMARY KEY, project_name TEXT NOT NULL UNIQUE, client_id "
            "INTEGER NOT NULL REFERENCES clients(client_id), start_date TEXT NOT NULL, end_date TEXT NOT NULL "
            "CHECK (end_date >= start_date)) STRICT")
CONSULTANTS = ("CREATE TABLE consultants (consultant_id INTEGER PRIMARY KEY, consultant_name TEXT NOT NULL UNIQUE) "
               "STRICT")
BILLING = ("CREATE TABLE billing_records (billing_record_id INTEGER PRIMARY KEY, project_id INTEGER NOT NULL "
           "REFERENCES projects(project_id), consultant_id INTEGER NOT NULL REFERENCES consultants(consultant_id), "
           "hours_worked REAL CHECK (hours_worked >= 0)) STRICT")
BILLING_DATED = BILLING.replace("hours_worked REAL", "work_date TEXT NOT NULL, hours_worked REAL")
BILLS = {"clients": CLIENTS, "projects": PROJECTS, "consultants": CONSULTANTS, "billing_records": BILLING}
BILLS_REPLY = {"tables": [{"name": n, "ddl": d, "natural_key": [k], "personal": []} for (n, d), k in zip(
    BILLS.items(), ["client_name", "project_name", "consultant_name", "hours_worked"], strict=True)]}
BILLING_SCENARIO = Scenario(name="Project billing", description="Consultants log hours against projects.")


def ddl_of(res, name: str) -> str:
    return next(t.ddl for t in res.value if t.name == name)


def test_islands_and_undated_events_are_found_by_structure() -> None:
    assert islands(TRIALS) == ["eligibility_criteria", "study_protocols"]
    assert undated_events(TRIALS) == []  # visits reference one table: not a fact between records
    assert islands(BILLS) == [] and undated_events(BILLS) == ["billing_records"]
    assert undated_events({**BILLS, "billing_records": BILLING_DATED}) == []
    assert date_columns({**BILLS, "billing_records": BILLING_DATED}, "billing_records") == ["work_date"]
    # one table is no island; a table referencing only itself is one; two linked groups are left alone
    assert islands({"clients": CLIENTS}) == []
    staff = ("CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, name TEXT NOT NULL, manager_id INTEGER REFERENCES "
             "staff(staff_id)) STRICT")
    assert islands({"clients": CLIENTS, "projects": PROJECTS, "staff": staff}) == ["staff"]
    shifts = ("CREATE TABLE shifts (shift_id INTEGER PRIMARY KEY, staff_id INTEGER NOT NULL REFERENCES "
              "staff(staff_id), day TEXT NOT NULL) STRICT")
    assert islands({"clients": CLIENTS, "projects": PROJECTS, "staff": staff, "shifts": shifts}) == []
    # a CHECK-listed TEXT column holds its listed values, not a date; listed ISO dates are dates
    listed = BILLING.replace("hours_worked REAL", "kind TEXT CHECK (kind IN ('onsite', 'remote')), hours_worked REAL")
    assert undated_events({**BILLS, "billing_records": listed}) == ["billing_records"]
    days = listed.replace("('onsite', 'remote')", "('2026-01-05', '2026-01-12')")
    assert undated_events({**BILLS, "billing_records": days}) == []


@pytest.mark.parametrize("fixture", ["book_lending.json", "book_lending_guard.json", "pharmacy.json"])
def test_the_examples_schemas_have_no_island_and_no_undated_event(fixture: str) -> None:
    """The committed example's library and pharmacy (their copies among the fixtures): a domain expert accepts
    their shape, and the check must not re-ask it (a regeneration of the example would follow)."""
    tables = {t["name"]: t["ddl"] for t in json.loads((FIXTURES / fixture).read_text())["tables"]}
    assert len(tables) >= 4
    assert islands(tables) == [] and undated_events(tables) == []


def test_a_clean_schema_gets_no_extra_call() -> None:
    client = fake_client([SCHEMA])
    res = generate_schema(TRIAL, INTENTS, client, small_settings())
    assert res.ok and res.rejections == () and len(client.requests) == 1


def test_an_island_is_fed_back_and_one_link_mends_two_islands() -> None:
    client = fake_client([TRIALS_REPLY, {"ddl": CRITERIA_LINKED}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and res.rejections == () and res.attempts == 2 and len(client.requests) == 2
    assert ddl_of(res, "eligibility_criteria") == CRITERIA_LINKED
    names = [t.name for t in res.value]
    assert names.index("study_protocols") < names.index("eligibility_criteria")  # parents first
    ask = client.requests[1]
    assert ask[:2] == [client.requests[0][0], {"role": "assistant", "content": json.dumps(TRIALS_REPLY)}]
    said = ask[-1]["content"]
    assert ("table eligibility_criteria is linked to no other table: say which row of which table each "
            "eligibility_criteria belongs to, with a foreign key, or drop it") in said
    assert PROTOCOLS in said and VISITS in said and '{"ddl": ""} to drop "eligibility_criteria"' in said


def test_an_island_may_be_linked_from_the_table_whose_rows_belong_to_it() -> None:
    """The protocols are the parents: the participants' table gets the foreign key, the island stays as written."""
    client = fake_client([TRIALS_REPLY, {"ddl": CRITERIA_LINKED.replace("protocol_id INTEGER NOT NULL REFERENCES "
                                                                         "study_protocols(protocol_id)", "x TEXT")},
                          {"ddl": CRITERIA_LINKED}, {"ddl": PARTICIPANTS_LINKED}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and res.rejections == () and len(client.requests) == 3
    # the first answer linked nothing: said again, with the same words
    assert "table eligibility_criteria is linked to no other table" in client.requests[2][-1]["content"]
    assert ddl_of(res, "eligibility_criteria") == CRITERIA_LINKED
    # study_protocols first: linked from participants, which keeps its own link from visits
    only_protocols = {"tables": [t for t in TRIALS_REPLY["tables"] if t["name"] != "eligibility_criteria"]}
    client = fake_client([only_protocols, {"ddl": PARTICIPANTS_LINKED}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and res.rejections == () and len(client.requests) == 2
    assert ddl_of(res, "participants") == PARTICIPANTS_LINKED and ddl_of(res, "study_protocols") == PROTOCOLS


def test_a_link_that_breaks_the_schema_or_leaves_another_island_is_fed_back() -> None:
    only_protocols = {"tables": [t for t in TRIALS_REPLY["tables"] if t["name"] != "eligibility_criteria"]}
    ghost = PARTICIPANTS.replace("email TEXT NOT NULL UNIQUE)", "email TEXT NOT NULL UNIQUE, protocol_id INTEGER "
                                 "REFERENCES protocols(protocol_id))")
    unlinks_visits = ("CREATE TABLE visit_schedules (schedule_id INTEGER PRIMARY KEY, protocol_id INTEGER NOT NULL "
                      "REFERENCES study_protocols(protocol_id), visit_date TEXT NOT NULL) STRICT")
    client = fake_client([only_protocols, {"ddl": ghost}, {"ddl": unlinks_visits}, {"ddl": PARTICIPANTS_LINKED}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5, max_attempts=4))
    assert res.ok and res.rejections == () and len(client.requests) == 4
    assert "references table protocols, which does not exist" in client.requests[2][-1]["content"]
    assert ("the change leaves table participants linked to no other table: keep its foreign keys"
            in client.requests[3][-1]["content"])
    assert ddl_of(res, "participants") == PARTICIPANTS_LINKED and ddl_of(res, "visit_schedules") == VISITS


def test_an_island_the_model_drops_goes_with_a_rejection_unless_too_few_tables_would_remain() -> None:
    client = fake_client([TRIALS_REPLY, {"ddl": ""}, {"ddl": ""}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and [t.name for t in res.value] == ["participants", "visit_schedules"]
    notes = {r.item: r for r in res.rejections}
    assert notes["eligibility_criteria"].reason == ("table eligibility_criteria dropped at the model's word: it was "
                                                    "linked to no other table")
    assert notes["eligibility_criteria"].evidence == {"ddl": CRITERIA}
    assert set(notes) == {"eligibility_criteria", "study_protocols"}
    # with three tables needed, the second may not go: asked again, and kept when the model insists
    client = fake_client([TRIALS_REPLY, {"ddl": ""}, {"ddl": ""}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_min=3, tables_max=5, max_attempts=2))
    assert res.ok and [t.name for t in res.value] == ["participants", "visit_schedules", "study_protocols"]
    assert "the schema needs at least 3 tables, so study_protocols cannot be dropped" in \
        res.rejections[-1].reason
    assert res.rejections[-1].reason.startswith("table study_protocols kept, linked to no other table: ")


def test_an_island_the_model_does_not_link_is_kept_with_a_rejection() -> None:
    client = fake_client([TRIALS_REPLY, {"ddl": CRITERIA}, {"ddl": PROTOCOLS}])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5, max_attempts=2))
    assert res.ok and len(res.value) == 4 and len(client.requests) == 3 and res.attempts == 3
    assert [(r.item, r.reason) for r in res.rejections] == [
        ("eligibility_criteria", "table eligibility_criteria kept, linked to no other table: table "
                                 "eligibility_criteria is linked to no other table: say which row of which table each "
                                 "eligibility_criteria belongs to, with a foreign key, or drop it"),
        ("study_protocols", "table study_protocols kept, linked to no other table: table study_protocols is linked to "
                            "no other table: say which row of which table each study_protocols belongs to, with a "
                            "foreign key, or drop it")]
    # no retries allowed: no call, the same notes
    client = fake_client([TRIALS_REPLY])
    res = generate_schema(TRIAL, INTENTS, client, small_settings(tables_max=5, max_attempts=1))
    assert res.ok and len(client.requests) == 1 and [r.item for r in res.rejections] == [
        "eligibility_criteria", "study_protocols"]


def test_an_undated_event_is_asked_for_its_date() -> None:
    client = fake_client([BILLS_REPLY, {"ddl": BILLING_DATED}])
    res = generate_schema(BILLING_SCENARIO, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and res.rejections == () and res.attempts == 2
    assert ddl_of(res, "billing_records") == BILLING_DATED
    said = client.requests[1][-1]["content"]
    assert "each billing_records records something that happens: give it the date it happens" in said
    assert BILLING in said and PROJECTS not in said
    scratch_db(res.value)  # valid together


def test_a_dated_answer_that_drops_a_reference_or_still_has_no_date_is_fed_back() -> None:
    no_consultant = BILLING_DATED.replace(" REFERENCES consultants(consultant_id)", "")
    client = fake_client([BILLS_REPLY, {"ddl": no_consultant}, {"ddl": BILLING_DATED}])
    res = generate_schema(BILLING_SCENARIO, INTENTS, client, small_settings(tables_max=5))
    assert res.ok and res.rejections == () and ddl_of(res, "billing_records") == BILLING_DATED
    assert "billing_records no longer references consultants: keep its references" in \
        client.requests[2][-1]["content"]
    client = fake_client([BILLS_REPLY, {"ddl": BILLING}, {"ddl": BILLING.replace("hours_worked", "hours")}])
    res = generate_schema(BILLING_SCENARIO, INTENTS, client, small_settings(tables_max=5, max_attempts=3))
    assert res.ok and ddl_of(res, "billing_records") == BILLING  # kept as it was
    assert [(r.item, r.reason) for r in res.rejections] == [
        ("billing_records", "table billing_records kept without a date: each billing_records records something "
                            "that happens: give it the date it happens")]
    assert res.rejections[0].evidence == {"ddl": BILLING}


def test_a_column_is_read_as_a_date_by_its_type_and_constraints_never_its_name() -> None:
    """Names are words of some language: a German schema is read as an English one. A free TEXT column can hold a
    date (the check cannot tell a note from a day without rows): the rows stage sees the values."""
    german = ("CREATE TABLE stunden (stunde_id INTEGER PRIMARY KEY, projekt_id INTEGER NOT NULL REFERENCES "
              "projects(project_id), berater_id INTEGER NOT NULL REFERENCES consultants(consultant_id), "
              "stunden REAL NOT NULL) STRICT")
    tables = {**BILLS, "stunden": german}
    assert undated_events(tables) == ["billing_records", "stunden"]
    tables["stunden"] = german.replace("stunden REAL", "arbeitstag TEXT NOT NULL, stunden REAL")
    assert undated_events(tables) == ["billing_records"]
    assert date_columns(tables, "stunden") == ["arbeitstag"]
    assert date_columns({**BILLS, "billing_records": BILLING.replace("REAL", "TEXT")},
                        "billing_records") == ["hours_worked"]
