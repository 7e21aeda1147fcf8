"""The task shapes, each instantiated by code from real rows (see ``chains`` for what they mean)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from typing import Any, NamedTuple

from pipeline.dbmodel import lifecycle as states
from pipeline.ir import Rule, ToolCall
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner import held
from pipeline.stages.tasks.planner.aggregates import aggregates, read_all, summable
from pipeline.stages.tasks.planner.chains import (
    _DATE,
    Chain,
    Goal,
    Named,
    Planner,
    _shift,
    _valid,
    answer_type,
    row_words,
    said,
    spoken,
    thing,
)
from pipeline.stages.tasks.planner.values import (
    enum_of,
    fit_dates,
    made_in_row,
    new_value,
    own_value,
    parent_fits,
    plain_value,
    rotate,
    unique_cols,
)

MAX_OTHERS = 40
PARENT_TRIES = 6
"""Rows a new row's reference may name, tried in turn for one its dates fit (:func:`values.parent_fits`)."""
ROOM_TRIES = 60
"""Rows tried when none of those has room for another child (:func:`held.room`: the seeded children's parents)."""


def _others(p: Planner, table: str, col: str, expected: Any, stated: list[Any]) -> list[Any]:
    vals = [r[0] for r in p.conn.execute(
        f"SELECT DISTINCT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL ORDER BY 1 LIMIT {MAX_OTHERS + 1}")]
    return [v for v in vals if v != expected and v not in stated and isinstance(v, str)][:MAX_OTHERS]


# ---------------------------------------------------------------- questions


def lookups(p: Planner, seed: int) -> Iterator[Chain]:
    for table in sorted(p.keys):
        nk = p.keys[table]
        info = p.infos[table]
        cols = [c for c in info.columns if c not in nk.columns and not p.is_surrogate((table, c))]
        for i, row in enumerate(p.window(table, seed, 6)):
            desc = p.describe(table, row)
            if desc is None:
                continue
            for col in rotate(cols, seed + i):
                value = row.get(col)
                if value is None:
                    continue
                got = p.reach(table, row, (table, col))
                if got is None:
                    continue
                calls, sources, stated, _field = got
                if any(v == value for v in stated):
                    continue
                desc = spoken(table, desc, stated)  # what the calls need: "the loan of Ana" when she has one
                kind = answer_type(info, col, value, enum_of(p, table, col))
                stated_all = [v for _, v in desc] + [v for v in stated if v not in [d for _, d in desc]]
                answer = {"type": kind, "value": value, "stated": [str(v) for v in stated_all]}
                if kind in ("text", "enum"):
                    answer["others"] = _others(p, table, col, value, stated_all)
                yield Chain("lookup", calls, [f"Ask for the {col.replace('_', ' ')} of {row_words(table, desc)}."],
                            must_state=stated_all, hidden=[value], answer=answer, sources=sources,
                            goals=[Goal("lookup", table, p.named(table, row, desc, stated), asked=col)])
                break


# ---------------------------------------------------------------- writes


class WriteArgs(NamedTuple):
    calls: list[ToolCall]
    """Lookups the write needs first."""
    sources: list[dict[str, str]]
    stated: list[Any]
    args: dict[str, Any]
    src: dict[str, str]
    facts: list[str]
    values: list[tuple[str, Any]]
    """New values as data: (column or parameter, value)."""
    refs: list[tuple[str, str, Named]]
    """Existing rows a new value points at: (column, table, how the user names the row)."""


