"""A parent's count of its children held in the seeded rows (issue 40): a loan's renewal count is its number of
renewals. Found from the example rows' values (each example parent's count is its number of example children) or
from MiniLM similarity of the column's name to the child table's name (here a scripted similarity: the real model's
numbers are in benchmarks/results/counters_2026-11-28.md), among integer columns that start at zero; never from
English words."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from pipeline import ir
from pipeline.dbmodel.ddl import scratch_db
from pipeline.llm import fake_client
from pipeline.meaning import relations
from pipeline.stages.rows import counts
from pipeline.stages.rows.populate import generate_seed
from tests.stages.library_replies import SCENARIO, small_settings

LOANS = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, loan_date TEXT NOT NULL, "
                                   "quantity INTEGER NOT NULL, renewal_count INTEGER DEFAULT 0, "
                                   "max_renewals INTEGER NOT NULL DEFAULT 3) STRICT")
RENEWALS = ir.Table(name="renewals", ddl="CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER "
                                         "NOT NULL REFERENCES loans(loan_id), renewal_date TEXT NOT NULL) STRICT")
FINES = ir.Table(name="overdue_fines", ddl="CREATE TABLE overdue_fines (fine_id INTEGER PRIMARY KEY, loan_id "
                                           "INTEGER NOT NULL REFERENCES loans(loan_id), amount REAL NOT NULL) STRICT")


def scripted(pairs: dict[tuple[str, str], float]) -> counts.Similarity:
    """Similarities of names (with '_' read as spaces) from a table; any other pair 0.1."""

    def sim(names: Sequence[str], others: Sequence[str]) -> list[list[float]]:
        return [[pairs.get((a, b), 0.1) for b in others] for a in names]

    return sim


# the real MiniLM's numbers for these names (benchmarks/results/counters_2026-11-28.md)
MINILM = scripted({("renewal count", "renewals"): 0.85, ("max renewals", "renewals"): 0.82,
                   ("quantity", "renewals"): 0.15, ("renewal count", "overdue fines"): 0.26,
                   ("max renewals", "overdue fines"): 0.25})


def _db(loans: list[tuple[Any, ...]], renewals: list[tuple[int, str]]) -> sqlite3.Connection:
    conn = scratch_db([LOANS, RENEWALS, FINES])
    conn.executemany("INSERT INTO loans (loan_date, quantity, renewal_count, max_renewals) VALUES (?, ?, ?, ?)", loans)
    conn.executemany("INSERT INTO renewals (loan_id, renewal_date) VALUES (?, ?)", renewals)
    return conn


# ------------------------------------------------------------------ inference (relations.py)


def test_a_column_counts_from_zero_only_when_whole_non_negative_and_starting_at_zero() -> None:
    assert relations.counts_from_zero([0, 0, 0, 0])  # the library's four example loans
    assert relations.counts_from_zero([2, 1, 3], default="0")
    assert relations.counts_from_zero([2, 1, 3], default="'0'")
    assert not relations.counts_from_zero([2, 1, 3])  # a quantity of 1..3
    assert not relations.counts_from_zero([3, 3, 3], default="3")  # a limit
    assert not relations.counts_from_zero([0, 1, -2])
    assert not relations.counts_from_zero([0, 1.5])
    assert not relations.counts_from_zero([0, True])


def test_the_examples_show_a_count_when_every_example_parent_has_as_many_example_children() -> None:
    assert relations.counts_shown({1: 2, 2: 0, 3: 1}, [1, 3, 1])
    assert not relations.counts_shown({1: 2, 2: 0, 3: 1}, [1, 3])  # loan 1: 2 counted, 1 child
    assert not relations.counts_shown({1: 0, 2: 0, 3: 0}, [])  # all zero, no child: shows nothing
    assert not relations.counts_shown({1: 1, 2: 1}, [1, 2])  # two parents agree by chance too often


def _cands() -> list[relations.CounterCandidate]:
    return [relations.CounterCandidate("loans", "renewal_count", {1: 0, 2: 0, 3: 0, 4: 0}),
            relations.CounterCandidate("loans", "max_renewals", {1: 0, 2: 2, 3: 1, 4: 0})]


def test_a_counter_by_name_is_the_closest_pair_both_ways_and_above_the_bar() -> None:
    links = [relations.ChildLink("renewals", "loans", "loan_id", [1, 2, 3, 4]),
             relations.ChildLink("overdue_fines", "loans", "loan_id", [1, 2, 3, 4])]
    got = relations.counters(_cands(), links, MINILM)
    # the library's examples: four loans counted 0, one example renewal each; only the name says it
    assert got == [relations.Counter("loans", "renewal_count", "renewals", "loan_id", "name")]
    # without the model, the examples alone show nothing
    assert relations.counters(_cands(), links) == []
    # below the bar: nothing
    low = scripted({("renewal count", "renewals"): relations.COUNTER_SIM - 0.01})
    assert relations.counters(_cands(), links, low) == []


def test_a_counter_the_examples_show_needs_no_name() -> None:
    cands = [relations.CounterCandidate("t1", "k9", {1: 2, 2: 0, 3: 1})]
    links = [relations.ChildLink("t2", "t1", "x", [1, 1, 3])]
    assert relations.counters(cands, links) == [relations.Counter("t1", "k9", "t2", "x", "examples")]


def test_no_count_through_two_references_to_one_parent() -> None:
    # a transfer names two accounts: which one the count is of is ambiguous
    links = [relations.ChildLink("renewals", "loans", "a", [1]), relations.ChildLink("renewals", "loans", "b", [2])]
    assert relations.counters(_cands(), links, MINILM) == []


# ------------------------------------------------------------------ held in the rows (counts.py)


def test_every_loans_count_is_set_from_its_renewals() -> None:
    # the 2026-11-28 library: loan 9 counted 0 with 4 renewals, loan 15 counted 3 with none
    conn = _db([("2026-01-15", 1, 0, 3)] * 4 + [("2025-11-01", 2, 3, 3), ("2025-10-01", 1, 0, 3),
                                               ("2025-09-01", 5, 1, 3)],
               [(1, "2026-01-15"), (2, "2026-01-15"), (3, "2026-01-15"), (4, "2026-01-15"),
                (6, "2025-10-05"), (6, "2025-10-09"), (6, "2025-10-12"), (6, "2025-10-20")])
    done = counts.settle(conn, [LOANS, RENEWALS, FINES], {"loans": 4, "renewals": 4, "overdue_fines": 0}, MINILM)
    assert [d.counter.column for d in done] == ["renewal_count"]
    assert done[0].changed == 7 and not done[0].refused
    got = conn.execute("SELECT l.renewal_count, (SELECT COUNT(*) FROM renewals r WHERE r.loan_id = l.loan_id), "
                       "quantity, max_renewals FROM loans l").fetchall()
    assert all(a == b for a, b, _, _ in got)
    assert [q for _, _, q, _ in got] == [1, 1, 1, 1, 2, 1, 5] and {m for *_, m in got} == {3}  # others untouched
    rej = counts.rejections(done, "seed_data")
    assert len(rej) == 1 and rej[0].item == "loans.renewal_count" and "7 loans rows" in rej[0].reason


def test_a_count_sqlite_refuses_is_reported_not_hidden() -> None:
    capped = ir.Table(name="loans", ddl=LOANS.ddl.replace("renewal_count INTEGER DEFAULT 0",
                                                          "renewal_count INTEGER DEFAULT 0 CHECK (renewal_count <= 2)"))
    conn = scratch_db([capped, RENEWALS, FINES])
    conn.executemany("INSERT INTO loans (loan_date, quantity, renewal_count, max_renewals) VALUES (?, 1, 0, 3)",
                     [("2025-10-01",)] * 4)
    conn.executemany("INSERT INTO renewals (loan_id, renewal_date) VALUES (?, '2025-10-05')", [(1,), (2,), (2,)]
                     + [(3,)] * 3)
    done = counts.settle(conn, [capped, RENEWALS, FINES], {}, MINILM)
    assert done[0].changed == 2 and done[0].refused == {3: (0, 3)}
    assert "could not be set" in counts.rejections(done, "seed_data")[-1].reason


def test_the_plan_says_the_counter_is_set_from_its_children() -> None:
    conn = _db([("2026-01-15", 1, 0, 3)] * 4, [(1, "2026-01-15")])
    done = counts.settle(conn, [LOANS, RENEWALS, FINES], {}, MINILM)
    plan = ir.RowPlan(seed=1, examples=4, generators=[
        ir.ColumnGenerator(column="renewal_count", kind="integer", by="llm", min=0, max=3)])
    assert "set from the number of renewals rows naming it by loan_id" in (
        counts.noted("loans", plan, done).generators[0].note or "")
    assert counts.noted("renewals", plan, done) == plan


def test_the_stage_sets_counts_in_rows_the_llm_wrote(monkeypatch: Any) -> None:
    from pipeline.stages.rows import populate

    monkeypatch.setattr(populate, "_similarity", MINILM)
    loans = {"rows": [["2026-01-15", 1, 0, 3], ["2026-01-10", 2, 3, 3], ["2026-01-02", 1, 1, 3],
                      ["2025-12-20", 1, 0, 3]]}
    renewals = {"rows": [[1, "2026-01-15"], [1, "2026-01-16"], [2, "2026-01-12"], [4, "2026-01-01"]]}
    fines = {"rows": [[3, 2.5], [4, 1.0], [4, 3.0], [2, 0.5]]}
    client = fake_client([loans, renewals, fines])
    res = generate_seed(SCENARIO, (LOANS, RENEWALS, FINES), client, small_settings(row_generators=False))
    assert res.value is not None
    seed = {s.table: s.rows for s in res.value}
    assert [r["renewal_count"] for r in seed["loans"]] == [2, 1, 0, 1]
    assert [r["max_renewals"] for r in seed["loans"]] == [3, 3, 3, 3]
    assert any(r.item == "loans.renewal_count" for r in res.rejections)
