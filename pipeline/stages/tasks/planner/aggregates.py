"""Aggregate questions: count (or sum) the rows a list tool shows, and how a list tool is read in full.

A paged lister (``[stages.build] paged_listers``, :mod:`pipeline.dbmodel.paging`) returns one page of its matches,
each row carrying how many rows match (``total_matched``, a count, not a column): a count is that field of the
first row (no row: 0), never the page's length. A sum or a choice among the rows reads every page, with explicit
``limit`` and ``offset`` arguments (sources ``page``), at most ``MAX_PAGES`` pages of ``PAGE_MAX`` rows; with more
matches it is not planned. The count field is never summed nor asked as a fact of a row; nor is a key, a reference
or a column named as an id (:func:`summable`).

A paged lister's optional filter on a CHECK-listed column makes counts that need it: how many of the rows a lister
shows for a named row have a value ("how many kegs of this batch are full"), and, on a lister of a whole table, how
many of its rows have it. Listers that are not paged plan as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from pipeline.dbmodel import lifecycle as states
from pipeline.dbmodel import paging
from pipeline.dbmodel.analysis import Col, ToolShape
from pipeline.dbmodel.columns import check_enums
from pipeline.dbmodel.keynames import id_named
from pipeline.ir import ToolCall
from pipeline.runtime import reward
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import Chain, Goal, Planner, _valid, row_words, said, spoken
from pipeline.stages.tasks.planner.values import rotate

MAX_PAGES = 3
"""Pages of ``PAGE_MAX`` rows a sum or a choice reads at most."""


def summable(p: Planner, col: Col | None, name: str) -> bool:
    """Whether the value ``name`` of a listed row (``col``: the column it comes from, when known) is a quantity to
    add up or to choose a row by: not its table's primary key, not a foreign key, not a column named as an id ("the
    total court id of the cases", "the case with the highest court id" ask nothing)."""
    if id_named(name):
        return False
    if col is None:
        return True
    t, c = col
    info = p.infos.get(t)
    keys = set(info.key) | {fk for fk, _, _ in info.foreign_keys} if info is not None else set()
    return not (id_named(c) or c in keys or p.is_surrogate(col))


class Listing(NamedTuple):
    """Every row a list tool gives for some arguments, and the calls that show them."""

    calls: list[ToolCall]
    """One call, or one per page (explicit ``limit`` and ``offset``)."""
    sources: list[dict[str, str]]
    """Per call: the sources of its arguments (``page`` for the page arguments)."""
    rows: list[dict[str, Any]]
    """The rows, the count field left out."""
    at: list[int]
    """Per row: the index in ``calls`` of the call that shows it."""


def count_of(p: Planner, name: str, args: dict[str, Any]) -> int | None:
    """How many rows ``name`` matches with ``args``: the count field of a paged lister's first row (no row: 0),
    else the number of rows returned; None when the call fails."""
    result = p.call(name, args)
    if result is None:
        return None
    page = paging.page_of(p.env.tool(name))
    if page is None:
        return len(result)
    return int(result[0].get(page.count) or 0) if result else 0


def read_all(p: Planner, name: str, args: dict[str, Any], src: dict[str, str], explicit: bool = False
             ) -> Listing | None:
    """Every row ``name`` gives for ``args`` (``src``: their sources): the call itself when it shows them all (unless
    ``explicit``: a paged lister is then always read with page arguments), else its pages of ``PAGE_MAX`` rows;
    None when the call fails or the rows need more than ``MAX_PAGES`` pages."""
    result = p.call(name, args)
    if result is None:
        return None
    page = paging.page_of(p.env.tool(name))
    if page is None:
        return Listing([ToolCall(tool=name, arguments=args)], [src], result, [0] * len(result))
    total = count_of(p, name, args) or 0
    if total <= len(result) and not explicit:
        rows = [_drop(r, page.count) for r in result]
        return Listing([ToolCall(tool=name, arguments=args)], [src], rows, [0] * len(rows))
    if total > MAX_PAGES * paging.PAGE_MAX:
        return None
    out = Listing([], [], [], [])
    for k, offset in enumerate(range(0, total, paging.PAGE_MAX)):
        paged = {**args, page.limit: paging.PAGE_MAX, page.offset: offset}
        got = p.call(name, paged)
        if not got:
            return None
        out.calls.append(ToolCall(tool=name, arguments=paged))
        out.sources.append({**src, page.limit: "page", page.offset: "page"})
        out.rows.extend(_drop(r, page.count) for r in got)
        out.at.extend([k] * len(got))
    return out if len(out.rows) == total else None


