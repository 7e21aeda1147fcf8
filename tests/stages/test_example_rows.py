"""The model's example rows in requests (issue 40): the first rows of a table are the ones the LLM wrote as examples
(``RowPlan.examples``), often placeholders, and the rows other tables' examples point at are examples too (an
example loan is of an example member), so a plain shuffle still named them several times as often as other rows.
The planner tries them after every other row, and only where no other row gives a chain."""

from __future__ import annotations

from collections import Counter

from pipeline.dbmodel.keynames import singular
from pipeline.ir import Environment, RowPlan, SeedRows
from pipeline.runtime.replay import fresh
from pipeline.stages.tasks.planner import make_planner, plan_chains
from tests.fixtures.brewery import brewery_at_scale

EXAMPLES = 4


def _marked(env: Environment) -> Environment:
    """``env`` with its first rows of each table marked as the model's examples (code made the rest)."""
    seed = [SeedRows(table=s.table, rows=s.rows, plan=s.plan or RowPlan(seed=0, examples=min(EXAMPLES, len(s.rows))))
            for s in env.seed]
    return env.model_copy(update={"seed": seed})


def _named(env: Environment) -> tuple[Counter[str], Counter[str], int]:
    """Per table: the rows the build's chains name (an id a call takes), those that are examples; and the chains."""
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True)
        keys = {name: t for t, info in run.infos.items() if len(info.key) == 1
                for name in (info.key[0], singular(t) + "_id")}
        ex = {s.table: {r[run.infos[s.table].key[0]] for r in s.rows[:EXAMPLES]} for s in env.seed}
    named: Counter[str] = Counter()
    examples: Counter[str] = Counter()
    for ch in chains:
        rows = {(keys[a], v) for c in ch.calls for a, v in c.arguments.items() if a in keys and isinstance(v, int)
                and v <= len(next(s.rows for s in env.seed if s.table == keys[a]))}  # a row of the initial state
        for t, v in rows:
            named[t] += 1
            examples[t] += v in ex[t]
    return named, examples, len(chains)


def test_the_examples_are_named_no_more_often_than_their_share() -> None:
    env = _marked(brewery_at_scale())
    named, examples, n = _named(env)
    rows = {s.table: len(s.rows) for s in env.seed}
    assert n >= 20 and named["batches"] >= 10 and named["kegs"] >= 5, (n, named)
    for t in ("batches", "kegs"):
        assert examples[t] / named[t] <= EXAMPLES / rows[t], (t, examples[t], named[t], rows[t])
    # the same rows, none marked: the first rows are named as any other (more often than the marked examples)
    _, before, _ = _named(brewery_at_scale())
    assert examples["batches"] + examples["kegs"] < before["batches"] + before["kegs"], (examples, before)


def test_a_table_of_examples_alone_is_still_planned_and_the_window_puts_them_last() -> None:
    env = _marked(brewery_at_scale())
    with fresh(env) as run:
        p = make_planner(env, run)
        order = [r["id"] for r in p.window("batches", 0, 6)]
        assert len(order) == 6 + EXAMPLES and set(order[-EXAMPLES:]) == {1, 2, 3, 4}
        assert all(p.is_example("batches", r) for r in p.rows("batches", -1)[-EXAMPLES:])
        p.examples_first = True
        assert {r["id"] for r in p.window("batches", 0, 6)[:EXAMPLES]} == {1, 2, 3, 4}
        # the beers hold only the model's rows (no row made by code): none to prefer, they are planned as before
        assert not p.examples("beers") and len(p.window("beers", 0, 6)) == len(env.seed[0].rows)
