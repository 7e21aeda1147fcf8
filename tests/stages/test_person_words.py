"""Requests in a customer's or clerk's words (issue 40): the planner's intents (what the phrasing model rewrites)
and the requests code writes when the model's wording is refused name things as a person does: the entity in the
singular, a referenced parent by its natural key ("the loan of the book 'The Hobbit' and the member 'Zoe
Johnson'"), columns as words; no table or column name as the schema writes it, no id column. The lint refuses a
reply that uses the schema's own names, whatever its language (it reads the schema, not a word list).

The schema is scripted: books and members named by a title and a name, loans named by their book and member (a
natural key of two references), renewals and overdue fines of a loan; no LLM."""

from __future__ import annotations

import re

import pytest

from pipeline.dbmodel.keys import surrogates
from pipeline.ir import Environment, Param, Returns, Scenario, SeedRows, Step, Table, Tool
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.bank import _template_chunks, lint_request, schema_identifier
from pipeline.stages.tasks.code_wording import request_from_plan
from pipeline.stages.tasks.planner import plan_chains
from pipeline.stages.tasks.planner.chains import row_words
from verify.derive import derive_verifier

BOOKS = "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL) STRICT"
MEMBERS = "CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL) STRICT"
LOANS = ("CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id), "
         "member_id INTEGER NOT NULL REFERENCES members(member_id), loan_date TEXT NOT NULL, due_date TEXT NOT NULL, "
         "UNIQUE (book_id, member_id)) STRICT")
RENEWALS = ("CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), "
            "renewal_date TEXT NOT NULL) STRICT")
FINES = ("CREATE TABLE overdue_fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES loans(loan_id), "
         "fine_amount REAL NOT NULL CHECK (fine_amount > 0)) STRICT")

_BOOKS = ["The Hobbit", "Emma", "Dune", "Beloved"]
_MEMBERS = ["Zoe Johnson", "Pamela Johnson", "Omar Haddad"]
_LOANS = [(1, 1, "2026-01-02", "2026-01-30"), (1, 2, "2026-01-05", "2026-02-02"), (2, 1, "2026-01-06", "2026-02-03"),
          (3, 3, "2026-01-08", "2026-02-05"), (4, 2, "2026-01-09", "2026-02-06")]

LOAN_ID = Param(name="loan_id", type="integer", minimum=1, description="The loan (see find_loan)")


