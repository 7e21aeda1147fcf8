"""Rule-bound chains (``[stages.tasks] rule_tasks``): writes whose fate depends on the environment's rules.

The user asks for a write a rule governs; whether it may be done depends on values of the database, which the
agent must read (the rule's condition, ``ir.Rule``) before acting. Code finds the verdict by running each rule's
condition on the call and the rows it meets, under the engine's read-only authorizer (:func:`against`):

* every planned chain is checked (:func:`annotate`): one whose reference does a write a rule forbids is dropped
  (its gold would break the policy); one whose writes rules govern and allow is a *decide* task, and carries the
  verdicts (an agent that refuses it fails);
* ``compound_rule``: two writes in one request, one allowed and one forbidden; the reference does the allowed
  one and reads the evidence of the other (its lookups), never its write. The derived verifier gates every row
  the reference leaves alone, so doing everything (the forbidden write too) scores 0, and doing nothing misses
  the allowed goal and scores 0.

* ``exception``: a forbidden write whose rule names a compliant alternative (``ir.Rule.alternative``, "put the
  permit on hold"); the request asks for the forbidden write alone, the reference reads its evidence and does the
  alternative on the same row. Doing nothing misses the alternative's change; doing the forbidden write changes
  what the gold state keeps (the row the alternative changes is pinned whole, every other row by the gates).

A forbidden write need not move a row forward (``shapes.refused_writes``: the state a row holds asked for again, or
an earlier one): a state guard forbids exactly the writes a forward-only planner never asks for. Only those a rule
forbids are kept; an allowed write moves forward only.

A rule none of the planner's own writes meets on a call that works but for the rules (:func:`_met`) is asked for
through its recorded calls (``ir.Rule.forbidden``, ``allowed``: ``shapes.recorded_writes``), judged by :func:`against`
like every other write: a ``linked`` rule (an allergy of the patient to the medication) meets pairs of rows the write
shapes seldom draw.

A governed write whose rule reads a row of another table linking rows it names (the allergy of the patient to the
medication a fill names) reads that table before the write (:func:`_with_link`): the linking row before a write it
forbids, and the rows of one named row (the patient's allergies) before a write it allows, in every planned chain
(:func:`with_reads`): the agent reads what the rule depends on whatever the verdict turns out to be.

* ``refuse_rule``: the forbidden write asked for alone, whose rules offer no alternative (:func:`refusals`): the
  reference reads its evidence and writes nothing, so its gold is the initial state, which doing nothing also
  reaches; the write must change a row, which the verifier pins, so a blind writer fails. The bank takes one only
  paired with a decide task whose write is allowed, and only while the pairs keep both baselines under a fifth of
  the rule-bound tasks (``planner.decide_fits``).

A chain's ``rules``: per governed write
asked for, the id of each rule governing it, whether the rule ``allows`` or ``forbids`` it, and the write (tool
and arguments; the forbidden one is in no reference, adversarial checks can replay it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.ir import Environment, Rule, ToolCall
from pipeline.runtime import engine
from pipeline.runtime.replay import fresh, play
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import Chain, Goal, Planner, _shift
from pipeline.stages.tasks.planner.shapes import (
    condition_params,
    example_writes,
    over_limit_writes,
    recorded_writes,
    refused_writes,
    writes,
)

SEEDS = 6
"""Seeds of the write shape tried per seed of this one (a create names one parent row per seed)."""
MAX_PER_TOOL = 6


def governing(p: Planner, tool: str) -> list[Rule]:
    return [r for r in p.env.rules if tool in r.tools]


def against(env: Environment, conn: sqlite3.Connection, call: ToolCall) -> list[Rule] | None:
    """The rules that forbid ``call`` on the state of ``conn`` (in policy order); None when a condition cannot be
    evaluated. Each condition runs as the returns query of a read tool with the governed tool's parameters: the
    arguments are checked as the tool's, the statement is read-only under the engine's authorizer."""
    params = [q.model_dump(mode="json") for q in env.tool(call.tool).params]
    out = []
    for rule in (r for r in env.rules if call.tool in r.tools):
        probe = {"name": f"rule_{rule.id}"[:64], "kind": "read", "params": params, "steps": [],
                 "returns": {"sql": rule.condition, "mode": "all"}}
        res = engine.run_tool(conn, probe, dict(call.arguments), now=env.clock)
        if not res.get("ok"):
            return None
        if res["result"]:
            out.append(rule)
    return out


def forbidding(p: Planner, call: ToolCall) -> list[Rule] | None:
    """:func:`against` on the planner's initial rows."""
    return against(p.env, p.conn, call)


