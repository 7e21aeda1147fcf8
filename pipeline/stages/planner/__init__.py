"""The task planner: compositional tasks over the tool-dependency graph, chosen by code.

``plan_chains(env, run, n, tiers)`` analyses the tools (``analysis``), finds each table's natural key
(``keys``), instantiates every task shape on real rows (``shapes``), and picks ``n`` chains with the
requested tier mix, deterministically. The LLM later only words the request (``pipeline.stages.tasks``).
"""

from __future__ import annotations

from pathlib import Path

from pipeline.ir import Environment
from pipeline.stages.planner.analysis import ParamUse, ToolShape, analyse
from pipeline.stages.planner.chains import Chain, Planner
from pipeline.stages.planner.keys import NaturalKey, natural_keys
from pipeline.stages.planner.ops import tool_op
from pipeline.stages.planner.shapes import SHAPES
from verify.replay import Run, fresh, play

__all__ = ["Chain", "NaturalKey", "ParamUse", "Planner", "ToolShape", "make_planner", "natural_keys", "plan_chains",
           "tool_op"]

MAX_PER_SHAPE = 24


def make_planner(env: Environment, run: Run) -> Planner:
    conn, infos = run.inst.conn, run.infos
    shapes = analyse(env, conn, infos)
    searchable = {u.column for s in shapes.values() if s.kind == "read" for us in s.uses.values() for u in us
                  if u.column is not None and u.role == "filter"}
    return Planner(env, conn, infos, shapes, natural_keys(env, conn, infos, searchable), run.inst.call)


def replays(env: Environment, chain: Chain, initial_db: str | Path | None) -> bool:
    """Whether the chain's calls all succeed, in order, on a fresh instance."""
    with fresh(env, initial_db) as run:
        play(run, chain.calls)
        return run.error is None


def candidates(planner: Planner, seed: int = 0, initial_db: str | Path | None = None) -> dict[str, list[Chain]]:
    """Every chain each shape yields (bounded) that replays, deduplicated by calls, in a deterministic order."""
    out: dict[str, list[Chain]] = {}
    seen: set[str] = set()
    for gen in SHAPES.values():
        got: list[Chain] = []
        for s in range(3):
            for ch in gen(planner, seed + s):
                sig = ch.signature()
                if sig in seen:
                    continue
                seen.add(sig)
                if not replays(planner.env, ch, initial_db):
                    continue
                got.append(ch)
                if len(got) >= MAX_PER_SHAPE:
                    break
        for ch in got:
            out.setdefault(ch.shape, []).append(ch)
    return out


def plan_chains(env: Environment, run: Run, n: int, tiers: dict[int, float], seed: int = 0,
                initial_db: str | Path | None = None) -> list[Chain]:
    """``n`` chains (or as many as the environment allows) spread over shapes, with about ``tiers[t]`` of
    them in tier ``t`` (shares; tiers that cannot be filled give their places to the others)."""
    planner = make_planner(env, run)
    pools = candidates(planner, seed, initial_db)
    by_tier: dict[int, list[list[Chain]]] = {}
    for shape in sorted(pools):
        for t in (1, 2, 3):
            group = [c for c in pools[shape] if c.tier == t]
            if group:
                by_tier.setdefault(t, []).append(group)
    total = sum(tiers.values()) or 1.0
    quota = {t: round(n * tiers.get(t, 0) / total) for t in (1, 2, 3)}
    picked: list[Chain] = []
    for t in (3, 2, 1):
        picked += _round_robin(by_tier.get(t, []), quota[t], picked)
    if len(picked) < n:  # fill from whatever is left, deeper tiers first
        for t in (3, 2, 1):
            picked += _round_robin(by_tier.get(t, []), n - len(picked), picked)
    return picked[:n]


def _round_robin(groups: list[list[Chain]], k: int, taken: list[Chain]) -> list[Chain]:
    out: list[Chain] = []
    ids = {id(c) for c in taken}
    idx = [0] * len(groups)
    while len(out) < k and any(i < len(g) for i, g in zip(idx, groups, strict=True)):
        for gi, g in enumerate(groups):
            while idx[gi] < len(g) and id(g[idx[gi]]) in ids:
                idx[gi] += 1
            if idx[gi] < len(g) and len(out) < k:
                out.append(g[idx[gi]])
                ids.add(id(g[idx[gi]]))
                idx[gi] += 1
    return out