def _drop(row: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != field}


def _gist(tool: Any) -> str:
    """What a list tool gives, in its own description's words (the rows it lists may be filtered)."""
    return '"' + tool.description.strip().rstrip(".") + '"'


def _lists_all(p: Planner, table: str, parent: str, parent_id: Any, n: int) -> bool:
    """Whether ``n`` is the number of all the rows of ``table`` that point at a row of ``parent``: a list of
    them counts what "the <table> of that <parent>" says plainly."""
    return any(p.conn.execute(f"SELECT count(*) FROM {qi(table)} WHERE {qi(c)} = ?", (parent_id,)).fetchone()[0] == n
               for c, pt, pc in p.infos[table].foreign_keys if pt == parent and (pc or p.infos[pt].key[0]) ==
               p.infos[pt].key[0])


def _numbers(values: list[Any]) -> set[float]:
    return {n for v in values for n, _ in reward.numbers_in(str(v))}


def where_counts(p: Planner, tool: Any, shape: ToolShape, args: dict[str, Any], n: int, seed: int,
                 stated: list[Any]) -> Iterator[tuple[str, Col, Any, int]]:
    """(parameter, column, value, count) per optional CHECK-listed filter of a paged lister called with ``args``
    (which match ``n`` rows): the first value (rotated by ``seed``) that keeps some of the rows but not all, and
    whose count is no number the request states (``stated`` and the value: a reply may repeat those)."""
    if paging.page_of(tool) is None:
        return
    for prm in tool.params:
        col = shape.column_of(prm.name, "filter")
        if prm.required or not prm.enum or prm.name in args or col is None or p.is_surrogate(col):
            continue
        for v in rotate(list(prm.enum), seed):
            m = count_of(p, tool.name, {**args, prm.name: v})
            if m is not None and 0 < m < n and m not in _numbers([*stated, v]):
                yield prm.name, col, v, m
                break


def state_columns(p: Planner, table: str) -> set[str]:
    """The columns of ``table`` that hold the state its rows are in: CHECK-listed (:func:`~pipeline.stages.tasks.
    pipeline.dbmodel.lifecycle.states`) and either set by an update tool (:func:`~pipeline.dbmodel.lifecycle.moved`)
    or with an order of states the evidence gives (:func:`~pipeline.dbmodel.lifecycle.lifecycle`). From the
    schema, the tools and the rows: no column's name, no value's words."""
    ddl = next((t.ddl for t in p.env.tables if t.name == table), "")
    info = p.infos.get(table)
    if info is None:
        return set()
    return {c for c in check_enums(ddl) if c in info.columns and states.states(p, table, c) is not None
            and (states.moved(p, table, c) or states.lifecycle(p, table, c) is not None)}


