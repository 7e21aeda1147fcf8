"""Values of one row that belong together are drawn together (issue 40): a book's year with its title, a
medicine's strength and dose frequency with its name. The numbers and CHECK-list values whose examples vary with a
table's vocabulary column join the tuple the model continues; each is checked by code (a number in its generator's
range, a value of the CHECK list) and drawn from the row's tuple."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.meaning import vocab
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import SCENARIO
from tests.stages.test_rowgen import gen_settings, scripted


def column(name: str, enum: tuple[str, ...] | None = None) -> Column:
    return Column(name=name, type="TEXT", notnull=True, pk=0, has_default=False, enum=enum, ref=None)


# ------------------------------------------------------------------ cleaning and checking


def test_loose_places_may_repeat_and_share_a_beginning() -> None:
    known = [("The Hobbit", "1937"), ("1984", "1949")]
    rows = [("The Lord of the Rings", "1954"),   # kept
            ("Animal Farm", "1984"),             # kept: a year may equal a title ("1984")
            ("Dune", "1965"), ("Emma", "1965"),  # kept: a year may repeat
            ("The Hobbit", "1951"),              # the key again
            ("Ulysses", "Ulysses")]              # a year place equal to its title: a loose place is not compared
    got = vocab.clean_tuples(rows, known, loose=(1,))
    assert got == [("The Lord of the Rings", "1954"), ("Animal Farm", "1984"), ("Dune", "1965"), ("Emma", "1965"),
                   ("Ulysses", "Ulysses")]
    as_text = vocab.clean_tuples(rows, known)  # as text, "1984" is another column's value, "Ulysses" said twice
    assert ("Animal Farm", "1984") not in as_text and ("Ulysses", "Ulysses") not in as_text


def test_a_continued_number_must_be_one_in_its_generators_range() -> None:
    year = rowgen.value_check(column("year"), ir.ColumnGenerator(column="year", kind="integer", min=1800, max=2026),
                              [1925, 1960])
    assert year is not None
    assert [year(t) for t in ("1954", "1954.0", " 1851 ", "2150", "1799", "1954.5", "MCMLIV", "nan")] == [
        "1954", "1954", "1851", None, None, None, None, None]
    strength = rowgen.value_check(column("strength"), ir.ColumnGenerator(column="strength", kind="amount"),
                                  [100.0, 50.0, 200.0, 15.0])  # no range chosen: the examples' own
    assert strength is not None
    assert [strength(t) for t in ("15", "87.5", "200", "500", "10")] == ["15", "87.5", "200", None, None]


def test_a_check_lists_value_is_matched_whole_and_text_enums_stay_text() -> None:
    freq = rowgen.value_check(column("frequency", ("daily", "weekly", "monthly")),
                              ir.ColumnGenerator(column="frequency", kind="enum", values=["daily", "weekly"]), [])
    assert freq is not None
    assert [freq(t) for t in ("daily", "Weekly", " monthly ", "twice daily", "hourly")] == [
        "daily", "weekly", "monthly", None, None]
    assert rowgen.value_check(column("make"), ir.ColumnGenerator(column="make", kind="enum", values=["Ford"]),
                              []) is None
    assert rowgen.value_check(column("title"), ir.ColumnGenerator(column="title", kind="text_pool"), []) is None


# ------------------------------------------------------------------ which columns join the tuple


def gens_of(**kinds: str) -> dict[str, ir.ColumnGenerator | None]:
    return {n: ir.ColumnGenerator(column=n, kind=k, values=["a", "b"] if k == "enum" else None)  # type: ignore[arg-type]
            for n, k in kinds.items()}


def test_numbers_and_check_values_that_vary_with_an_entitys_rows_join_it() -> None:
    ex: dict[str, list[Any]] = {
        "title": ["The Great Gatsby", "1984", "Emma", "Dune"], "year": [1925, 1949, 1815, 1965],
        "copies": [2, 2, 2, 2],                                       # the same in every example: drawn apart
        "status": [None, None, None, None],                           # never set
        "freq": ["daily", "weekly", "daily", "monthly"],
        "isbn_no": [11, 12, 13, 14],                                  # UNIQUE: not a row's attribute
        "added": ["2025-01-02", "2025-02-03", "2025-03-04", "2025-04-05"],  # a date: relations hold it
        "flag": [1, 0, 1, 0]}
    asked = [column(n, ("daily", "weekly", "monthly") if n == "freq" else None) for n in ex]
    gens = gens_of(title="text_pool", year="integer", copies="integer", status="enum", freq="enum",
                   isbn_no="integer", added="integer", flag="boolean")
    rows = rowgen.set_rows(ex["title"])
    got = rowgen.row_mates(asked, gens, ex, rows, True, frozenset({"isbn_no"}))
    assert got == ["year", "freq"]
    # a tuple drawn again and again (no UNIQUE or natural-key column): neither a number nor a CHECK state joins it
    assert rowgen.row_mates(asked, gens, ex, rows, False, frozenset({"isbn_no"})) == []


def test_an_enum_the_model_listed_joins_a_repeated_tuple() -> None:
    ex: dict[str, list[Any]] = {"model": ["Camry", "X5", "Focus"], "make": ["Toyota", "BMW", "Ford"],
                                "seats": [5, 7, 5], "status": ["free", "rented", "free"]}
    asked = [column("model"), column("make"), column("seats"), column("status", ("free", "rented"))]
    gens = gens_of(model="text_pool", make="enum", seats="integer", status="enum")
    assert rowgen.row_mates(asked, gens, ex, rowgen.set_rows(ex["model"]), False, frozenset()) == ["make"]


# ------------------------------------------------------------------ in generated rows

CATALOGUE = ir.Table(name="catalogue", natural_key=["title"], ddl=(
    "CREATE TABLE catalogue (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL, "
    "year INTEGER NOT NULL CHECK (year > 0)) STRICT"))
CLASSICS = [("The Great Gatsby", "F. Scott Fitzgerald", 1925), ("To Kill a Mockingbird", "Harper Lee", 1960),
            ("1984", "George Orwell", 1949), ("Pride and Prejudice", "Jane Austen", 1813)]
MORE = [("The Lord of the Rings", "J.R.R. Tolkien", "1954"), ("Moby-Dick", "Herman Melville", "1851.0"),
        ("The Hobbit", "J.R.R. Tolkien", "1937"), ("War and Peace", "Leo Tolstoy", "1869"),
        ("The Catcher in the Rye", "J.D. Salinger", "1951"), ("Brave New World", "Aldous Huxley", "2150"),
        ("Jane Eyre", "Charlotte Bronte", "1847"), ("Dracula", "Bram Stoker", "1897"),
        ("Frankenstein", "Mary Shelley", "1818"), ("Ulysses", "James Joyce", "sometime"),
        ("Beloved", "Toni Morrison", "1987"), ("Walden", "Henry David Thoreau", "1854")]
TRUE_YEAR = {t: int(float(y)) for t, _, y in MORE if y.replace(".", "").isdigit()} | {t: y for t, _, y in CLASSICS}


def test_each_generated_book_keeps_the_year_continued_with_its_title(monkeypatch: pytest.MonkeyPatch) -> None:
    """The library's books carried years drawn apart from their titles (2026-11-28: 'The Lord of the Rings' 1854,
    'Moby-Dick' 2003); continued with title and author, each book keeps its own year, a year outside the chosen
    range (2150) or no number ("sometime") drops its row."""
    from pipeline.stages.rows.populate import generate_seed

    monkeypatch.setattr(rowgen, "_vectors", lambda: None)
    replies = [{"rows": [list(r) for r in CLASSICS]},
               {"locale": "en_GB", "columns": {"title": {"kind": "text_pool"}, "author": {"kind": "text_pool"},
                                               "year": {"kind": "integer", "min": 1800, "max": 2026}}}]
    pools = {"title": [t for t, _, _ in MORE], "author": [a for _, a, _ in MORE], "year": [y for _, _, y in MORE]}
    client = scripted(replies, pools)
    res = generate_seed(SCENARIO, (CATALOGUE,), client, gen_settings(entity_rows=(12, 12)))
    assert res.ok and res.value is not None, res.rejections
    (books,) = res.value
    assert books.plan is not None
    gens = {g.column: g for g in books.plan.generators}
    assert gens["year"].kind == "integer" and gens["year"].after == "title"
    assert any("more rows of (title, author, year)" in m[0]["content"] for m in client.requests)
    made = [(r["title"], r["year"]) for r in books.rows]
    assert len(made) > len(CLASSICS)
    assert all(TRUE_YEAR.get(t) == y for t, y in made), made  # never 'The Lord of the Rings' 1854
    assert not {"Brave New World", "Ulysses"} & {t for t, _ in made}
    assert all(isinstance(y, int) for _, y in made)


PHARMACY = ir.Table(name="medicines", natural_key=["name"], ddl=(
    "CREATE TABLE medicines (medicine_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, strength REAL NOT NULL "
    "CHECK (strength > 0), frequency TEXT NOT NULL CHECK (frequency IN ('daily', 'weekly', 'monthly')), "
    "expires TEXT NOT NULL) STRICT"))
DRUGS = [("Aspirin", 100.0, "daily", "2026-06-01"), ("Ibuprofen", 400.0, "daily", "2026-07-01"),
         ("Vitamin D", 1000.0, "weekly", "2026-08-01"), ("Methotrexate", 10.0, "weekly", "2026-09-01")]
MORE_DRUGS = [("Amlodipine", "5", "Daily"), ("Metformin", "500", "daily"), ("Atorvastatin", "20", "daily"),
              ("Alendronate", "70", "weekly"), ("Paracetamol", "500", "monthly"), ("Lisinopril", "10", "daily"),
              ("Warfarin", "5000", "daily"), ("Omeprazole", "20", "twice daily"), ("Sertraline", "50", "daily")]


def test_each_generated_medicine_keeps_its_strength_and_frequency(monkeypatch: pytest.MonkeyPatch) -> None:
    """A medicine's strength and dose frequency come with its name (2026-11-28: "Amlodipine 188", "Paracetamol
    monthly" drawn apart); a strength far outside the examples' range (5000) or a frequency outside the CHECK list
    ("twice daily") drops its row, a CHECK value in another case ("Daily") is stored as the list writes it. The
    expiry date is no attribute of the medicine: it stays drawn by its own generator."""
    from pipeline.stages.rows.populate import generate_seed

    monkeypatch.setattr(rowgen, "_vectors", lambda: None)
    replies = [{"rows": [list(r) for r in DRUGS]},
               {"locale": "en_US", "columns": {
                   "name": {"kind": "text_pool"}, "strength": {"kind": "amount", "min": 1, "max": 1000},
                   "frequency": {"kind": "enum", "values": ["daily", "weekly", "monthly"], "weights": [1, 1, 1]},
                   "expires": {"kind": "date", "start": "2026-02-01", "end": "2027-01-01"}}}]
    pools = {"name": [n for n, _, _ in MORE_DRUGS], "strength": [s for _, s, _ in MORE_DRUGS],
             "frequency": [f for _, _, f in MORE_DRUGS]}
    client = scripted(replies, pools)
    res = generate_seed(SCENARIO, (PHARMACY,), client, gen_settings(entity_rows=(10, 10)))
    assert res.ok and res.value is not None, res.rejections
    (meds,) = res.value
    assert meds.plan is not None
    gens = {g.column: g for g in meds.plan.generators}
    assert gens["strength"].after == gens["frequency"].after == "name"
    assert gens["expires"].after is None
    truth = {n: (float(s), f.lower()) for n, s, f in MORE_DRUGS} | {n: (s, f) for n, s, f, _ in DRUGS}
    made = [(r["name"], r["strength"], r["frequency"]) for r in meds.rows]
    assert len(made) > len(DRUGS)
    assert all(truth[n] == (s, f) for n, s, f in made), made
    assert not {"Warfarin", "Omeprazole"} & {n for n, _, _ in made}


# ------------------------------------------------------------------ a category every example shares


def constrained(name: str, enum: tuple[Any, ...] | None = None, default: bool = False) -> Column:
    return Column(name=name, type="TEXT", notnull=True, pk=0, has_default=default, enum=enum, ref=None)


def test_a_category_every_example_shares_joins_an_entitys_row_a_state_does_not() -> None:
    """The library's four example books were all 'fiction' (2026-11-30, r20b): a genre the same in every example
    was drawn apart from its book by weights and made 'Animal Farm' and 'The Hobbit' non-fiction. An entity's
    named category joins its row whatever its examples hold; what marks a state stays drawn apart: a DEFAULT (the
    state a row starts in), a yes/no list, a number (a count rows change), a table whose dates code draws (a short
    list there is a state held to the clock)."""
    ex: dict[str, list[Any]] = {
        "title": ["The Great Gatsby", "1984", "Emma", "Dune"], "year": [1925, 1949, 1815, 1965],
        "genre": ["fiction"] * 4,                                     # CHECK list, no default: a category
        "shelf": ["hall"] * 4,                                        # the model's own vocabulary: a category
        "state": ["in"] * 4,                                          # CHECK list with a DEFAULT: a state
        "flag": [1] * 4,                                              # CHECK (flag IN (0, 1)): yes/no
        "copies": [2] * 4}                                            # a number: drawn apart
    asked = [constrained("title"), constrained("year"), constrained("genre", ("fiction", "non-fiction")),
             constrained("shelf"), constrained("state", ("in", "out"), default=True), constrained("flag", (0, 1)),
             constrained("copies")]
    gens = gens_of(title="text_pool", genre="enum", year="integer", shelf="enum", state="enum", flag="enum",
                   copies="integer")
    rows = rowgen.set_rows(ex["title"])
    # the varying year first: TUPLE_MATES_WIDTH keeps the first
    assert rowgen.row_mates(asked, gens, ex, rows, True, frozenset()) == ["year", "genre", "shelf"]
    assert rowgen.row_mates(asked, gens, ex, rows, False, frozenset()) == []  # a row drawn again and again
    dated = {**gens, "added": ir.ColumnGenerator(column="added", kind="date", start="2025-01-01", end="2026-01-01")}
    assert rowgen.row_mates(asked, dated, ex, rows, True, frozenset()) == ["year"]


BOOKS = ir.Table(name="books", natural_key=["title"], ddl=(
    "CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, author TEXT NOT NULL, genre TEXT "
    "NOT NULL CHECK (genre IN ('fiction', 'non-fiction')), publication_year INTEGER NOT NULL CHECK "
    "(publication_year > 0)) STRICT"))
NOVELS = [("The Great Gatsby", "F. Scott Fitzgerald", "fiction", 1925),
          ("To Kill a Mockingbird", "Harper Lee", "fiction", 1960), ("1984", "George Orwell", "fiction", 1949),
          ("Pride and Prejudice", "Jane Austen", "fiction", 1813)]
SHELF = [("Animal Farm", "George Orwell", "fiction", "1945"), ("The Hobbit", "J.R.R. Tolkien", "fiction", "1937"),
         ("Moby-Dick", "Herman Melville", "Fiction", "1851"), ("War and Peace", "Leo Tolstoy", "fiction", "1869"),
         ("A Brief History of Time", "Stephen Hawking", "non-fiction", "1988"),
         ("Silent Spring", "Rachel Carson", "non-fiction", "1962"),
         ("The Lord of the Rings", "J.R.R. Tolkien", "fiction", "1954"),
         ("The Histories", "Herodotus", "history", "1850"),          # no value of the CHECK list: the row drops
         ("Walden", "Henry David Thoreau", "non-fiction", "1854"), ("Dracula", "Bram Stoker", "fiction", "1897"),
         ("The Origin of Species", "Charles Darwin", "non-fiction", "1859"),
         ("Frankenstein", "Mary Shelley", "fiction", "1818")]


def test_each_generated_book_keeps_the_genre_written_with_its_title(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example of 2026-11-30: every example book 'fiction', the model's generator 'fiction' or 'non-fiction'
    half and half; drawn apart, 7 of its 10 new novels were non-fiction. Continued with title, author and year, the
    genre is each book's own, held to the CHECK list ('Fiction' stored as 'fiction', 'history' drops its row)."""
    from pipeline.stages.rows.populate import generate_seed

    monkeypatch.setattr(rowgen, "_vectors", lambda: None)
    replies = [{"rows": [list(r) for r in NOVELS]},
               {"locale": "en_US", "columns": {
                   "title": {"kind": "text_pool"}, "author": {"kind": "text_pool"},
                   "genre": {"kind": "enum", "values": ["fiction", "non-fiction"], "weights": [0.5, 0.5]},
                   "publication_year": {"kind": "integer", "min": 1800, "max": 2026}}}]
    pools = {c: [r[i] for r in SHELF] for i, c in enumerate(("title", "author", "genre", "publication_year"))}
    client = scripted(replies, pools)
    res = generate_seed(SCENARIO, (BOOKS,), client, gen_settings(entity_rows=(12, 12)))
    assert res.ok and res.value is not None, res.rejections
    (books,) = res.value
    assert books.plan is not None
    gens = {g.column: g for g in books.plan.generators}
    assert gens["genre"].kind == "enum" and gens["genre"].after == "title"
    assert any("more rows of (title, author, genre, publication_year)" in m[0]["content"] for m in client.requests)
    truth = {t: g.lower() for t, _, g, _ in SHELF} | {t: g for t, _, g, _ in NOVELS}
    made = [(r["title"], r["genre"]) for r in books.rows]
    assert len(made) > len(NOVELS) + 4
    assert all(truth[t] == g for t, g in made), made  # never 'Animal Farm' non-fiction
    assert "The Histories" not in {t for t, _ in made}
    assert {g for _, g in made} == {"fiction", "non-fiction"}
