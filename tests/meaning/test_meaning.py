"""The language-neutral checks of meaning: a column's profile from its examples, vocabulary lists cleaned by their
structure, relations the examples show, and the findings on the committed example (built before these checks)."""

from __future__ import annotations

import glob
from datetime import date
from pathlib import Path

import numpy as np

from pipeline.envdir import load_env_dir
from pipeline.meaning import findings, profile, relations, vocab

ROOT = Path(__file__).resolve().parents[2]


def test_a_profile_refuses_values_of_another_shape_in_any_script() -> None:
    drugs = profile.profile(["Aspirin", "Ibuprofen", "Paracetamol", "Lisinopril"])
    phones = profile.profile(["123-456-7890", "098-765-4321", "111-222-3333"])
    mails = profile.profile(["john.doe@example.com", "jane@example.org"])
    assert drugs and phones and mails
    assert "2 words" in (profile.misfit(drugs, "Bryan Robbins") or "")
    assert profile.misfit(drugs, "Metformin") is None
    assert "few digits" in (profile.misfit(phones, "Diamond Sosa") or "")
    assert profile.misfit(phones, "(555) 201-3344") is None
    assert "'@'" in (profile.misfit(mails, "Kathryn") or "") and profile.misfit(mails, "mo@example.net") is None
    kanji = profile.profile(["東京都", "大阪府", "京都府"])  # no word list: the same checks hold in any script
    assert kanji and profile.misfit(kanji, "0312345678") and profile.misfit(kanji, "北海道") is None
    assert profile.contradiction(drugs, ["Bryan Robbins", "Kathryn Evans", "Ivy Blue", "Amoxicillin"]) is not None
    assert profile.contradiction(drugs, ["Bryan Robbins", "Kathryn Evans", "Amoxicillin"]) is None
    assert profile.contradiction(drugs, ["Amoxicillin", "Warfarin", "Kathryn Evans"]) is None


def test_a_column_of_dates_takes_only_real_days() -> None:
    # the HR leave domain's public holidays were continued as "2025-12-32", "2025-09-31", "2025-10-55"
    days = profile.profile(["2026-01-01", "2025-12-25", "2026-04-03"])
    assert days and days.dates
    for bad in ("2025-12-32", "2025-09-31", "2025-10-55", "New Year"):
        assert "calendar date" in (profile.misfit(days, bad) or ""), bad
    assert profile.misfit(days, "2026-05-01") is None
    assert profile.contradiction(days, ["2025-12-32", "2025-08-43", "2025-10-54", "2026-01-01"]) is not None
    mixed = profile.profile(["2026-01-01", "soon"])
    assert mixed and not mixed.dates


def test_samples_closer_to_another_columns_examples_are_that_columns_kind() -> None:
    # a toy encoder: two directions, the drug names on one, person names on the other
    axis = {"Aspirin": 0, "Ibuprofen": 0, "Paracetamol": 0, "John Doe": 1, "Jane Smith": 1, "Bryan Robbins": 1,
            "Kathryn Evans": 1, "Metformin": 0}

    def encode(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 2), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, axis[t]] = 1.0
        return out

    vec = profile.Vectors(encode)
    own, others = ["Aspirin", "Ibuprofen", "Paracetamol"], {"patients.name": ["John Doe", "Jane Smith"]}
    hit = profile.semantic_misfit(vec, own, others, ["Bryan Robbins", "Kathryn Evans"])
    assert hit is not None and hit[0] == "patients.name" and hit[2] > hit[1]
    assert profile.semantic_misfit(vec, own, others, ["Metformin"]) is None


def test_vocabulary_lists_lose_placeholders_glued_values_suffixes_and_repeated_words() -> None:
    examples = ["The Great Gatsby", "1984", "Charles Dickens"]
    got = vocab.clean(["Dune", "1984 Charles Dickens", "The Great Gatsby II", "dune", "Emma", "Work A", "Work B",
                       "Antihistamines antihistamines", "Beloved", "  Middlemarch "], examples)
    assert got == ["Dune", "Emma", "Beloved", "Middlemarch"]
    assert vocab.placeholder_examples(["Work A", "Work B", "Work C"])
    assert vocab.placeholder_examples(["Depot 1", "Depot 2", "Harbour"])
    assert not vocab.placeholder_examples(["123-456-7890", "098-765-4321"])  # digits only: no word repeated
    assert not vocab.placeholder_examples(["Emma", "Dune", "Ulysses"])


