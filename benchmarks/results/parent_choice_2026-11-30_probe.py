"""Does the embedded model's choice of example parents show a child's meaning (issue 40: a fine only on a loan past
due), when the parents its seed_data prompt lists are ordered so that the first ones straddle the relation? (n17-fines,
seventeenth session.) For three domains, the child's product prompt (``populate.generate_seed_for``, 4 example rows)
is asked with the same parent rows under three listings: the parents the child should not name first ("other
first", as the library's listing was: the model's own loans, not yet due), the ones it should name first ("fit
first"), and the two interleaved. Keys follow the listing (an INTEGER PRIMARY KEY table lists by key). Printed per
asking: the parents the examples name, how many fit, whether ``relations.positional`` calls the choice a copy of the
listing's head, and what ``relations.parent_clocks`` reads.

Run: ``PYTHONPATH=. python benchmarks/results/parent_choice_2026-11-30_probe.py [cache.sqlite]`` (9 seed_data calls;
the embedded model, or ENVFOUNDRY_TEST_MODEL). Results: parent_choice_2026-11-30.md."""
from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

from pipeline import ir
from pipeline.config import LLMSettings
from pipeline.llm import embedded_client
from pipeline.meaning import relations
from pipeline.settings import BuildSettings
from pipeline.stages.rows.populate import generate_seed_for

TODAY = date(2026, 1, 15)
LIB_DESC = ("A system for members to borrow, renew and return books from a library. It stores information about "
            "the books, members, loans, renewals, overdue fines, and holds.")
LOANS_FIT = [("returned", "2025-10-08", "2025-11-08"), ("returned", "2025-08-26", "2025-09-26"),
             ("returned", "2025-11-03", "2025-12-04"), ("returned", "2025-10-02", "2025-11-02"),
             ("returned", "2025-10-26", "2025-11-26"), ("returned", "2025-08-18", "2025-09-18"),
             ("returned", "2025-11-03", "2025-12-04"), ("returned", "2025-09-03", "2025-10-04")]
LOANS_OTHER = [("pending", "2026-01-15", "2026-02-15")] * 4 + [
    ("pending", "2025-12-16", "2026-01-16"), ("pending", "2025-12-18", "2026-01-18"),
    ("pending", "2026-01-05", "2026-02-05"), ("pending", "2026-01-12", "2026-02-12")]
HOTEL_FIT = [("completed", "2025-12-02", "2025-12-05"), ("completed", "2025-11-14", "2025-11-16"),
             ("completed", "2026-01-03", "2026-01-06"), ("completed", "2025-10-20", "2025-10-24"),
             ("completed", "2025-12-19", "2025-12-22"), ("completed", "2026-01-08", "2026-01-10")]
HOTEL_OTHER = [("booked", "2026-02-10", "2026-02-13"), ("booked", "2026-01-20", "2026-01-22"),
               ("cancelled", "2026-01-05", "2026-01-07"), ("booked", "2026-03-01", "2026-03-04"),
               ("cancelled", "2025-12-10", "2025-12-12"), ("booked", "2026-01-28", "2026-01-30")]
SHOP_FIT = [("paid", "2025-12-28", 54.9), ("paid", "2026-01-03", 19.5), ("paid", "2025-12-12", 88.0),
            ("paid", "2026-01-09", 32.4), ("paid", "2025-11-30", 12.9), ("paid", "2026-01-11", 41.0)]
SHOP_OTHER = [("pending", "2026-01-15", 23.0), ("pending", "2026-01-14", 61.5), ("cancelled", "2026-01-02", 15.0),
              ("pending", "2026-01-13", 9.9), ("cancelled", "2025-12-20", 44.0), ("pending", "2026-01-15", 27.5)]

