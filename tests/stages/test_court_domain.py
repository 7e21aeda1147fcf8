"""Three generator defects first seen on a court-scheduling domain no prompt or test used, checked on a small
hand-written court (real SQLite, a scripted LLM): a rule's message or a request that copies a run of a tool's
description is refused with the copied words (``pipeline.stages.tasks.code_wording.copied_words``); no rule is proposed on a
key or reference column, even one the schema leaves undeclared (``cases.court_id``, its courts table gone); no
planned sum adds up ids, and no planned decision chooses a row by one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline.dbmodel.columns import Column
from pipeline.dbmodel.keynames import id_named
from pipeline.ir import Environment, Param, Returns, Scenario, SeedRows, Step, Table, Tool
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.runtime.replay import fresh
from pipeline.settings import BuildSettings
from pipeline.stages.feedback import COPIED_WORDS, copied_words
from pipeline.stages.policy.candidates import check, key_column, propose
from pipeline.stages.policy.house_rules import check_pick, make_policy, reply_model
from pipeline.stages.tasks.bank import lint_request
from pipeline.stages.tasks.planner import Chain, make_planner, plan_chains
from pipeline.stages.tasks.planner.aggregates import aggregates, summable
from pipeline.stages.tasks.planner.shapes import decide_writes
from tests.fixtures.permits import permit_env
from tests.stages.test_policy import prose_saying

JUDGES_DDL = """CREATE TABLE judges (
  judge_id INTEGER PRIMARY KEY,
  full_name TEXT NOT NULL UNIQUE,
  chamber TEXT NOT NULL
) STRICT"""

# court_id has no REFERENCES: the model's courts table failed and its link was dropped with it
CASES_DDL = """CREATE TABLE cases (
  case_id INTEGER PRIMARY KEY,
  docket_no TEXT NOT NULL UNIQUE,
  court_id INTEGER NOT NULL,
  judge_id INTEGER NOT NULL REFERENCES judges(judge_id),
  status TEXT NOT NULL CHECK (status IN ('filed', 'scheduled', 'closed')),
  hearing_minutes INTEGER NOT NULL,
  filed_on TEXT NOT NULL
) STRICT"""

JUDGES = [{"judge_id": 1, "full_name": "Ines Okafor", "chamber": "North"},
          {"judge_id": 2, "full_name": "Pavel Richter", "chamber": "South"},
          {"judge_id": 3, "full_name": "Leah Marsh", "chamber": "East"}]
CASES = [
    {"case_id": i, "docket_no": f"CV-2025-{100 + i}", "court_id": court, "judge_id": judge, "status": status,
     "hearing_minutes": minutes, "filed_on": filed}
    for i, (court, judge, status, minutes, filed) in enumerate([
        (3, 1, "filed", 30, "2025-10-02"), (12, 1, "scheduled", 90, "2025-11-14"), (7, 1, "closed", 45, "2025-09-20"),
        (1, 2, "scheduled", 120, "2025-12-01"), (9, 2, "filed", 60, "2026-01-05"), (11, 2, "closed", 15, "2025-08-30"),
        (5, 3, "filed", 75, "2025-12-19"), (2, 3, "scheduled", 40, "2026-01-11"), (10, 3, "filed", 150, "2025-10-27"),
    ], 1)]

CASE_ID = Param(name="case_id", type="integer", description="Case id (see find_case)", minimum=1)
CASE_EXISTS = Step(kind="guard", sql="SELECT 1 FROM cases WHERE case_id = :case_id", must="exist",
                   error="case {case_id} not found")
SET_STATUS = "Set the status of a case; returns the case as changed."
CHANGED = Returns(sql="SELECT case_id, docket_no, court_id, status, hearing_minutes FROM cases WHERE case_id = "
                      ":case_id", mode="one")

TOOLS = [
    Tool(name="find_judge", description="Look up a judge by full name.", kind="read",
         params=[Param(name="full_name", type="string", description="The judge's full name", max_length=60)],
         returns=Returns(sql="SELECT judge_id, full_name, chamber FROM judges WHERE full_name = :full_name",
                         mode="one")),
    Tool(name="find_case", description="Look up a case by its docket number.", kind="read",
         params=[Param(name="docket_no", type="string", description="The docket number, e.g. CV-2025-101",
                       max_length=20)],
         returns=Returns(sql="SELECT case_id, docket_no, court_id, judge_id, status, hearing_minutes, filed_on "
                             "FROM cases WHERE docket_no = :docket_no", mode="one")),
    Tool(name="list_judge_cases", description="List the cases a judge hears.", kind="read",
         params=[Param(name="judge_id", type="integer", description="Judge id (see find_judge)", minimum=1)],
         returns=Returns(sql="SELECT case_id, docket_no, court_id, judge_id, hearing_minutes, status FROM cases "
                             "WHERE judge_id = :judge_id ORDER BY case_id", mode="all")),
    Tool(name="set_case_status", description=SET_STATUS, kind="write",
         params=[CASE_ID, Param(name="status", type="string", enum=["filed", "scheduled", "closed"])],
         steps=[CASE_EXISTS, Step(kind="write", sql="UPDATE cases SET status = :status WHERE case_id = :case_id")],
         returns=CHANGED),
    Tool(name="assign_court", description="Move a case to another courtroom.", kind="write",
         params=[CASE_ID, Param(name="court_id", type="integer", description="The courtroom number", minimum=1,
                                maximum=99)],
         steps=[CASE_EXISTS, Step(kind="write", sql="UPDATE cases SET court_id = :court_id WHERE case_id = :case_id")],
         returns=CHANGED),
    Tool(name="set_hearing_length", description="Change how long the hearing of a case lasts.", kind="write",
         params=[CASE_ID, Param(name="hearing_minutes", type="integer", description="Minutes", minimum=5,
                                maximum=600)],
         steps=[CASE_EXISTS, Step(kind="write", sql="UPDATE cases SET hearing_minutes = :hearing_minutes "
                                                    "WHERE case_id = :case_id")],
         returns=CHANGED),
]

IDS = {"case_id", "court_id", "judge_id"}


def court_env() -> Environment:
    """A county court's scheduling (2 STRICT tables, 12 seed rows, 6 tools of which 3 write)."""
    return Environment(
        scenario=Scenario(name="County court scheduling", seed="courts",
                          description="A county court clerk schedules cases before judges and courtrooms.",
                          entities=["judge", "case"], goals=["schedule cases"]),
        tables=[Table(name="judges", ddl=JUDGES_DDL, natural_key=["full_name"]),
                Table(name="cases", ddl=CASES_DDL, natural_key=["docket_no"])],
        seed=[SeedRows(table="judges", rows=JUDGES), SeedRows(table="cases", rows=CASES)],
        tools=TOOLS,
    )


