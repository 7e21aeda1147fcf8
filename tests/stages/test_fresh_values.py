"""New values a planned create or update states (issue 40): from the column's own vocabulary that no row uses, or
from the column's generator with a seed; never a suffix ("The Catcher in the Rye: The Complete Edition (ePub) II",
the library's regeneration, 2026-11-28); None when neither gives one, so the planner picks another task."""

from __future__ import annotations

import re

from pipeline import ir
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.planner import make_planner
from pipeline.stages.tasks.planner.values import fresh_text, new_value
from tests.fixtures.library import library_env

TITLES = ["Emma", "A Brief History of Time", "The Guns of August", "Matilda", "Middlemarch", "Beloved", "Dracula"]


def planned(env: ir.Environment, table: str, gens: list[ir.ColumnGenerator]) -> ir.Environment:
    """``env`` with ``table``'s rows recorded as made by ``gens`` (a rows-stage plan; its first rows examples)."""
    seed = [s.model_copy(update={"plan": ir.RowPlan(locale="de_DE", seed=7, examples=2, generators=gens)})
            if s.table == table else s for s in env.seed]
    return env.model_copy(update={"seed": seed})


def param(env: ir.Environment, tool: str, name: str) -> ir.Param:
    return next(p for t in env.tools if t.name == tool for p in t.params if p.name == name)


def test_a_new_text_comes_from_the_columns_unused_vocabulary_then_its_generator() -> None:
    base = library_env()
    env = planned(planned(base, "books", [ir.ColumnGenerator(column="title", kind="text_pool", pool=TITLES)]),
                  "members", [ir.ColumnGenerator(column="email", kind="email"),
                              ir.ColumnGenerator(column="name", kind="person_name")])
    title, email = param(env, "add_book", "title"), param(env, "update_member_email", "email")
    with fresh(env) as run:
        p = make_planner(env, run)
        rows = {r[0] for r in run.inst.conn.execute("SELECT title FROM books")}
        got = new_value(p, "books", "title", "Emma", title, True)
        assert got in set(TITLES) - rows  # a title of the list that no book has
        assert new_value(p, "books", "title", "Emma", title, True) == got  # deterministic
        mail = new_value(p, "members", "email", "alice@example.org", email, True)
        assert re.fullmatch(r"[^@\s]+@[^@\s]+\.\w+", mail) and not mail.startswith("alice")  # drawn, not "alice2@"
        assert mail not in {r[0] for r in run.inst.conn.execute("SELECT email FROM members")}
        assert new_value(p, "members", "name", "Alice Park", param(env, "add_book", "author"), True) != "Alice Park"
    # without a plan: no vocabulary and no generator for a title, so no value (the planner picks another task)
    with fresh(base) as run:
        p = make_planner(base, run)
        assert new_value(p, "books", "title", "Emma", title, True) is None
        mail = new_value(p, "members", "email", "alice@example.org", email, True)  # every row holds an address
        assert mail and "@" in mail and not mail.startswith("alice") and mail == new_value(
            p, "members", "email", "alice@example.org", email, True)


def test_a_used_up_vocabulary_gives_none_and_a_code_moves_its_digits_on() -> None:
    pool = ir.ColumnGenerator(column="title", kind="text_pool", pool=["Dune", "Emma"])
    assert fresh_text("Dune", {"Dune"}, (pool, 1)) == "Emma"
    assert fresh_text("Dune", {"Dune", "Emma"}, (pool, 1)) is None
    assert fresh_text("The Catcher in the Rye: The Complete Edition (ePub)", {"x"}) is None
    assert fresh_text("K-004", {"K-004", "K-005"}) == "K-006" and fresh_text("555-0101") == "555-0102"
    assert fresh_text("jane@example.com") is None
    code = ir.ColumnGenerator(column="isbn", kind="code", pattern="9780#########")
    got = fresh_text("9780743273565", {"9780743273565"}, (code, 3))
    assert got and re.fullmatch(r"9780\d{9}", got) and got == fresh_text("9780743273565", {"9780743273565"}, (code, 3))