def lending_env() -> Environment:
    seed = [
        SeedRows(table="books", rows=[{"book_id": i, "title": t, "author": f"Author {i}"} for i, t in enumerate(_BOOKS, 1)]),
        SeedRows(table="members", rows=[{"member_id": i, "name": n, "email": f"m{i}@example.org"}
                                        for i, n in enumerate(_MEMBERS, 1)]),
        SeedRows(table="loans", rows=[{"loan_id": i, "book_id": b, "member_id": m, "loan_date": d, "due_date": due}
                                      for i, (b, m, d, due) in enumerate(_LOANS, 1)]),
        SeedRows(table="renewals", rows=[{"renewal_id": i, "loan_id": lo, "renewal_date": d} for i, (lo, d) in
                                         enumerate([(1, "2026-01-20"), (1, "2026-01-27"), (2, "2026-01-25"),
                                                    (4, "2026-01-28")], 1)]),
        SeedRows(table="overdue_fines", rows=[{"fine_id": i, "loan_id": lo, "fine_amount": a} for i, (lo, a) in
                                              enumerate([(1, 2.5), (1, 4.0), (3, 1.5), (3, 3.0)], 1)]),
    ]
    tools = [
        Tool(name="find_book", description="Look a book up by its exact title.", kind="read",
             params=[Param(name="title", type="string", max_length=200)],
             returns=Returns(sql="SELECT book_id, title, author FROM books WHERE title = :title", mode="all")),
        Tool(name="find_member", description="Look a member up by their exact name.", kind="read",
             params=[Param(name="name", type="string", max_length=200)],
             returns=Returns(sql="SELECT member_id, name, email FROM members WHERE name = :name", mode="all")),
        Tool(name="find_loan", description="The loan of a book to a member, with its dates.", kind="read",
             params=[Param(name="book_id", type="integer", minimum=1), Param(name="member_id", type="integer", minimum=1)],
             returns=Returns(sql="SELECT loan_id, loan_date, due_date FROM loans WHERE book_id = :book_id "
                                 "AND member_id = :member_id", mode="all")),
        Tool(name="list_member_loans", description="Every loan a member has.", kind="read",
             params=[Param(name="member_id", type="integer", minimum=1)],
             returns=Returns(sql="SELECT loan_id, book_id, loan_date, due_date FROM loans WHERE member_id = :member_id "
                                 "ORDER BY loan_id", mode="all")),
        Tool(name="list_loan_fines", description="The overdue fines charged on a loan.", kind="read", params=[LOAN_ID],
             returns=Returns(sql="SELECT fine_id, fine_amount FROM overdue_fines WHERE loan_id = :loan_id "
                                 "ORDER BY fine_id", mode="all")),
        Tool(name="renew_loan", description="Renew a loan on a given day.", kind="write",
             params=[LOAN_ID, Param(name="renewal_date", type="string", max_length=10)],
             steps=[Step(kind="write", sql="INSERT INTO renewals (loan_id, renewal_date) VALUES (:loan_id, :renewal_date)")],
             returns=Returns(sql="SELECT renewal_id, loan_id, renewal_date FROM renewals WHERE renewal_id = :last_id",
                             mode="one")),
        Tool(name="move_due_date", description="Move a loan's due date.", kind="write",
             params=[LOAN_ID, Param(name="due_date", type="string", max_length=10)],
             steps=[Step(kind="write", sql="UPDATE loans SET due_date = :due_date WHERE loan_id = :loan_id")],
             returns=Returns(sql="SELECT loan_id, due_date FROM loans WHERE loan_id = :loan_id", mode="one")),
    ]
    return Environment(
        scenario=Scenario(name="Lending desk", description="A small lending library's front desk."),
        tables=[Table(name="books", ddl=BOOKS, natural_key=["title"]), Table(name="members", ddl=MEMBERS,
                natural_key=["name"]), Table(name="loans", ddl=LOANS, natural_key=["book_id", "member_id"]),
                Table(name="renewals", ddl=RENEWALS), Table(name="overdue_fines", ddl=FINES)],
        seed=seed, tools=tools)


IDENTIFIERS = ["overdue_fines", "book_id", "member_id", "loan_id", "renewal_id", "fine_id", "loan_date", "due_date",
               "renewal_date", "fine_amount"]