def _write_args(p: Planner, tool: Any, shape: Any, table: str, row: dict[str, Any] | None, creating: bool,
                seed: int, preset: dict[str, tuple[Any, str]] | None = None,
                new_parent: tuple[str, dict[str, Any]] | None = None) -> WriteArgs | None:
    """Arguments of a write tool for ``row`` (update/delete) or a new row (create); its dates where the table's
    example rows put them (:func:`~pipeline.stages.tasks.planner.values.fit_dates`). ``new_parent``: (reference
    column, values) of a row the chain creates first, which a preset argument names."""
    calls: list[ToolCall] = []
    sources: list[dict[str, str]] = []
    stated: list[Any] = []
    args: dict[str, Any] = {}
    src: dict[str, str] = {}
    facts: list[str] = []
    values: list[tuple[str, Any]] = []
    refs: list[tuple[str, str, Named]] = []
    placed: dict[str, tuple[str, int, int, int]] = {}  # column -> (parameter, its place in stated, facts, values)
    parents: dict[str, dict[str, Any]] = dict([new_parent]) if new_parent else {}
    uniq = unique_cols(p, table)
    template = p.window(table, seed, 1)[0] if creating and p.rows(table) else None
    pinned = p.pinned.arguments if p.pinned is not None else None
    for prm in tool.params:
        if preset and prm.name in preset:  # a value read by an earlier call of the chain
            args[prm.name], src[prm.name] = preset[prm.name]
            continue
        if pinned is not None and prm.name not in pinned and not prm.required:
            continue  # an optional parameter the recorded call leaves out
        use = next((u for u in shape.uses.get(prm.name, []) if u.column is not None), None)
        if use is None:
            if prm.required:
                return None
            continue
        col = use.column
        if use.role == "filter" and not creating:
            if row is None:
                return None
            target = p._value_for(col, table, row)
            if target is None:
                if prm.required:
                    return None
                continue
            t2, r2, c2 = target
            value = r2.get(c2)
            if value is None:
                return None
            if p.is_surrogate(col):
                sub = p.id_source(col, t2, r2, c2, 0, frozenset())
                if sub is None:
                    return None
                s_calls, s_src, s_stated, s_field = sub
                base = len(calls)
                calls += s_calls
                sources += [{k: _shift(v, base) for k, v in s.items()} for s in s_src]
                stated += [v for v in s_stated if v not in stated]
                src[prm.name] = f"${len(calls)}.{s_field}"
            else:
                stated.append(value)
                src[prm.name] = "stated"
            args[prm.name] = value
        elif use.role == "value":
            t, c = col
            if p.is_surrogate(col):
                # a foreign key of a new/updated row: name an existing parent row, look its id up
                fk = [(pp, pc) for cc, pp, pc in p.infos[t].foreign_keys if cc == c]
                if not fk:
                    return None
                parent_table = fk[0][0]
                near = p.window(parent_table, seed + len(args), PARENT_TRIES) if p.rows(parent_table) else []
                if pinned is not None and prm.name in pinned:  # the row the recorded call names, whatever its room
                    pk = fk[0][1] or p.infos[parent_table].key[0]
                    near = [r for r in p.rows(parent_table, -1) if r.get(pk) == pinned[prm.name]][:1]
                elif creating:  # a parent the seeded children's relations allow one more child (``held.room``)
                    near = [r for r in near if held.room(p, t, c, r)] or \
                        [r for r in p.window(parent_table, seed + len(args), ROOM_TRIES) if held.room(p, t, c, r)]
                fits = [r for r in near if parent_fits(p, t, c, r)] if creating else []  # dated as the examples
                prow = (fits or near)[0] if near else None
                if prow is None:
                    return None
                pdesc = p.describe(parent_table, prow)
                sub = p.reach(parent_table, prow, (parent_table, fk[0][1] or p.infos[parent_table].key[0]))
                if sub is None or pdesc is None:
                    return None
                s_calls, s_src, s_stated, s_field = sub
                pdesc = spoken(parent_table, pdesc, s_stated)
                base = len(calls)
                calls += s_calls
                sources += [{k: _shift(v, base) for k, v in s.items()} for s in s_src]
                stated += [v for v in s_stated if v not in stated]
                args[prm.name] = prow[fk[0][1] or p.infos[parent_table].key[0]]
                src[prm.name] = f"${len(calls)}.{s_field}"
                parents[c] = prow
                facts.append(f"for {row_words(parent_table, pdesc)}")  # no id column's name: the row it names
                refs.append((c, parent_table, p.named(parent_table, prow, pdesc, s_stated)))
                continue
            current = (row or template or {}).get(c)
            if held.counted(p, t, c):  # its children's number: a new row has none, and no task dictates it
                if not creating:
                    return None
                args[prm.name], src[prm.name] = 0, "stated"
                continue
            if not use.direct:  # the parameter only feeds an expression (``date(:now, '+' || :days || ' days')``)
                value = pinned[prm.name] if pinned is not None and prm.name in pinned else plain_value(prm)
                if value is None:
                    if prm.required:
                        return None
                    continue
                args[prm.name] = value
                src[prm.name] = "stated"
                stated.append(value)
                facts.append(f"{prm.name.replace('_', ' ')} {said(value)}")
                values.append((prm.name, value))
                continue
            if pinned is not None and prm.name in pinned:
                value = pinned[prm.name]
            elif p.over is not None and prm.name in p.over:
                value = p.over[prm.name]
            elif creating:  # a row's own value (a phone, an e-mail address) new, else the template row's
                own = own_value(p, t, c)
                value = current if current is not None and c not in uniq and not own and not (
                    p.keys.get(t) and c in p.keys[t].columns) else new_value(p, t, c, current, prm, True)
                alone = own or c in uniq or (p.keys.get(t) is not None and tuple(p.keys[t].columns) == (c,))
                if value is None and current is not None and not alone:  # a key's value repeated: another task
                    value = current
            else:
                value = new_value(p, t, c, current, prm, c in uniq)
            if value is None:
                if prm.required:
                    return None
                continue
            args[prm.name] = value
            src[prm.name] = "stated"
            placed[c] = (prm.name, len(stated), len(facts), len(values))
            stated.append(value)
            facts.append(f"{c.replace('_', ' ')} {said(value)}")
            values.append((c, value))
        elif prm.required:
            return None
    stated_now = {c: args[q] for c, (q, *_) in placed.items()}
    # a value made of another of the row's (an e-mail address of the person's name) made of the row's: the new
    # row's stated name, an existing row's name (or its new one)
    made = made_in_row(p, table, stated_now if creating else {**(row or {}), **stated_now},
                       {c for c, (q, *_) in placed.items() if not (p.over and q in p.over) and not (pinned and q in pinned)})
    if any(v is None for v in made.values()):
        return None
    stated_now.update(made)
    fitted = fit_dates(p, table, None if creating else row, stated_now, parents)
    if fitted is None:
        return None
    for c, value in fitted.items():
        q, i, j, k = placed[c]
        if value != args[q]:
            args[q] = stated[i] = value
            facts[j] = f"{c.replace('_', ' ')} {said(value)}"
            values[k] = (c, value)
    ok, _ = _valid(tool, args)
    if not ok or any(q.required and q.name not in args for q in tool.params):
        return None
    if creating:  # a new row's state when it is the state new rows have: implied, as a person leaves it
        # only a state a row moves through (an update tool sets it) that the create may leave out: a required one
        # is a value the agent must give, and the request alone can tell it (2026-11-30: a donation's blood type
        # 'O+', most example donations' value, left unsaid and required by the verifier)
        optional = {q.name for q in tool.params if not q.required}
        implied = [c for c, (q, *_) in placed.items() if q in optional and states.moved(p, table, c)
                   and states.initial_state(p, table, c) == args[q]]
        for c in implied:
            src[placed[c][0]] = "implied"
        for i, j, k in sorted(((placed[c][1], placed[c][2], placed[c][3]) for c in implied), reverse=True):
            del stated[i], facts[j], values[k]
    return WriteArgs(calls, sources, stated, args, src, facts, values, refs)