def test_a_continued_value_ends_in_a_digit_only_where_an_example_does() -> None:
    """Issue 40: the dental clinic's dentists ("Dr. Smith", "Dr. Johnson", ...) were continued with "Dr. Wang7",
    "Dr. Li7", "Dr. Chen1": a digit glued to the name is no count to :func:`vocab.stem` and no word to
    :func:`vocab.glued`; no example ends in a digit, so no continued value may."""
    dentists = ["Dr. Smith", "Dr. Johnson", "Dr. Brown", "Dr. Davis"]
    got = vocab.clean(["Dr. Lee", "Dr. Wang7", "Dr. Liu2", "Dr. Yu5", "Dr. Kim", "Dr. Wang10"], dentists)
    assert got == ["Dr. Lee", "Dr. Kim"]
    # in any script: a wide digit too
    assert vocab.clean(["陈医生", "王医生2", "刘医生３"], ["李医生", "张医生"]) == ["陈医生"]
    # where an example ends in digits, a value may: the examples' own character class decides
    assert vocab.clean(["Vitamin B12", "Zinc"], ["Vitamin D3", "Aspirin"]) == ["Vitamin B12", "Zinc"]
    # continued rows: the row of a suffixed name is dropped, a number place (loose) is not read as text
    rows = [("Dr. Wang", "4"), ("Dr. Liu2", "5"), ("Dr. Zhang3", "1"), ("Dr. Park", "2")]
    known = [("Dr. Smith", "3"), ("Dr. Johnson", "7")]
    assert vocab.clean_tuples(rows, known, loose=(1,)) == [("Dr. Wang", "4"), ("Dr. Park", "2")]


def test_a_list_valued_column_is_found_by_its_separator_and_short_items() -> None:
    allergies = ["Aspirin, ibuprofen", "Antibiotics, antihistamines", "Penicillin"]
    assert vocab.list_separator(allergies) == ", "
    assert vocab.list_items(allergies, ", ") == ["Aspirin", "ibuprofen", "Antibiotics", "antihistamines",
                                                 "Penicillin"]
    assert vocab.list_counts(allergies, ", ") == (1, 2) and vocab.later_lower(allergies, ", ")
    sentences = ["A pain reliever for mild pain, taken with food.", "An anti-inflammatory, for swelling."]
    assert vocab.list_separator(sentences) is None
    # parts in fixed places are no list (2026-11-28: addresses shuffled into "USA, 789 Oak St, Anytown")
    addresses = ["123 Main St, Anytown, USA", "456 Elm St, Anytown, USA", "789 Oak St, Anytown, USA"]
    assert vocab.list_separator(addresses) is None
    assert vocab.list_separator(["12 Rue Cler, Lyon", "3 Via Roma, Milano", "8 Calle Mayor, Sevilla"]) is None
    assert vocab.list_separator(["Aspirin, ibuprofen", "Penicillin, latex"]) == ", "  # like items, none fixed


