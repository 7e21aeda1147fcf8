"""Planned tasks that break a relation the seeded rows hold, on a built environment (no model call).

Replays the planner (``candidates`` with the rules, spread, seed 0, as the bank's ``plan_chains``) on an
environment's env.json and initial.db, replays each chain's reference on a fresh copy and counts, from outside the
planner's own inference (the relations measured here are found again from the rows, independently of
``planner.held``):

- ``second_child``: a parent left with two rows of a child table whose seeded rows name each parent at most once;
- ``counter``: a parent's integer column that equals its number of children in every seeded row, left disagreeing;
- ``child_off_clock``: a new child whose parent's date columns are all on the other side of the clock than those of
  every seeded child's parent (a fine on a loan not yet due, when every seeded fine's loan is past due);
- ``forbidden_generic``: a chain that is not rule-bound whose reference does a write a rule forbids.

Usage: python benchmarks/bench_held_relations.py ENV_DIR [--no-rules]   (--no-rules: the plan without rule-bound
tasks, as a build with ``rule_tasks`` off makes it)
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from datetime import date
from pathlib import Path

from pipeline.ir import Environment
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import candidates, make_planner


def rows(conn, table):
    cur = conn.execute(f'SELECT * FROM "{table}"')
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur]


def main(env_dir: str, rules: bool = True) -> dict:
    d = Path(env_dir)
    env = Environment.model_validate_json((d / "env.json").read_text())
    db = str(d / "initial.db")
    today = date.fromisoformat(env.clock[:10])
    init = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    fks = []
    for (t,) in init.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        for r in init.execute(f'PRAGMA foreign_key_list("{t}")'):
            if r[2] != t:
                fks.append((t, r[3], r[2], r[4] or "rowid"))
    singles = [f for f in fks if len({r[f[1]] for r in rows(init, f[0])}) == len(rows(init, f[0])) >= 3]
    counters = []
    for child, via, parent, key in fks:
        tally = Counter(r[via] for r in rows(init, child))
        prow = rows(init, parent)
        for col in prow[0] if prow else []:
            vals = [r[col] for r in prow]
            if col != key and all(isinstance(v, int) for v in vals) and any(tally.values()) and \
                    all(r[col] == tally.get(r[key], 0) for r in prow):
                counters.append((child, via, parent, key, col))

    def side(r):  # the sides of the clock of a row's date columns
        return tuple(sorted((c, str(v)[:10] <= today.isoformat()) for c, v in r.items()
                            if isinstance(v, str) and len(v) >= 10 and v[4] == "-" and v[7] == "-"))

    clocks = {}
    for child, via, parent, key in fks:
        par = {r[key]: r for r in rows(init, parent)}
        sides = {side(par[r[via]]) for r in rows(init, child) if r[via] in par}
        if len(sides) == 1 and next(iter(sides)):
            clocks[(child, via, parent, key)] = sides.pop()
    with fresh(env, db) as run:
        planner = make_planner(env, run)
        pools = candidates(planner, 0, db, spread=True, rules=rules)
    chains = [c for s in sorted(pools) for c in pools[s]]
    counts = Counter()
    examples = {}
    from pipeline.stages.tasks.planner.rules import against as rule_against
    for ch in chains:
        broke = set()
        with fresh(env, db) as run:
            for call in ch.calls:
                if not ch.rules and any(call.tool in r.tools for r in env.rules):
                    if rule_against(env, run.inst.conn, call):
                        broke.add("forbidden_generic")
                play(run, [call], changes=False)
            after = run.inst.conn
            for child, via, _parent, _key in singles:
                if after.execute(f'SELECT 1 FROM "{child}" GROUP BY "{via}" HAVING COUNT(*) > 1').fetchone():
                    broke.add("second_child")
            for child, via, parent, key, col in counters:
                tally = Counter(r[via] for r in rows(after, child))
                if any(r[col] != tally.get(r[key], 0) for r in rows(after, parent)):
                    broke.add("counter")
            for (child, via, parent, key), s in clocks.items():
                before = {tuple(r.items()) for r in rows(init, child)}
                par = {r[key]: r for r in rows(after, parent)}
                if any(tuple(r.items()) not in before and r[via] in par and side(par[r[via]]) != s
                       for r in rows(after, child)):
                    broke.add("child_off_clock")
        for b in broke:
            counts[b] += 1
            examples.setdefault(b, [ch.shape, " ".join(ch.facts)[:400]])
    out = {"env": d.name, "rules": rules, "chains": len(chains), "by_shape": dict(Counter(c.shape for c in chains)),
           "singles": [f"{c}.{v}" for c, v, _, _ in singles], "counters": [f"{p}.{c}" for *_, p, _, c in counters],
           "clock_relations": [f"{c}.{v}" for c, v, _, _ in clocks],
           "breaking": {k: counts.get(k, 0) for k in ("second_child", "counter", "child_off_clock",
                                                       "forbidden_generic")},
           "examples": examples}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main(sys.argv[1], rules="--no-rules" not in sys.argv[2:])