# ------------------------------------------------------------------ the shared run of words


@pytest.mark.parametrize(("text", "run"), [
    ("Set the status of a case; returns the case as changed.", "set the status of a case returns the case as changed"),
    ("A CLOSED case: set the STATUS of a case... returns the case", "set the status of a case returns the case"),
    ("Please, set the status of a case, returns the case", "set the status of a case returns the case"),
])
def test_a_run_of_copied_words_or_more_is_found_whatever_the_case_and_punctuation(text: str, run: str) -> None:
    assert copied_words(text, SET_STATUS) == run


@pytest.mark.parametrize("text", [
    "Change the status of a case to closed.",  # five words in a row, then another word
    "A closed case cannot be reopened; ask the presiding judge.",
    "status case set the of a returns changed",  # the words, not the run
    "",
])
def test_fewer_than_copied_words_consecutive_words_are_no_copy(text: str) -> None:
    assert copied_words(text, SET_STATUS) is None
    assert COPIED_WORDS == 8


# ------------------------------------------------------------------ 1. the policy pick


def _reply(*messages: str):
    ids = [f"r{i}" for i in range(1, len(messages) + 1)]
    return reply_model(ids, 1, len(ids))(rules=[{"id": i, "message": m} for i, m in zip(ids, messages, strict=True)])


def test_check_pick_refuses_a_message_that_copies_a_tool_description() -> None:
    env = court_env()
    got, err = check_pick(_reply("A closed case cannot be reopened.",
                                 "Set the status of a case; returns the case as changed."), env)
    assert got is None
    assert err is not None and "r2" in err and "'set the status of a case returns the case as changed'" in err
    got, err = check_pick(_reply("A closed case cannot be reopened.", "The status of a closed case stays closed."),
                          env)
    assert err is None and got == [("r1", "A closed case cannot be reopened."),
                                   ("r2", "The status of a closed case stays closed.")]


def test_check_pick_takes_a_rule_that_names_its_action_in_the_description_words_and_says_the_condition() -> None:
    # seen on the permit office with the real model: "book an inspection of a permit on a date" is the whole
    # description of book_inspection, and the rule around it is the model's own
    env = permit_env()
    rule = "No one may book an inspection of a permit on a date before the permit is approved."
    got, err = check_pick(_reply(rule), env)
    assert err is None and got == [("r1", rule)]
    got, err = check_pick(_reply("Please book an inspection of a permit on a date."), env)
    assert got is None and err is not None and "'book an inspection of a permit on a date'" in err