def test_relations_come_from_the_examples_values_not_their_names() -> None:
    ex = {"a": ["2026-01-02", "2025-12-01", "2026-01-10"], "b": ["2026-01-16", "2025-12-15", "2026-01-24"],
          "c": ["2026-01-01", "2026-02-01", "2025-11-01"], "n": [3, 0, 5]}
    orders = relations.date_orders(ex)
    assert [(o.first, o.second, o.min_days, o.max_days) for o in orders] == [("a", "b", 14, 14)]
    assert relations.clock_side(ex["a"], date(2026, 1, 15)) == "past"
    assert relations.clock_side(ex["c"], date(2026, 1, 15)) is None
    assert relations.sign(ex["n"]) == "non_negative" and relations.sign([2.5, 1]) == "positive"
    parents = {1: {"start": "2026-01-01"}, 2: {"start": "2026-01-05"}, 3: {"start": "2025-12-01"}}
    po = relations.parent_orders({"via": [1, 2, 3], "d": ["2026-01-03", "2026-01-05", "2025-12-09"]}, "via", parents)
    assert [(p.column, p.parent_column, p.after, p.min_days) for p in po] == [("d", "start", True, 0)]
    # two children agree by chance one time in two: no relation from them
    assert relations.parent_orders({"via": [1, 2], "d": ["2026-01-03", "2026-01-05"]}, "via", parents) == []
    assert relations.violations([{"a": "2026-01-05", "b": "2026-01-01"}], orders[0])


def test_findings_name_the_column_a_value_and_what_it_contradicts() -> None:
    from pipeline import ir

    ex = [{"id": i + 1, "name": n, "phone": p, "made": m, "due": d, "note": None}
          for i, (n, p, m, d) in enumerate([("Aspirin", "123-456-7890", "2026-01-02", "2026-01-16"),
                                           ("Ibuprofen", "098-765-4321", "2025-12-01", "2025-12-15"),
                                           ("Paracetamol", "111-222-3333", "2026-01-10", "2026-01-24")])]
    made = [{"id": 4 + i, "name": f"{a} {b}", "phone": f"{b} {a}", "made": "2026-01-10", "due": "2026-01-01",
             "note": None} for i, (a, b) in enumerate([("Bryan", "Robbins"), ("Kathryn", "Evans"), ("Ivy", "Blue")])]
    env = ir.Environment(
        scenario=ir.Scenario(name="s", description="d"),
        tables=[ir.Table(name="t", ddl="CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, phone TEXT, made TEXT, "
                                       "due TEXT, note TEXT) STRICT")],
        seed=[ir.SeedRows(table="t", rows=ex + made, plan=ir.RowPlan(seed=1, examples=3))])
    found = {(f.column, f.value): f.contradicts for f in findings.env_findings(env)}
    assert "2 words" in found[("name", "Bryan Robbins")]
    assert "few digits" in found[("phone", "Robbins Bryan")]
    assert "3 of 3 generated rows have due before made" in found[("due", "2026-01-01")]
    assert "NULL in all 6 rows" in found[("note", None)]
    assert not [k for k in found if k[0] == "id"]
    clean = ir.Environment(scenario=env.scenario, tables=env.tables,
                           seed=[ir.SeedRows(table="t", rows=ex + [{**ex[0], "id": 9, "note": "x"}],
                                             plan=ir.RowPlan(seed=1, examples=3))])
    assert findings.env_findings(clean) == []


def test_the_committed_example_catalog_loads_into_the_findings() -> None:
    for d in sorted(glob.glob(str(ROOT / "generated/quickstart/envs/*"))):
        env, _, _ = load_env_dir(d)
        for f in findings.env_findings(env):
            assert f.table in {t.name for t in env.tables} and f.contradicts


# the library's continuation of books.title (2026-11-28 regeneration, its cached replies): 25 of 47 titles were an
# earlier title with more words, or shared most of their beginning with another
LIBRARY_VARIANTS = [
    "The Catcher in the Rye: The Complete Edition (ePub)", "The Catcher in the Rye: The Complete Edition (Paperback)",
    "The Hobbit: A Comprehensive Edition (Audio Book)", "The Great Gatsby: A Novel", "To Kill a Mockingbird in America",
    "The Lord of the Rings: The Extended Edition (DVD)", "Pride and Prejudice: A Novel (Paperback)"]


