"""One value spelled twice is a variant (issue 40: the pharmacy's continued medicines held "Pramipexol" and
"Pramipexole", the library's titles "Moby Dick" and "Moby-Dick"); distinct values that look alike stay."""

from __future__ import annotations

import pytest

from pipeline.meaning import vocab

TWICE = [("Moby Dick", "Moby-Dick"), ("Pramipexol", "Pramipexole"), ("Dipyridamol", "Dipyridamole"),
         ("Lisinopril", "Lisinoprol"), ("Spider Man", "Spider-Man"), ("東京 タワー", "東京タワー")]
DISTINCT = [("The Lord of the Rings", "The Lord of the Flies"), ("Amlodipine", "Nifedipine"),
            ("Losartan", "Valsartan"), ("Rivastatin", "Fluvastatin"), ("Der Herr der Ringe", "Der Herr der Diebe"),
            ("Emma", "Emmy"), ("Dune", "June"), ("Cien años de soledad", "Cien años de perdón")]


@pytest.mark.parametrize(("a", "b"), TWICE)
def test_one_value_spelled_twice_is_a_variant(a: str, b: str) -> None:
    assert vocab.spelled_twice(a, b) and vocab.spelled_twice(b, a)
    assert vocab.clean([b], [a]) == []


@pytest.mark.parametrize(("a", "b"), DISTINCT)
def test_values_that_look_alike_stay(a: str, b: str) -> None:
    assert not vocab.spelled_twice(a, b)
    assert vocab.clean([b], [a]) == [b]
