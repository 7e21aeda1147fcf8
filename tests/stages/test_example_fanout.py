"""Children per parent as the example rows show (issue 40): a table of details of one parent row (its only
reference, no unique name of its own) whose example rows each name another parent gets at most one row per parent
(the u4 project billing: 1-5 invoices per billing record, where every example billing record had one invoice); a
row linking two parents (a loan of a book to a member), a named thing of its own (a project of a client), examples
that repeat a parent, or a parent's count of its children above one in its example rows (a loan renewed 3 times)
keep the configured fan-out. Keys, constraints and values are read, never names."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.settings import BuildSettings
from pipeline.stages.rows import counts
from pipeline.stages.rows.maker import key_sets, one_each, table_shape

SETTINGS = BuildSettings(child_fanout=(0, 4), child_rows_max=1000)

RECORDS = ir.Table(name="billing_records", ddl="CREATE TABLE billing_records (billing_record_id INTEGER PRIMARY "
                                               "KEY, hours_worked REAL) STRICT")
INVOICES = ir.Table(name="invoices", ddl="CREATE TABLE invoices (invoice_id INTEGER PRIMARY KEY, billing_record_id "
                                         "INTEGER NOT NULL REFERENCES billing_records(billing_record_id), amount_due "
                                         "REAL CHECK (amount_due > 0)) STRICT")
MEMBERS = ir.Table(name="members", ddl="CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT) STRICT")
LOANS = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL "
                                   "REFERENCES billing_records(billing_record_id), member_id INTEGER NOT NULL "
                                   "REFERENCES members(member_id)) STRICT")
PROJECTS = ir.Table(name="projects", ddl="CREATE TABLE projects (project_id INTEGER PRIMARY KEY, project_name TEXT "
                                         "NOT NULL UNIQUE, client_id INTEGER NOT NULL REFERENCES "
                                         "billing_records(billing_record_id)) STRICT")
# the invoices' shape in another language's words
RACHUNKI = ir.Table(name="rachunki", ddl="CREATE TABLE rachunki (nr INTEGER PRIMARY KEY, wpis INTEGER NOT NULL "
                                         "REFERENCES billing_records(billing_record_id), kwota REAL) STRICT")


def _shape(child: ir.Table, examples: list[tuple[Any, ...]], shown: dict[str, int] | None = None,
           parents: int = 33) -> tuple[Counter[Any], int]:
    """The per-parent counts of the rows ``table_shape`` plans for ``child`` (its ``examples`` inserted first, every
    parent table with ``parents`` rows), and how many it plans."""
    conn = scratch_db([RECORDS, MEMBERS, child])
    for k in range(1, parents + 1):
        conn.execute("INSERT INTO billing_records VALUES (?, ?)", (k, 2.5))
        conn.execute("INSERT INTO members VALUES (?, ?)", (k, f"m{k}"))
    cols = table_columns(conn, child)
    names = [c.name for c in cols if not c.auto_id]
    for r in examples:
        conn.execute(f'INSERT INTO "{child.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in names)})', r)
    sets = key_sets(conn, child, names)
    shape = table_shape(conn, child, cols, sets, len(examples), SETTINGS, random.Random(11), shown)
    planned = Counter(f[shape.primary] for f in shape.fixed) if shape.primary else Counter()
    for r in conn.execute(f'SELECT "{shape.primary}" FROM "{child.name}"'):
        planned[r[0]] += 1
    return planned, len(shape.fixed)


def test_details_whose_examples_name_one_parent_each_keep_one_per_parent() -> None:
    per, n = _shape(INVOICES, [(1, 50.0), (2, 75.0), (3, 60.0), (4, None)])
    assert n > 0 and max(per.values()) == 1  # 1-5 per billing record before
    assert sum(per.values()) <= 33


def test_the_same_in_other_words() -> None:
    per, n = _shape(RACHUNKI, [(1, 50.0), (2, 75.0), (3, 60.0), (4, 10.0)])
    assert n > 0 and max(per.values()) == 1


def test_examples_that_repeat_a_parent_keep_the_fanout() -> None:
    per, _ = _shape(INVOICES, [(1, 50.0), (1, 75.0), (3, 60.0), (4, 20.0)])
    assert max(per.values()) > 1


def test_a_row_linking_two_parents_keeps_the_fanout() -> None:
    # four example loans on four books and four members: a book is still lent many times
    per, _ = _shape(LOANS, [(1, 2), (3, 4), (5, 6), (7, 8)])
    assert max(per.values()) > 1


def test_a_named_row_of_its_own_keeps_the_fanout() -> None:
    # four example projects for four clients: a client may still own several projects
    per, _ = _shape(PROJECTS, [("Alpha", 1), ("Beta", 2), ("Gamma", 3), ("Delta", 4)])
    assert max(per.values()) > 1


def test_a_parents_count_above_one_keeps_the_fanout() -> None:
    per, _ = _shape(INVOICES, [(1, 50.0), (2, 75.0), (3, 60.0), (4, 10.0)], shown={"billing_record_id": 3})
    assert max(per.values()) > 1
    per, _ = _shape(INVOICES, [(1, 50.0), (2, 75.0), (3, 60.0), (4, 10.0)], shown={"billing_record_id": 1})
    assert max(per.values()) == 1


def test_one_example_shows_no_count() -> None:
    conn = scratch_db([RECORDS, INVOICES])
    conn.execute("INSERT INTO billing_records VALUES (1, 2.0)")
    conn.execute("INSERT INTO invoices VALUES (1, 1, 20.0)")
    cols = table_columns(conn, INVOICES)
    assert not one_each(conn, INVOICES, cols, [], "billing_record_id")
    conn.execute("INSERT INTO billing_records VALUES (2, 2.0)")
    conn.execute("INSERT INTO invoices VALUES (2, 2, 30.0)")
    assert one_each(conn, INVOICES, cols, [], "billing_record_id")


# ------------------------------------------------------------------ a parent's count of the child (counts.py)

PARENT = ir.Table(name="loans", ddl="CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, renewal_count INTEGER "
                                    "DEFAULT 0) STRICT")
CHILD = ir.Table(name="renewals", ddl="CREATE TABLE renewals (renewal_id INTEGER PRIMARY KEY, loan_id INTEGER NOT "
                                      "NULL REFERENCES loans(loan_id), renewal_date TEXT) STRICT")


def _similar(names: Any, others: Any) -> list[list[float]]:
    return [[0.9 for _ in others] for _ in names]  # MiniLM's 0.85 for "renewal count" / "renewals"


def test_shown_most_reads_the_parents_example_counts() -> None:
    # the quickstart library's example loans: renewal counts 1, 1, 1, 3; its example renewals name loans 1-4 once
    conn = scratch_db([PARENT, CHILD])
    for k, n in ((1, 1), (2, 1), (3, 1), (4, 3), (5, 0), (6, 9)):  # rows 5-6 are code-made, not examples
        conn.execute("INSERT INTO loans VALUES (?, ?)", (k, n))
    for k in (1, 2, 3, 4):
        conn.execute("INSERT INTO renewals (loan_id, renewal_date) VALUES (?, '2026-01-15')", (k,))
    got = counts.shown_most(conn, [PARENT, CHILD], {"loans": 4}, "renewals", _similar)
    assert got == {"loan_id": 3}
    assert counts.shown_most(conn, [PARENT, CHILD], {"loans": 4}, "renewals", None) == {}  # no counter by values