def test_a_continued_list_refuses_a_value_with_more_words_or_most_of_its_beginning_shared() -> None:
    examples = ["The Great Gatsby", "To Kill a Mockingbird", "1984", "Pride and Prejudice"]
    got = vocab.clean(["The Catcher in the Rye", "The Hobbit", "The Lord of the Rings", *LIBRARY_VARIANTS, "Dune",
                       "Brave New World"], examples)
    assert got == ["The Catcher in the Rye", "The Hobbit", "The Lord of the Rings", "Dune", "Brave New World"]
    # without the value they vary: the first edition is kept, the next ones share its head
    eds = ["The Catcher in the Rye: The Complete Edition (ePub)", "The Catcher in the Rye: The Complete Edition (VHS)",
           "The Catcher in the Rye: A Novel", "The Catcher in the Rye Complete Edition Paperback",
           "The Catcher in the Rye Complete Edition Hardcover"]
    assert vocab.clean(eds) == ["The Catcher in the Rye: The Complete Edition (ePub)",
                                "The Catcher in the Rye Complete Edition Paperback"]
    assert vocab.clean(["Der Process: Roman"], ["Der Process"]) == []
    assert vocab.clean(["ノルウェイの森 上"], ["ノルウェイの森"]) == []  # no spaces: each wide character may end a word
    # a shorter value of a kept one is its variant too
    assert vocab.clean(["Pride and Prejudice"], ["Pride and Prejudice: A Novel"]) == []


def test_distinct_values_that_share_a_few_words_are_kept_in_any_language() -> None:
    pairs = [("The Lord of the Rings", "The Lord of the Flies"), ("Der Herr der Ringe", "Der Herr der Diebe"),
             ("Harry Potter and the Chamber of Secrets", "Harry Potter and the Prisoner of Azkaban"),
             ("Harry Potter und der Stein der Weisen", "Harry Potter und die Kammer des Schreckens"),
             ("Krieg und Frieden", "Krieg der Welten"), ("Le Petit Prince", "Le Petit Nicolas"),
             ("Cien años de soledad", "Cien años de perdón"), ("Star Wars: A New Hope", "Star Wars: The Empire Strikes Back"),
             ("無印良品 アロマオイル", "無印良品 アロマディフューザー"), ("ソニー ワイヤレスイヤホン ブラック", "ソニー ワイヤレスイヤホン ホワイト"),
             ("ハリー・ポッターと賢者の石", "ハリー・ポッターと秘密の部屋"), ("千と千尋の神隠し", "千年女優"),
             ("J.K. Rowling", "J.R.R. Tolkien"), ("Emma", "Emmanuel"), ("Nike Air Max", "Nike Air Force")]
    for a, b in pairs:
        assert vocab.clean([b], [a]) == [b], (a, b, vocab.shared_share(a, b))
    # where the lines are (the figures of vocab.SHARED and vocab.SHARED_HEAD)
    assert vocab.shared_share("The Lord of the Rings", "The Lord of the Flies") == (15 / 21, 0.0)
    words, head = vocab.shared_share("The Hobbit: A Comprehensive Edition (ePub)",
                                     "The Hobbit: A Comprehensive Edition (Audio Book)")
    assert words == head and head >= vocab.SHARED_HEAD
    assert vocab.shared_share("Die Verwandlung (Taschenbuch)", "Die Verwandlung (Gebundene Ausgabe)")[1] >= 0.5
    assert vocab.variant_of("Die Verwandlung (Gebundene Ausgabe)", ["Die Verwandlung (Taschenbuch)"])
    # the model's examples are the column's specification: two of them may share a beginning
    assert vocab.clean(["Harry Potter 1: Stone", "Harry Potter 1: Chamber"], variants=False) == [
        "Harry Potter 1: Stone", "Harry Potter 1: Chamber"]


def test_the_values_shown_to_continue_a_list_spread_over_it() -> None:
    kept = [f"v{i}" for i in range(30)]
    shown = vocab.spread(kept, 6, 1)
    assert len(shown) == 6 and shown == sorted(shown, key=kept.index)
    assert kept.index(shown[0]) < 5 and kept.index(shown[-1]) >= 25  # the oldest and the newest alike
    assert vocab.spread(kept, 6, 1) == shown and vocab.spread(kept, 6, 2) != shown  # same turn same picks
    assert vocab.spread(kept[:4], 6, 3) == kept[:4]
