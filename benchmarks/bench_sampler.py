"""Sampler benchmark: proved tasks per second per core from one environment, distinct tasks per level, memory.

Usage: .venv/bin/python benchmarks/bench_sampler.py [ENV_DIR] [--n 1000] [--seed 1] [--levels 1,2,3,4,5]
       [--max-rounds 400] [--json]

ENV_DIR defaults to the first environment of the committed example (generated/quickstart/envs). For each level it
runs ``pipeline.sampler.sample_env_dir(ENV_DIR, n, seed, level)`` in this one process (one core) and reports:
the distinct proved tasks found (when fewer than ``n``, the sampler's rounds stopped finding new ones: the
environment holds about that many at that level beyond its bank), how many tasks had been sampled when a planned
chain first repeated one (of the bank or the sample), proved tasks per CPU second, and the process's peak RSS.
No LLM is involved. A table goes to stdout; with --json, one JSON object as the last line. Exit 1 when no level found
a proved task (a sampler error is a traceback, exit 1 too).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.sampler import Want, sample_env_dir  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("env_dir", nargs="?", type=Path, default=None)
    ap.add_argument("--n", type=int, default=1000, help="tasks asked per level")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--levels", default="1,2,3,4,5")
    ap.add_argument("--max-rounds", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    env_dir = args.env_dir or sorted((ROOT / "generated" / "quickstart" / "envs").glob("*/env.json"))[0].parent
    rows = []
    base = peak_rss_mib()
    for level in [int(x) for x in args.levels.split(",")]:
        cpu, wall = time.process_time(), time.perf_counter()
        got = sample_env_dir(env_dir, args.n, seed=args.seed, want=Want(level=level), max_rounds=args.max_rounds)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rows.append({"level": level, "found": len(got.tasks), "exhausted": got.exhausted, "rounds": got.rounds,
                     "first_repeat": got.first_repeat, "refused": got.refused, "cpu_s": round(cpu, 2),
                     "wall_s": round(wall, 2), "tasks_per_cpu_s": round(len(got.tasks) / cpu, 2) if cpu else None,
                     "peak_rss_mib": round(peak_rss_mib(), 1)})
        print(f"level {level}: {len(got.tasks)} tasks in {cpu:.1f} CPU s", file=sys.stderr, flush=True)
    total = sum(r["found"] for r in rows)
    cpu_total = sum(r["cpu_s"] for r in rows)
    print(f"envfoundry sample on {env_dir.name} (n={args.n} per level, seed {args.seed}; {platform.processor() or ''}"
          f" {platform.python_version()})")
    print(f"{'level':>5} {'found':>6} {'exhausted':>9} {'rounds':>6} {'1st repeat':>10} {'tasks/cpu-s':>11} "
          f"{'cpu s':>7} {'peak MiB':>8}")
    for r in rows:
        print(f"{r['level']:>5} {r['found']:>6} {str(r['exhausted']):>9} {r['rounds']:>6} "
              f"{str(r['first_repeat']):>10} {str(r['tasks_per_cpu_s']):>11} {r['cpu_s']:>7} {r['peak_rss_mib']:>8}")
    overall = round(total / cpu_total, 2) if cpu_total else None
    print(f"all levels: {total} distinct proved tasks in {cpu_total:.1f} CPU s: {overall} tasks per second per core; "
          f"peak RSS {peak_rss_mib():.0f} MiB (after imports {base:.0f} MiB)")
    if args.json:
        print(json.dumps({"env": env_dir.name, "n": args.n, "seed": args.seed, "levels": rows,
                          "tasks_per_cpu_s": overall, "peak_rss_mib": round(peak_rss_mib(), 1),
                          "rss_after_imports_mib": round(base, 1)}, sort_keys=True))
    if not total:
        sys.exit(f"bench_sampler: FAILED: no proved task at any level of {env_dir}; the figures above measure a "
                 "failed run")


if __name__ == "__main__":
    main()