# English words of the database's trade: this test reads English from outside; the product's guard reads the schema
DATABASE_WORDS = re.compile(r"\b(?:table|tables|row|rows|entry|entries|record|records|id|ids)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def planned() -> list[tuple[object, str, str | None]]:
    env = lending_env()
    with fresh(env) as run:
        chains = plan_chains(env, run, 60, {1: 0.3, 2: 0.4, 3: 0.3})
        ids = surrogates(run.infos)
    out = []
    for c in chains:
        d = derive_verifier(env, c.calls, answer=c.answer)
        out.append((c, " ".join(c.facts), request_from_plan(c, d.changes, skip=ids)))
    return out


def test_intents_and_code_wording_name_things_as_a_person_does(planned) -> None:
    env = lending_env()
    shapes = {c.shape for c, _, _ in planned}
    assert {"lookup", "create", "update", "aggregate"} <= shapes, shapes
    written = [(c, text) for c, _, text in planned if text is not None]
    assert len(written) >= len(planned) // 2
    for c, intent, text in planned:
        for said in [intent] + ([text] if text else []):
            assert not DATABASE_WORDS.search(said), said
            assert not [i for i in IDENTIFIERS if i in said], said
            assert schema_identifier(env, said, c.must_state) is None, said
    for c, text in written:
        assert lint_request(env, c, text, plain=True) is None, text


def test_a_parent_is_named_by_its_natural_key_in_words() -> None:
    facts = [("books.title", "The Hobbit"), ("members.name", "Zoe Johnson")]
    assert row_words("loans", facts) == "the loan of the book 'The Hobbit' and the member 'Zoe Johnson'"
    assert row_words("overdue_fines", facts + [("overdue_fines.fine_amount", 2.5)]) == \
        "the overdue fine of the book 'The Hobbit' and the member 'Zoe Johnson', with fine amount 2.5"
    assert row_words("members", [("members.name", "Zoe Johnson")]) == "the member 'Zoe Johnson'"
    assert row_words("loans", [("loans.loan_date", "2026-01-02")]) == "the loan with loan date 2026-01-02"


def test_requests_code_writes_read_like_a_clerk(planned) -> None:
    texts = {text for _, _, text in planned if text}
    intents = {intent for _, intent, _ in planned}
    loan = "the loan of the book The Hobbit for the member Zoe Johnson"  # names as people write them: no quotes
    assert any(t.startswith("How many overdue fines does the loan of the book ") for t in texts), texts
    assert any(re.fullmatch(r"How many loans does the member [A-Za-z ]+ have\?", t) for t in texts), texts
    assert any(i.startswith("Ask for the due date of the loan of the book ") or
               i.startswith("Ask for the loan date of the loan of the book ") for i in intents), intents
    assert any(loan in t for t in texts) or any("the loan of the book 'The Hobbit' and the member 'Zoe Johnson'" in i
                                                for i in intents)
    assert not any("'" in t for t in texts if "O'" not in t), texts  # no value in quotes as the database holds it


def test_the_lint_refuses_the_schemas_own_names_in_any_language(planned) -> None:
    env = lending_env()
    c, _, text = next((c, i, t) for c, i, t in planned if t and c.shape == "lookup")
    assert text is not None
    assert lint_request(env, c, text, plain=True) is None
    values = " ".join(str(v) for v in c.must_state)
    # the schema's names, whatever the words around them: a column with an underscore, a table, an id column
    for said, name in [(f"Quelle est la due_date du prêt {values} ?", "due_date"),
                       (f"¿Cuántas overdue_fines tiene {values}?", "overdue_fines"),
                       (f"Wie lautet die loan_id für {values}?", "loan_id")]:
        problem = lint_request(env, c, said, plain=True)
        assert problem is not None and name in problem, (said, problem)
        assert schema_identifier(env, said, c.must_state) is not None
    # a value the request must state may hold one: it is the user's value, not the schema's name
    assert schema_identifier(env, "Write to due_date_team@example.org, please.", ["due_date_team@example.org"]) is None
    assert schema_identifier(env, "Quelle est la date de retour ?") is None


def test_a_phrase_code_itself_says_is_no_copy_of_the_plan(planned) -> None:
    """The intent and code's request name a row alike ("for the loan of the book ..."): that phrase is a person's
    words, not the plan's; a phrase only the plan says ("ask for the due date of ...") is still a copy."""
    env = lending_env()
    descriptions = [t.description for t in env.tools]
    c, _, text = next((c, i, t) for c, i, t in planned if c.shape == "update" and t)
    assert text is not None
    assert [k for k in _template_chunks(c.facts, descriptions) if k in reward.normalize_text(text)], text
    assert lint_request(env, c, text, plain=True) is None
    c, intent, _ = next((c, i, t) for c, i, t in planned if c.shape == "lookup" and "loan of the book" in i)
    assert "the plan's wording" in (lint_request(env, c, intent, plain=True) or ""), intent


def test_a_reference_named_for_what_it_points_at_is_a_persons_word() -> None:
    """``author INTEGER REFERENCES authors``: "the author" is how a person says it; ``id`` and ``author_ref`` are
    the schema's."""
    env = Environment(scenario=Scenario(name="Shelf", description="Books and their authors."), tables=[
        Table(name="authors", ddl="CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT"),
        Table(name="books", ddl="CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, author INTEGER "
                                "NOT NULL REFERENCES authors(id), author_ref INTEGER REFERENCES authors(id)) STRICT")])
    assert schema_identifier(env, "Who is the author of 'Emma'?") is None
    assert schema_identifier(env, "What is the ID of the author of 'Emma'?") == ("column", "id")
    assert schema_identifier(env, "Set author_ref of 'Emma'.") == ("column", "author_ref")
