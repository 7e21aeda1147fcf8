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


def test_a_list_valued_column_is_found_by_its_separator_and_short_items() -> None:
    allergies = ["Aspirin, ibuprofen", "Antibiotics, antihistamines", "Penicillin"]
    assert vocab.list_separator(allergies) == ", "
    assert vocab.list_items(allergies, ", ") == ["Aspirin", "ibuprofen", "Antibiotics", "antihistamines",
                                                 "Penicillin"]
    assert vocab.list_counts(allergies, ", ") == (1, 2) and vocab.later_lower(allergies, ", ")
    sentences = ["A pain reliever for mild pain, taken with food.", "An anti-inflammatory, for swelling."]
    assert vocab.list_separator(sentences) is None


def test_relations_come_from_the_examples_values_not_their_names() -> None:
    ex = {"a": ["2026-01-02", "2025-12-01", "2026-01-10"], "b": ["2026-01-16", "2025-12-15", "2026-01-24"],
          "c": ["2026-01-01", "2026-02-01", "2025-11-01"], "n": [3, 0, 5]}
    orders = relations.date_orders(ex)
    assert [(o.first, o.second, o.min_days, o.max_days) for o in orders] == [("a", "b", 14, 14)]
    assert relations.clock_side(ex["a"], date(2026, 1, 15)) == "past"
    assert relations.clock_side(ex["c"], date(2026, 1, 15)) is None
    assert relations.sign(ex["n"]) == "non_negative" and relations.sign([2.5, 1]) == "positive"
    parents = {1: {"start": "2026-01-01"}, 2: {"start": "2026-01-05"}}
    po = relations.parent_orders({"via": [1, 2], "d": ["2026-01-03", "2026-01-05"]}, "via", parents)
    assert [(p.column, p.parent_column, p.after, p.min_days) for p in po] == [("d", "start", True, 0)]
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
