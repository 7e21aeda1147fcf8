"""The calls a rule is checked on, and recorded with, take no value only the LLM's example rows hold (issue 40: "the
model's example rows are no more likely to be named in a request than any other row"). The examples are the first
``RowPlan.examples`` rows of every table; the Sampler's spread began at them, so every rule's recorded calls named
them and the planner's rule-bound tasks asked about them: the committed pharmacy of 2026-11-30 (cc2ce4670f) recorded
``fill_prescription`` for patient 1, medication 1 and quantity 0.5 (the first prescription's), and both of its
compound tasks asked for a fill of quantity 0.5 (Sean Benjamin's Aspirin, Ronnie Martinez's Ibuprofen), a quantity
only the example rows hold. On ``tests/fixtures/pharmacy_allergies.json`` (that pharmacy's env.json of 2026-11-30,
r18c, without rules; 4 example rows per table)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pipeline import ir
from pipeline.dbmodel.arguments import Sampler, set_uses
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import argument_sets, example_rows, propose

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_allergies.json"


def only_examples_hold(conn: sqlite3.Connection, table: str, col: str, n: int, value: object) -> bool:
    """Whether ``value`` is held in ``table.col`` by some of its first ``n`` rows and by no other row."""
    rows = [r[0] for r in conn.execute(f'SELECT "{col}" FROM "{table}" ORDER BY rowid')]
    return value in rows[:n] and value not in rows[n:]


def test_the_sampler_draws_past_the_example_rows_spread_over_the_rest() -> None:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    examples = example_rows(env)
    assert examples and set(examples.values()) == {4}
    tool = next(t for t in env.tools if t.kind == "write" and {p.name for p in t.params} >= {"patient_id", "quantity"})
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, env.tables, env.clock, examples)
        ids = [r[0] for r in inst.conn.execute("SELECT patient_id FROM patients ORDER BY rowid")]
        drawn = sampler.arguments(tool, 3, past_examples=True)
        plain = sampler.arguments(tool, 3)
    assert any(s.get("patient_id") in ids[:4] for s in plain)  # the spread began at the example rows
    assert drawn and not any(s.get("patient_id") in ids[:4] for s in drawn)
    assert len({s.get("patient_id") for s in drawn}) >= 3


def test_every_candidate_s_calls_from_the_sampler_name_no_example_row() -> None:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    examples = example_rows(env)
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, env.tables, env.clock, examples)
        cands = propose(env, inst.conn)
        assert cands
        checked = 0
        for c in cands:
            tool = env.tool(c.tool)
            base = argument_sets(c, tool, sampler, inst.conn, env.clock)[0]  # each probe is the base, one value moved
            set_params = {u.param for u in set_uses(tool)}  # a value an UPDATE sets is drawn from another row
            for p in tool.params:
                src = sampler.source(tool, p.name)
                if p.name == c.probe or src is None or p.name not in base or p.name in set_params:
                    continue
                table, col = src[0], src[1].name
                if table in examples:
                    assert not only_examples_hold(inst.conn, table, col, examples[table], base[p.name]), \
                        (c.key, p.name, base[p.name])
                    checked += 1
        assert checked >= 5
