"""The calls a rule is checked on, and recorded with, take no value from a table's first row (issue 40: "the model's
example rows are no more likely to be named in a request than any other row"). The LLM's example rows are the first
rows of every table; the Sampler's spread began at them, so every rule's recorded calls named them and the planner's
rule-bound tasks asked about them: the committed pharmacy of 2026-11-30 (cc2ce4670f) recorded ``fill_prescription``
for patient 1, medication 1 and quantity 0.5 (the first prescription's), and both of its compound tasks asked for a
fill of quantity 0.5 (Sean Benjamin's Aspirin, Ronnie Martinez's Ibuprofen), a quantity only the example rows hold.
On ``tests/fixtures/pharmacy_allergies.json`` (that pharmacy's env.json of 2026-11-30, r18c, without rules)."""

from __future__ import annotations

from pathlib import Path

from pipeline import ir
from pipeline.dbmodel.arguments import Sampler, set_uses
from pipeline.runtime import EnvInstance
from pipeline.stages.policy.candidates import argument_sets, propose

FIXTURE = Path(__file__).parent.parent / "fixtures" / "pharmacy_allergies.json"


def first_row_values(conn, table: str) -> dict[str, object]:
    cur = conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid LIMIT 1')
    return dict(zip([d[0] for d in cur.description], cur.fetchone(), strict=True))


def test_the_sampler_can_leave_the_first_rows_out_and_spreads_over_the_rest() -> None:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    tool = next(t for t in env.tools if t.kind == "write" and {p.name for p in t.params} >= {"patient_id", "quantity"})
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, env.tables, env.clock)
        firsts = {t.name: first_row_values(inst.conn, t.name) for t in env.tables}
        drawn = sampler.arguments(tool, 3, skip=1)
        plain = sampler.arguments(tool, 3)
    first_ids = {firsts["patients"]["patient_id"]}
    assert any(s.get("patient_id") in first_ids for s in plain)  # the spread began at the example rows
    assert drawn and not any(s.get("patient_id") in first_ids for s in drawn)
    assert len({s.get("patient_id") for s in drawn}) >= 3


def test_every_candidate_s_calls_from_the_sampler_name_no_first_row() -> None:
    env = ir.Environment.model_validate_json(FIXTURE.read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        sampler = Sampler(inst.conn, env.tables, env.clock)
        cands = propose(env, inst.conn)
        assert cands
        checked = 0
        for c in cands:
            tool = env.tool(c.tool)
            sets = argument_sets(c, tool, sampler, inst.conn, env.clock)
            # each probe is the base call with the probed parameter changed: its other parameters are the base's
            others = [{k: v for k, v in s.items() if k != c.probe} for s in sets]
            base = others[0]
            # no parameter may hold a value only a table's first row holds
            set_params = {u.param for u in set_uses(tool)}  # a value an UPDATE sets is drawn from another row
            for p in tool.params:
                src = sampler.source(tool, p.name)
                if p.name == c.probe or src is None or p.name not in base or p.name in set_params:
                    continue
                table, col = src[0], src[1].name
                first = first_row_values(inst.conn, table)[col]
                rows = inst.conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]
                alone = inst.conn.execute(f'SELECT COUNT(*) FROM "{table}" WHERE "{col}" = ?', (first,)).fetchone()[0]
                if rows > 3 and alone == 1:  # a value only the first row holds: naming it names that row
                    assert base[p.name] != first, (c.key, p.name, base[p.name])
                    checked += 1
        assert checked >= 5