def annotate(env: Environment, chain: Chain, initial_db: str | Path | None = None) -> Chain | None:
    """``chain`` with the verdicts of the writes it does (each judged on the state it meets when replayed), or None
    when a rule forbids one of them or cannot be evaluated."""
    verdicts: list[dict[str, Any]] = []
    with fresh(env, initial_db) as run:
        for call in chain.calls:
            if any(call.tool in r.tools for r in env.rules):
                found = against(env, run.inst.conn, call)
                if found is None or found:
                    return None
                verdicts += _verdicts(env, call, [])
            play(run, [call], changes=False)
            if run.error is not None:
                return None
    if chain.rules or not verdicts:
        return chain
    return replace(chain, rules=verdicts)


def _governed_writes(p: Planner, seed: int) -> Iterator[tuple[Chain, list[Rule]]]:
    """Single writes of governed tools (the write shape over several seeds), each with the rules forbidding it.
    Found once per planner and seed (``Planner.memo``): each rule shape asks for them."""
    key = ("governed_writes", seed)
    if key not in p.memo:
        p.memo[key] = list(_find_governed_writes(p, seed))
    yield from p.memo[key]


def _find_governed_writes(p: Planner, seed: int) -> Iterator[tuple[Chain, list[Rule]]]:
    """Over the other rows first; then, for a (tool, verdict) none of them gave, over the model's example rows
    (:func:`~pipeline.stages.tasks.planner.shapes.example_writes`): a rule may allow a write only on them; then the
    changes that move a row's state anywhere but forward (:func:`~pipeline.stages.tasks.planner.shapes.refused_writes`),
    kept only where a rule forbids them: the write a state guard refuses (a loan already returned, returned again)
    is never a forward move, and an allowed write still moves forward only. Last, for a rule none of those writes
    meets on a call that would work but for the rules (:func:`_met`), the rule's own recorded calls
    (:func:`~pipeline.stages.tasks.planner.shapes.recorded_writes`): its forbidden ones, and its allowed ones for a
    tool no write allowed yet. A pair of rows another table links ("not allowed when the patient already has
    allergies for the medication") is seldom a pair the write shapes draw: the example pharmacy's one draw that met
    it was for more than the stock, and no task asked for a fill the allergy forbids."""
    seen: set[str] = set()
    per_tool: dict[tuple[str, bool], int] = {}
    found: list[tuple[Chain, list[Rule]]] = []
    for s in range(seed, seed + SEEDS):
        found += _judged(p, writes(p, s), seen, per_tool)
    missing = {(t.name, v) for t in p.env.tools if governing(p, t.name) for v in (False, True)} - set(per_tool)
    if missing:
        for s in range(seed, seed + SEEDS):
            chains = [ch for ch in example_writes(p, s) if any(ch.calls[-1].tool == t for t, _ in missing)]
            found += [(ch, f) for ch, f in _judged(p, chains, seen, per_tool) if (ch.calls[-1].tool, bool(f)) in missing]
    for s in range(seed, seed + SEEDS):
        found += _judged(p, refused_writes(p, s), seen, per_tool, forbidden_only=True)
    unrefused = {t.name for t in p.env.tools if governing(p, t.name)} - {t for t, f in per_tool if f}
    if unrefused:  # a threshold on the request's own amount that every seeded amount sits under
        for s in range(seed, seed + SEEDS):
            chains = [ch for ch in over_limit_writes(p, s) if ch.calls[-1].tool in unrefused]
            found += _judged(p, chains, seen, per_tool, forbidden_only=True)
    unmet = [r for r in p.env.rules if r.forbidden and not _met(p, r, found)]
    if unmet:
        calls = [(c, condition_params(r)) for r in unmet for c in r.forbidden]
        found += _judged(p, recorded_writes(p, seed, calls), seen, per_tool, forbidden_only=True)
        lone = {t for r in unmet for t in r.tools} - {t for t, f in per_tool if not f}
        calls = [(c, condition_params(r)) for r in unmet for c in r.allowed if c.tool in lone]
        found += [(ch, f) for ch, f in _judged(p, recorded_writes(p, seed, calls), seen, per_tool) if not f]
    yield from ((_with_link(p, ch, f), f) for ch, f in found)


