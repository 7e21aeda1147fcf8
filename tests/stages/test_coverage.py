"""Tool coverage: finders and listers written by code where the tools lack them, and the chains they open."""

from __future__ import annotations

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.planner import plan_chains
from pipeline.stages.tools import Workspace, fill_gaps
from tests.stages import test_tools as library
from tests.stages import test_tools_domains as brewery
from tests.stages.library_replies import (
    FIND_MEMBER,
    LEND_BOOK,
    LIST_LOANS,
    RETURN_BOOK,
    TOOL_PLAN,
    small_settings,
)
from verify.replay import fresh

LIBRARY_REPLIES = [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, LEND_BOOK, RETURN_BOOK]


def added(res) -> dict[str, str]:
    return {r.item: r.reason for r in res.rejections if r.reason.startswith("tool added by code")}


def test_library_gaps(seed) -> None:
    res, _ = library.run(seed, LIBRARY_REPLIES, tools_max=4, gap_tools_max=6)
    assert res.ok
    names = [t.name for t in res.value.tools]
    # lend_book takes books.book_id and nothing finds a book: a finder by its natural key (title). Loans are
    # reached already (find_member by email -> list_member_loans gives loan_id): no finder for them.
    assert names == ["find_member", "list_member_loans", "lend_book", "return_book", "find_books_by_title",
                     "list_loans_by_book_id"]
    assert added(res) == {
        "find_books_by_title": "tool added by code (finder): lend_book takes books.book_id and no read tool "
                               "leads to it from what users know",
        "list_loans_by_book_id": "tool added by code (lister): no read tool lists the loans of one books row",
    }
    env = res.value
    with EnvInstance(env) as inst:
        title, book_id = inst.conn.execute("SELECT title, book_id FROM books ORDER BY book_id DESC").fetchone()
        found = inst.call("find_books_by_title", {"title": title})
        assert found["ok"] and found["result"]["book_id"] == book_id
        missing = inst.call("find_books_by_title", {"title": title + " (no such book)"})
        assert not missing["ok"] and missing["kind"] == "not_found"
        listed = inst.call("list_loans_by_book_id", {"book_id": 1})
        n = inst.conn.execute("SELECT count(*) FROM loans WHERE book_id = 1").fetchone()[0]
        assert listed["ok"] and len(listed["result"]) == n
    # the finder opens chains: a book named by its title is lent (the id read by the first call feeds the second)
    with fresh(env) as run:
        chains = plan_chains(env, run, 12, {1: 0.3, 2: 0.4, 3: 0.3})
    lends = [[c.tool for c in ch.calls] for ch in chains if ch.calls[-1].tool == "lend_book" and ch.dependent]
    assert ["find_member", "find_books_by_title", "lend_book"] in lends, lends


def test_gap_tools_max_bounds_the_added_tools_finders_first(seed) -> None:
    res, _ = library.run(seed, LIBRARY_REPLIES, tools_max=4, gap_tools_max=1)
    assert res.ok and [t.name for t in res.value.tools][4:] == ["find_books_by_title"]
    res, _ = library.run(seed, LIBRARY_REPLIES, tools_max=4, gap_tools_max=0)
    assert res.ok and len(res.value.tools) == 4 and not added(res)


def test_a_key_of_two_references_gets_a_finder_once_its_parents_can_be_found() -> None:
    """Another domain: a brewery whose only read tool needs a keg id. Kegs are found by serial, and fills (keyed
    by two references, keg + batch) by a finder taking both ids, which the parents' finders give."""
    tables = [*brewery.TABLES, ir.Table(
        name="fills", natural_key=["keg_id", "batch_id"],
        ddl="CREATE TABLE fills (fill_id INTEGER PRIMARY KEY, keg_id INTEGER NOT NULL REFERENCES kegs(keg_id), "
            "batch_id INTEGER NOT NULL REFERENCES batches(batch_id), litres REAL NOT NULL) STRICT")]
    seed = [ir.SeedRows(table="batches", rows=[
                {"batch_id": 1, "beer": "Dry Stout", "brewed_on": "2026-01-05", "status": "packaged", "litres": 400.0},
                {"batch_id": 2, "beer": "Pale Ale", "brewed_on": "2026-01-09", "status": "fermenting",
                 "litres": 300.0}]),
            ir.SeedRows(table="kegs", rows=[{"keg_id": 1, "serial": "K-001", "batch_id": 1, "status": "full"},
                                           {"keg_id": 2, "serial": "K-002", "batch_id": 2, "status": "full"}]),
            ir.SeedRows(table="fills", rows=[{"fill_id": 1, "keg_id": 1, "batch_id": 1, "litres": 50.0},
                                            {"fill_id": 2, "keg_id": 2, "batch_id": 2, "litres": 30.0}])]
    void = ir.Tool(name="void_fill", description="Delete a fill.", kind="write",
                   params=[ir.Param(name="fill_id", type="integer")],
                   steps=[ir.Step(kind="write", sql="DELETE FROM fills WHERE fill_id = :fill_id")])
    with Workspace(brewery.SCENARIO, tables, seed, "2026-01-15T09:00:00", [void]) as ws:
        notes = fill_gaps(ws, small_settings(gap_tools_max=12))
        names = [t.name for t in ws.tools]
        env = ws.environment()
    # round 1: the fills finder (void_fill takes its id) and the listers; round 2: the finders of the parents
    # whose ids the fills finder takes
    assert names == ["void_fill", "find_fills_by_keg_id_and_batch_id", "list_kegs_by_batch_id",
                     "list_fills_by_batch_id", "list_fills_by_keg_id", "find_batches_by_beer_and_brewed_on",
                     "find_kegs_by_serial"]
    assert all(n.reason.startswith("tool added by code") for n in notes)
    with fresh(env) as run:
        chains = plan_chains(env, run, 12, {1: 0.2, 2: 0.3, 3: 0.5})
    voids = [[c.tool for c in ch.calls] for ch in chains if ch.calls[-1].tool == "void_fill" and ch.dependent]
    # the batch named by beer and brew date, its fills listed, the fill deleted: the ids come from earlier calls
    assert ["find_batches_by_beer_and_brewed_on", "list_fills_by_batch_id", "void_fill"] in voids, voids

seed = library.seed
