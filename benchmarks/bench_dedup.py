"""Dedup benchmarks: the threshold sweep on the labelled pairs, and embedding + dedup time by batch size.

    .venv/bin/python benchmarks/bench_dedup.py sweep            # precision/recall per threshold and text mode
    .venv/bin/python benchmarks/bench_dedup.py scale 1000 10000  # seconds to embed and dedup N synthetic texts
    .venv/bin/python benchmarks/bench_dedup.py worst 1000 100000 # dedup alone when nothing is a duplicate
    .venv/bin/python benchmarks/bench_dedup.py approx 10000 100000 # exact vs IVF search: time and agreement

Results are recorded in ``benchmarks/results/dedup.md``. Synthetic texts come from a seeded generator
(same N, same texts); they are scenario-shaped sentences, not real scenarios.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.embed import Embedder, get_embedder  # noqa: E402
from pipeline.ir import Scenario  # noqa: E402
from pipeline.scenarios.dedup import DedupIndex, DedupSettings, dedup_scenarios, scenario_text  # noqa: E402

PAIRS = ROOT / "tests" / "data" / "dedup_pairs.jsonl"

ACTORS = ["Librarians", "Guests", "Patients", "Dispatchers", "Recruiters", "Buyers", "Tenants", "Students",
          "Nurses", "Agents", "Managers", "Drivers", "Members", "Clerks", "Technicians", "Teachers", "Farmers",
          "Brokers", "Adjusters", "Volunteers", "Inspectors", "Cashiers", "Planners", "Auditors", "Couriers"]
VERBS = ["book", "cancel", "approve", "track", "assign", "schedule", "renew", "return", "order", "invoice",
         "inspect", "register", "transfer", "refund", "review", "reserve", "close", "escalate", "count", "ship"]
OBJECTS = ["rooms", "loans", "appointments", "shipments", "tickets", "invoices", "permits", "claims", "orders",
           "shifts", "vehicles", "leases", "courses", "donations", "parcels", "contracts", "pallets", "licences",
           "meters", "policies", "tables", "seats", "lessons", "repairs", "payments", "samples", "crops", "desks"]
QUALIFIERS = ["by date", "per branch", "for each customer", "within a budget", "against a deadline",
              "by priority", "across warehouses", "per department", "with approval limits", "by region",
              "for returning members", "under a service level", "with deposits", "in time slots"]


def synthetic_scenarios(n: int, seed: int = 0) -> list[Scenario]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        actor = rng.choice(ACTORS)
        v1, v2 = rng.sample(VERBS, 2)
        o1, o2 = rng.sample(OBJECTS, 2)
        q = rng.choice(QUALIFIERS)
        desc = f"{actor} {v1} {o1} {q}, {v2} {o2} and keep a history of each change (#{i})."
        out.append(Scenario(name=f"{o1.title()} {v1} desk {i}", description=desc, seed=f"seed-{i % 100}"))
    return out


class Precomputed:
    """Looks like an :class:`Embedder` but returns vectors computed beforehand (to time dedup alone)."""

    def __init__(self, base: Embedder, vectors: Any):
        self.label, self.vectors, self._dim = base.label, vectors, base.dim

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str], **_: Any) -> Any:
        assert len(texts) == len(self.vectors)
        return self.vectors


def scale(sizes: list[int], batch_size: int, threads: int | None, quantize: bool) -> None:
    """Wall and CPU seconds to embed N synthetic scenarios and dedup them (the load average is printed
    because other processes on a shared machine inflate wall time; CPU seconds, this process's and its
    embedding workers', much less so)."""
    import os

    import torch

    if threads:
        torch.set_num_threads(threads)
    embedder = get_embedder(None, quantize)
    if not quantize:
        embedder.batch_size = batch_size
    embedder.encode(["warm-up"])
    print(f"model {embedder.label}, torch threads {torch.get_num_threads()}, batch {embedder.batch_size}, "
          f"{_cores()} cores")
    print("| N | embed wall s | embed CPU s | dedup wall s | total wall s | kept | load avg (1 min) |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        scenarios = synthetic_scenarios(n)
        texts = [scenario_text(s.name, s.description, "scenario", s.entities, s.goals) for s in scenarios]
        c0, t0 = _cpu(), time.perf_counter()
        vectors = embedder.encode(texts)
        c1, t1 = _cpu(), time.perf_counter()
        index = DedupIndex(Precomputed(embedder, vectors), "scenario")  # type: ignore[arg-type]
        result = dedup_scenarios(scenarios, index, DedupSettings(max_per_seed=None))
        t2 = time.perf_counter()
        print(f"| {n:,} | {t1 - t0:.1f} | {c1 - c0:.1f} | {t2 - t1:.1f} | {t2 - t0:.1f} | "
              f"{result.counts['kept']:,} | {os.getloadavg()[0]:.1f} |", flush=True)


def worst_case(sizes: list[int]) -> None:
    """Dedup alone on N random unit vectors: nothing is a duplicate, so the index grows to N (the upper
    bound of the search cost, which is quadratic in N with the exact flat index)."""
    import os

    import numpy as np

    base = get_embedder(None)
    print("| N | dedup wall s | dedup CPU s | kept | load avg (1 min) |\n|---|---|---|---|---|")
    for n in sizes:
        rng = np.random.default_rng(0)
        v = rng.standard_normal((n, base.dim)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        scenarios = [Scenario(name=f"s{i}", description=f"scenario {i}") for i in range(n)]
        c0, t0 = time.process_time(), time.perf_counter()
        result = dedup_scenarios(scenarios, DedupIndex(Precomputed(base, v), "scenario"),  # type: ignore[arg-type]
                                 DedupSettings(max_per_seed=None))
        print(f"| {n:,} | {time.perf_counter() - t0:.1f} | {time.process_time() - c0:.1f} | "
              f"{result.counts['kept']:,} | {os.getloadavg()[0]:.1f} |", flush=True)


def _planted(n: int, dim: int, seed: int = 0) -> Any:
    """``n`` unit vectors: 80% random, 20% near copies (cosine about 0.7-0.9) of an earlier one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    for i in range(1, n):
        if rng.random() < 0.2:
            noise = rng.standard_normal(dim).astype(np.float32)
            noise /= np.linalg.norm(noise)
            w = v[rng.integers(0, i)] + rng.uniform(0.5, 1.0) * noise
            v[i] = w / np.linalg.norm(w)
    return v


def approx(sizes: list[int]) -> None:
    """Exact flat search against the IVF index (``DedupIndex.APPROX_MIN``) on vectors with planted near
    duplicates: seconds, and how many keep/drop decisions differ."""
    import os

    base = get_embedder(None)
    print(f"IVF: {DedupIndex.NLIST} cells, {DedupIndex.NPROBE} probed, from {DedupIndex.APPROX_MIN:,} vectors on")
    print("| N | exact s | IVF s | decisions differing | duplicates found exact / IVF | load avg |")
    print("|---|---|---|---|---|---|")
    default_min = DedupIndex.APPROX_MIN
    for n in sizes:
        v = _planted(n, base.dim)
        scenarios = [Scenario(name=f"s{i}", description=f"scenario {i}") for i in range(n)]
        out = {}
        for mode, at in (("exact", 10**12), ("ivf", default_min)):
            DedupIndex.APPROX_MIN = at
            t0 = time.perf_counter()
            r = dedup_scenarios(scenarios, DedupIndex(Precomputed(base, v), "scenario"),  # type: ignore[arg-type]
                                DedupSettings(max_per_seed=None))
            out[mode] = (time.perf_counter() - t0, set(r.kept_positions), r.counts["duplicates"])
        DedupIndex.APPROX_MIN = default_min
        diff = len(out["exact"][1] ^ out["ivf"][1])
        print(f"| {n:,} | {out['exact'][0]:.1f} | {out['ivf'][0]:.1f} | {diff} ({diff / n:.2%}) | "
              f"{out['exact'][2]:,} / {out['ivf'][2]:,} | {os.getloadavg()[0]:.1f} |", flush=True)


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the embedding worker processes)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def sweep(lo: float, hi: float, step: float, quantize: bool) -> None:
    import numpy as np

    embedder = get_embedder(None, quantize)
    print(f"model {embedder.label}")
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    y = np.array([bool(p["duplicate"]) for p in pairs])
    print(f"{len(pairs)} labelled pairs ({int(y.sum())} duplicates, {int((~y).sum())} distinct)")
    def text(s: dict[str, Any], mode: str) -> str:
        return scenario_text(s["name"], s["description"], mode, s.get("entities", ()), s.get("goals", ()))

    for mode in ("scenario", "description", "name_description"):
        a = embedder.encode([text(p["a"], mode) for p in pairs])
        b = embedder.encode([text(p["b"], mode) for p in pairs])
        sims = (a * b).sum(axis=1)
        print(f"\ntext={mode}: duplicates {sims[y].min():.3f}..{sims[y].max():.3f} (mean {sims[y].mean():.3f}); "
              f"distinct {sims[~y].min():.3f}..{sims[~y].max():.3f} (mean {sims[~y].mean():.3f})")
        print("| threshold | precision | recall | F1 |\n|---|---|---|---|")
        for t in np.arange(lo, hi + 1e-9, step):
            pred = sims >= t
            tp, fp, fn = int((pred & y).sum()), int((pred & ~y).sum()), int((~pred & y).sum())
            p = tp / (tp + fp) if tp + fp else 1.0
            r = tp / (tp + fn)
            print(f"| {t:.2f} | {p:.3f} | {r:.3f} | {2 * p * r / (p + r) if p + r else 0:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scale", help="time embedding + dedup of N synthetic scenario texts")
    s.add_argument("sizes", nargs="*", type=int, default=[1000, 10000])
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    s.add_argument("--quantize", action="store_true", help="int8 embedding, one text at a time")
    wc = sub.add_parser("worst", help="time dedup alone on N random vectors (nothing is a duplicate)")
    wc.add_argument("sizes", nargs="*", type=int, default=[1000, 10000, 100000])
    ax = sub.add_parser("approx", help="exact vs IVF search on vectors with planted near duplicates")
    ax.add_argument("sizes", nargs="*", type=int, default=[10000, 20000, 50000, 100000])
    w = sub.add_parser("sweep", help="precision/recall per threshold on the labelled pairs")
    w.add_argument("--lo", type=float, default=0.45)
    w.add_argument("--hi", type=float, default=0.75)
    w.add_argument("--step", type=float, default=0.02)
    w.add_argument("--quantize", action="store_true", help="int8 embedding, one text at a time")
    args = ap.parse_args()
    if args.cmd == "scale":
        scale(args.sizes, args.batch_size, args.threads, args.quantize)
    elif args.cmd == "worst":
        worst_case(args.sizes)
    elif args.cmd == "approx":
        approx(args.sizes)
    else:
        sweep(args.lo, args.hi, args.step, args.quantize)


if __name__ == "__main__":
    main()
