"""Columns continued together with the real embedded model (issue 40), on two domains that appear nowhere in the
example catalog: a car rental fleet's makes and models, a perfumery's fragrances and their houses. What must hold
whatever the small model writes: the one short call per round parses into rows of both columns, enough new rows
are kept (``TUPLE_MIN``) after cleaning, no row repeats a kept one or its key, no value is its own row's other
value, and the calls stay within the rounds given. The perfumery is asked only when the fleet keeps no row.

Each domain is continued until ``TUPLE_MIN`` new rows are kept (``want``), in at most 3 calls: what the test asserts
(the model's rows, once kept, and every call's guarantees) needs no more. Until 2026-11-29 it asked for 24 rows,
so the fleet took all 3 rounds (40 + 38 + 36 s of model time in the real-model session of 2026-11-29 15:51 UTC)
although its first reply alone kept 8 rows; a later round's prompt (two examples and a spread of the rows kept,
sampled after a dry reply) and the cleaning across rounds are code, checked with scripted replies in
tests/stages/test_rowgen_pairs.py, and the real build continues its tables' tuples for as many rounds as their
rows need (``real_build``, tests/test_build_real.py: the brewery's batches took two in that session). The first
call's prompt is the same as before (it always asks ``TUPLE_ASK`` rows): its recorded reply, replayed, ends the
fleet's continuation after that one call with 8 rows kept."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.meaning import vocab
from pipeline.settings import BuildSettings
from pipeline.stages.rows import generators as rowgen

FLEET = (ir.Scenario(name="Car rental fleet", description="A car rental company keeps its fleet and its bookings."),
         ir.Table(name="vehicles", natural_key=["model"], ddl=(
             "CREATE TABLE vehicles (vehicle_id INTEGER PRIMARY KEY, make TEXT NOT NULL, model TEXT NOT NULL, "
             "seats INTEGER NOT NULL) STRICT")),
         ["make", "model"], [("Toyota", "Corolla"), ("BMW", "X5"), ("Ford", "Focus"), ("Honda", "Civic")], 1)
PERFUMERY = (ir.Scenario(name="Perfumery", description="A perfume shop sells fragrances from many houses."),
             ir.Table(name="fragrances", natural_key=["fragrance"], ddl=(
                 "CREATE TABLE fragrances (fragrance_id INTEGER PRIMARY KEY, fragrance TEXT NOT NULL UNIQUE, house "
                 "TEXT NOT NULL, price REAL NOT NULL) STRICT")),
             ["fragrance", "house"], [("No. 5", "Chanel"), ("Sauvage", "Dior"), ("Light Blue", "Dolce & Gabbana")], 0)
WANT = rowgen.TUPLE_MIN
"""New rows a domain is continued for: what the test asserts (a call ends the continuation once it keeps them)."""


@pytest.mark.real_llm
def test_rows_of_two_columns_continued_by_the_real_model(real_llm: object) -> None:
    """The domains in turn until one keeps new rows (the capability: the model continues rows of values that
    belong together; CI's real-model time, issue 42): the fleet, then the perfumery only when the fleet kept none.
    What code guarantees (calls within the rounds, two different values a row, no key repeated) is checked on every
    domain asked."""
    kept: dict[str, int] = {}
    for scenario, table, columns, seeds, key in (FLEET, PERFUMERY):
        got, calls = rowgen.continue_tuples(scenario, table, columns, seeds, WANT, 3, real_llm,  # type: ignore[arg-type]
                                            BuildSettings(), distinct=(key,))
        print(f"\n{table.name}: {calls} calls, {got}")
        assert 1 <= calls <= 3
        assert all(len(r) == 2 and all(r) and vocab.norm(r[0]) != vocab.norm(r[1]) for r in got), got
        keys = [vocab.norm(r[key]) for r in [*seeds, *got]]
        assert len(keys) == len(set(keys)), got
        kept[table.name] = len(got)
        if len(got) >= rowgen.TUPLE_MIN:
            break
    assert any(n >= rowgen.TUPLE_MIN for n in kept.values()), kept