DOMAINS: list[dict[str, Any]] = [
    {"scenario": ir.Scenario(name="Book Lending System", description=LIB_DESC),
     "parent": ir.Table(name="loans", ddl=(
         "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, loan_date TEXT NOT NULL, due_date TEXT NOT NULL, status "
         "TEXT NOT NULL CHECK (status IN ('pending', 'returned'))) STRICT")),
     "cols": ("status", "loan_date", "due_date"), "fit": LOANS_FIT, "other": LOANS_OTHER,
     "child": ir.Table(name="overdue_fines", ddl=(
         "CREATE TABLE overdue_fines (fine_id INTEGER PRIMARY KEY, loan_id INTEGER NOT NULL REFERENCES "
         "loans(loan_id), fine_amount REAL NOT NULL CHECK (fine_amount > 0)) STRICT")), "via": "loan_id"},
    {"scenario": ir.Scenario(name="Seaside hotel", description=(
        "A small hotel takes room bookings; guests stay, and may review their stay afterwards.")),
     "parent": ir.Table(name="bookings", ddl=(
         "CREATE TABLE bookings (booking_id INTEGER PRIMARY KEY, status TEXT NOT NULL CHECK (status IN ('booked', "
         "'completed', 'cancelled')), check_in TEXT NOT NULL, check_out TEXT NOT NULL) STRICT")),
     "cols": ("status", "check_in", "check_out"), "fit": HOTEL_FIT, "other": HOTEL_OTHER,
     "child": ir.Table(name="reviews", ddl=(
         "CREATE TABLE reviews (review_id INTEGER PRIMARY KEY, booking_id INTEGER NOT NULL REFERENCES "
         "bookings(booking_id), rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5), comment TEXT) STRICT")),
     "via": "booking_id"},
    {"scenario": ir.Scenario(name="Online tea shop", description=(
        "An online tea shop takes orders, ships them once paid, and refunds paid orders customers send back.")),
     "parent": ir.Table(name="orders", ddl=(
         "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, status TEXT NOT NULL CHECK (status IN ('pending', "
         "'paid', 'cancelled')), order_date TEXT NOT NULL, total REAL NOT NULL) STRICT")),
     "cols": ("status", "order_date", "total"), "fit": SHOP_FIT, "other": SHOP_OTHER,
     "child": ir.Table(name="refunds", ddl=(
         "CREATE TABLE refunds (refund_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES "
         "orders(order_id), amount REAL NOT NULL CHECK (amount > 0), reason TEXT) STRICT")), "via": "order_id"},
]


def listing(d: dict[str, Any], how: str) -> list[tuple[bool, tuple[Any, ...]]]:
    fit, other = [(True, r) for r in d["fit"]], [(False, r) for r in d["other"]]
    if how == "other first":
        return other + fit
    if how == "fit first":
        return fit + other
    out = []
    for a, b in zip(other, fit, strict=False):
        out += [a, b]
    return out + other[len(fit):] + fit[len(other):]


def main() -> None:
    cache = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/parent_choice_cache.sqlite")
    client = embedded_client(LLMSettings(cache_path=cache))
    settings = BuildSettings(row_generators=False, rows_per_table=4, rows_per_call=4, rows_min=3,
                             clock=TODAY.isoformat() + "T09:00:00")
    for d in DOMAINS:
        for how in ("other first", "fit first", "interleaved"):
            rows = listing(d, how)
            pk = d["via"]
            parents = [{pk: k, **dict(zip(d["cols"], r, strict=True))} for k, (_, r) in enumerate(rows, 1)]
            fits = {k for k, (ok, _) in enumerate(rows, 1) if ok}
            env = ir.Environment(scenario=d["scenario"], tables=[d["parent"], d["child"]],
                                 seed=[ir.SeedRows(table=d["parent"].name, rows=parents)])
            t = time.monotonic()
            got = generate_seed_for(d["scenario"], env, d["child"], client, settings)  # type: ignore[arg-type]
            named = [r[d["via"]] for r in got.rows] if got else []
            ex = {d["via"]: named}
            by_key = {p[pk]: p for p in parents}
            listed = list(by_key)
            print(f"{d['child'].name:14} {how:12} named {named} fit {sum(k in fits for k in named)}/{len(named)} "
                  f"positional {relations.positional(named, listed)} "
                  f"parent_clocks {relations.parent_clocks(ex, d['via'], by_key, TODAY, listed)} "
                  f"({time.monotonic() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