def _with_link(p: Planner, ch: Chain, forbid: list[Rule], index: int = -1) -> Chain:
    """``ch`` (a governed write and its lookups) with a read that shows the row of another table linking two rows
    the write names, when that row is why a rule forbids it (:func:`_links`): the allergy of the patient to the
    medication a fill names. The write's lookups show the patient and the medication, not the allergy: a reference
    that refuses the fill without reading it decides on nothing it saw. An allowed write (``forbid`` empty) a rule
    of that kind governs reads the same table for one of the rows it names (:func:`_links` with ``allowed``: a
    pharmacist reads the patient's allergies before every fill, not only before those they forbid), a read whose
    filters the rows the write names fill (not every allergy's first page). The read with the fewest calls the
    chain does not do already, then the fewest rows shown (the patient's allergies, not every allergy's first page);
    added before the write, a call equal to one of its lookups not repeated; only with values the request states
    already (``must_state``); else ``ch`` (a write no such table links: the library's, unchanged). ``index``: the
    write's place in ``ch`` (its last call by default; :func:`with_reads`), the sources of the calls after it moved
    past the reads added."""
    index = index % len(ch.calls) if ch.calls else 0
    if not ch.calls or len(ch.sources) != len(ch.calls):
        return ch
    write, done = ch.calls[index], ch.calls[:index]
    allowed = not forbid
    for table, row in _links(p, write, forbid, allowed=allowed):
        key = p.infos[table].key
        best = None
        for name in sorted(p.shapes):
            shape = p.shapes[name]
            if shape.kind != "read" or not all(shape.output_for((table, k)) for k in key):
                continue
            planned = p._fill_read(shape, table, row, 0, frozenset({name}))
            if planned is None:
                continue
            calls, sources, stated, args, my_src = planned
            got = p.call(name, args)
            shown = got or []
            if any(v not in ch.must_state for v in stated):
                continue
            if allowed:  # no row links them yet: a read for one of the rows the write names, whatever it shows
                if not args or got is None:  # a read that works, filtered by a row the write names
                    continue
            elif not any(all(r.get(shape.output_for((table, k)) or "") == row.get(k) for k in key) for r in shown):
                continue
            cost = (sum(1 for c in calls if c not in done), len(shown))  # new calls, then the narrowest read
            if best is None or cost < best[0]:
                best = (cost, calls + [ToolCall(tool=name, arguments=args)], sources + [my_src])
        if best is None:
            continue
        before, before_src = list(done), list(ch.sources[:index])
        at: dict[int, int] = {}  # place of an evidence call (1-based) -> its place in the chain
        for i, (call, src) in enumerate(zip(best[1], best[2], strict=True), 1):
            if call in before:
                at[i] = before.index(call) + 1
                continue
            before.append(call)
            before_src.append({k: _moved(v, at) for k, v in src.items()})
            at[i] = len(before)
        m = len(before) - index  # calls added: those after the write read calls moved by m
        moved = {k: k + m for k in range(index + 1, len(ch.calls) + 1)}
        later = [{k: _moved(v, moved, keep=True) for k, v in src.items()} for src in ch.sources[index:]]
        return replace(ch, calls=[*before, *ch.calls[index:]], sources=[*before_src, *later])
    return ch


def _moved(src: str, at: dict[int, int], keep: bool = False) -> str:
    """A source ``$k.field`` of an evidence call, with ``k`` its place in the chain (``keep``: a ``k`` ``at`` does
    not hold stays)."""
    head, dot, field = src.partition(".")
    if not (dot and head.startswith("$") and head[1:].isdigit()):
        return src
    k = int(head[1:])
    return f"${at.get(k, k) if keep else at[k]}.{field}"


def with_reads(p: Planner, ch: Chain) -> Chain:
    """``ch`` (a planned chain the rules allow, ``annotate``) with, before each governed write it does, the read of
    the table a linking rule would read (:func:`_with_link` on an allowed write): a fill in any task, a decide task's
    or a compound's of several writes, reads the patient's allergies first. A chain of no such write is ``ch``."""
    for i in reversed(range(len(ch.calls))):
        shape = p.shapes.get(ch.calls[i].tool)
        if shape is not None and shape.kind == "write" and governing(p, ch.calls[i].tool):
            ch = _with_link(p, ch, [], index=i)
    return ch


