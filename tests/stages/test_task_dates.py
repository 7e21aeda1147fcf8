"""The dates a planned task writes keep the relations the seed's example rows show (issue 40), as the seeded rows
do: a new row dated where the examples lie around the clock (not months back), its dates in the examples' order
(no leave that ends before it starts), a child after the parent row it names (no renewal before its loan began);
a changed date that would break an order moves the other way, or the planner picks another task. Inferred from
values, never from names: the library's loans are renamed to made-up words and the relations still hold."""

from __future__ import annotations

from datetime import date

from pipeline import ir
from pipeline.meaning import relations
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner.values import fit_dates, time_relations
from tests.fixtures.library import library_env

TODAY = date(2026, 1, 15)
EXAMPLES = [  # the model's: borrowed 5-10 days ago, due 14 days after
    {"id": 1, "member_id": 1, "book_id": 3, "borrowed_at": "2026-01-10", "due_date": "2026-01-24"},
    {"id": 2, "member_id": 3, "book_id": 4, "borrowed_at": "2026-01-05", "due_date": "2026-01-19"},
    {"id": 3, "member_id": 3, "book_id": 5, "borrowed_at": "2026-01-06", "due_date": "2026-01-20"},
]
MADE = [  # code's rows, spread over the past year (one due three days after it began)
    {"id": 4 + i, "member_id": 1 + i % 4, "book_id": 1 + i % 6, "borrowed_at": f"2025-{3 + i:02d}-01",
     "due_date": f"2025-{3 + i:02d}-{'04' if i == 2 else 15}"} for i in range(8)
]
RECORD = ir.Tool(
    name="record_loan", description="Record a loan with its dates.", kind="write",
    params=[ir.Param(name="member_id", type="integer", description="Member id (members.id)", minimum=1),
            ir.Param(name="book_id", type="integer", description="Book id (books.id)", minimum=1),
            ir.Param(name="borrowed_at", type="string", description="When the loan began (loans.borrowed_at)"),
            ir.Param(name="due_date", type="string", description="When it is due (loans.due_date)")],
    steps=[ir.Step(kind="write", sql="INSERT INTO loans (member_id, book_id, borrowed_at, due_date) "
                                     "VALUES (:member_id, :book_id, :borrowed_at, :due_date)")],
    returns=ir.Returns(sql="SELECT id, borrowed_at, due_date FROM loans WHERE id = :last_id", mode="one"))
MOVE = ir.Tool(
    name="set_loan_start", description="Change when a loan began.", kind="write",
    params=[ir.Param(name="loan_id", type="integer", description="Loan id (loans.id)", minimum=1),
            ir.Param(name="borrowed_at", type="string", description="New start (loans.borrowed_at)")],
    steps=[ir.Step(kind="write", sql="UPDATE loans SET borrowed_at = :borrowed_at WHERE id = :loan_id")],
    returns=ir.Returns(sql="SELECT id, borrowed_at FROM loans WHERE id = :loan_id", mode="one"))


def dated_env() -> ir.Environment:
    env = library_env()
    plan = ir.RowPlan(locale="en_US", seed=1, examples=len(EXAMPLES), generators=[])
    seed = [ir.SeedRows(table="loans", rows=EXAMPLES + MADE, plan=plan) if s.table == "loans" else s for s in env.seed]
    return env.model_copy(update={"seed": seed, "tools": [*env.tools, RECORD, MOVE]})


def test_new_rows_sit_where_the_examples_are_and_keep_their_order() -> None:
    env = dated_env()
    assert env.clock.startswith(TODAY.isoformat())
    with fresh(env) as run:
        chains = plan_chains(env, run, 30, {1: 0.4, 2: 0.3, 3: 0.3}, spread=True)
    made = [c for ch in chains for c in ch.calls if c.tool == "record_loan"]
    assert made, "the planner found no task that records a loan"
    for call in made:
        start, due = (date.fromisoformat(call.arguments[k]) for k in ("borrowed_at", "due_date"))
        assert -12 <= (start - TODAY).days <= -3, call.arguments  # the examples: 5-10 days back, widened by half
        assert (due - start).days == 14, call.arguments  # the examples' gap, as the template row had it
    with fresh(env) as run:  # before: a new loan copied a made row's dates, months back
        p = make_planner(env, run)
        rel = time_relations(p, "loans")
        assert [(o.first, o.second) for o in rel.orders] == [("borrowed_at", "due_date")]
        got = fit_dates(p, "loans", None, {"borrowed_at": "2025-04-01", "due_date": "2025-04-15", "member_id": 2}, {})
        assert got == {"borrowed_at": "2026-01-03", "due_date": "2026-01-17", "member_id": 2}


