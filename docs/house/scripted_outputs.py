"""Outputs of a scripted build and two scripted runs (no model: the scripted replies of tests/test_build.py and
tests/run/test_task_checkpoints.py), listed as sha256 per file (databases as SQL dumps, checkpoints left out).
Run it before and after a change that must not change outputs, into the SAME OUTDIR path (paths are recorded in
catalog.db), and diff the listings:
    cd REPO && PYTHONPATH=$PWD .venv/bin/python docs/house/scripted_outputs.py /tmp/out > before.txt"""
import hashlib
import sqlite3
import sys
from pathlib import Path

from pipeline.build import build_environment
from pipeline.config import Config
from pipeline.envdir import write_env_dir
from pipeline.llm import fake_client
from pipeline.run import plan_from_config, run_catalog
from tests.run.test_task_checkpoints import Policy, _client
from tests.stages import library_replies as lib
from tests.test_build import build_replies

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
# 1. build_environment on scripted replies
res = build_environment(lib.SCENARIO, fake_client(build_replies()), lib.small_settings())
write_env_dir(res.env, out / "build")
# 2. a whole run (expand, build, tasks, verification) with a scripted policy
seeds = out / "seeds.txt"
seeds.write_text("public library lending\n")
for n, tasks in (("run4", 4), ("run12", 12)):
    plan = plan_from_config(Config(), {"expand": {"scenarios_per_seed": 1}, "tester": {"attempts": 1},
                                       "run": {"tasks_per_env": tasks}})
    plan.build = lib.small_settings(row_generators=False)
    pol = Policy()
    run_catalog(seeds, out / n, plan, client_factory=lambda s, pol=pol: _client(pol))


def dump(p):
    con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
    rows = []
    for (name,) in con.execute("select name from sqlite_master where type='table' order by name"):
        if name == "runs":
            continue
        cols = [r[1] for r in con.execute(f'pragma table_info("{name}")') if r[1] not in ("seconds",)]
        rows.append(f"-- {name}")
        rows += [repr(r) for r in con.execute(f'select {", ".join(chr(34)+c+chr(34) for c in cols)} from "{name}" order by 1')]
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


for p in sorted(out.rglob("*")):
    if p.is_file():
        rel = p.relative_to(out)
        if p.name == "checkpoints.sqlite":
            continue
        if p.suffix in (".db", ".sqlite"):
            print(rel, "sql", dump(p))
        else:
            print(rel, hashlib.sha256(p.read_bytes()).hexdigest())