def test_the_policy_feedback_loop_tells_the_model_the_copied_words() -> None:
    env = court_env()
    first = {"rules": [{"id": "r1", "message": "Set the status of a case; returns the case as changed."}]}
    def second(messages: list[dict[str, Any]]) -> dict[str, Any]:  # the message names the state its rule checks
        state = re.search(r"^r1: .*? '([^']+)'", messages[0]["content"], re.M).group(1)  # type: ignore[union-attr]
        return {"rules": [{"id": "r1", "message": f"A case that is {state} cannot be changed."}]}

    client = fake_client([prose_saying(env, ["Set the status of a case"]), first, second])
    res = make_policy(env, client, BuildSettings(policy=True, max_attempts=3, policy_rules=1))
    assert len(client.requests) == 3
    feedback = client.requests[2][-1]["content"]
    assert "the message of r1 copies the words 'set the status of a case returns the case as changed'" in feedback
    assert [r.worded_by for r in res.value.rules] == ["llm"]
    # a state guard's message is followed by code's sentence of its whole condition (house_rules.said_whole)
    assert re.fullmatch(r"A case that is (\S+) cannot be changed\. Once the case's status is '\1', its status may "
                        r"no longer be changed\.", res.value.rules[0].message)


# ------------------------------------------------------------------ 2. candidate rules


def test_key_columns_are_keys_references_and_columns_named_as_ids() -> None:
    def col(name: str, pk: int = 0, ref: tuple[str, str] | None = None) -> Column:
        return Column(name=name, type="INTEGER", notnull=True, pk=pk, has_default=False, enum=None, ref=ref)

    assert key_column(col("case_id", pk=1)) and key_column(col("line_no", pk=2))  # part of a composite key
    assert key_column(col("presiding", ref=("judges", "judge_id")))  # a reference, whatever its name
    assert key_column(col("court_id")) and key_column(col("id")) and key_column(col("Court_ID"))
    assert not key_column(col("hearing_minutes")) and not key_column(col("paid")) and not key_column(col("void"))
    assert id_named("court_id") and not id_named("valid") and not id_named("fluid_ml") and not id_named("idle")


def test_no_rule_is_proposed_on_a_key_or_reference_column() -> None:
    env = court_env()
    with EnvInstance(env) as inst:
        found = propose(env, inst.conn)
    labels = {c.words.get("label", "") for c in found}
    assert not labels & {"court id", "case id", "judge id"}, sorted(labels)
    assert not any(c.probe == "court_id" for c in found)  # no "the court id given is above ..."
    # the measures still make rules: a threshold on the hearing's length, states of the case's status
    assert {"hearing minutes", "status"} <= labels
    kept, _ = check(env, found)
    assert any(c.candidate.words.get("label") == "hearing minutes" for c in kept)


# ------------------------------------------------------------------ 3. planned sums


def test_no_planned_sum_adds_up_ids() -> None:
    env = court_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        shape = p.shapes["list_judge_cases"]
        assert {k for k, c in shape.outputs.items() if not summable(p, c, k)} == IDS
        made = [c for seed in range(8) for c in aggregates(p, seed)]
        planned = plan_chains(env, run, 60, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
    totals = [g for c in [*made, *planned] for g in c.goals if g.kind == "total"]
    assert totals and {g.asked for g in totals} == {"hearing_minutes"}
    assert not any("total court id" in f or "total case id" in f or "total judge id" in f
                   for c in [*made, *planned] for f in c.facts)


def test_no_planned_decision_chooses_a_row_by_an_id() -> None:
    # the cases a judge hears list three numbers besides the hearing's length: the case's key, the judge's (a
    # declared reference) and the courtroom's (a reference the schema lost); "the case with the highest court id"
    # is no choice a clerk makes, and each judge's cases have distinct court ids, so it was planned first
    env = court_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        made = [c for seed in range(6) for c in decide_writes(p, seed)]
        planned = plan_chains(env, run, 60, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
    decided = [g for c in [*made, *[c for c in planned if c.shape == "decide_write"]] for g in c.goals]
    assert decided and {g.asked for g in decided} == {"hearing_minutes"}
    assert not any(f"{which} {col}" in f for c in [*made, *planned] for f in c.facts
                   for which in ("highest", "lowest") for col in ("court id", "case id", "judge id"))


# ------------------------------------------------------------------ 4. the request lint


@pytest.mark.parametrize("plain", [False, True])
def test_lint_refuses_a_request_that_copies_a_tool_description(plain: bool) -> None:
    env = court_env()
    chain = Chain("update", [], ["Set the case with docket number 'CV-2025-102' to closed."],
                  must_state=["CV-2025-102", "closed"])
    # the whole description with its full stop is not in it: the older check (the description repeated) misses it
    copied = "Set the status of a case; returns the case as changed, for the row with docket 'CV-2025-102': closed."
    problem = lint_request(env, chain, copied, plain=plain)
    assert problem is not None
    assert "copies the words 'set the status of a case returns the case as changed'" in problem
    assert "set_case_status" in problem
    assert lint_request(env, chain, "Please close case CV-2025-102, the hearing is over: mark it closed.",
                        plain=plain) is None