def _subject(p: Planner, shape: Any, tool: Any) -> str | None:
    """The table whose row a write names through its filter parameter (a foreign key names the parent)."""
    for prm in tool.params:
        col = shape.column_of(prm.name, "filter")
        if col is None:
            continue
        t, c = col
        for cc, pp, _pc in p.infos[t].foreign_keys:
            if cc == c:
                return pp
        return t
    return None


def changes_naming(table: str, desc: list[tuple[str, Any]], values: list[tuple[str, Any]]) -> bool:
    """Whether a write on a row of ``table`` that ``desc`` names sets a column of the row that names it (``values``:
    the write's new values, column -> value): no one names the order they change the quantity of by its quantity.
    The planner then takes another row (or the tool no update on the rows its key names)."""
    own = {ref.rpartition(".")[2] for ref, _ in desc if ref.rpartition(".")[0] == table}
    return any(c in own for c, _ in values)


def _intent(op: str, row: str, description: str, changes: bool) -> str:
    """What a write on ``row`` wants, in the planner's words: the row and, with new values (``changes``), nothing of
    the tool's description, which the phrasing model copies or paraphrases into the request ("Set the quantity of an
    order; returns the updated order details ...", 2026-11-28). Only a write that states no new value (a tool that
    marks a loan returned) needs the description to say what it does."""
    if op == "delete":
        return f"Remove {row}"
    if changes:
        return f"For {row}, change"
    return f"{description.rstrip('.')}, for {row}"


