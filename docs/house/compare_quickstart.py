#!/usr/bin/env python3
"""Compare a rebuilt quickstart (OUT) with a repo's committed generated/quickstart (REPO).

Usage: python3 compare_quickstart.py REPO OUT [REF]
(REF: another run's output directory to compare OUT with, instead of REPO/generated/quickstart; the file list is
still the one git tracks under REPO/generated/quickstart.)
Every file git tracks under REPO/generated/quickstart is compared byte for byte, except: catalog.db and
llm_cache.sqlite, compared as SQL dumps (catalog.db without the ``runs`` table, the run record, and
without ``environments.seconds``, a timing); server.py, which
may differ and then must equal ``REPO``'s ``envfoundry render`` of the env.json (checked by the caller with
``python -m pipeline.cli render --check``). Prints each difference; exit 1 when any.
"""
import sqlite3
import subprocess
import sys
from pathlib import Path

repo, out = Path(sys.argv[1]), Path(sys.argv[2])
ref = Path(sys.argv[3]) if len(sys.argv) > 3 else repo / "generated" / "quickstart"
files = subprocess.run(["git", "ls-files", "generated/quickstart"], cwd=repo, capture_output=True, text=True,
                       check=True).stdout.split()


def dump(path: Path, skip: set[str]) -> list[str]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = []
    for (name,) in con.execute("select name from sqlite_master where type='table' order by name"):
        if name in skip:
            continue
        cols = [r[1] for r in con.execute(f'pragma table_info("{name}")')
                if not (name == "environments" and r[1] == "seconds")]  # a timing, not an output
        rows.append(f"-- {name}")
        sel = ", ".join(f'"{c}"' for c in cols)
        rows += [repr(r) for r in con.execute(f'select {sel} from "{name}" order by 1')]
    con.close()
    return rows


bad = 0
servers = []
for rel in files:
    a, b = ref / Path(rel).relative_to("generated/quickstart"), out / Path(rel).relative_to("generated/quickstart")
    if not b.exists():
        print(f"MISSING {b}")
        bad += 1
        continue
    if rel.endswith("catalog.db") or rel.endswith("llm_cache.sqlite"):
        skip = {"runs"} if rel.endswith("catalog.db") else set()
        if dump(a, skip) != dump(b, skip):
            print(f"DIFFER (sql) {rel}")
            bad += 1
        continue
    if a.read_bytes() != b.read_bytes():
        if rel.endswith("server.py"):
            servers.append(str(b.parent))
            print(f"server.py differs (must be a fresh render): {rel}")
            continue
        print(f"DIFFER {rel}")
        bad += 1
print(f"{len(files)} files compared, {bad} differ" + (f"; servers to render-check: {' '.join(servers)}" if servers else ""))
sys.exit(1 if bad else 0)
