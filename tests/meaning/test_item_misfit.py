"""One continued value against its column's examples (issue 40, the library's regeneration of 2026-11-28): a value
of another column's kind ("J.D. Salinger", "fiction", "1925" among book titles) is refused by meaning, item by
item, and a value whose shape the examples contradict ("timeless" among capitalised titles) by its shape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipeline.meaning import profile as prof
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import SCENARIO
from tests.stages.test_rowgen import small_settings
from tests.stages.test_rowgen_vocab import BOOKS, EXAMPLES, continuing

AUTHORS = ["F. Scott Fitzgerald", "Harper Lee", "George Orwell", "Jane Austen"]
GENRES = ["Fiction", "Fiction", "Dystopian", "Romance"]
YEARS = ["1925", "1960", "1949", "1813"]


def axis_vectors(groups: dict[str, list[str]]) -> prof.Vectors:
    """Fake MiniLM: each text of a group on that group's axis; any other text on the axis of the first group (a
    title like the titles)."""
    names = list(groups)
    axis = {t: names.index(g) for g, texts in groups.items() for t in texts}

    def encode(texts: list[str]) -> Any:
        out = np.zeros((len(texts), len(names)), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, axis.get(t, 0)] = 1.0
        return out

    return prof.Vectors(encode)


def test_a_value_of_another_columns_kind_is_refused_item_by_item() -> None:
    vec = axis_vectors({"title": EXAMPLES, "author": [*AUTHORS, "J.D. Salinger"], "genre": [*GENRES, "Horror"]})
    got = prof.closer_elsewhere(vec, EXAMPLES, {"author": AUTHORS, "genre": GENRES},
                                ["The Hobbit", "J.D. Salinger", "Horror", "Dune"])
    assert set(got) == {"J.D. Salinger", "Horror"}
    assert got["J.D. Salinger"] == ("author", 0.0, 1.0)
    assert prof.closer_elsewhere(vec, EXAMPLES, {}, ["J.D. Salinger"]) == {}  # nothing to compare with


def test_a_column_of_numbers_judges_only_values_that_are_numbers() -> None:
    vec = axis_vectors({"model": ["Camry", "X5"], "seats": [*YEARS, "3 Series", "1953"]})
    got = prof.closer_elsewhere(vec, ["Camry", "X5"], {"seats": YEARS}, ["3 Series", "1953"])
    assert set(got) == {"1953"}  # "3 Series" holds words: a count is no kind of it


def test_a_small_first_letter_among_capitalised_examples_is_a_misfit() -> None:
    p = prof.profile(EXAMPLES)
    assert p is not None and p.capital
    assert prof.misfit(p, "timeless") and prof.misfit(p, "fiction")
    assert prof.misfit(p, "The Odyssey") is None and prof.misfit(p, "2001") is None
    lower = prof.profile(["john.doe@example.com", "jane@example.org"])
    assert lower is not None and not lower.capital
    assert prof.misfit(lower, "ann@example.net") is None
    cjk = prof.profile(["東京タワー", "大阪城"])  # no case in the script: never a capital rule
    assert cjk is not None and not cjk.capital


def test_a_continued_list_drops_values_of_the_tables_other_columns() -> None:
    """The library's fourth title call (cached reply, 2026-11-28) offered an author, a genre, a year and a word;
    only the real titles are kept."""
    vec = axis_vectors({"title": EXAMPLES, "author": [*AUTHORS, "J.D. Salinger"], "genre": [*GENRES, "Horror"],
                        "year": YEARS})
    reply = ["The Catcher in the Rye", "1925", "J.D. Salinger", "Horror", "timeless", "The Hobbit"]
    mates = {"author": AUTHORS, "genre": GENRES, "year": YEARS}
    got, _ = rowgen.continue_list(SCENARIO, BOOKS, "title", EXAMPLES, 40, 1, continuing([reply]), small_settings(),
                                  shape=prof.profile(EXAMPLES), mates=mates, vectors=vec)
    assert got == ["The Catcher in the Rye", "The Hobbit"]
    before, _ = rowgen.continue_list(SCENARIO, BOOKS, "title", EXAMPLES, 40, 1, continuing([reply]),
                                     small_settings(), shape=prof.profile(EXAMPLES))
    assert "J.D. Salinger" in before  # without the table's other columns, meaning cannot tell


@pytest.fixture(scope="module")
def minilm() -> prof.Vectors:
    vec = rowgen._vectors()
    if vec is None:
        pytest.fail("the MiniLM model (pipeline.embed) did not load: the item check cannot be measured")
    return vec


def test_the_margin_on_the_librarys_cached_titles_and_two_other_languages(minilm: prof.Vectors) -> None:
    """Real MiniLM on the values measured for :data:`pipeline.meaning.profile.ITEM_MARGIN`."""
    titles = prof.closer_elsewhere(minilm, EXAMPLES, {"author": AUTHORS, "genre": GENRES, "year": YEARS},
                                   ["fiction", "non-fiction", "1925", "1953", "F. Scott Fitzgerald", "Jane Austen",
                                    "The Catcher in the Rye", "Moby-Dick", "War and Peace", "The Hobbit",
                                    "Brave New World", "A Tale of Two Cities", "The Odyssey"])
    assert set(titles) == {"fiction", "non-fiction", "1925", "1953", "F. Scott Fitzgerald", "Jane Austen"}
    titel = ["Der Zauberberg", "Die Blechtrommel", "Der Steppenwolf", "Effi Briest"]
    german = prof.closer_elsewhere(
        minilm, titel, {"autor": ["Thomas Mann", "Günter Grass", "Hermann Hesse", "Theodor Fontane"],
                        "gattung": ["Roman", "Roman", "Erzählung", "Novelle"], "jahr": ["1924", "1959", "1927", "1896"]},
        ["Buddenbrooks", "Die Verwandlung", "Der Prozess", "Siddhartha", "Faust", "Berlin Alexanderplatz",
         "Hermann Hesse", "Roman", "1901"])
    assert set(german) == {"Hermann Hesse", "Roman", "1901"}
    spanish = prof.closer_elsewhere(
        minilm, ["Paracetamol", "Ibuprofeno", "Amoxicilina", "Omeprazol"],
        {"descripcion": ["Analgésico y antipirético", "Antiinflamatorio no esteroideo",
                         "Antibiótico de amplio espectro", "Inhibidor de la bomba de protones"],
         "paciente": ["María García", "José Martínez", "Lucía Fernández", "Carlos López"]},
        ["Metformina", "Atorvastatina", "Losartán", "Salbutamol", "Diazepam", "Enalapril", "Ana Torres"])
    assert set(spanish) == {"Ana Torres"}