def writes(p: Planner, seed: int) -> Iterator[Chain]:
    """Single writes (``create``, ``update``, ``delete``) of each write tool on rows chosen by ``seed``. Found once
    per planner and seed (``Planner.memo``): the rule shapes ask for the same seeds again."""
    key = ("writes", seed)
    if key not in p.memo:
        p.memo[key] = list(_writes(p, seed))
    yield from p.memo[key]


def example_writes(p: Planner, seed: int) -> Iterator[Chain]:
    """:func:`writes` over the model's example rows first (:meth:`Planner.window`): for a tool whose writes the rules
    allow on no other row (the examples are often the only rows dated "today"). Found once per planner and seed."""
    key = ("example_writes", seed)
    if key not in p.memo:
        p.examples_first = True
        try:
            p.memo[key] = list(_writes(p, seed))
        finally:
            p.examples_first = False
    yield from p.memo[key]


REFUSED_STATES = 2
"""States a refused write may ask for per row (:func:`refused_writes`): the one the row holds, and the one before."""


def refused_writes(p: Planner, seed: int) -> Iterator[Chain]:
    """Changes of :func:`writes`' rows that move a status-like column anywhere but forward (the state the row holds,
    then the one before it: :func:`~pipeline.dbmodel.lifecycle.behind`), for a rule to forbid: a task that
    moves a row only forward never asks for the write a state guard refuses ("return a loan already returned"). Only
    the rule-bound shapes take them, and only those a rule forbids (``rules._find_governed_writes``): the reference
    never does one. Those equal to a forward write of the seed (a tool with no such column) are left out. Found once
    per planner and seed."""
    key = ("refused_writes", seed)
    if key not in p.memo:
        forward = {ch.signature() for ch in writes(p, seed)}
        found: list[Chain] = []
        for k in range(REFUSED_STATES):
            p.refusing = k
            try:
                found += [ch for ch in _writes(p, seed) if ch.signature() not in forward]
            finally:
                p.refusing = None
        p.memo[key] = found
    yield from p.memo[key]


def over_limit_writes(p: Planner, seed: int) -> Iterator[Chain]:
    """:func:`writes` of each tool a rule on the request's own values governs (a threshold: ``:amount_due > 10000``),
    with those values taken from a call the rule's check found forbidden (``Rule.forbidden``), for a rule to forbid:
    the seeded rows' amounts may all sit under the threshold, and then no planned write would ever meet the rule.
    Only values the write states are replaced, never the row it names. Found once per planner and seed."""
    key = ("over_limit_writes", seed)
    if key not in p.memo:
        found: list[Chain] = []
        for rule in p.env.rules:
            named = condition_params(rule)
            for bad in rule.forbidden:
                over = {q: v for q, v in bad.arguments.items() if q in named and _stated_value(p, bad.tool, q)}
                if not over:
                    continue
                p.over = over
                try:
                    found += [ch for ch in _writes(p, seed) if ch.calls[-1].tool == bad.tool
                              and all(ch.calls[-1].arguments.get(q) == v for q, v in over.items())]
                finally:
                    p.over = None
        p.memo[key] = found
    yield from p.memo[key]


def condition_params(rule: Rule) -> set[str]:
    """The parameters of the governed tool a rule's condition reads (its SQL's named parameters, the clock's left
    out)."""
    return set(re.findall(r":([A-Za-z_][A-Za-z0-9_]*)", rule.condition)) - {"now", "today"}


