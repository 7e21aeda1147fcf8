"""Rows at scale against the embedded model's real replies of the 2026-11-28 regeneration (meaning-wip, 47da615:
generated/quickstart/llm_cache.sqlite, copied here so that a later regeneration does not change these tests): a
UNIQUE list that no longer ends at 11 titles, people's columns from the people generators, dates on the
examples' side, a child's dates between its parent's."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.llm import fake_client
from pipeline.meaning import relations
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.maker import ValueMaker
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings, scripted

SCENARIO = ir.Scenario(name="Book Lending System", description=(
    "A system for members to borrow, renew and return books from a library. It stores information about the books, "
    "members, loans, renewals, overdue fines, and holds."))
BOOKS = ir.Table(name="books", natural_key=["title"], ddl=(
    "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL, genre TEXT "
    "NOT NULL CHECK (genre IN ('fiction', 'non-fiction')), publication_date TEXT NOT NULL, isbn TEXT NOT NULL UNIQUE) "
    "STRICT"))
MEMBERS = ir.Table(name="members", natural_key=["name"], ddl=(
    "CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL UNIQUE, "
    "phone_number TEXT NOT NULL UNIQUE, address TEXT NOT NULL, date_of_birth TEXT NOT NULL) STRICT"))

# the model's replies, as the cache holds them
TITLE_REPLIES = [
    ["The Catcher in the Rye", "Pride and Prejudice", "1984", "To Kill a Mockingbird", "The Hobbit",
     "The Lord of the Rings", "The Great Gatsby", "The Catcher in the Rye", "Pride and Prejudice", "1984",
     "To Kill a Mockingbird"],
    ["The Catcher in the Rye", "Pride and Prejudice", "The Great Gatsby", "To Kill a Mockingbird", "1984",
     "The Hobbit", "The Lord of the Rings", "The Odyssey", "War and Peace", "Moby Dick", "The Alchemist"],
    # the third call was shown all 11 and copied them back: the old loop ended the list here (7 code-made books)
    ["The Catcher in the Rye", "The Great Gatsby", "To Kill a Mockingbird", "1984", "Pride and Prejudice",
     "The Hobbit", "The Lord of the Rings", "The Odyssey", "War and Peace", "Moby Dick", "The Alchemist"],
]
TITLE_SEEDS = ["The Great Gatsby", "To Kill a Mockingbird", "1984", "Pride and Prejudice"]
ISBN_SEEDS = ["9780743273565", "9780060942211", "9780451524935", "9780140449531"]
MEMBER_ROWS = {"rows": [
    ["John Doe", "john.doe@example.com", "123-456-7890", "123 Main St, Anytown, USA", "1990-01-01"],
    ["Jane Smith", "jane.smith@example.com", "098-765-4321", "456 Elm St, Anytown, USA", "1992-05-15"],
    ["Alice Johnson", "alice.johnson@example.com", "111-222-3333", "789 Oak St, Anytown, USA", "1994-10-01"],
    ["Bob Brown", "bob.brown@example.com", "222-333-4444", "890 Pine St, Anytown, USA", "1996-03-15"]]}
_POOLS = {"name": {"kind": "text_pool", "values": ["John Doe", "Jane Smith", "Alice Johnson"]},
          "email": {"kind": "text_pool", "values": ["john.doe@example.com", "jane.smith@example.com",
                                                    "alice.johnson@example.com"]},
          "phone_number": {"kind": "text_pool", "values": ["123-456-7890", "098-765-4321", "111-222-3333"]},
          "address": {"kind": "text_pool", "values": ["123 Main St, Anytown, USA", "456 Elm St, Anytown, USA",
                                                      "789 Oak St, Anytown, USA"]}}
MEMBER_GENERATORS = [
    {"locale": "en_US", "columns": {**_POOLS, "date_of_birth": {"kind": "date_after", "min": 0, "max": 365}}},
    {"locale": "en_US", "columns": {**_POOLS, "date_of_birth": {"kind": "date_after", "min": 0, "max": 365}}},
    # its last word: birth dates with a time, all in the coming year (the examples were born 1990-1996)
    {"locale": "en_US", "columns": {**_POOLS, "date_of_birth": {"kind": "datetime", "start": "2026-01-01",
                                                                "end": "2026-12-31"}}},
]


def _values(values: list[str]) -> dict[str, Any]:
    return {"values": values}


def test_a_call_that_copies_the_list_back_does_not_end_it() -> None:
    fresh = ["Brave New World", "Jane Eyre", "Wuthering Heights", "Great Expectations", "Crime and Punishment"]
    client = fake_client([_values(r) for r in TITLE_REPLIES] + [_values(fresh)] + [_values(TITLE_REPLIES[2])] * 3)
    settings = gen_settings()
    got, calls = rowgen.continue_list(SCENARIO, BOOKS, "title", TITLE_SEEDS, 240, 12, client, settings)
    assert got[:7] == ["The Catcher in the Rye", "The Hobbit", "The Lord of the Rings", "The Odyssey",
                       "War and Peace", "Moby Dick", "The Alchemist"]
    assert got[7:] == fresh  # the call after the copied list added five: the list went on
    assert len(got) == len(set(got))
    # ended after two calls in a row that added fewer than three (5: the copy, 6 and 7: the same copy again)
    assert calls == 6
    bodies = client.bodies  # type: ignore[attr-defined]
    assert [b.get("temperature") for b in bodies[:3]] == [0.0, 0.0, 0.0]
    assert bodies[3]["temperature"] == settings.retry_temperature and bodies[3]["seed"] != bodies[4]["seed"]
    # after the first call, the prompt shows two examples and the newest values, not the whole list to copy
    shown = [re.findall(r"^- (.+)$", b["messages"][0]["content"], re.M) for b in bodies]
    assert shown[0] == TITLE_SEEDS and all(len(s) <= rowgen.VOCAB_SHOWN for s in shown)
    assert shown[2][:2] == TITLE_SEEDS[:2] and shown[2][-1] == "The Alchemist"


def test_a_digit_code_gets_the_tokens_it_needs_and_the_examples_shape() -> None:
    # the real ISBN replies used 168-183 of 184 tokens for 11-12 values: the budget is now per digit
    assert rowgen.VOCAB_ASK * rowgen.value_tokens(ISBN_SEEDS) + 40 >= 240
    assert rowgen.value_tokens(TITLE_SEEDS) < rowgen.value_tokens(ISBN_SEEDS)
    assert rowgen.digit_pattern(ISBN_SEEDS, 250) == "9780#########"
    assert rowgen.digit_pattern(["123-456-7890", "098-765-4321", "111-222-3333"], 250) == "###-###-####"
    assert rowgen.digit_pattern(["BK-0001", "BK-0002", "BK-0003"], 250) == "BK-####"  # a kept "BK-000" gives 10
    assert rowgen.digit_pattern(["BK-0001", "BK-0002", "BK-0003"], None) == "BK-000#"
    assert rowgen.digit_pattern(TITLE_SEEDS, 250) is None  # "1984" alone is digits: the shapes differ
    assert rowgen.digit_pattern(["A1", "B2"], None) is None
    assert rowgen.digit_pattern(["2026-01-15", "2026-01-12"], None) is None  # a date is no code


def test_members_from_the_models_real_replies_are_people_at_scale() -> None:
    client = scripted([MEMBER_ROWS, *MEMBER_GENERATORS], {})
    res = generate_seed(SCENARIO, (MEMBERS,), client, gen_settings(entity_rows=(120, 120)))
    assert res.ok, res.rejections
    seed = res.value[0]
    assert seed.plan is not None
    gens = {g.column: g for g in seed.plan.generators}
    assert gens["name"].kind == "person_name"
    assert gens["email"].kind == "derived" and gens["email"].after == "name"  # "john.doe@example.com" of "John Doe"
    assert gens["phone_number"].kind == "phone" and gens["phone_number"].pattern == "###-###-####"  # the locale's numbers
    assert gens["date_of_birth"].kind == "date"
    rows = seed.rows
    assert len(rows) >= 100 and not any("short_list" in str(r.evidence) for r in res.rejections)
    names = [r["name"] for r in rows]
    assert len(set(names)) == len(names) and "John Doe" not in names and "Jane Smith" not in names
    for r in rows:  # the e-mail made from the row's own name
        first = r["name"].split()[0].lower()
        assert first[:3] in r["email"].split("@")[0].lower(), r
        assert re.fullmatch(r"\d{3}-\d{3}-\d{4}", r["phone_number"]), r
        born = r["date_of_birth"]
        assert len(born) == 10 and born <= "2026-01-15", r  # no time, on the examples' side of the clock
        assert date.fromisoformat(born).year < 2010, r


def test_a_child_date_stays_between_its_parents_dates() -> None:
    # renewals on their loan's day, 31 days before its due date, in every example: the order holds, not the gap
    loans = {1: {"loan_date": "2026-01-15", "due_date": "2026-02-15"}, 2: {"loan_date": "2025-10-08",
                                                                            "due_date": "2025-11-08"}}
    examples = {"loan_id": [1, 1, 1], "renewal_date": ["2026-01-15", "2026-01-15", "2026-01-15"]}
    orders = relations.parent_orders(examples, "loan_id", loans)
    assert {(o.parent_column, o.after, o.min_days) for o in orders} == {("loan_date", True, 0),
                                                                        ("due_date", False, 0)}
    col = Column("renewal_date", "TEXT", True, 0, False, None, None)
    g = ir.ColumnGenerator(column="renewal_date", kind="date", start="2025-06-01", end="2026-01-15")
    maker = ValueMaker("en_US", 3, [g], [col], examples)
    maker.bounds = [(o.column, "loan_id", {k: date.fromisoformat(v[o.parent_column]) for k, v in loans.items()},
                     o.after, o.min_days) for o in orders]
    for _ in range(200):
        day = maker.bound("renewal_date", "2025-06-02", {"loan_id": 2}, g)
        assert "2025-10-08" <= day <= "2025-11-08", day
        day = maker.bound("renewal_date", "2025-12-01", {"loan_id": 2}, g)
        assert "2025-10-08" <= day <= "2025-11-08", day
    assert maker.bound("renewal_date", "2025-10-20", {"loan_id": 2}, g) == "2025-10-20"  # inside: kept


def test_a_date_range_no_example_falls_in_takes_the_examples() -> None:
    g = ir.ColumnGenerator(column="date_of_birth", kind="datetime", start="2026-01-01", end="2026-12-31")
    out = rowgen._examples_range(g, ["1990-01-01", "1992-05-15", "1994-10-01", "1996-03-15"])
    assert out.kind == "date" and out.by == "code"
    assert out.start is not None and out.end is not None
    assert out.start <= "1990-01-01" and "1996-03-15" <= out.end < "2005"
    kept = ir.ColumnGenerator(column="loan_date", kind="date", start="2025-06-01", end="2026-01-15")
    assert rowgen._examples_range(kept, ["2026-01-15", "2025-12-16"]) == kept


def test_a_continued_value_of_another_column_is_left_out() -> None:
    # the model's real continuation of the authors: half of it titles
    authors = ["J.K. Rowling", "Moby Dick", "The Great Gatsby", "To Kill a Mockingbird", "Pride and Prejudice",
               "War and Peace", "1984", "Brave New World", "The Catcher in the Rye", "The Hobbit"]
    titles = ir.ColumnGenerator(column="title", kind="text_pool", pool=[*TITLE_SEEDS, "Moby Dick", "The Hobbit"])
    others = {"books.title": TITLE_SEEDS, "title": TITLE_SEEDS, "books.author": ["Harper Lee"],
              "author": ["Harper Lee"], "members.name": ["John Doe"]}
    taken = rowgen.elsewhere("author", "books", others, {"title": titles, "author": None})
    kept = [a for a in authors if rowgen.vocab.norm(a) not in taken]
    assert kept == ["J.K. Rowling", "War and Peace", "Brave New World", "The Catcher in the Rye"]
    assert rowgen.vocab.norm("Harper Lee") not in taken  # the column's own examples stay its own


def test_date_after_is_offered_only_where_the_row_has_another_date() -> None:
    from tests.stages.test_rowgen import _cols

    books = _cols(BOOKS.ddl, "books")
    examples = {"title": TITLE_SEEDS, "publication_date": ["1925-04-10", "1960-07-11", "1949-06-25", "1813-01-28"],
                "isbn": ISBN_SEEDS}
    ctx = rowgen.Context(rows=246, singles=frozenset({"title", "isbn"}), examples=examples)
    assert "date_after" not in rowgen.kinds_for(books["publication_date"], ctx)  # the model's pick three times
    assert "date" in rowgen.kinds_for(books["publication_date"], ctx)
    loans = {"loan_date": ["2026-01-15"], "due_date": ["2026-02-15"]}
    due = Column("due_date", "TEXT", True, 0, False, None, None)
    assert "date_after" in rowgen.kinds_for(due, rowgen.Context(rows=10, singles=frozenset(), examples=loans))
