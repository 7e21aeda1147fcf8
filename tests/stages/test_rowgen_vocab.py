"""Rows at scale, issue 40's defects of the library's regeneration (2026-11-28): a continued list that degenerates
into variants of one value, and addresses written as placeholders from a list where a street generator exists."""

from __future__ import annotations

import re
from typing import Any

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import BOOKS_DDL, SCENARIO
from tests.stages.test_rowgen import small_settings

BOOKS = ir.Table(name="books", ddl=BOOKS_DDL, natural_key=["title"])
EXAMPLES = ["The Great Gatsby", "To Kill a Mockingbird", "1984", "Pride and Prejudice"]
EDITIONS = [f"The Catcher in the Rye: The Complete Edition ({f})" for f in
            ("Paperback", "Hardcover", "Kindle Edition", "ePub", "Audio Book", "VHS", "DVD", "Blu-ray Disc")]
REAL = ["The Catcher in the Rye", "The Hobbit", "The Lord of the Rings", "The Alchemist", "The Odyssey", "Moby Dick",
        "War and Peace", "Ulysses", "Fahrenheit 451", "Dune", "Brave New World", "Utopia", "The Silmarillion",
        "The Giver", "A Brief History of Time", "Middlemarch", "Beloved", "Emma", "Dracula", "Frankenstein",
        "Jane Eyre", "Persuasion", "Walden", "Candide", "Lolita", "Rebecca", "Ivanhoe", "Kidnapped"]


def continuing(replies: list[list[str]]) -> Any:
    """A fake LLM answering each continuation call with the next scripted list (the library's model, which
    continues into editions of one title once it sees them last)."""
    queue = list(replies)

    def reply(messages: list[dict[str, Any]]) -> Any:
        return {"values": queue.pop(0) if queue else ["The Great Gatsby"]}

    return fake_client([reply] * 20)


def shown_in(messages: list[dict[str, Any]]) -> list[str]:
    return re.findall(r"^- (.+)$", messages[0]["content"], re.M)


def test_a_continued_list_keeps_no_variants_and_shows_a_spread_of_what_it_kept() -> None:
    replies = [REAL[:4] + ["The Catcher in the Rye: A Novel", "The Great Gatsby in New York"],
               REAL[4:10] + EDITIONS[:2],
               EDITIONS[2:] + REAL[10:14],
               ["To Kill a Mockingbird: The Complete Edition (ePub)", "The Hobbit: A Comprehensive Edition (ePub)"]
               + REAL[14:20],
               REAL[20:28]]
    client = continuing(replies)
    got, calls = rowgen.continue_list(SCENARIO, BOOKS, "title", EXAMPLES, 60, 5, client, small_settings())
    assert calls == 5
    assert got == REAL  # every edition, subtitle and "... in New York" refused; every real title kept
    # after the first call: two examples and a spread of the kept values (the oldest among them), not the newest
    later = [shown_in(m) for m in client.requests[1:]]
    assert all(s[:2] == EXAMPLES[:2] for s in later)
    third, fifth = later[1], later[3]
    assert "The Catcher in the Rye" in fifth or "The Hobbit" in fifth or "The Lord of the Rings" in fifth
    assert set(fifth[2:]) <= set(REAL[:20]) and len(fifth) == rowgen.VOCAB_SHOWN
    assert fifth[2:] != REAL[20 - (rowgen.VOCAB_SHOWN - 2):20]  # not the newest six
    assert third[2:] != fifth[2:]
    # same inputs, same requests
    again = continuing(replies)
    assert rowgen.continue_list(SCENARIO, BOOKS, "title", EXAMPLES, 60, 5, again, small_settings()) == (got, calls)
    assert again.requests == client.requests


MEMBERS = ir.Table(name="members", natural_key=["name"], ddl=(
    "CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, address TEXT NOT NULL, home_city TEXT "
    "NOT NULL, favourite TEXT NOT NULL) STRICT"))
MEMBER_REPLIES = [
    {"rows": [["Christina Berry", "123 Main St, Anytown, USA", "New York", "The Great Gatsby"],
              ["Paul Johnson", "456 Elm St, Anytown, USA", "Chicago", "To Kill a Mockingbird"],
              ["Teresa Boyd", "789 Oak St, Anytown, USA", "San Francisco", "1984"],
              ["Malik Zhang", "890 Pine St, Anytown, USA", "Boston", "Pride and Prejudice"]]},
    # the model picks lists for every text column (2026-11-28: the library's members.address)
    {"locale": "en_US", "columns": {"name": {"kind": "person_name"}, "address": {"kind": "text_pool"},
                                    "home_city": {"kind": "text_pool"}, "favourite": {"kind": "text_pool"}}},
]


def test_a_list_of_addresses_or_cities_the_model_chose_is_the_street_or_city_generator() -> None:
    from pipeline.stages.rows.populate import generate_seed
    from tests.stages.test_rowgen import gen_settings, scripted

    pools = {"address": ["123 Main St, Anytown, UK", "456 Elm St, Anytown, France"], "home_city": ["Denver"],
             "favourite": REAL}
    res = generate_seed(SCENARIO, (MEMBERS,), scripted(MEMBER_REPLIES, pools), gen_settings(entity_rows=(30, 30)))
    assert res.ok, res.rejections
    (members,) = res.value
    gens = {g.column: g for g in members.plan.generators}
    assert gens["address"].kind == "street_address" and gens["address"].pattern == ", "
    assert gens["home_city"].kind == "city"
    assert gens["favourite"].kind == "text_pool"  # titles are no place
    addresses = [r["address"] for r in members.rows]
    assert not [a for a in addresses if "Anytown" in a]  # the examples' placeholders drawn again too
    assert all(", " in a and any(ch.isdigit() for ch in a) for a in addresses)
    assert len(set(addresses)) == len(addresses)


def test_a_unique_list_keeps_spare_values_for_the_tasks_new_values() -> None:
    """A UNIQUE column's list is continued until it holds as many new values as the table has rows; its examples'
    rows take their own values, so as many values as there are examples are left for a planned create."""
    from pipeline.stages.rows.populate import generate_seed
    from pipeline.stages.tasks.planner.values import fresh_text
    from tests.stages.test_rowgen import gen_settings, scripted

    shelf = ir.Table(name="shelf", natural_key=["title"], ddl=(
        "CREATE TABLE shelf (shelf_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, copies INTEGER NOT NULL) STRICT"))
    replies = [{"rows": [[t, 2] for t in EXAMPLES]},
               {"locale": "en_GB", "columns": {"title": {"kind": "text_pool"},
                                               "copies": {"kind": "integer", "min": 1, "max": 5}}}]
    res = generate_seed(SCENARIO, (shelf,), scripted(replies, {"title": REAL}), gen_settings(entity_rows=(12, 12)))
    assert res.ok, res.rejections
    (rows,) = res.value
    g = next(g for g in rows.plan.generators if g.column == "title")
    used = {r["title"] for r in rows.rows}
    spare = [t for t in g.pool or [] if t not in used]
    assert len(rows.rows) == 12 and len(spare) >= len(EXAMPLES)
    assert fresh_text("Dune", used, (g, rows.plan.seed)) in spare