def test_a_changed_date_that_breaks_the_order_moves_the_other_way() -> None:
    env = dated_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        row = dict(zip(p.infos["loans"].columns,
                       run.inst.conn.execute("SELECT * FROM loans WHERE id = 6").fetchone(), strict=True))
        assert (row["borrowed_at"], row["due_date"]) == ("2025-05-01", "2025-05-04")
        # a week on puts its start after its due date: a week back instead
        assert fit_dates(p, "loans", row, {"borrowed_at": "2025-05-08"}, {}) == {"borrowed_at": "2025-04-24"}
        assert fit_dates(p, "loans", row, {"due_date": "2025-05-11"}, {}) == {"due_date": "2025-05-11"}
        # neither way keeps it: no value (the planner takes another task)
        assert fit_dates(p, "loans", row, {"due_date": "2025-04-20"}, {}) is None
        for ch in plan_chains(env, run, 30, {1: 0.4, 2: 0.3, 3: 0.3}, spread=True):
            with fresh(env) as r2:
                play(r2, ch.calls)
                for c in r2.changes():
                    if c.table == "loans" and c.after is not None:
                        assert not relations.violations([c.after], rel_order(p)), (ch.shape, c.after)


def rel_order(p) -> relations.DateOrder:
    return time_relations(p, "loans").orders[0]


def test_fit_new_row_from_values_alone() -> None:
    """Made-up names: a window around the clock, an order within the row, and a child after its parent's date."""
    ex = {"ryk": [1, 2, 3], "zol": ["2026-01-15"] * 3, "kap": ["2026-02-15"] * 3}
    rel = relations.row_relations(ex, TODAY, {"ryk": {1: {"vum": "2026-01-10"}, 2: {"vum": "2026-01-12"},
                                                      3: {"vum": "2026-01-01"}}})
    assert rel.windows == (("zol", 0, 0), ("kap", 31, 31))
    assert [(o.first, o.second, o.min_days, o.max_days) for o in rel.orders] == [("zol", "kap", 31, 31)]
    assert [(o.column, o.parent_column, o.after, o.strict) for o in rel.parents] == [
        ("zol", "vum", True, True), ("kap", "vum", True, True)]
    # a backdated new row comes to the clock; its second date follows at the examples' gap
    assert relations.fit_new_row(rel, {"zol": "2025-10-16", "kap": "2025-11-16"}, {}, TODAY) == {
        "zol": "2026-01-15", "kap": "2026-02-15"}
    # a parent dated after the window: the child just after it, and what follows it moves along
    got = relations.fit_new_row(rel, {"zol": "2026-01-15", "kap": "2026-02-15"}, {"ryk": {"vum": "2026-03-01"}}, TODAY)
    assert got == {"zol": "2026-03-02", "kap": "2026-04-02"}
    assert relations.broken(rel, {"zol": "2025-10-16", "kap": "2025-10-01"}, {"ryk": {"vum": "2026-01-10"}}) == [
        "kap before zol", "zol before its ryk's vum", "kap before its ryk's vum"]
    # a leave that ends before it starts: the end follows the start at the examples' smallest gap
    leave = relations.row_relations({"a": ["2026-01-18", "2026-01-21"], "b": ["2026-01-20", "2026-01-25"]}, TODAY)
    assert relations.fit_new_row(leave, {"a": "2026-01-20", "b": "2026-01-17"}, {}, TODAY) == {"b": "2026-01-22"}
    assert relations.clock_window(["2025-12-01T10:00:00", "2026-01-10"], TODAY) == (-65, 0)