def recorded_writes(p: Planner, seed: int, calls: Sequence[tuple[ToolCall, Collection[str]]]) -> Iterator[Chain]:
    """:func:`writes` made of ``calls`` (a rule's recorded forbidden or allowed calls, ``ir.Rule.forbidden``: each
    worked on the seeded rows and the rule's check gave its verdict on it), each with the parameters its write must
    keep (those the rule's condition reads): the rows each call names, reached by the lookups a request's words lead
    to, and its values, except where the planner's own checks change one the condition does not read (a new row's
    date put where the table's rows put theirs: the check's probe date is no date a person asks for); a call the
    planner cannot name so gives none. For a rule whose condition the planner's own draws never meet, or meet only on
    writes that fail anyway: a pair of rows another table links (the patient's allergy to the medication) is seldom
    among the pairs the write shapes draw. Found once per planner, seed and calls."""
    key = ("recorded_writes", seed, tuple((c.model_dump_json(), tuple(sorted(k))) for c, k in calls))
    if key not in p.memo:
        found: list[Chain] = []
        for call, keep in calls:
            if call.tool not in p.shapes:
                continue
            p.pinned = call
            try:
                found += [ch for ch in _writes(p, seed) if ch.calls[-1].tool == call.tool and all(
                    ch.calls[-1].arguments.get(q) == call.arguments.get(q) for q in keep)]
            finally:
                p.pinned = None
        p.memo[key] = found
    yield from p.memo[key]


def _pinned_rows(p: Planner, shape: Any, tool: Any, subject: str) -> list[dict[str, Any]]:
    """The rows of ``subject`` the pinned call's filter parameters name (:attr:`Planner.pinned`), in the planner's
    order: a recorded call's row, not the seed's window."""
    assert p.pinned is not None
    want = {q.name: p.pinned.arguments[q.name] for q in tool.params if q.name in p.pinned.arguments
            and shape.column_of(q.name, "filter") is not None}
    if not want:
        return []
    out = []
    for row in p.rows(subject, -1):
        ok = True
        for q, v in want.items():
            col = shape.column_of(q, "filter")
            target = p._value_for(col, subject, row)
            if target is None or target[1].get(target[2]) != v:
                ok = False
                break
        if ok:
            out.append(row)
    return out[:1]


def _stated_value(p: Planner, tool: str, param: str) -> bool:
    """Whether ``param`` of ``tool`` is a new value the request states (not a filter naming a row, nor a reference)."""
    shape = p.shapes.get(tool)
    use = next((u for u in shape.uses.get(param, []) if u.column is not None), None) if shape else None
    return use is not None and use.column is not None and use.role == "value" and not p.is_surrogate(use.column)


def _writes(p: Planner, seed: int) -> Iterator[Chain]:
    for name in sorted(p.shapes):
        shape = p.shapes[name]
        tool = p.env.tool(name)
        if shape.kind != "write" or shape.target is None or p.pinned is not None and name != p.pinned.tool:
            continue
        if p.refusing is not None and shape.op != "update":
            continue  # a new row starts in the state new rows have; a delete names no state
        table = shape.target
        if shape.op == "create":
            got = _write_args(p, tool, shape, table, None, True, seed)
            if got is None:
                continue
            calls, sources, stated, args, src, facts = got[:6]
            yield Chain("create", calls + [ToolCall(tool=name, arguments=args)],
                        [f"Create a new {thing(table)}: " + "; ".join(facts) + "."],
                        must_state=stated, sources=sources + [src], hidden=[],
                        goals=[Goal("create", table, values=tuple(got.values), refs=tuple(got.refs))])
            continue
        subject = _subject(p, shape, tool)
        if subject is None or subject not in p.infos:
            continue
        found = False
        for row in p.window(subject, seed, 6) if p.pinned is None else _pinned_rows(p, shape, tool, subject):
            if found and p.is_example(subject, row) and not p.examples_first:
                break  # the model's examples only for a tool no other row gives a chain
            desc = p.describe(subject, row)
            if desc is None:
                continue
            got = _write_args(p, tool, shape, subject, row, False, seed)
            if got is None:
                continue
            if subject == table and changes_naming(table, desc, got.values):
                continue  # a row named by the value the task changes ("the order with quantity 1: make it 4")
            calls, sources, stated, args, src, facts = got[:6]
            new = [v for _, v in got.values]
            desc = spoken(subject, desc, [v for v in stated if v not in new])  # no key column the calls do without
            named = p.named(subject, row, desc, [v for v in stated if v not in new])
            for _, v in desc:
                if v not in stated:
                    stated.append(v)
            change = "; ".join(facts)
            what = _intent(shape.op, row_words(subject, desc), tool.description, bool(change))
            goal = Goal(shape.op, table, named, owner=subject if subject != table else "", values=tuple(got.values),
                        refs=tuple(got.refs), key=p.row_key(table, row) if subject == table else ())
            found = True
            yield Chain(shape.op, calls + [ToolCall(tool=name, arguments=args)],
                        [what + (f": {change}." if change else ".")],
                        must_state=stated, sources=sources + [src], hidden=[], goals=[goal])


