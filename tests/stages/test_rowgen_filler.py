"""A place asked again with its row's name (``complete_rows``) that the model answered with one value for most rows
(issue 40, rows: the pharmacy's strengths 10 for 28 of 39 medicines, /work/out/r18a, 2026-11-30) keeps the values the
rows were continued with (``generators.unfilled``)."""

from __future__ import annotations

from pipeline.stages.rows import generators as rowgen

SEEDS = [("Aspirin", "100", "daily"), ("Ibuprofen", "50", "weekly"), ("Paracetamol", "200", "monthly"),
         ("Lisinopril", "15", "daily")]
CONTINUED = [("Acetaminophen", "30", "daily"), ("Naproxen", "40", "weekly"), ("Oxycodone", "60", "monthly"),
             ("Lorazepam", "75", "daily"), ("Metformin", "90", "monthly"), ("Albuterol", "10", "weekly"),
             ("Cetirizine", "25", "daily"), ("Fenfluramine", "20", "weekly")]
ASKED = [("Acetaminophen", "20", "daily"), ("Naproxen", "30", "daily"), ("Oxycodone", "10", "daily"),
         ("Lorazepam", "10", "daily"), ("Metformin", "10", "daily"), ("Albuterol", "10", "daily"),
         ("Cetirizine", "10", "daily"), ("Fenfluramine", "10", "daily")]


def test_a_filler_answer_gives_way_to_the_continued_values() -> None:
    rows, undone = rowgen.unfilled(SEEDS, CONTINUED, ASKED, [1, 2])
    assert [r[1] for r in rows] == ["20", "30", "60", "75", "90", "10", "25", "20"]  # Albuterol was continued 10
    assert [r[2] for r in rows] == ["daily", "weekly", "monthly", "daily", "monthly", "weekly", "daily", "weekly"]
    assert undone == {1: 5, 2: 5}
    assert [r[0] for r in rows] == [r[0] for r in ASKED]


def test_a_listed_answer_stays_even_when_most_rows_gave_it() -> None:
    rows, undone = rowgen.unfilled(SEEDS, CONTINUED, ASKED, [1, 2], listed={2})
    assert [r[2] for r in rows] == ["daily"] * 8  # the continuation's daily, weekly, monthly cycle is not taken back
    assert undone == {1: 5}


def test_an_answer_the_examples_hold_as_often_stays() -> None:
    seeds = [("Aspirin", "10", "daily"), ("Ibuprofen", "10", "daily"), ("Paracetamol", "200", "daily"),
             ("Lisinopril", "10", "weekly")]
    rows, undone = rowgen.unfilled(seeds, CONTINUED, ASKED, [1, 2])
    assert rows == ASKED and undone == {}


def test_spread_answers_stay() -> None:
    asked = [(n, str(10 * (i + 1)), f) for i, (n, _, f) in enumerate(CONTINUED)]  # every row its own strength
    rows, undone = rowgen.unfilled(SEEDS, CONTINUED, asked, [1])
    assert rows == asked and undone == {}


def test_a_value_the_continuation_already_held_stays() -> None:
    continued = [(n, "10", f) for n, _, f in CONTINUED]  # the continuation wrote 10 throughout: nothing to give back
    rows, undone = rowgen.unfilled(SEEDS, continued, ASKED, [1])
    assert rows == ASKED and undone == {}
