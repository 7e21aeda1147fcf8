"""The task planner: compositional tasks over the tool-dependency graph, chosen by code.

``plan_chains(env, run, n, tiers)`` analyses the tools (``analysis``), finds each table's natural key
(``keys``), instantiates every task shape on real rows (``shapes``), and picks ``n`` chains with the
requested tier mix, deterministically. The LLM later only words the request (``pipeline.stages.tasks.bank``).
With ``spread``, every chain found is returned in that order, and :func:`next_chain` chooses which the bank
takes next: a write tool no task uses yet first, then the least repeated (shape, tool chain, asked column).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pipeline.dbmodel.analysis import ParamUse, ToolShape, analyse
from pipeline.dbmodel.keys import NaturalKey, natural_keys
from pipeline.dbmodel.ops import tool_op
from pipeline.dbmodel.paging import page_of
from pipeline.ir import Environment
from pipeline.runtime.replay import Run, fresh, play
from pipeline.stages.tasks.planner import held
from pipeline.stages.tasks.planner.chains import Chain, Goal, Planner
from pipeline.stages.tasks.planner.rules import RULE_SHAPES, annotate, with_reads
from pipeline.stages.tasks.planner.shapes import SHAPES

__all__ = ["Chain", "Goal", "NaturalKey", "ParamUse", "Planner", "ShuffledPlanner", "ToolShape", "make_planner",
           "PER_RULE", "natural_keys", "next_chain", "plan_chains", "refusing", "round_chains", "shuffled_planner", "single", "tool_op",
           "unpaired"]

MAX_PER_SHAPE = 24
SPREAD_PER_KEY = 2
"""With ``spread``: chains kept per (shape, tool chain, asked column), so that every write tool and column gets
its own before one shape's first rows fill the pool."""
SPREAD_PER_SHAPE = 96


def make_planner(env: Environment, run: Run) -> Planner:
    conn, infos = run.inst.conn, run.infos
    shapes = analyse(env, conn, infos)
    # the columns users name rows by; a paged lister's optional filters (a status, a date range) narrow a list
    narrowing = {(t.name, p.name) for t in env.tools if page_of(t) is not None for p in t.params if not p.required}
    searchable = {u.column for s in shapes.values() if s.kind == "read" for prm, us in s.uses.items() for u in us
                  if u.column is not None and u.role == "filter" and (s.name, prm) not in narrowing}
    return Planner(env, conn, infos, shapes, natural_keys(env, conn, infos, searchable, partial=True, amounts_last=True),
                   run.inst.call)


class ShuffledPlanner(Planner):
    """The build's planner, with the rows of each table handed over in an order shuffled per (seed, round), the
    model's example rows still last: successive rounds reach rows and columns the build's order never looks at
    (the sampler, the phrasing stage)."""

    order: tuple[int, int] | None = None
    """(seed, round) of the current order; None: the build's order."""

    def reorder(self, seed: int, rnd: int) -> None:
        self.order = (seed, rnd)
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self.memo = {}  # what the shapes found over the previous order

    def rows(self, table: str, limit: int = 60) -> list[dict[str, Any]]:
        if self.order is None:
            return super().rows(table, limit)
        if table not in self._rows:
            every = super().rows(table, -1)
            random.Random(f"{self.order[0]}:{self.order[1]}:{table}").shuffle(every)
            self._rows[table] = self.examples_last(table, every)
        return self._rows[table]


def shuffled_planner(env: Environment, run: Run) -> ShuffledPlanner:
    base = make_planner(env, run)
    return ShuffledPlanner(env, base.conn, base.infos, base.shapes, base.keys, run.inst.call)


def round_chains(planner: ShuffledPlanner, seed: int, rnd: int, initial_db: str | Path | None,
                 rules: bool = False) -> list[Chain]:
    """Round ``rnd`` of ``seed``: the chains :func:`candidates` finds over rows in that round's order (planner seed
    ``3 * rnd``, spread), shape by shape."""
    planner.reorder(seed, rnd)
    pools = candidates(planner, 3 * rnd, initial_db, spread=True, rules=rules)
    return [ch for shape in sorted(pools) for ch in pools[shape]]


