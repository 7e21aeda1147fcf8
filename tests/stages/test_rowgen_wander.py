"""Continued lists that wander (issue 40, the fifteenth session's closing note): later, sampled calls of a list
continued from its examples drift to other kinds of values, films and books among a record shop's albums. Each value
a call adds is checked against the column's own examples before it is kept: on later calls its shape must look like
the examples and the values kept so far (the first call's "keep them all when most misfit" does not carry over),
and by MiniLM it must not sit far below the examples' own similarity to one another
(:func:`pipeline.meaning.profile.strays`), nor nearer another column's examples (``closer_elsewhere``)."""

from __future__ import annotations

import pytest

from pipeline.llm import fake_client
from pipeline.meaning import profile as prof
from pipeline.stages.rows import generators as rowgen
from tests.meaning.test_item_misfit import axis_vectors
from tests.stages.library_replies import SCENARIO
from tests.stages.test_rowgen import small_settings
from tests.stages.test_rowgen_short_list import ALBUMS, SEEDS, SHOP
from tests.stages.test_rowgen_vocab import BOOKS, EXAMPLES, continuing

REPLIES = [
    [("The Dark Side of the Moon", "Pink Floyd"), ("Stairway to Heaven", "Led Zeppelin"), ("Imagine", "John Lennon"),
     ("Let It Be", "The Beatles"), ("Hotel California", "The Eagles"),
     ("Sgt. Pepper's Lonely Hearts Club Band", "The Beatles"), ("A Day in the Life", "The Beatles"),
     ("The Wall", "Pink Floyd")],
    [("Thriller", "Michael Jackson"), ("Back in Black", "AC/DC"), ("The Bodyguard", "Michael Jackson"),
     ("The Dark Side of the Moon (Remastered)", "Pink Floyd"), ("The Wall (Remastered)", "Pink Floyd"),
     ("Stairway to Heaven", "Led Zeppelin"), ("The Who's Next", "The Who"), ("Thriller (Remastered)", "Michael Jackson")],
    [("Thriller", "Michael Jackson"), ("Back in Black", "AC/DC"), ("The Matrix", "The Matrix"),
     ("The Lord of the Rings: The Fellowship of the Ring", "J.R.R. Tolkien"),
     ("The Lord of the Rings: The Return of the King", "J.R.R. Tolkien"),
     ("The Lord of the Rings: The Two Towers", "J.R.R. Tolkien"),
     ("The Lord of the Rings: The Hobbit", "J.R.R. Tolkien"),
     ("The Lord of the Rings: The Silmarillion", "J.R.R. Tolkien")],
]
"""The real model's replies for the record shop's albums (qwen2.5-coder-1.5b, 2026-11-30, the real test's
prompt): the third, sampled call wandered into the Lord of the Rings."""


def replaying(replies: list[list[tuple[str, str]]]) -> object:
    queue = list(replies)

    def reply(messages: object) -> object:
        rows = queue.pop(0) if queue else []
        return {"rows": [{"title": t, "artist": a} for t, a in rows] or [{"title": "Abbey Road", "artist": "The Beatles"}]}

    return fake_client([reply] * 10)


def test_a_later_call_that_wanders_off_the_examples_shape_adds_nothing() -> None:
    """The third call's five Lord of the Rings rows (eight and nine words, a colon, beside one- and two-word albums)
    were all kept before: fewer than half of its new rows fit, so none was refused. A later call keeps only what
    looks like the examples and the rows kept so far."""
    shapes = [prof.profile([r[i] for r in SEEDS]) for i in range(2)]
    refused: dict[str, str] = {}
    got, calls = rowgen.continue_tuples(SHOP, ALBUMS, ["title", "artist"], SEEDS, 40, 3, replaying(REPLIES),  # type: ignore[arg-type]
                                        small_settings(), distinct=(0,), shapes=shapes, refused=refused)
    assert calls == 3
    titles = [t for t, _ in got]
    assert not [t for t in titles if "Lord of the Rings" in t], got
    assert {"Stairway to Heaven", "Imagine", "Back in Black", "The Who's Next"} <= set(titles)
    assert "words" in refused[
        "The Lord of the Rings: The Fellowship of the Ring"]


def test_a_value_far_from_every_example_is_refused_without_other_columns() -> None:
    """No other column's examples to compare with (a list's only text column): a value on its own axis, far below
    the examples' similarity to one another, is refused, and said why. Before, meaning was checked only against
    other columns' examples, and with none the value was kept."""
    vec = axis_vectors({"title": [*EXAMPLES, "The Hobbit", "Dune"], "person": ["John Smith"]})
    refused: dict[str, str] = {}
    got, _ = rowgen.continue_list(SCENARIO, BOOKS, "title", EXAMPLES, 40, 1,
                                  continuing([["The Hobbit", "John Smith", "Dune"]]), small_settings(),
                                  shape=prof.profile(EXAMPLES), vectors=vec, refused=refused)
    assert got == ["The Hobbit", "Dune"]
    assert list(refused) == ["John Smith"] and "MiniLM 0.0" in refused["John Smith"]
    assert rowgen.refused_note(refused).startswith("; 1 continued values refused as unlike the examples ('John Smith'")


@pytest.fixture(scope="module")
def minilm() -> prof.Vectors:
    vec = rowgen._vectors()
    if vec is None:
        pytest.fail("the MiniLM model (pipeline.embed) did not load: strays cannot be measured")
    return vec


MEDICINES = ["Aspirin", "Ibuprofen", "Paracetamol", "Lisinopril"]
CONTINUED = ["Lorazepam", "Albuterol", "Lithium", "Methadone", "Zalopril", "Lidocaine", "Metoprolol", "Dapoxetine",
             "Acetaminophen", "Dipyridamole", "Ciprofloxacin", "Ritodine", "Dexamethasone", "Hydrochlorothiazide",
             "Naproxen", "Oxycodone", "Furosemide", "Metformin", "Pimefloxacin", "Bupropion", "Fenofibrate",
             "Carvedilol", "Diphenhydramine", "Amoxicillin", "Omeprazole", "Zinc", "Ranitidine", "Ondansetron",
             "Fluoxetine", "Zolpidem", "Celebix", "Fluteroxate", "Metastasone", "Iodine", "Cetirizine", "Clopidogrel",
             "Fenfluramine", "Piroxicam", "Sulprazole"]
"""The committed example's pharmacy: its four example medicines and the 39 the model continued (2026-11-30)."""


def test_strays_on_real_minilm_refuse_a_person_among_medicines_and_keep_real_values(minilm: prof.Vectors) -> None:
    """The calibration of :data:`pipeline.meaning.profile.STRAY` on real MiniLM: a person's name among the
    pharmacy's medicines is refused; every medicine the example continued, the library's real titles, German
    titles (the farthest, "Buddenbrooks") and the record shop's bands (the farthest, "AC/DC") are kept."""
    assert set(prof.strays(minilm, MEDICINES, [*CONTINUED, "John Smith"])) == {"John Smith"}
    assert prof.strays(minilm, EXAMPLES, ["The Catcher in the Rye", "Moby-Dick", "Siddhartha", "The Alchemist",
                                          "War and Peace", "A Tale of Two Cities"]) == {}
    assert prof.strays(minilm, ["Der Zauberberg", "Die Blechtrommel", "Der Steppenwolf", "Effi Briest"],
                       ["Buddenbrooks", "Faust", "Die Verwandlung", "Der Prozess"]) == {}
    assert prof.strays(minilm, [a for _, a in SEEDS], ["AC/DC", "Pink Floyd", "The Who", "The Eagles"]) == {}
