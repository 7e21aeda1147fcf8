"""The per-row re-ask of a continued row's numbers and CHECK-list values (issue 40, reader's audit of 2026-11-29,
section 1.2): asked again one row a call, the library's "Brave New World" (continued as Dystopian, George Orwell,
1932) got 1949, the year of the example row of 1984 that shares its author; the six other books' years came back
unchanged. The re-ask now runs only for a table whose continued replies wrote such a place as a sequence down their
rows (the pharmacy's strengths 30, 40, ..., 110 and frequencies cycling daily, weekly, monthly), and a re-asked value
that copies the example row sharing one of the row's values is refused (the continued value stays)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.llm import fake_client
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import SCENARIO
from tests.stages.test_rowgen import gen_settings, scripted

BOOKS = ir.Table(name="books", natural_key=["title"], ddl=(
    "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL, genre TEXT "
    "NOT NULL, publication_year INTEGER CHECK (publication_year > 0)) STRICT"))
# the model's example rows and its continuation (generated/quickstart/llm_cache.sqlite, 2026-11-29), word for word
EXAMPLES = [["The Great Gatsby", "F. Scott Fitzgerald", "Fiction", 1925],
            ["To Kill a Mockingbird", "Harper Lee", "Fiction", 1960],
            ["1984", "George Orwell", "Dystopian", 1949],
            ["Pride and Prejudice", "Jane Austen", "Romance", 1813]]
CONTINUED = [("The Catcher in the Rye", "Fiction", "J.D. Salinger", "1951"),
             ("Moby-Dick", "Dystopian", "Herman Melville", "1851"),
             ("The Hobbit", "Fantasy", "J.R.R. Tolkien", "1937"),
             ("War and Peace", "Dystopian", "Leo Tolstoy", "1869"),
             ("The Alchemist", "Fiction", "Paulo Coelho", "1984"),
             ("The Lord of the Rings", "Fantasy", "J.R.R. Tolkien", "1954"),
             ("Brave New World", "Dystopian", "George Orwell", "1932"),
             ("The Odyssey", "Fantasy", "Homer", "8th century BCE")]
CHOICE = {"locale": "en_US", "columns": {
    "title": {"kind": "text_pool", "values": ["The Great Gatsby", "1984"]},
    "author": {"kind": "text_pool", "values": ["F. Scott Fitzgerald", "George Orwell"]},
    "genre": {"kind": "text_pool", "values": ["Fiction", "Dystopian"]},
    "publication_year": {"kind": "integer", "min": 1800, "max": 2026}}}
# the re-ask's replies in that run: each year as continued, Brave New World's the 1984 example row's
NAMED = {t: {"publication_year": int(y) if y.isdigit() else 1} for t, _, _, y in CONTINUED}
NAMED["Brave New World"] = {"publication_year": 1949}


def books(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, tuple[str, int]], list[str], dict[str, Any]]:
    from pipeline.stages.rows.populate import generate_seed

    monkeypatch.setattr(rowgen, "_vectors", lambda: None)
    pools = {c: [r[i] for r in CONTINUED] for i, c in enumerate(["title", "genre", "author", "publication_year"])}
    client = scripted([{"rows": EXAMPLES}, CHOICE], pools, named=NAMED)
    res = generate_seed(SCENARIO, (BOOKS,), client, gen_settings(entity_rows=(11, 11)))
    assert res.ok, res.rejections
    (table,) = res.value
    made = {r["title"]: (r["author"], r["publication_year"]) for r in table.rows}
    gens = {g.column: g for g in table.plan.generators}
    return made, [m[0]["content"] for m in client.requests], gens


def test_years_continued_each_its_own_are_kept_and_not_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    made, prompts, gens = books(monkeypatch)
    assert made["Brave New World"] == ("George Orwell", 1932)  # was 1949 (the 1984 row's year)
    assert made["The Hobbit"] == ("J.R.R. Tolkien", 1937) and made["1984"] == ("George Orwell", 1949)
    assert not [p for p in prompts if "Complete this row" in p]  # 7 calls fewer for this table
    assert "no reply wrote publication_year as a sequence" in (gens["publication_year"].note or "")


def test_a_sequence_down_a_reply_is_told_from_values_each_row_chose() -> None:
    assert rowgen.in_sequence(["30", "40", "60", "75", "80", "90", "100", "110"])  # the pharmacy's strengths
    assert rowgen.in_sequence(["daily", "weekly", "monthly", "daily", "weekly", " Monthly", "daily", "weekly"])
    assert rowgen.in_sequence(["110", "90", "75", "60"])
    assert not rowgen.in_sequence(["1951", "1851", "1937", "1869", "1984", "1954", "1951", "1851"])  # the library's
    assert not rowgen.in_sequence(["daily", "monthly", "weekly", "daily", "weekly", "weekly", "daily", "monthly"])
    assert not rowgen.in_sequence(["daily"] * 8)  # one value throughout is no cycle
    assert not rowgen.in_sequence(["30", "40", "60"])  # too few rows to tell
    assert not rowgen.in_sequence(["daily", "weekly", "daily"])


def test_a_reask_answer_copying_the_example_row_that_shares_a_value_keeps_the_continued_value() -> None:
    columns = ["title", "genre", "author", "publication_year"]
    seeds = [("The Great Gatsby", "Fiction", "F. Scott Fitzgerald", "1925"), ("1984", "Dystopian", "George Orwell", "1949")]
    rows = [("Brave New World", "Dystopian", "George Orwell", "1932"), ("Animal Farm", "Fable", "George Orwell", "1949"),
            ("The Hobbit", "Fantasy", "J.R.R. Tolkien", "1900")]
    client = fake_client([{"publication_year": 1949}, {"publication_year": 1945}, {"publication_year": 1937}])
    year = Column(name="publication_year", type="INTEGER", notnull=False, pk=0, has_default=False, enum=None, ref=None)
    check = rowgen.value_check(year,
                               ir.ColumnGenerator(column="publication_year", kind="integer", min=1800, max=2026),
                               [1925, 1949], named=True)
    assert check is not None
    out, calls, done = rowgen.complete_rows(SCENARIO, BOOKS, columns, seeds, rows, [3], [check], {}, client, 40)
    assert calls == 3 and done == 2
    assert out[0][3] == "1932"  # 1949 is the 1984 row's year, the example sharing the author: refused
    assert out[1][3] == "1945"  # a year of its own, though the author is the same
    assert out[2][3] == "1937"