def replays(env: Environment, chain: Chain, initial_db: str | Path | None, planner: Planner | None = None) -> bool:
    """Whether the chain's calls all succeed, in order, on a fresh instance; with ``planner``, and leave a state that
    keeps the relations between tables every seeded row holds (:func:`~pipeline.stages.tasks.planner.held.broken`:
    a count of children, one child per parent, a child's parent on one side of the clock or in some states)."""
    with fresh(env, initial_db) as run:
        play(run, chain.calls, changes=False)  # only whether they succeed: no per-call diff
        if run.error is not None:
            return False
        return planner is None or not held.broken(planner, run.inst.conn)


def candidates(planner: Planner, seed: int = 0, initial_db: str | Path | None = None,
               spread: bool = False, rules: bool = False) -> dict[str, list[Chain]]:
    """Every chain each shape yields (bounded) that replays, deduplicated by calls, in a deterministic order
    (``spread``: bounded per (shape, tool chain, asked column) rather than by the first rows found; ``rules``, with
    the environment's rules: the compound allowed + forbidden shape too, and every chain judged by the rules, none
    kept whose reference does a forbidden write, each with the verdicts of the governed writes it does; without
    ``rules``, an environment's rules still keep out every chain whose reference does a write they forbid). None is
    kept whose end state breaks a relation between tables the seeded rows hold (:mod:`.held`)."""
    out: dict[str, list[Chain]] = {}
    seen: set[str] = set()
    shapes = {**SHAPES, **RULE_SHAPES} if rules and planner.env.rules else SHAPES
    for gen in shapes.values():
        got: list[Chain] = []
        per_key: Counter[tuple[str, tuple[str, ...], str]] = Counter()
        for s in range(3):
            for ch in gen(planner, seed + s):
                sig = ch.signature()
                if sig in seen or (spread and per_key[ch.spread_key] >= SPREAD_PER_KEY):
                    continue
                seen.add(sig)
                if not replays(planner.env, ch, initial_db, planner):
                    continue
                if shapes is not SHAPES:  # with the rules: the verdicts of its writes; none it breaks
                    judged = annotate(planner.env, ch, initial_db)
                    if judged is None:
                        continue
                    ch = with_reads(planner, judged)  # a linking rule's table read before each write
                elif planner.env.rules and annotate(planner.env, ch, initial_db) is None:
                    continue  # without rule-bound tasks, no task asks for a write the policy forbids either
                got.append(ch)
                per_key[ch.spread_key] += 1
                if len(got) >= (SPREAD_PER_SHAPE if spread else MAX_PER_SHAPE):
                    break
        for ch in got:
            out.setdefault(ch.shape, []).append(ch)
    return out


def plan_chains(env: Environment, run: Run, n: int, tiers: dict[int, float], seed: int = 0,
                initial_db: str | Path | None = None, spread: bool = False, rules: bool = False) -> list[Chain]:
    """``n`` chains (or as many as the environment allows) spread over shapes, with about ``tiers[t]`` of
    them in tier ``t`` (shares; tiers that cannot be filled give their places to the others). ``spread``: those
    ``n`` first, then every other chain found, for :func:`next_chain` to choose from. ``rules``: rule-bound
    chains too (``pipeline.stages.tasks.planner.rules``)."""
    planner = make_planner(env, run)
    pools = candidates(planner, seed, initial_db, spread, rules)
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
    if spread:
        for t in (3, 2, 1):
            picked += _round_robin(by_tier.get(t, []), sum(map(len, pools.values())), picked)
        return picked
    return picked[:n]