def parent_child(p: Planner, seed: int) -> Iterator[Chain]:
    """Create a row, then a row that refers to it through the id the first call returned."""
    for pname in sorted(p.shapes):
        ps = p.shapes[pname]
        if ps.op != "create" or ps.target is None:
            continue
        id_field = next((f for f, c in ps.outputs.items() if c == (ps.target, p.infos[ps.target].key[0])), None)
        if id_field is None:
            continue
        first = _write_args(p, p.env.tool(pname), ps, ps.target, None, True, seed)
        if first is None or first[0]:
            continue
        _, _, stated1, args1, src1, facts1 = first[:6]
        new_id = p.conn.execute(f"SELECT COALESCE(MAX(rowid), 0) + 1 FROM {qi(ps.target)}").fetchone()[0]
        for cname in sorted(p.shapes):
            cs = p.shapes[cname]
            if cs.op != "create" or cs.target is None or cname == pname:
                continue
            link = [prm for prm in p.env.tool(cname).params
                    if any(u.role == "value" and u.column is not None and
                           any(cc == u.column[1] and pp == ps.target for cc, pp, _ in p.infos[cs.target].foreign_keys)
                           for u in cs.uses.get(prm.name, []))]
            if not link:
                continue
            via = next(u.column[1] for u in cs.uses.get(link[0].name, []) if u.role == "value" and u.column)
            child = _write_args(p, p.env.tool(cname), cs, cs.target, None, True, seed + 1,
                                preset={link[0].name: (new_id, f"$1.{id_field}")},
                                new_parent=(via, dict(first.values)))
            if child is None:
                continue
            calls2, sources2, stated2, args2, src2, facts2 = child[:6]
            # the new parent named as the user knows it ("for the member Angel Morgan"), not "for this member"
            key_cols = p.keys[ps.target].columns if ps.target in p.keys else ()
            new_named = tuple((f"{ps.target}.{c}", v) for c, v in first.values if c in key_cols)
            child_refs = tuple(child.refs)
            if key_cols and len(new_named) == len(key_cols):
                child_refs = ((via, ps.target, new_named), *child_refs)
            # the lookups the child needs come after the first create: shift their references by one call
            calls_mid = calls2
            sources_mid = [{k: _shift(v, 1) for k, v in s_.items()} for s_ in sources2]
            src2 = {k: (v if k == link[0].name else _shift(v, 1)) for k, v in src2.items()}
            yield Chain("parent_child",
                        [ToolCall(tool=pname, arguments=args1)] + calls_mid + [ToolCall(tool=cname, arguments=args2)],
                        [f"Create a new {thing(ps.target)}: " + "; ".join(facts1) + ",",
                         f"then a new {thing(cs.target)} that belongs to it: " + "; ".join(facts2) + "."],
                        must_state=stated1 + [v for v in stated2 if v not in stated1], hidden=[new_id],
                        sources=[src1] + sources_mid + [src2],
                        goals=[Goal("create", ps.target, values=tuple(first.values), refs=tuple(first.refs)),
                               Goal("child", cs.target, values=tuple(child.values), refs=child_refs)])
            break


