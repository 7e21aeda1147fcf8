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