def rows_named(ch: Chain) -> set[str]:
    """The existing rows ``ch``'s request names, as the values that name them (a loan by its book and member, a new
    order's patient): one value per (table, naming column)."""
    return {f"{t}.{c}={v!r}" for g in ch.goals
            for t, pairs in [(g.owner or g.table, g.named), *((rt, n) for _, rt, n in g.refs)] for c, v in pairs}


def next_chain(chains: Sequence[Chain], tried: Collection[int], bank: Sequence[Chain],
               writes: Collection[str] | None = None, rule_quota: int = 0) -> int | None:
    """The 1-based index of the chain to try next for a bank that holds ``bank``, among those not ``tried``.
    Without ``writes``: the first. With the environment's write tools: one that brings a write tool no chain
    of the bank uses, else one whose (shape, tool chain, asked column) the bank holds least, then whose
    (shape, tool chain) it holds least, then the first (so the tier mix of the plan's order breaks ties).
    ``rule_quota``: while the bank holds fewer rule-bound chains, those come first (a compound request of an
    allowed and a forbidden write, or an exception). Single-write decide tasks come in pairs, one whose write the
    rules allow (:func:`decide`) and one whose write they forbid (:func:`refusing`), and only while a pair keeps
    both under :data:`DECIDE_SHARE` of the bank's rule-bound tasks (:func:`decide_fits`): an agent that writes
    whatever it is asked passes the first, one that does nothing the second, and neither passes a compound or an
    exception. A decide task that completes a pair comes first of all; one that starts a pair (the allowed one
    first) before chains that are not rule-bound once the quota is met; among them, one that does a single write
    first (a compound of two allowed writes is a decide task too, which the blind writer passes as well). A chain
    naming a row the bank already names (:func:`rows_named`: "the loan of The Hobbit for Andrea Black" in three
    tasks) comes after one that names none among chains the rest ranks equal: requests spread over the tables' rows.
    No compound or exception asks for a write a rule forbids once the bank holds :data:`PER_RULE` of them for that
    rule (or half of ``rule_quota``), and among chains that ask for a forbidden write, the kind of forbidden write (:func:`forbidden_writes`) the bank
    asks for least comes first."""
    cap = max(PER_RULE, (rule_quota + 1) // 2)
    held_rules = Counter(r for ch in bank if ch.shape in RULED for r in forbidden_rules(ch))
    left = [i for i in range(1, len(chains) + 1) if i not in tried and not (
        single(chains[i - 1]) and not decide_fits(bank, chains[i - 1])) and not (chains[i - 1].shape in RULED and any(
            held_rules[r] >= cap for r in forbidden_rules(chains[i - 1])))]
    if writes is None or not left:
        return left[0] if left else None
    uncovered = set(writes) - {c.tool for ch in bank for c in ch.calls}
    keys = Counter(ch.spread_key for ch in bank)
    pairs = Counter(ch.spread_key[:2] for ch in bank)
    short = sum(1 for ch in bank if ch.rules) < rule_quota
    allowed, refused = sum(1 for ch in bank if decide(ch)), sum(1 for ch in bank if refusing(ch))

    def lead(ch: Chain) -> int:
        if single(ch) and (allowed < refused if decide(ch) else refused < allowed):
            return 0  # completes a pair
        if short:
            return 1 if ch.shape in RULED else 2 if ch.rules else 3
        return 1 if decide(ch) else 2 if refusing(ch) else 3

    named = Counter(v for ch in bank for v in rows_named(ch))
    asked = Counter(w for ch in bank for w in forbidden_writes(ch))

    def rank(i: int) -> tuple[int, int, int, bool, int, int, int, int]:
        ch = chains[i - 1]
        done = sum(1 for c in ch.calls if c.tool in writes) if single(ch) else 0  # a decide of one write first
        again = sum(named[v] for v in rows_named(ch))
        same = sum(asked[w] for w in forbidden_writes(ch))  # a forbidden write of a kind the bank asks for least
        return (lead(ch), done, same, not uncovered & {c.tool for c in ch.calls}, keys[ch.spread_key],
                pairs[ch.spread_key[:2]], again, i)

    return min(left, key=rank)


PER_RULE = 2
"""Compound and exception tasks (:data:`RULED`) that ask for a write one rule forbids, at most, in a bank (or half its
``rule_quota`` when that is more): the example library's one rule ("once a loan is returned its status may not
change") was the refused half of five requests of ten, "Please mark the loan of ... as pending" glued onto unrelated
ones (issue 40's audit). A refusal is not counted: :func:`decide_fits` takes one only beside four of them, so a rule
alone gives none, and a bank that holds them holds them over two rules or more."""


def forbidden_rules(ch: Chain) -> set[str]:
    """The ids of the rules that forbid a write ``ch``'s request asks for."""
    return {str(r["id"]) for r in ch.rules if r.get("verdict") == "forbids"}


def forbidden_writes(ch: Chain) -> set[tuple[str, str, tuple[str, ...]]]:
    """The kinds of forbidden write ``ch`` asks for: (rule, tool, the parameters it is given), values left out, so
    that a bank asks for a rule's other kinds (another tool, a create rather than a status set) before the same
    kind on another row."""
    return {(str(r["id"]), str(r["tool"]), tuple(sorted(r.get("arguments") or {})))
            for r in ch.rules if r.get("verdict") == "forbids"}


DECIDE_SHARE = 0.2
"""A bank's allowed decide tasks, and its refusals, each stay below this share of its rule-bound tasks: the blind
writer earns the first, the agent that does nothing the second."""


RULED = ("compound_rule", "exception")
"""The rule-bound shapes a blind writer fails (and one that does nothing)."""

REFUSAL = "refuse_rule"
"""A single write the rules forbid, asked for alone (``rules.refusals``): its gold keeps the state and says why (the
value its rule checks), so neither the agent that does nothing nor a blind writer passes it."""


def decide(ch: Chain) -> bool:
    """A rule-bound chain whose every governed write the rules allow: a blind writer passes it."""
    return bool(ch.rules) and ch.shape not in RULED and ch.shape != REFUSAL


def refusing(ch: Chain) -> bool:
    """A refusal: a single write the rules forbid asked for alone; its gold is the state it starts from."""
    return ch.shape == REFUSAL


def single(ch: Chain) -> bool:
    """A single-write decide task: allowed (:func:`decide`) or refused (:func:`refusing`)."""
    return decide(ch) or refusing(ch)


def unpaired(bank: Sequence[Chain]) -> list[int]:
    """The 0-based places in ``bank`` of the single-write decide tasks of the more numerous kind beyond the other
    kind's count, the last ones first (a pair whose second task no chain gave)."""
    allowed = [j for j, ch in enumerate(bank) if decide(ch)]
    refused = [j for j, ch in enumerate(bank) if refusing(ch)]
    more, fewer = (allowed, refused) if len(allowed) > len(refused) else (refused, allowed)
    return sorted(more[len(fewer):], reverse=True)


def decide_fits(bank: Sequence[Chain], chain: Chain) -> bool:
    """Whether one more single-write decide task (``chain``: allowed or refused) fits a bank that holds ``bank``:
    when it completes a pair (its kind is the fewer in the bank), or when the bank holds as many of each and one
    more pair keeps each kind under :data:`DECIDE_SHARE` of the rule-bound tasks, the compound and exception tasks
    banked counted (k pairs and c of them: k < (c + 2k) / 5, that is 3k < c; 4 compounds hold one pair, each
    baseline then earning 1 of 6). A bank with fewer than 4 compound or exception tasks takes no decide task."""
    held = sum(1 for ch in bank if ch.shape in RULED)
    allowed, refused = sum(1 for ch in bank if decide(ch)), sum(1 for ch in bank if refusing(ch))
    mine, other = (refused, allowed) if refusing(chain) else (allowed, refused)
    if mine < other:
        return True
    return mine == other and (mine + 1) < DECIDE_SHARE * (held + 2 * (mine + 1))


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
