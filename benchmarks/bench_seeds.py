"""`envfoundry seeds check` on large seed files: wall time, peak memory (ru_maxrss of the child) and output size.

    .venv/bin/python benchmarks/bench_seeds.py                       # 2,000 and 10,000 identical lines
    .venv/bin/python benchmarks/bench_seeds.py --distinct 2000       # also N different names that all read alike

Each case runs the real CLI in a fresh subprocess (so the peak is that command's alone). Targets: output size
independent of the number of repeats (one line per repeated name, --limit near pairs); memory and time linear in
the file for repeated lines. Results are recorded in ``benchmarks/results/seeds.md``. Every case holds repeated or
near-duplicate names, so each command must exit 1 with its report; exit 1, the reasons on stderr, when one does not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def measure(path: Path, *extra: str) -> dict[str, Any]:
    """Run `seeds check` in a child; its peak RSS is the growth of RUSAGE_CHILDREN's maximum (fresh process)."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], capture_output=True); "
            "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
            "len(p.stdout), p.stdout.count(b'\\n'), p.returncode); "
            "sys.stderr.buffer.write(p.stderr[-2000:])")
    cmd = [sys.executable, "-m", "pipeline.cli", "seeds", "check", str(path), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, env=env, check=True)
    secs, rss_kb, size, lines, rc = out.stdout.split()
    return {"seconds": float(secs), "peak_mb": int(rss_kb) / 1024, "output_bytes": int(size),
            "output_lines": int(lines), "exit": int(rc), "stderr": out.stderr}


def problem(m: dict[str, Any]) -> str | None:
    """Why a case's command failed, or None. Every case holds repeated or near-duplicate names, so `seeds check`
    must report them: exit 1 with a report (2 is a bad seed file; a crash is a traceback)."""
    if "Traceback" in str(m["stderr"]):
        return f"the command crashed: {str(m['stderr']).strip().splitlines()[-1]}"
    if m["exit"] != 1:
        return f"exit {m['exit']}, not 1 (duplicates reported): {str(m['stderr']).strip()[-300:]}"
    if not m["output_lines"]:
        return "exit 1 but no report"
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--identical", type=int, nargs="*", default=[2000, 10000])
    ap.add_argument("--distinct", type=int, nargs="*", default=[])
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, rusage units: KiB (Linux)")
    print("| case | seconds | peak RSS (MB) | output lines | output bytes | exit |")
    print("|---|---|---|---|---|---|")
    failed: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        cases = [(f"{n:,} identical lines", "Hotel booking: guests reserve rooms\n" * n) for n in args.identical]
        cases += [(f"{n:,} different names that read alike", "".join(
            f"Hotel room booking for branch number {i}\n" for i in range(n))) for n in args.distinct]
        for label, text in cases:
            p = Path(d) / "seeds.txt"
            p.write_text(text)
            for extra in ((), ("--json",)):
                m = measure(p, *extra)
                name = label + (" (--json)" if extra else "")
                print(f"| {name} | {m['seconds']:.2f} | {m['peak_mb']:.0f} | {m['output_lines']} | "
                      f"{m['output_bytes']:,} | {m['exit']} |", flush=True)
                why = problem(m)
                if why:
                    failed.append(f"{name}: {why}")
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    if failed:
        sys.exit(f"bench_seeds: FAILED ({len(failed)} case(s)); the figures above measure failed runs")


if __name__ == "__main__":
    main()
