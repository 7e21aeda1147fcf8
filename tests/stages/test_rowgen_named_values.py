"""A row's numbers and CHECK-list values asked with its name (issue 40): continued eight rows a call, the embedded
model wrote a medicine's strength and frequency as a sequence down its reply (2026-11-28, the pharmacy: frequencies
cycling daily, weekly, monthly as in the examples, strengths climbing 30, 40, 60, ..., 110: lorazepam 75 daily,
metformin 90 monthly); each continued row's values are now asked again one row a call, given its name, checked by
code against the column's range and CHECK list, and a row whose reply is refused keeps the values it was continued
with."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.stages.rows import generators as rowgen
from tests.stages.library_replies import SCENARIO
from tests.stages.test_rowgen import gen_settings, scripted

PHARMACY = ir.Table(name="medications", natural_key=["name"], ddl=(
    "CREATE TABLE medications (medication_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, dosage REAL CHECK "
    "(dosage > 0), frequency TEXT NOT NULL CHECK (frequency IN ('daily', 'weekly', 'monthly')), "
    "expiration_date TEXT NOT NULL) STRICT"))
EXAMPLES = [["Aspirin", 100, "daily", "2026-01-30"], ["Ibuprofen", 50, "weekly", "2026-02-14"],
            ["Paracetamol", 200, "monthly", "2026-03-08"], ["Lisinopril", 15, "daily", "2026-04-12"]]
CHOICE = {"columns": {"name": {"kind": "text_pool", "values": ["Aspirin", "Ibuprofen", "Paracetamol"]},
                      "dosage": {"kind": "integer", "min": 10, "max": 200, "distribution": "uniform"},
                      "frequency": {"kind": "enum", "values": ["daily", "weekly", "monthly"], "weights": [1, 1, 1]},
                      "expiration_date": {"kind": "date", "start": "2026-01-15", "end": "2027-01-14"}}}
# the run's first continuation reply (llm_cache.sqlite, 2026-11-28), word for word: a sequence, not each drug's own
BATCH = [("Acetaminophen", "30", "daily"), ("Naproxen", "40", "weekly"), ("Oxycodone", "60", "monthly"),
         ("Lorazepam", "75", "daily"), ("Hydrochlorothiazide", "80", "weekly"), ("Metformin", "90", "monthly"),
         ("Ciprofloxacin", "100", "daily"), ("Lithium", "110", "weekly")]
# asked one at a time with its name
NAMED = {"Acetaminophen": {"dosage": 500, "frequency": "daily"}, "Naproxen": {"dosage": 250, "frequency": "daily"},
         "Oxycodone": {"dosage": 5, "frequency": "daily"}, "Lorazepam": {"dosage": 0.5, "frequency": "daily"},
         "Hydrochlorothiazide": {"dosage": 25, "frequency": "daily"},
         "Metformin": {"dosage": 500, "frequency": "daily"}, "Ciprofloxacin": {"dosage": 500, "frequency": "daily"},
         "Lithium": {"dosage": 3e9, "frequency": "daily"}}  # refused (far beyond any strength): the batch's kept


def medications(monkeypatch: pytest.MonkeyPatch, **settings: object
                ) -> tuple[dict[str, tuple[float, str]], dict[str, ir.ColumnGenerator], list[str]]:
    from pipeline.stages.rows.populate import generate_seed

    monkeypatch.setattr(rowgen, "_vectors", lambda: None)
    pools = {"name": [n for n, _, _ in BATCH], "dosage": [d for _, d, _ in BATCH],
             "frequency": [f for _, _, f in BATCH]}
    client = scripted([{"rows": EXAMPLES}, {"locale": "en_US", **CHOICE}], pools, named=NAMED)
    res = generate_seed(SCENARIO, (PHARMACY,), client, gen_settings(entity_rows=(12, 12), **settings))
    assert res.ok, res.rejections
    (meds,) = res.value
    made = {r["name"]: (r["dosage"], r["frequency"]) for r in meds.rows}
    return made, {g.column: g for g in meds.plan.generators}, [m[0]["content"] for m in client.requests]


def test_each_medicine_gets_the_strength_and_frequency_asked_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    made, gens, prompts = medications(monkeypatch)
    assert set(made) == {n for n, *_ in EXAMPLES} | {n for n, _, _ in BATCH}
    for name, values in NAMED.items():
        if name != "Lithium":
            assert made[name] == (values["dosage"], values["frequency"]), (name, made[name])
    assert made["Lithium"] == (110.0, "weekly")  # its named strength refused: the continued values, as before
    assert made["Aspirin"] == (100.0, "daily")  # the model's example rows stay as written
    assert gens["dosage"].kind == "amount" and gens["dosage"].after == gens["frequency"].after == "name"
    asked = [p for p in prompts if p.startswith("The SQLite") and "Complete this row" in p]
    assert len(asked) == len(BATCH)
    assert all('"dosage": ?, "frequency": ?' in p for p in asked)
    assert any('{"name": "Lorazepam", "dosage": ?, "frequency": ?}' in p for p in asked)
    assert "7 of 8 continued rows' values asked again with their name" in (gens["dosage"].note or "")


def test_complete_rows_max_caps_the_rows_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``[stages.build] complete_rows_max``: the first rows in the continued order are asked again, one call each,
    the rest keep the values they were continued with (the real build test asks 4 a table)."""
    made, gens, prompts = medications(monkeypatch, complete_rows_max=3)
    asked = [p for p in prompts if p.startswith("The SQLite") and "Complete this row" in p]
    assert len(asked) == 3
    assert [made[n] for n, _, _ in BATCH[:3]] == [(NAMED[n]["dosage"], NAMED[n]["frequency"]) for n, _, _ in BATCH[:3]]
    assert [made[n] for n, _, _ in BATCH[3:]] == [(float(d), f) for _, d, f in BATCH[3:]]
    assert "3 of 8 continued rows' values asked again with their name" in (gens["dosage"].note or "")
    made, gens, prompts = medications(monkeypatch, complete_rows_max=0)
    assert not [p for p in prompts if "Complete this row" in p]
    assert [made[n] for n, _, _ in BATCH] == [(float(d), f) for _, d, f in BATCH]


def test_a_number_asked_with_its_name_may_leave_the_range_chosen_for_values_drawn_apart() -> None:
    col = Column(name="dosage", type="REAL", notnull=False, pk=0, has_default=False, enum=None, ref=None)
    g = ir.ColumnGenerator(column="dosage", kind="integer", min=10, max=200)
    examples = [100.0, 50.0, 200.0, 15.0]
    apart = rowgen.value_check(col, g, examples)
    named = rowgen.value_check(col, g, examples, named=True)
    assert apart is not None and named is not None
    assert [apart(t) for t in ("500", "0.5", "75")] == [None, None, "75"]
    assert [named(t) for t in ("500", "0.5", "75", "3000000000", "-5", "0")] == ["500", "0.5", "75", None, None, None]
    year = Column(name="year", type="INTEGER", notnull=True, pk=0, has_default=False, enum=None, ref=None)
    lo, hi = rowgen.named_range(ir.ColumnGenerator(column="year", kind="integer", min=1800, max=2026),
                                [1925, 1960, 1949, 1813])
    assert lo is not None and hi is not None and 1600 < lo < 1650 and 2150 < hi < 2250
    by_year = rowgen.value_check(year, ir.ColumnGenerator(column="year", kind="integer", min=1800, max=2026),
                                 [1925, 1960, 1949, 1813], named=True)
    assert by_year is not None and [by_year(t) for t in ("1605", "1620", "1954.5", "2100")] == [None, "1620", None,
                                                                                                "2100"]