def _links(p: Planner, write: ToolCall, forbid: list[Rule], allowed: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """Rows of a table other than the one ``write`` writes that point at two or more of the rows its references
    name (an allergy of the patient to the medication a fill names), each whose removal lifts a rule of ``forbid``
    (checked on a copy of the initial rows): the row the rule reads. With ``allowed`` (an allowed write): per such
    table, the row it would hold linking them (its other columns None), where adding one (a copy of the table's
    first row in the planner's order, pointing at the write's rows) makes a rule governing the write forbid it
    (checked on a copy of the initial rows): the table the rule would read. Found once per planner, write, rules
    and ``allowed``."""
    key = ("links", write.model_dump_json(), tuple(r.id for r in forbid), allowed)
    if key not in p.memo:
        p.memo[key] = _find_links(p, write, forbid, allowed)
    return list(p.memo[key])


def _find_links(p: Planner, write: ToolCall, forbid: list[Rule], allowed: bool) -> list[tuple[str, dict[str, Any]]]:
    shape = p.shapes.get(write.tool)
    if shape is None or shape.target is None:
        return []
    named: dict[str, Any] = {}  # parent table -> the key value the write names there
    for prm in p.env.tool(write.tool).params:
        col = shape.column_of(prm.name, "value")
        if col is None or prm.name not in write.arguments or not p.is_surrogate(col):
            continue
        for cc, pt, _pc in p.infos[col[0]].foreign_keys:
            if cc == col[1]:
                named.setdefault(pt, write.arguments[prm.name])
    out: list[tuple[str, dict[str, Any]]] = []
    ids = {r.id for r in (governing(p, write.tool) if allowed else forbid)}
    for table in sorted(p.infos):
        info = p.infos[table]
        links = [(cc, pt) for cc, pt, pc in info.foreign_keys if pt in named and pc in ("", p.infos[pt].key[0])]
        if table == shape.target or len({pt for _, pt in links}) < 2:
            continue
        if allowed:
            if ids and _would_link(p, table, {cc: named[pt] for cc, pt in links}, write, ids):
                out.append((table, {**dict.fromkeys(info.columns), **{cc: named[pt] for cc, pt in links}}))
            continue
        for row in (r for r in p.rows(table, -1) if all(r.get(cc) == named[pt] for cc, pt in links)):
            with fresh(p.env) as run:
                run.inst.conn.execute(f"DELETE FROM {qi(table)} WHERE " + " AND ".join(
                    f"{qi(k)} = ?" for k in info.key), [row[k] for k in info.key])
                left = against(p.env, run.inst.conn, write)
            if left is not None and not ids & {r.id for r in left}:
                out.append((table, row))
    return out


def _would_link(p: Planner, table: str, values: dict[str, Any], write: ToolCall, ids: set[str]) -> bool:
    """Whether a row of ``table`` holding ``values`` (a copy of its first row in the planner's order, its key left
    to SQLite when an ``INTEGER PRIMARY KEY``) makes a rule of ``ids`` forbid ``write``, on a copy of the initial
    rows; False when the table has no row to copy or the copy breaks a constraint."""
    every = p.rows(table, -1)
    if not every:
        return False
    info = p.infos[table]
    row = {**every[0], **values}
    cols = [c for c in info.columns if not (info.int_pk and c in info.key) and c != "rowid"]
    with fresh(p.env) as run:
        try:
            run.inst.conn.execute(f"INSERT INTO {qi(table)} ({', '.join(qi(c) for c in cols)}) VALUES "
                                  f"({', '.join('?' for _ in cols)})", [row[c] for c in cols])
        except sqlite3.Error:
            return False
        left = against(p.env, run.inst.conn, write)
    return left is not None and bool(ids & {r.id for r in left})


def _met(p: Planner, rule: Rule, found: list[tuple[Chain, list[Rule]]]) -> bool:
    """Whether a write of ``found`` that ``rule`` forbids would work on the initial rows but for the rules, changing
    a row (:func:`_still_forbidden`): the one a refusal asks for, and a compound's forbidden half."""
    nothing = Chain("refuse_rule", [], [], [])
    return any(any(r.id == rule.id for r in f) and _still_forbidden(p, nothing, ch) for ch, f in found)


def _judged(p: Planner, chains: Iterable[Chain], seen: set[str], per_tool: dict[tuple[str, bool], int],
            forbidden_only: bool = False) -> Iterator[tuple[Chain, list[Rule]]]:
    for ch in chains:
        last = ch.calls[-1]
        if ch.signature() in seen or not governing(p, last.tool):
            continue
        seen.add(ch.signature())
        forbid = forbidding(p, last)
        if forbid is None or forbidden_only and not forbid:
            continue
        key = (last.tool, bool(forbid))
        if per_tool.get(key, 0) >= MAX_PER_TOOL:
            continue
        per_tool[key] = per_tool.get(key, 0) + 1
        yield ch, forbid


def _verdicts(env: Environment, write: ToolCall, forbid: list[Rule]) -> list[dict[str, Any]]:
    """Per rule governing ``write``: its id, ``allows`` or ``forbids``, and the write (its tool and arguments)."""
    ids = {r.id for r in forbid}
    return [{"id": r.id, "verdict": "forbids" if r.id in ids else "allows", "tool": write.tool,
             "arguments": dict(write.arguments)} for r in env.rules if write.tool in r.tools]


def _said(p: Planner, ch: Chain) -> Goal:
    """The forbidden write's goal, with the values its write would set when the tool takes none (an approval
    that sets a status): the request must still say what is asked."""
    goal = ch.goals[0]
    if goal.values or goal.kind != "update":
        return goal
    with fresh(p.env) as run:
        play(run, ch.calls, changes=False)
        changes = run.changes() if run.error is None else []
    values = tuple((col, c.after[col]) for c in changes if c.op == "update" and c.after
                   for col in c.changed_columns if c.table == goal.table)
    return Goal(goal.kind, goal.table, goal.named, goal.owner, goal.asked, values, goal.refs, goal.items, goal.which,
                goal.key, goal.where)


def _still_forbidden(p: Planner, a: Chain, b: Chain) -> bool:
    """Whether ``b``'s write is still forbidden once ``a``'s calls are done (a cap may count ``a``'s new row), and
    would work there but for the rules, changing a row: two new rows asked for in one request may not collide (seen
    on the brewery: two kegs both coded "K-1006", one per batch); a write that changes nothing (a loan already
    returned, returned again: :func:`~pipeline.stages.tasks.planner.shapes.refused_writes`) leaves the state the
    refusal leaves, so the gold state cannot tell doing it from refusing it (the proofs' ``blind`` would pass)."""
    with fresh(p.env) as run:
        play(run, a.calls, changes=False)
        if run.error is not None or not against(p.env, run.inst.conn, b.calls[-1]):
            return False
        play(run, b.calls)
        return run.error is None and bool(run.records[-1].changes)


def touches(ch: Chain) -> tuple[Any, ...]:
    """What identifies the row a single write's goal writes (``Goal``): the row it names (an update or a delete),
    the rows a new row points at (a create names none: its parent rows tell two apart) and the key of the row it
    changes."""
    goal = ch.goals[0]
    return goal.named, goal.refs, goal.key


def parents(ch: Chain) -> dict[str, Any]:
    """The rows other than its own that a single write's goal names (the member and the book of a loan, the parents
    a new row points at), as table -> the facts that name the row there."""
    goal = ch.goals[0]
    out: dict[str, list[Any]] = {}
    for ref, v in goal.named:
        t = ref.rpartition(".")[0]
        if t and t != goal.table:
            out.setdefault(t, []).append((ref, v))
    for _col, t, named in goal.refs:
        if t != goal.table:
            out.setdefault(t, []).extend(named)
    return {t: tuple(v) for t, v in out.items()}


def same_party(p: Planner, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two writes are one person's errands: both name the same row of ``a``'s party, the parent table with
    the most rows (of a loan's book and member, the member: the party who asks is the one the many rows are about,
    and a row of a large table is seldom shared by chance; two strangers' loans of one book are not one visit).
    The schema's counts, no names."""
    if not a:
        return False
    party = max(sorted(a), key=lambda t: p.conn.execute(f"SELECT COUNT(*) FROM {qi(t)}").fetchone()[0])
    return b.get(party) == a[party]


def compound_rules(p: Planner, seed: int) -> Iterator[Chain]:
    """An allowed write and a forbidden one in the same request, on other rows (:func:`touches`: two creates for
    other parents are on other rows too), in shapes that vary (issue 40: the library's four were one phrasing, "mark
    X as returned. Mark Y as pending."): as partner, an allowed write (a governed one the rules allow, or one of a
    tool no rule governs: :func:`_plain_writes`) no earlier compound chain of this planner took, then one whose tool chain (its reads and its write) and whose (partner tool, forbidden tool) pair earlier
    compounds used least (a partner taken twice makes the same change twice: one task); among partners equal on the
    first, one about the same person (:func:`same_party`: the member whose returned loan is asked about, borrowing
    another book), so the message reads as one visit, not two strangers' errands (issue 40's audit); and every
    other compound asks for the forbidden write first (its evidence read first, then the allowed write done)."""
    found = list(_governed_writes(p, seed))
    allowed = [ch for ch, forbid in found if not forbid] + _plain_writes(p, seed)
    used: set[str] = p.memo.setdefault(("compound_partners",), set())
    chains_used: dict[tuple[str, ...], int] = p.memo.setdefault(("compound_chains",), {})
    pairs_used: dict[tuple[str, str], int] = p.memo.setdefault(("compound_pairs",), {})
    for b, forbid in ((ch, f) for ch, f in found if f):
        tool = b.calls[-1].tool

        mine = parents(b)

        def rank(a: Chain, tool: str = tool, mine: dict[str, Any] = mine) -> tuple[bool, bool, int, int]:
            calls = tuple(c.tool for c in a.calls)
            return (a.signature() in used, not same_party(p, mine, parents(a)), chains_used.get(calls, 0),
                    pairs_used.get((a.calls[-1].tool, tool), 0))

        mates = sorted(allowed, key=rank)
        a = next((a for a in mates if a.calls[-1].arguments != b.calls[-1].arguments and touches(a) != touches(b)
                  and _still_forbidden(p, a, b)), None)
        if a is None:
            continue
        used.add(a.signature())
        made = sum(pairs_used.values())
        calls = tuple(c.tool for c in a.calls)
        chains_used[calls] = chains_used.get(calls, 0) + 1
        pairs_used[(a.calls[-1].tool, tool)] = pairs_used.get((a.calls[-1].tool, tool), 0) + 1
        yield _compound(p, a, b, forbid, refused_first=made % 2 == 1)


def _plain_writes(p: Planner, seed: int) -> list[Chain]:
    """Single writes of tools no rule governs (:func:`~pipeline.stages.tasks.planner.shapes.writes` over the seeds the
    governed writes use, at most :data:`MAX_PER_TOOL` a tool): a compound's allowed write need not be governed ("add
    the member X, and set the returned loan of Y back to pending"), so a policy with one governed tool still gives
    compounds of more than one tool."""
    key = ("plain_writes", seed)
    if key not in p.memo:
        seen: set[str] = set()
        per_tool: dict[str, int] = {}
        out: list[Chain] = []
        for s in range(seed, seed + SEEDS):
            for ch in writes(p, s):
                tool = ch.calls[-1].tool
                if governing(p, tool) or ch.signature() in seen or per_tool.get(tool, 0) >= MAX_PER_TOOL:
                    continue
                seen.add(ch.signature())
                per_tool[tool] = per_tool.get(tool, 0) + 1
                out.append(ch)
        p.memo[key] = out
    return list(p.memo[key])


def _compound(p: Planner, a: Chain, b: Chain, forbid: list[Rule], refused_first: bool) -> Chain:
    """The compound of the allowed write ``a`` and the forbidden ``b``: the reference does ``a``'s calls and ``b``'s
    lookups (its evidence), never ``b``'s write; ``refused_first``: the request asks for ``b`` first, and its evidence
    is read before ``a``'s calls."""
    evidence = b.calls[:-1]
    said = _said(p, b)
    also = "In the same message, also: "
    if refused_first:
        n = len(evidence)
        return Chain("compound_rule", evidence + a.calls, [b.facts[0], also + a.facts[0]],
                     must_state=b.must_state + [v for v in a.must_state if v not in b.must_state],
                     hidden=b.hidden + a.hidden,
                     sources=b.sources[:-1] + [{k: _shift(v, n) for k, v in src.items()} for src in a.sources],
                     goals=[said, *a.goals], rules=_verdicts(p.env, b.calls[-1], forbid) + _verdicts(p.env, a.calls[-1], []))
    n = len(a.calls)
    return Chain("compound_rule", a.calls + evidence, a.facts + [also + b.facts[0]],
                 must_state=a.must_state + [v for v in b.must_state if v not in a.must_state],
                 hidden=a.hidden + b.hidden,
                 sources=a.sources + [{k: _shift(v, n) for k, v in src.items()} for src in b.sources[:-1]],
                 goals=a.goals + [said], rules=_verdicts(p.env, a.calls[-1], []) + _verdicts(p.env, b.calls[-1], forbid))


def refusals(p: Planner, seed: int) -> Iterator[Chain]:
    """A write the rules forbid asked for alone, whose forbidding rules offer no alternative (that is an
    ``exception``): the reference reads its evidence (the write's lookups; a write with none is left out: the agent
    reads before it decides) and does nothing else, so the gold is the state the task starts from. Kept only where
    the write would work but for the rules and change a row (:func:`_still_forbidden` with nothing done before):
    doing it then fails the goals that pin that row, and a blind writer fails. Its reply must say why (the verifier's
    answer, :func:`verify.derive.refusal_reason`), so doing nothing fails too; the bank pairs each with an allowed
    decide task (``planner.decide_fits``), which a blind writer passes."""
    nothing = Chain("refuse_rule", [], [], [])
    for b, forbid in _governed_writes(p, seed):
        if not forbid or any(r.alternative is not None for r in forbid) or not b.calls[:-1]:
            continue
        if not _still_forbidden(p, nothing, b):
            continue
        yield Chain("refuse_rule", b.calls[:-1], list(b.facts), must_state=list(b.must_state), hidden=list(b.hidden),
                    sources=b.sources[:-1], goals=[_said(p, b)], rules=_verdicts(p.env, b.calls[-1], forbid))


def exceptions(p: Planner, seed: int) -> Iterator[Chain]:
    """A forbidden write whose rule names a compliant alternative (``ir.Rule.alternative``): the request asks for
    the forbidden write alone; the reference reads its evidence (its lookups) and does the alternative on the same
    row, which the rules allow there and which changes it. The forbidden write's verdict carries the alternative
    (``instead``); the proofs' adversaries replay the forbidden write (``overreach``, ``blind``)."""
    for ch, forbid in _governed_writes(p, seed):
        rule = next((r for r in forbid if r.alternative is not None), None)
        if rule is None or rule.alternative is None:
            continue
        write = ch.calls[-1]
        alt = rule.alternative.call(dict(write.arguments))
        if any(v is None for v in alt.arguments.values()) or forbidding(p, alt) != []:
            continue
        last = ch.sources[-1] if ch.sources else {}
        src = {**{q: last.get(pn, "stated") for q, pn in rule.alternative.same.items()},
               **{k: "policy" for k in rule.alternative.fixed}}
        instead = {"tool": alt.tool, "arguments": dict(alt.arguments)}
        verdicts = [{**v, "instead": instead} if v["id"] == rule.id else v for v in _verdicts(p.env, write, forbid)]
        told = [v for v in rule.alternative.fixed.values() if isinstance(v, str) and len(v) > 2
                and v not in ch.must_state]  # the request asks for the forbidden write, not the alternative
        yield Chain("exception", ch.calls[:-1] + [alt], list(ch.facts), must_state=list(ch.must_state),
                    hidden=ch.hidden + told, sources=ch.sources[:-1] + [src], goals=[_said(p, ch)],
                    rules=verdicts + _verdicts(p.env, alt, []))


def decide_rules(p: Planner, seed: int) -> Iterator[Chain]:
    """Single governed writes the rules allow, looked for over more rows than the plain write shapes try (a rule
    that forbids most rows, "fiction books cannot be loaned", would otherwise leave its tool in no task): each a
    decide task, with the verdicts of its write."""
    for ch, forbid in _governed_writes(p, seed):
        if not forbid:
            yield replace(ch, rules=_verdicts(p.env, ch.calls[-1], []))


RULE_SHAPES: dict[str, Any] = {"compound_rule": compound_rules, "decide_rule": decide_rules, "exception": exceptions,
                               "refuse_rule": refusals}
