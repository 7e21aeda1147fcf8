"""Issue 40's new model calls with the real embedded model, on two domains of ``seeds/domains.txt`` that no prompt,
test or example of the project uses: a museum's collection register ("Museum collections management") and a patent
attorney's docket ("Patent docketing"). Each test is a few short calls on a small hand-written scenario, not a build.

- Vocabulary by continuation (``pipeline.stages.rows.generators.continue_list``, as ``settle`` calls it for a text
  column no generator makes): the museum objects' ``medium`` continued from four example values. The values kept
  are new, pass the module's own cleaning again unchanged (no repeats, numbered placeholders, glued or suffixed
  values, variants), look like the examples by shape (``pipeline.meaning.profile``) and sit nearer in meaning
  (MiniLM) to the examples than to the other columns' (titles, artists), as the rows stage judges a generator.
- The scenario's goals named back to the intents call (``pipeline.stages.schema.intents.generate_intents`` with
  ``pipeline.meaning.goals.missing_goals``): the patent docket's goals are all said again by the intents that come
  back as the model answers, and after a first list (scripted, as the model wrote the library's) that left three
  out, the real model's answer to the request that names them back says more of them.
- The policy's prose grounded in checked candidates, with feedback on the messages
  (``pipeline.stages.policy.house_rules``): the museum's rules in the model's prose; each that grounds in a
  candidate says its condition and is kept, its message says its condition (what the feedback asks for) or is
  code's wording, and every rule still allows and forbids real calls; prose that grounds in nothing is dropped with
  a note (the museum's, as the model writes it today: its rules are about things the schema does not hold); a rule about another thing (the condition reports, which no tool
  writes) added to the model's prose grounds in nothing and takes no candidate from the model's rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pipeline.ir import Environment, Param, Returns, Scenario, SeedRows, Step, Table, Tool
from pipeline.llm.replies import Reply
from pipeline.settings import BuildSettings

# ------------------------------------------------------------------ the museum (vocabulary, policy)

MUSEUM = Scenario(name="Museum collections management", seed="museum collections",
                  description="A museum registers the objects of its collection, lends them to other museums for "
                              "their exhibitions and keeps condition reports on them.",
                  entities=["object", "outgoing loan", "condition report"],
                  goals=["lend an object to another museum", "change where an object stands",
                         "update an object's insured value"])

OBJECTS_DDL = """CREATE TABLE objects (
  object_id INTEGER PRIMARY KEY,
  accession_number TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  artist TEXT NOT NULL,
  medium TEXT NOT NULL,
  insured_value REAL NOT NULL CHECK (insured_value > 0),
  status TEXT NOT NULL CHECK (status IN ('on_display', 'in_storage', 'on_loan', 'in_conservation'))
) STRICT"""

LOANS_DDL = """CREATE TABLE outgoing_loans (
  loan_id INTEGER PRIMARY KEY,
  object_id INTEGER NOT NULL REFERENCES objects(object_id),
  borrower TEXT NOT NULL,
  start_date TEXT NOT NULL,
  end_date TEXT NOT NULL
) STRICT"""

REPORTS_DDL = """CREATE TABLE condition_reports (
  report_id INTEGER PRIMARY KEY,
  object_id INTEGER NOT NULL REFERENCES objects(object_id),
  report_date TEXT NOT NULL,
  condition TEXT NOT NULL CHECK (condition IN ('excellent', 'good', 'fair', 'poor')),
  examiner TEXT NOT NULL
) STRICT"""

OBJECTS = [
    {"object_id": 1, "accession_number": "1921.4.17", "title": "Harbour at Dusk", "artist": "Eugène Boudin",
     "medium": "Oil on canvas", "insured_value": 850000.0, "status": "on_display"},
    {"object_id": 2, "accession_number": "1958.2.3", "title": "Seated Dancer", "artist": "Edgar Degas",
     "medium": "Bronze", "insured_value": 1200000.0, "status": "on_loan"},
    {"object_id": 3, "accession_number": "1974.11.8", "title": "Study of Clouds", "artist": "John Constable",
     "medium": "Watercolour on paper", "insured_value": 95000.0, "status": "in_storage"},
    {"object_id": 4, "accession_number": "2003.7.1", "title": "Bust of a Young Woman", "artist": "Camille Claudel",
     "medium": "Marble", "insured_value": 640000.0, "status": "in_conservation"},
    {"object_id": 5, "accession_number": "1989.5.22", "title": "River Landscape", "artist": "Jacob van Ruisdael",
     "medium": "Oil on panel", "insured_value": 2300000.0, "status": "on_display"},
    {"object_id": 6, "accession_number": "2011.3.9", "title": "Tea Bowl", "artist": "Raku Kichizaemon",
     "medium": "Glazed stoneware", "insured_value": 42000.0, "status": "in_storage"},
]

LOANS = [
    {"loan_id": 1, "object_id": 2, "borrower": "Musée d'Orsay", "start_date": "2025-11-01", "end_date": "2026-03-01"},
    {"loan_id": 2, "object_id": 1, "borrower": "Kunsthalle Bremen", "start_date": "2024-04-10",
     "end_date": "2024-08-30"},
    {"loan_id": 3, "object_id": 1, "borrower": "National Gallery of Ireland", "start_date": "2025-02-01",
     "end_date": "2025-06-15"},
    {"loan_id": 4, "object_id": 5, "borrower": "Rijksmuseum Twenthe", "start_date": "2023-09-01",
     "end_date": "2024-01-07"},
    {"loan_id": 5, "object_id": 1, "borrower": "Ateneum", "start_date": "2022-05-01", "end_date": "2022-09-01"},
]

REPORTS = [
    {"report_id": 1, "object_id": 4, "report_date": "2025-12-02", "condition": "poor", "examiner": "Ines Carvalho"},
    {"report_id": 2, "object_id": 2, "report_date": "2025-10-20", "condition": "good", "examiner": "Ines Carvalho"},
    {"report_id": 3, "object_id": 1, "report_date": "2025-01-15", "condition": "excellent", "examiner": "Aled Price"},
    {"report_id": 4, "object_id": 3, "report_date": "2024-06-03", "condition": "fair", "examiner": "Aled Price"},
]

STATUSES = ["on_display", "in_storage", "on_loan", "in_conservation"]
OBJECT_ID = Param(name="object_id", type="integer", description="Object id (see find_object)", minimum=1)
OBJECT_EXISTS = Step(kind="guard", sql="SELECT 1 FROM objects WHERE object_id = :object_id", must="exist",
                     error="object {object_id} not found")

MUSEUM_TOOLS = [
    Tool(name="find_object", description="Look up an object of the collection by its accession number.", kind="read",
         params=[Param(name="accession_number", type="string", description="The accession number, e.g. 1921.4.17",
                       max_length=20)],
         returns=Returns(sql="SELECT object_id, accession_number, title, artist, medium, insured_value, status "
                             "FROM objects WHERE accession_number = :accession_number", mode="one")),
    Tool(name="list_loans", description="List the outgoing loans of one object.", kind="read",
         params=[OBJECT_ID], steps=[OBJECT_EXISTS],
         returns=Returns(sql="SELECT loan_id, borrower, start_date, end_date FROM outgoing_loans "
                             "WHERE object_id = :object_id ORDER BY start_date", mode="all")),
    Tool(name="lend_object", description="Lend an object to another museum for a period.", kind="write",
         params=[OBJECT_ID, Param(name="borrower", type="string", description="The borrowing museum", max_length=80),
                 Param(name="start_date", type="string", description="First day of the loan, YYYY-MM-DD",
                       max_length=10),
                 Param(name="end_date", type="string", description="Last day of the loan, YYYY-MM-DD", max_length=10)],
         steps=[OBJECT_EXISTS,
                Step(kind="write", sql="INSERT INTO outgoing_loans (object_id, borrower, start_date, end_date) "
                                       "VALUES (:object_id, :borrower, :start_date, :end_date)")],
         returns=Returns(sql="SELECT * FROM outgoing_loans WHERE loan_id = :last_id", mode="one")),
    Tool(name="set_object_status", description="Change where an object stands (on display, in storage, on loan, "
                                               "in conservation).", kind="write",
         params=[OBJECT_ID, Param(name="status", type="string", enum=STATUSES)],
         steps=[OBJECT_EXISTS,
                Step(kind="write", sql="UPDATE objects SET status = :status WHERE object_id = :object_id")],
         returns=Returns(sql="SELECT object_id, accession_number, status FROM objects WHERE object_id = :object_id",
                         mode="one")),
    Tool(name="update_insured_value", description="Record a new insured value for an object.", kind="write",
         params=[OBJECT_ID, Param(name="insured_value", type="number", description="The insured value, in euros",
                                  minimum=1, maximum=100000000)],
         steps=[OBJECT_EXISTS, Step(kind="write", sql="UPDATE objects SET insured_value = :insured_value "
                                                      "WHERE object_id = :object_id")],
         returns=Returns(sql="SELECT object_id, accession_number, insured_value FROM objects "
                             "WHERE object_id = :object_id", mode="one")),
]


def museum_env() -> Environment:
    """The museum (3 STRICT tables, 15 seed rows, 5 tools of which 3 write; none writes condition reports)."""
    return Environment(
        scenario=MUSEUM,
        tables=[Table(name="objects", ddl=OBJECTS_DDL, natural_key=["accession_number"],
                      description="The objects of the collection"),
                Table(name="outgoing_loans", ddl=LOANS_DDL, description="Objects lent to other museums"),
                Table(name="condition_reports", ddl=REPORTS_DDL, description="Conservators' reports on an object")],
        seed=[SeedRows(table="objects", rows=OBJECTS), SeedRows(table="outgoing_loans", rows=LOANS),
              SeedRows(table="condition_reports", rows=REPORTS)],
        tools=MUSEUM_TOOLS,
    )


def examples(column: str) -> list[str]:
    return [str(r[column]) for r in OBJECTS[:4]]


@pytest.mark.real_llm
def test_real_model_continues_a_museum_vocabulary_in_its_own_words(real_llm) -> None:
    """The objects' ``medium`` continued from its first four example values, as ``settle`` does for a text column
    that is no person, company, place, e-mail or phone (``VOCAB_WANT`` values in at most ``VOCAB_ROUNDS`` calls)."""
    from pipeline.embed import get_embedder
    from pipeline.meaning import profile as prof
    from pipeline.meaning import vocab
    from pipeline.stages.rows import generators as rowgen

    table = Table(name="objects", ddl=OBJECTS_DDL, natural_key=["accession_number"])
    seeds = examples("medium")  # Oil on canvas, Bronze, Watercolour on paper, Marble
    shape = prof.profile(seeds)
    assert shape is not None
    got, calls = rowgen.continue_list(MUSEUM, table, "medium", seeds, rowgen.VOCAB_WANT, rowgen.VOCAB_ROUNDS,
                                      real_llm, BuildSettings(), shape=shape)
    print(f"\nmedium continued in {calls} calls: {got}")
    assert 1 <= calls <= rowgen.VOCAB_ROUNDS
    assert len(got) >= 6, got  # one call asks for VOCAB_ASK (12); half of them at least survive the cleaning
    # new: none is an example or another kept value again (case and spaces aside)
    norms = [vocab.norm(v) for v in got]
    assert len(set(norms)) == len(norms) and not set(norms) & {vocab.norm(s) for s in seeds}, got
    # the module's own cleaning keeps every one of them again: no numbered placeholder, glued or suffixed value,
    # word said twice or variant of an example or of an earlier value
    assert vocab.clean(got, seeds) == got, [v for v in got if v not in vocab.clean(got, seeds)]
    assert not [v for v in got if rowgen.PLACEHOLDER.search(v.strip())], got
    # shape: the values look like the examples (the rows stage's own test of a generator's samples)
    assert prof.contradiction(shape, got) is None
    # meaning (MiniLM): nearer to the examples of medium than to the titles' or the artists' examples, and not
    # another column's kind of value by the rows stage's margin (``semantic_misfit``)
    vectors = prof.Vectors(get_embedder().encode)
    others = {"objects.title": examples("title"), "objects.artist": examples("artist")}
    assert prof.semantic_misfit(vectors, seeds, others, got) is None
    vs = vectors(got)
    own = float((vs @ vectors.centroid(seeds)).mean())
    near = {k: round(float((vs @ vectors.centroid(v)).mean()), 3) for k, v in others.items()}
    print(f"similarity to medium's examples {own:.3f}, to the others' {near}")
    assert all(own > s for s in near.values()), (own, near)


# ------------------------------------------------------------------ the patent docket (intents)

PATENTS = Scenario(name="Patent docketing", seed="patent docketing",
                   description="A patent attorney's office dockets its clients' patent applications, the office "
                               "actions the patent offices send about them, the deadlines to respond and the fees "
                               "due to keep a patent in force.",
                   entities=["client", "patent application", "office action", "deadline", "fee"],
                   goals=["file a new patent application for a client", "record an office action received",
                          "mark a response deadline as met", "pay a renewal fee for a granted patent"])


FIRST_LIST = {"intents": [
    {"goal": "File a new patent application for a client", "kind": "write"},
    {"goal": "Find a patent application by its number", "kind": "read"},
    {"goal": "List the office actions of an application", "kind": "read"},
    {"goal": "Change the status of a patent application", "kind": "write"}]}
"""A first list as the model wrote the library's (2026-11-28: one of its five goals kept): it says the first goal
again and leaves out the other three (measured, ``missing_goals``)."""


class FirstReplyGiven:
    """The real model's client whose first structured replies are ``first`` (scripted: one reply, or a list of
    them); every later request, the feedback turns (sampled, ``pipeline.llm.sampling``), goes to the real model."""

    def __init__(self, client: Any, first: dict[str, Any] | list[dict[str, Any]]) -> None:
        self._client, self._first = client, list(first) if isinstance(first, list) else [first]
        self.real: list[str] = []  # the prompts the real model answered

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def structured_reply(self, model: Any, messages: list[dict[str, Any]], *, stage: str,
                         max_tokens: int = 1024) -> Any:
        if not self._first:
            self.real.append(messages[-1]["content"])
            return self._client.structured_reply(model, messages, stage=stage, max_tokens=max_tokens)
        content = json.dumps(self._first.pop(0))
        return model.model_validate_json(content), Reply(content, 0, 0, 0.0, True)


@pytest.mark.real_llm
def test_real_model_keeps_the_patent_dockets_goals_in_its_intents(real_llm) -> None:
    """The intents stage on a scenario with four goals, twice: as the model answers (it may keep every goal at
    once), and after a first list that left three out, so that the stage names them back and the real model answers
    that request. As the model answers, every goal is said again by some intent (``missing_goals``, one goal per
    intent); after the named-back request, fewer goals are left out than before it."""
    from pipeline.meaning.goals import missing_goals
    from pipeline.stages.schema.intents import generate_intents

    settings = BuildSettings()
    res = generate_intents(PATENTS, real_llm, settings)
    assert res.value is not None, res.rejections
    said = [i.goal for i in res.value]
    print(f"\nthe model's list {said} ({res.attempts} replies)")
    assert missing_goals(PATENTS.goals, said) == [], said
    assert {"read", "write"} <= {i.kind for i in res.value}
    # named back: the first list leaves three goals out; the stage asks once more, naming them
    left_out = missing_goals(PATENTS.goals, [i["goal"] for i in FIRST_LIST["intents"]])
    assert len(left_out) == 3, left_out
    again = generate_intents(PATENTS, FirstReplyGiven(real_llm, FIRST_LIST), settings)
    assert again.value is not None, again.rejections
    said = [i.goal for i in again.value]
    print(f"after {left_out} were named back: {said} ({again.attempts} replies)")
    assert again.attempts >= 2
    # the named-back request gains goals; the model may still leave one out (measured 2026-11-28: it added two of
    # three and dropped "record an office action received"): the tools stage names what is still unserved
    assert len(missing_goals(PATENTS.goals, said)) < len(left_out), said
    assert {"read", "write"} <= {i.kind for i in again.value}
    assert settings.intents_min <= len(again.value) <= settings.intents_max


# ------------------------------------------------------------------ the museum's policy

ELSEWHERE = "A condition report cannot be filed with a report date in the future."
"""A rule about the condition reports, which no tool writes: it names a date, as the loan candidates' conditions do
(measured: nearest table condition reports 0.48, the nearest candidate's table 0.04)."""


def says_condition(text: str, c: Any) -> bool:
    """Whether prose ``text`` says checked candidate ``c``'s condition, as the policy stage reads a message
    (``house_rules.names_value``, ``house_rules._names``): a state by its listed value, a threshold or a date by a
    word of its column (or, a threshold, by its value), a limit by a word of the items it counts."""
    from pipeline.stages.policy.house_rules import _names, names_value

    w = c.candidate.words
    if w.get("section") in ("state", "parent_state"):
        return names_value(text, w["value"])
    if w.get("section") in ("row_over", "value_over") and names_value(text, w["value"]):
        return True  # a threshold by its value ("stronger than 6.2 percent" for the brewery's abv), as the product
    said = [x.casefold() for x in re.findall(r"\w+", text)]
    keys = ("items", "label") if w.get("section", "").startswith("limit") else ("label",)
    return any(_names(said, w[k]) for k in keys if w.get(k))


@pytest.mark.real_llm
def test_real_model_writes_museum_rules_that_ground_and_are_worded_as_checked(real_llm) -> None:
    """The policy stage on the museum: the model's prose (asked alone first; the stage's own request is then a
    cache hit), grounded in the candidates that hold, and the grounded rules worded with feedback."""
    from pipeline.runtime import EnvInstance
    from pipeline.stages.policy.candidates import check, propose
    from pipeline.stages.policy.house_rules import Words, ground, make_policy, off_rule, prose, unsaid, whole
    from tests.stages.test_policy import assert_rules_hold

    env, words = museum_env(), Words()
    settings = BuildSettings(policy=True, max_attempts=3)
    with EnvInstance(env) as inst:
        checked = check(env, propose(env, inst.conn))[0]
    written, notes = prose(env, real_llm, settings, words)
    assert written and not notes, notes  # the model's own rules, not code's pick
    res = make_policy(env, real_llm, settings)
    grounded, _ = ground(env, written, checked, words)
    # the grounded candidates as ground() made them: a cap or threshold takes the prose's own number, and its key
    # with it (not the seeded candidate's)
    by_key = {c.candidate.key: c for _, c in grounded}
    print(f"\nprose {written}\ngrounded {[(p, c.candidate.key) for p, c in grounded]}\nrules "
          f"{[(r.id, r.worded_by, r.message) for r in res.value.rules]}\nnotes "
          f"{[(r.item, r.reason, r.evidence) for r in res.rejections if r.stage == 'policy']}")
    assert not any("code picked" in r.reason for r in res.rejections), res.rejections
    # each grounded prose rule says its candidate's condition: the listed value of a state, a word of the column a
    # threshold or a date reads or of the items a limit counts (the product's own readers, ``names_value`` and
    # ``_names``). Measured 2026-11-28 09:49 (this test, the first run): "... an object that is damaged or missing"
    # grounded in "insured value above 1200000", "... currently being used by another museum" in "status
    # in_conservation", "... too large for the space available in the loan location" in "3 outgoing loans or more":
    # prose about another thing, grounded by the action they share ("lend an object"). This catches the first two
    # (the third says "loan"): the test fails on that run's replies
    assert not [(p, c.candidate.key) for p, c in grounded if not says_condition(p, c)], grounded
    # prose about another thing grounds in nothing, and takes no candidate from the model's rules
    again, dropped = ground(env, [*written, ELSEWHERE], checked, words)
    assert ELSEWHERE not in [p for p, _ in again]
    assert [(p, c.candidate.key) for p, c in again] == [(p, c.candidate.key) for p, c in grounded]
    why = next(n.evidence for n in dropped if n.item == "prose" and n.evidence["prose"] == ELSEWHERE)
    assert why["about"] == "condition_reports", why
    # only grounded candidates become rules; prose that grounds in nothing is dropped with a note that names it,
    # its nearest candidate and why (measured 2026-11-28 15:00, the second run: all three of the museum's prose
    # rules, "... an object that is currently being used by another museum / damaged or missing / out of stock may
    # not be granted", ground in nothing, since the museum's schema has no column for use, damage or stock; the
    # policy is then empty and says so, and no candidate is picked by code in their place)
    rules = res.value.rules
    if not grounded:
        left = [r for r in res.rejections if r.stage == "policy" and r.item == "prose"]
        assert sorted(r.evidence["prose"] for r in left) == sorted(written), left
        assert all(r.evidence.get("nearest") and r.evidence.get("why") for r in left), left
        assert rules == [], rules
        return
    assert 1 <= len(rules) <= settings.policy_rules
    assert {r.id for r in rules} <= {c.candidate.key for _, c in grounded}
    # each message is whole and says what its condition checks: the model's after feedback, else code's words
    tools = {t.name for t in env.tools}
    for r in rules:
        c = by_key[r.id]
        assert whole(r.message) and not any(t in r.message for t in tools) and "{" not in r.message, r.message
        # no rule or alternative id ("r2", "a7": the request lists them; seen: "...; instead, set the object's status
        # to one of: a7 'in storage', a8 'on loan', a9 '", cut)
        assert not re.search(r"\b[ar]\d+\b", r.message), r.message
        if r.worded_by == "llm":
            assert unsaid(r.message, c) is None and off_rule(env, r.message, c, words) is None, r.message
    assert_rules_hold(res.value)


# ------------------------------------------------------------------ write goals named once more (tools stage)

PATENT_TABLES = [
    Table(name="clients", ddl="CREATE TABLE clients (client_id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                              "country TEXT NOT NULL) STRICT", natural_key=["name"]),
    Table(name="applications", ddl="CREATE TABLE applications (application_id INTEGER PRIMARY KEY, "
                                   "client_id INTEGER NOT NULL REFERENCES clients(client_id), application_number "
                                   "TEXT NOT NULL UNIQUE, title TEXT NOT NULL, filing_date TEXT NOT NULL, status "
                                   "TEXT NOT NULL CHECK (status IN ('pending', 'granted', 'abandoned'))) STRICT",
          natural_key=["application_number"]),
    Table(name="office_actions", ddl="CREATE TABLE office_actions (action_id INTEGER PRIMARY KEY, application_id "
                                     "INTEGER NOT NULL REFERENCES applications(application_id), received_date TEXT "
                                     "NOT NULL, response_deadline TEXT NOT NULL, met INTEGER NOT NULL DEFAULT 0) "
                                     "STRICT", natural_key=["application_id", "received_date"]),
]
MUSEUM_TABLES = [Table(name="objects", ddl=OBJECTS_DDL, natural_key=["accession_number"]),
                 Table(name="outgoing_loans", ddl=LOANS_DDL, natural_key=["object_id", "start_date"]),
                 Table(name="condition_reports", ddl=REPORTS_DDL, natural_key=["object_id", "report_date"])]


def reads_only(tables: list[Table]) -> list[dict[str, Any]]:
    """One scripted table-by-table plan per table, each naming read tools only (as the model planned a clinical
    trial's participants and visits, 2026-11-29)."""
    return [{"tools": [{"name": f"find_{t.name}", "kind": "read", "purpose": f"Find {t.name.replace('_', ' ')}",
                        "tables": [t.name], "goals": []}]} for t in tables]


@pytest.mark.real_llm
@pytest.mark.parametrize("scenario,tables", [(PATENTS, PATENT_TABLES), (MUSEUM, MUSEUM_TABLES)],
                         ids=["patents", "museum"])
def test_real_model_plans_write_tools_when_the_write_goals_are_named_once_more(real_llm, scenario, tables) -> None:
    """The tools stage's plan, table by table (more tools than one call plans), when every table's call planned
    read tools only (scripted here, as the model answered a clinical trial's): the scenario's write goals are
    named to the real model once more (``plan_tools``), and its answer adds write tools on the scenario's tables,
    at least one of which serves a named goal by meaning (``pipeline.meaning.goals.match_goals``)."""
    from pipeline.ir import Intent
    from pipeline.meaning.goals import match_goals
    from pipeline.stages.tools.toolset import PLAN_CHUNK, plan_tools, table_words

    intents = [Intent(goal=g[0].upper() + g[1:], kind="write") for g in scenario.goals]
    intents.append(Intent(goal=f"Find a {tables[0].name.rstrip('s').replace('_', ' ')}", kind="read"))
    settings = BuildSettings(tools_min=2, tools_max=PLAN_CHUNK + 2)
    client = FirstReplyGiven(real_llm, reads_only(tables))
    planned, error, attempts = plan_tools(scenario, intents, tables, client, settings)
    assert client.real and "No write tool in the plan serves these goals" in client.real[0], client.real
    assert planned is not None, error
    writes = [it for it in planned if it.kind == "write"]
    print(f"\n{scenario.name}: the model's write tools {[(w.name, w.purpose, w.tables) for w in writes]} "
          f"({attempts} replies)")
    assert writes and all(set(w.tables) <= {t.name for t in tables} for w in writes)
    served = [m for m in match_goals([i.goal for i in intents if i.kind == "write"],
                                     [(w.name, w.purpose) for w in writes], table_words(tables)) if m.tool]
    assert served, [(w.name, w.purpose) for w in writes]