def decide_writes(p: Planner, seed: int) -> Iterator[Chain]:
    """List rows reached by a lookup, choose the one with the highest/lowest value of a column, write on it (the
    rows of a paged lister read page by page: the choice is among all of them). The column is a quantity or a date
    (:func:`~pipeline.stages.tasks.planner.aggregates.summable`: not a key, a reference or a column named as an id)."""
    for agg in aggregates(p, seed, every=True):
        if agg.goals[0].kind != "count" or agg.goals[0].where:
            continue  # a total reads the same rows as its count; a filtered count has no words for a choice
        lister = agg.calls[-1]
        before = len(agg.calls) - 1
        shape = p.shapes[lister.tool]
        listing = read_all(p, lister.tool, dict(lister.arguments), agg.sources[-1])
        result = listing.rows if listing is not None else []
        listed = shape.target
        if listing is None or listed is None or not p.infos[listed].int_pk:
            continue
        pk = p.infos[listed].key[0]
        pk_field = shape.output_for((listed, pk))
        if pk_field is None:
            continue
        # a quantity or a date of the listed rows, never a key or a reference ("the highest court id" chooses nothing)
        order_cols = [k for k, c in shape.outputs.items() if c is not None and c[0] == listed and summable(p, c, k)
                      and all(r.get(k) is not None for r in result)]
        for k in order_cols:
            vals = [r[k] for r in result]
            if len(set(map(str, vals))) != len(vals) or not all(isinstance(v, int | float) or
                                                                  (isinstance(v, str) and _DATE.match(v)) for v in vals):
                continue
            high = seed % 2 == 0
            chosen = max(result, key=lambda r: r[k]) if high else min(result, key=lambda r: r[k])
            shown_by = before + listing.at[result.index(chosen)] + 1  # the call whose result shows the chosen row
            row = next((r for r in p.rows(listed, 500) if r[pk] == chosen[pk_field]), None)
            if row is None:
                continue
            for wname in sorted(p.shapes):
                ws = p.shapes[wname]
                if ws.kind != "write" or ws.op == "create" or _subject(p, ws, p.env.tool(wname)) != listed:
                    continue
                wtool = p.env.tool(wname)
                id_param = next((q.name for q in wtool.params if ws.column_of(q.name, "filter") == (listed, pk)), None)
                if id_param is None:
                    continue
                got = _write_args(p, wtool, ws, listed, row, False, seed,
                                  preset={id_param: (row[pk], f"${shown_by}.{pk_field}")})
                if got is None or got[0]:
                    continue
                _calls, _src, stated_w, args, src, facts = got[:6]
                which = "highest" if high else "lowest"
                dated = all(isinstance(v, str) for v in vals)
                change = ("change " + "; ".join(facts)) if facts else wtool.description.rstrip(".")  # see _intent
                yield Chain("decide_write", agg.calls[:before] + listing.calls + [ToolCall(tool=wname, arguments=args)],
                            [agg.facts[0].replace("Ask how many ", "Among the "),
                             f"take the one with the {which} {k.replace('_', ' ')}, and for it: {change}."],
                            must_state=agg.must_state + [v for v in stated_w if v not in agg.must_state],
                            hidden=[row[pk]], sources=agg.sources[:before] + listing.sources + [src],
                            goals=[Goal("decide_" + ws.op, listed, agg.goals[0].named, owner=agg.goals[0].table, asked=k,
                                        values=tuple(got.values), refs=tuple(got.refs), items=agg.goals[0].items,
                                        which=("latest" if high else "earliest") if dated else which,
                                        key=p.row_key(listed, row))])
                break
            break


def compounds(p: Planner, seed: int) -> Iterator[Chain]:
    """Two independent goals in one request (width): two writes on different rows with different tools,
    each reached through its own lookups; the second half's references shift past the first half's calls."""
    singles = [c for c in writes(p, seed) if c.shape in ("update", "delete", "create") and c.steps >= 2]
    for i, a in enumerate(singles):
        for b in singles[i + 1:]:
            if a.calls[-1].tool == b.calls[-1].tool:
                continue
            n = len(a.calls)
            yield Chain("compound", a.calls + b.calls, a.facts + ["In the same message, also: " + b.facts[0]],
                        must_state=a.must_state + [v for v in b.must_state if v not in a.must_state],
                        hidden=a.hidden + b.hidden,
                        sources=a.sources + [{k: _shift(v, n) for k, v in src.items()} for src in b.sources],
                        goals=a.goals + b.goals)
            break


SHAPES = {"lookup": lookups, "aggregate": aggregates, "write": writes, "parent_child": parent_child,
          "decide_write": decide_writes, "compound": compounds}
