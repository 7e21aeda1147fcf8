"""A parent's count of its children and the time relations across tables, inferred on stored environments (issue 40).

For each environment directory given, its ``initial.db`` (opened read-only, copied into memory) and ``env.json``
(each table's first ``plan.examples`` rows are the model's examples): the counter columns
:func:`pipeline.meaning.relations.counters` finds with the real MiniLM (``pipeline.embed``; no LLM), how many parent
rows disagree with their number of children before and after :func:`pipeline.stages.rows.counts.settle`, and per
child table what :func:`pipeline.stages.rows.maker.child_relations` infers from the example rows (date bounds against
the parent, the parents a child may name). ``--pairs`` prints MiniLM's similarity for a fixed list of column and
table names (counters and other integers, several languages), the numbers behind
:data:`pipeline.meaning.relations.COUNTER_SIM`.

    python benchmarks/bench_counters.py --pairs generated/quickstart/envs/*
"""

from __future__ import annotations

import sqlite3
import sys
from datetime import date
from pathlib import Path

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.stages.rows import counts
from pipeline.stages.rows.maker import child_relations
from pipeline.stages.rows.populate import _similarity

PAIRS = [  # (integer column, child table, is it that table's count?)
    ("renewal_count", "renewals", True), ("times_renewed", "renewals", True), ("fine_count", "overdue_fines", True),
    ("visit_count", "appointments", True), ("total_visits", "appointments", True), ("num_copies", "copies", True),
    ("order_count", "orders", True), ("loan_count", "loans", True), ("refill_count", "refills", True),
    ("nombre_renouvellements", "renouvellements", True), ("anzahl_verlaengerungen", "verlaengerungen", True),
    ("liczba_przedluzen", "przedluzenia", True),
    ("max_renewals", "renewals", False), ("max_loans", "loans", False), ("refills_remaining", "refills", False),
    ("age", "loans", False), ("quantity", "order_items", False), ("stock", "orders", False),
    ("stock_quantity", "prescriptions", False), ("publication_year", "loans", False),
    ("copies_available", "loans", False), ("renewal_count", "overdue_fines", False), ("duration_days", "renewals",
                                                                                        False),
    ("capacity", "bookings", False), ("seats", "bookings", False), ("points", "orders", False),
]


def pairs() -> None:
    sims = _similarity([a.replace("_", " ") for a, _, _ in PAIRS], [b.replace("_", " ") for _, b, _ in PAIRS])
    print("| column | child table | a count of it? | MiniLM |\n|---|---|---|---|")
    for i, (a, b, yes) in enumerate(PAIRS):
        print(f"| {a} | {b} | {'yes' if yes else 'no'} | {sims[i][i]:.2f} |")


def env(path: Path) -> None:
    e = ir.Environment.model_validate_json((path / "env.json").read_text())
    src = sqlite3.connect(f"file:{path / 'initial.db'}?mode=ro", uri=True)
    conn = sqlite3.connect(":memory:")
    src.backup(conn)
    src.close()
    conn.execute("PRAGMA foreign_keys = ON")
    examples = {s.table: s.plan.examples for s in e.seed if s.plan is not None}
    print(f"## {path.name}\n")
    cands, links = counts.candidates_and_links(conn, e.tables, examples)
    print("candidates (integers that start at zero):", [f"{c.parent}.{c.column}" for c in cands] or "none")
    for st in counts.settle(conn, e.tables, examples, _similarity):
        c = st.counter
        total = conn.execute(f'SELECT COUNT(*) FROM "{c.parent}"').fetchone()[0]
        print(f"counter: {c.parent}.{c.column} counts {c.child} by {c.via} (shown by {c.shown}): "
              f"{st.changed + len(st.refused)} of {total} rows disagreed; {st.changed} set, {len(st.refused)} refused")
    today = date.fromisoformat(e.clock[:10])
    for t in e.tables:
        cols = table_columns(conn, t)
        if not any(c.ref is not None and c.ref[0] != t.name for c in cols):
            continue
        rows = counts.example_rows(conn, t.name, examples.get(t.name))
        ex = {c.name: [r[c.name] for r in rows] for c in cols}
        drawn = {c.name for c in cols if c.ref is None and not c.auto_id}
        rel = child_relations(conn, t.name, cols, ex, drawn, today)
        bounds = [f"{col} {'after' if after else 'before'} its {via}'s parent date ({'strict' if days else 'same day ok'})"
                  for col, via, _, after, days in rel.bounds]
        print(f"{t.name}: bounds {bounds or 'none'}; parents allowed "
              f"{ {k: len(v) for k, v in rel.allowed.items()} or 'any'}; clock {rel.clock or 'none'}; "
              f"notes {rel.notes or 'none'}")
    print()


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--pairs" in args:
        args.remove("--pairs")
        pairs()
        print()
    for a in args:
        env(Path(a))
