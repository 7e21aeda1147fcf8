"""(Measuring script of example_fanout_nulls_2026-11-29.md; PYTHONPATH=REPO python THIS CATALOG.) Replays the rows stage (bench_seed_data's path: cached replies, examples from env.json) and prints per table:
rows, NULLs per nullable column, children per parent for each reference."""
import json
import os
import sys
from pathlib import Path

import benchmarks.bench_seed_data as b
from pipeline.config import load_config
from pipeline.dbmodel.columns import table_columns
from pipeline.envdir import load_env_dir

catalog = Path(sys.argv[1])
out = {}
real = b.rowgen.fill_table

def wrapped(scenario, table, conn, *a, **k):
    made = real(scenario, table, conn, *a, **k)
    cols = table_columns(conn, table)
    n = conn.execute(f'SELECT COUNT(*) FROM "{table.name}"').fetchone()[0]
    rec = {"rows": n, "nulls": {}, "per_parent": {}}
    for c in cols:
        if not c.notnull and not c.pk and c.ref is None:
            rec["nulls"][c.name] = conn.execute(f'SELECT COUNT(*) FROM "{table.name}" WHERE "{c.name}" IS NULL').fetchone()[0]
        if c.ref is not None:
            r = conn.execute(f'SELECT COUNT(DISTINCT "{c.name}"), MAX(k) FROM (SELECT "{c.name}", COUNT(*) k FROM "{table.name}" WHERE "{c.name}" IS NOT NULL GROUP BY 1)').fetchone()
            parents = conn.execute(f'SELECT COUNT(*) FROM "{c.ref[0]}"').fetchone()[0]
            rec["per_parent"][c.name] = {"parents": parents, "named": r[0], "max_per_parent": r[1]}
    out[f"{scenario.name}/{table.name}"] = rec
    return made

b.rowgen.fill_table = wrapped
_fc = b.fake_client
b.fake_client = lambda replies, **k: _fc([replies[0]] * 400, **k)  # the bench's 20 run out on the example
build = load_config(Path(sys.argv[2]) if len(sys.argv) > 2 else b.ROOT / "seeds/quickstart.toml").stages.build.model_copy(update={"row_generators": True})
cache = b.Cache(catalog / "llm_cache.sqlite")
for env_json in sorted((catalog / "envs").glob("*/env.json")):
    env, _, _ = load_env_dir(env_json.parent)
    if os.environ.get("RAW_NULL"):  # u4: the model's own 4th consultant had no contact (env.json holds it rewritten)
        seed = next(s for s in env.seed if s.table == "consultants")
        seed.rows[3]["contact_info"] = None
    b.bench_env(env, cache, build)
for k, v in out.items():
    print(k, json.dumps(v))
