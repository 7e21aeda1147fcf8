"""The MiniLM backstop that finds columns recording a personal characteristic (``pipeline.meaning.personal``)."""

from __future__ import annotations

import numpy as np

from pipeline.meaning.personal import (
    CONCEPTS,
    TERMS,
    THRESHOLD,
    personal_columns,
    score_columns,
    texts,
    words,
)


def test_a_column_is_read_as_its_names_words_and_with_its_listed_values() -> None:
    assert words("marital_status") == words("maritalStatus") == words("Marital-Status") == "marital status"
    assert texts("gender", ("male", "female")) == ["gender", "gender: male, female"]
    assert texts("gender", ()) == texts("gender", ("", " ")) == ["gender"]


def test_the_score_is_the_mean_of_the_best_definition_and_the_best_term_over_the_texts() -> None:
    """A scripted encoder: each text's vector is chosen, so the arithmetic and the threshold are seen exactly."""
    dim = len(CONCEPTS) + len(TERMS)

    def unit(i: int, weight: float = 1.0) -> np.ndarray:
        v = np.zeros(dim, dtype=np.float32)
        v[i] = weight
        return v

    def mixed(concept: int, term: int, a: float, b: float) -> np.ndarray:
        return unit(concept, a) + unit(len(CONCEPTS) + term, b)

    vectors = {c: unit(i) for i, c in enumerate(CONCEPTS)} | {t: unit(len(CONCEPTS) + i) for i, t in enumerate(TERMS)}
    vectors |= {"kind": mixed(0, 0, 0.5, 0.6), "kind: a, b": mixed(0, 0, 0.6, 0.7), "colour": mixed(2, 3, 0.3, 0.4)}

    def encode(batch: list[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in batch])

    got = score_columns([("t", "kind", ("a", "b")), ("t", "colour", ())], encode)
    assert [(f.column, f.score, f.concept, f.text) for f in got] == [
        ("kind", 0.65, CONCEPTS[0], "kind: a, b"), ("colour", 0.35, CONCEPTS[2], "colour")]
    assert [f.personal for f in got] == [0.65 >= THRESHOLD, False] == [True, False]
    assert score_columns([], encode) == []


def test_minilm_finds_the_characteristics_and_leaves_the_ordinary_columns_of_people() -> None:
    """The real model (all-MiniLM-L6-v2): the characteristics the example's schema model wrote (and did not list)
    are found; the ordinary columns beside them, dates of birth and ages included, and a book's genre are not."""
    personal = [("patients", "gender", ("male", "female")), ("patients", "ethnicity", ()), ("patients", "religion", ()),
                ("patients", "nationality", ()), ("patients", "marital_status", ()), ("patients", "disability", ()),
                ("patients", "pregnancy", ()), ("members", "sexual_orientation", ())]
    ordinary = [("patients", "name", ()), ("patients", "age", ()), ("members", "date_of_birth", ()),
                ("patients", "allergies", ()), ("patients", "medications", ()), ("members", "email", ()),
                ("members", "phone_number", ()), ("members", "address", ()),
                ("members", "membership_tier", ("basic", "gold")), ("members", "status", ("active", "suspended")),
                ("books", "genre", ("fiction", "non-fiction")), ("customers", "country", ()),
                ("patients", "blood_type", ())]
    found = personal_columns(personal + ordinary)
    assert [(f.table, f.column) for f in found] == [(t, c) for t, c, _ in personal]
    assert found[0].concept == "a person's gender or sex (male or female)" and found[0].score > 0.8
