"""Tasks whose writes break a relation between dates that the seed's example rows show (issue 40), no model.

For each environment directory given: the stored bank's reference solutions (``tasks.jsonl``) and every chain the
planner finds on the stored ``initial.db`` (``plan_chains(spread=True)``; code, no model), each replayed on a fresh
instance; a written row counts when it breaks an order of its own dates, an order against the parent row it names,
or (a new row) a date outside the window around the clock where the table's examples lie
(:func:`pipeline.meaning.relations.row_relations`). Run with ``PYTHONPATH`` at the checkout to measure.

    python benchmarks/bench_time_relations.py generated/quickstart/envs/*
"""

from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from pipeline.ir import Environment, ToolCall
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import plan_chains


def _this_relations() -> Any:
    """This checkout's relations module (standard library only), also when ``PYTHONPATH`` points at an older
    checkout to measure its planner ("before")."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "pipeline" / "meaning" / "relations.py"
    spec = importlib.util.spec_from_file_location("_relations_now", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


relations = _this_relations()


def _relations(env: Environment, conn: Any, infos: Any) -> dict[str, Any]:
    today = date.fromisoformat(env.clock[:10])
    out = {}
    for t in env.tables:
        rows: list[dict[str, Any]] = []
        for s in env.seed:
            if s.table == t.name:
                rows += s.rows[: s.plan.examples] if s.plan is not None else s.rows
        ex = {c: [r.get(c) for r in rows] for c in dict.fromkeys(c for r in rows for c in r)}
        parents = {}
        for c, pt, pc in infos[t.name].foreign_keys:
            if pt == t.name or pt not in infos:
                continue
            key = pc or infos[pt].key[0]
            cols = infos[pt].columns
            parents[c] = {r[cols.index(key)]: dict(zip(cols, r, strict=True)) for r in conn.execute(f'SELECT * FROM "{pt}"')}
        out[t.name] = relations.row_relations(ex, today, parents)
    return out


def _breaks(env: Environment, calls: list[ToolCall], db: Path) -> list[str]:
    today = date.fromisoformat(env.clock[:10])
    with fresh(env, db) as run:
        rels = _relations(env, run.inst.conn, run.infos)
        play(run, calls, stop_on_error=False)
        out = []
        final = run.final()
        for ch in run.changes():
            if ch.after is None:
                continue
            rel = rels[ch.table]
            row = dict(ch.after)
            parents = {}
            for c, pt, pc in run.infos[ch.table].foreign_keys:
                key = pc or run.infos[pt].key[0]
                par = next((dict(r) for r in final.get(pt, {}).values() if r.get(key) == row.get(c)), None) \
                    if pt in run.infos else None
                if par is not None:
                    parents[c] = par
            changed = set(row) if ch.op == "insert" else set(ch.changed_columns)
            found = [b for b in relations.broken(rel, row, parents) if any(c in b.split() for c in changed)]
            if ch.op == "insert":
                for c, lo, hi in rel.windows:
                    d = relations.as_date(row.get(c))
                    if d is not None and not lo <= (d - today).days <= hi:
                        found.append(f"new {c} {(d - today).days} days from the clock, examples {lo}..{hi}")
            out += [f"{ch.table}: {b}" for b in found]
        return out


def main(dirs: list[str]) -> None:
    for d in map(Path, dirs):
        env = Environment.model_validate_json((d / "env.json").read_text(encoding="utf-8"))
        db = d / "initial.db"
        bank = [json.loads(line) for line in (d / "tasks.jsonl").read_text(encoding="utf-8").splitlines() if line]
        bad_bank = Counter()
        n_bad = 0
        for task in bank:
            ref = task["reference_solution"]
            calls = [ToolCall(**c) for c in (ast.literal_eval(ref) if isinstance(ref, str) else ref)]
            got = _breaks(env, calls, db)
            n_bad += bool(got)
            bad_bank.update(got)
        with fresh(env, db) as run:
            chains = plan_chains(env, run, 40, {1: 0.3, 2: 0.4, 3: 0.3}, initial_db=db, spread=True,
                                 rules=bool(env.rules))
        bad_chains = Counter()
        c_bad = 0
        writes = 0
        for ch in chains:
            got = _breaks(env, ch.calls, db)
            writes += any(g.kind in ("create", "child", "update", "decide_update") for g in ch.goals)
            c_bad += bool(got)
            bad_chains.update(got)
        print(f"## {env.scenario.name if hasattr(env.scenario, 'name') else d.name} ({d.name})")
        print(f"bank: {n_bad}/{len(bank)} tasks break a relation; {dict(bad_bank)}")
        print(f"planned chains: {c_bad}/{len(chains)} ({writes} with a create/update) break one; "
              f"{dict(bad_chains.most_common(8))}")


if __name__ == "__main__":
    main(sys.argv[1:])