def aggregates(p: Planner, seed: int, every: bool = False) -> Iterator[Chain]:
    """Count (or sum) the rows a list tool shows for a row reached by a lookup; with a paged lister, count those
    with a value of a filter too, and the rows of a whole table that have it. The rows of a table with a state
    column (:func:`state_columns`) are counted only in one stated state ("how many of the loans of the member Darlene
    Rivera are pending"): "how many loans does she have" asks all of them or her current ones, and a reply of either
    is fair (the fifteenth audit: the tester's 0 current loans against the verifier's 2 ever). ``every``: those
    counts of all of them too, for a shape that takes a choice among them (``shapes.decide_writes``)."""
    for name in sorted(p.shapes):
        shape = p.shapes[name]
        tool = p.env.tool(name)
        if shape.kind != "read" or not shape.many or not tool.params:
            continue
        yield from _table_counts(p, tool, shape, seed)
        for prm in tool.params:
            col = shape.column_of(prm.name, "filter")
            if col is None or not p.is_surrogate(col):
                continue
            t, c = col
            # the anchor: the row the surrogate points at (its parent through a foreign key, or itself)
            anchor_table = t
            if c not in p.infos[t].key:
                fk = [(pp, pc) for cc, pp, pc in p.infos[t].foreign_keys if cc == c]
                if not fk:
                    continue
                anchor_table = fk[0][0]
            akey = p.infos[anchor_table].key[0]
            for arow in p.window(anchor_table, seed, 8):
                desc = p.describe(anchor_table, arow)
                if desc is None:
                    continue
                sub = p.reach(anchor_table, arow, (anchor_table, akey), skip=frozenset({name}))
                if sub is None:
                    continue
                calls, sources, stated, field = sub
                desc = spoken(anchor_table, desc, stated)
                args = {prm.name: arow[akey]}
                ok, _ = _valid(tool, args)
                if not ok or any(q.required and q.name not in args for q in tool.params):
                    continue
                n = count_of(p, name, args)
                if n is None or n < 2:
                    continue
                full = calls + [ToolCall(tool=name, arguments=args)]
                src = {prm.name: f"${len(calls)}.{field}"}
                srcs = sources + [src]
                stated_all = [v for _, v in desc] + [v for v in stated if v not in [d for _, d in desc]]
                counted = shape.target or t
                # what is counted: all the rows of the anchor (then said plainly), or those the tool picks (then in
                # its own description's words: a tool listing only open loans counts fewer than all loans)
                kind = "" if counted == t and n == p.conn.execute(
                    f"SELECT count(*) FROM {qi(t)} WHERE {qi(c)} = ?", (arow[akey],)).fetchone()[0] \
                    else f", of the kind this lists: {_gist(tool)}"
                whose = row_words(anchor_table, desc)
                many = counted.replace("_", " ")
                named = p.named(anchor_table, arow, desc, stated)
                items = counted if not kind or _lists_all(p, counted, anchor_table, arow[akey], n) else ""
                stateful = state_columns(p, counted)
                if every or not stateful:
                    yield Chain("aggregate", full, [f"Ask how many {many} {whose} has{kind}."],
                                must_state=stated_all, hidden=[n],
                                answer={"type": "number", "value": n, "stated": [str(v) for v in stated_all]},
                                sources=srcs, goals=[Goal("count", anchor_table, named, asked="*", items=items)])
                for pname, (wt, wc), v, m in where_counts(p, tool, shape, args, n, seed, stated_all):
                    if stateful and not (wt == counted and wc in stateful):
                        continue  # counted by a value that is no state: still all of them or the current ones
                    must = stated_all + [v]
                    yield Chain("aggregate", calls + [ToolCall(tool=name, arguments={**args, pname: v})],
                                [f"Ask how many {many} with {wc.replace('_', ' ')} {said(v)} {whose} has{kind}."],
                                must_state=must, hidden=[m],
                                answer={"type": "number", "value": m, "stated": [str(x) for x in must]},
                                sources=sources + [{**src, pname: "stated"}],
                                goals=[Goal("count", anchor_table, named, asked="*", items=items,
                                            where=((f"{wt}.{wc}", v),))])
                listing = read_all(p, name, args, src, explicit=True)  # not the count's calls: its own chain
                result = listing.rows if listing is not None else []
                numeric = [k for k, v in result[0].items() if isinstance(v, int | float) and not isinstance(v, bool)
                           and all(isinstance(r.get(k), int | float) for r in result)
                           and summable(p, shape.outputs.get(k), k)] if result else []
                if listing is not None and numeric:
                    k = numeric[seed % len(numeric)]
                    total = sum(r[k] for r in result)
                    total = round(total, 6) if isinstance(total, float) else total
                    yield Chain("aggregate", calls + listing.calls,
                                [f"Ask for the total {k.replace('_', ' ')} of the {many} {whose} has{kind}."],
                                must_state=stated_all, hidden=[total],
                                answer={"type": "number", "value": total, "stated": [str(v) for v in stated_all]},
                                sources=sources + listing.sources,
                                goals=[Goal("total", anchor_table, named, asked=k, items=items)])
                break


def _table_counts(p: Planner, tool: Any, shape: ToolShape, seed: int) -> Iterator[Chain]:
    """How many rows of a table have a value, through a paged lister of the whole table and its filter."""
    counted = shape.target
    if counted is None or paging.page_of(tool) is None or any(q.required for q in tool.params):
        return
    n = count_of(p, tool.name, {})
    if n is None or n != p.conn.execute(f"SELECT count(*) FROM {qi(counted)}").fetchone()[0]:
        return  # the tool lists some of the rows only: no plain words for them
    for pname, (wt, wc), v, m in where_counts(p, tool, shape, {}, n, seed, []):
        if wt != counted:
            continue
        yield Chain("aggregate", [ToolCall(tool=tool.name, arguments={pname: v})],
                    [f"Ask how many {counted.replace('_', ' ')} have {wc.replace('_', ' ')} {said(v)}."],
                    must_state=[v], hidden=[m], answer={"type": "number", "value": m, "stated": [str(v)]},
                    sources=[{pname: "stated"}],
                    goals=[Goal("count", counted, asked="*", items=counted, where=((f"{wt}.{wc}", v),))])
