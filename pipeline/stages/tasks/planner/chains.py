"""Compositional tasks by construction: chains of real tool calls over the tool-dependency graph.

Code chooses the rows, the arguments and the order of calls from the real database; the LLM only words
the request from the facts a chain carries. A chain is a trajectory an agent could follow knowing only the
request: every argument is stated in the request (natural-key values, new values) or read by an earlier
call of the same chain (an id found by a lookup, the id a create returned). Shapes:

* ``lookup``        — a field of a row named by its natural key (one call, or a lookup chain when the
  tool that shows the field needs an id first);
* ``update`` / ``delete`` — a write on a row named by its natural key (its id looked up first);
* ``create``        — a new row whose foreign keys name existing rows (their ids looked up first);
* ``parent_child``  — create a row, then a row that refers to it (the new id feeds the second call);
* ``decide_write``  — list rows, choose the one with the highest/lowest value of a column, write on it;
* ``aggregate``     — list rows reached through a lookup and count them (those with a filter's value too) /
  sum a column (the answer is computed from what the calls return; a paged lister's count is its count field,
  a sum reads every page: see ``aggregates``);
* ``compound``      — two independent goals in one request, each with its own lookups (width);
* ``compound_rule`` — an allowed and a forbidden write of the environment's rules in one request (with
  ``[stages.tasks] rule_tasks``, which also judges every other chain by the rules: see ``rules``);
* ``exception``     — a forbidden write asked for, whose rule names an alternative: the reference does that instead;
* ``refuse_rule``   — a forbidden write asked for alone, with no alternative: the reference reads its evidence and
  writes nothing (a refusal; a bank pairs it with a decide task whose write is allowed).

Tiers: 1 = one call; 2 = two or three calls in sequence; 3 = four or more calls, or a decision or an
aggregate over what was read.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.dbmodel.analysis import Col, ToolShape
from pipeline.dbmodel.keynames import singular
from pipeline.dbmodel.keys import NaturalKey, describe, surrogate_columns
from pipeline.ir import Environment, ToolCall
from pipeline.runtime import engine
from pipeline.runtime.state import TableInfo, qi

MAX_DEPTH = 3
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")

Named = tuple[tuple[str, Any], ...]
"""How a user names a row: ``(("table.column", value), ...)`` (its natural key, parents' keys included)."""


@dataclass(frozen=True)
class Goal:
    """One goal of a chain as data, for a request written by code (``pipeline.stages.tasks.code_wording``) and for telling
    chains apart (the column a goal asks about or sets)."""

    kind: str
    """``lookup``, ``count``, ``total``, ``create``, ``child`` (a new row of the row created just before),
    ``update``, ``delete``, ``decide_update`` or ``decide_delete`` (a write on the row chosen among ``items``)."""
    table: str
    """The table asked about or written; for ``count`` and ``total``, the table of the named row (a count of a
    whole table's rows: that table, ``named`` empty)."""
    named: Named = ()
    """How the user names the row the goal is about (empty for a new row)."""
    owner: str = ""
    """The table of the row ``named`` names when it is not ``table`` (a loan named through its book)."""
    asked: str = ""
    """The column asked (``lookup``), summed (``total``) or chosen by (``decide_*``)."""
    values: Named = ()
    """New values: (column or parameter, value)."""
    refs: tuple[tuple[str, str, Named], ...] = ()
    """Existing rows a new row points at: (column, their table, how the user names them)."""
    items: str = ""
    """What is counted or chosen among (a table); empty when the tool lists only some of them (no plain words)."""
    which: str = ""
    """``highest`` or ``lowest`` (``decide_*``; ``latest`` or ``earliest`` when the column holds dates)."""
    key: tuple[Any, ...] = ()
    """The primary key of the row a write changes, to find its changes when it takes no new value."""
    where: Named = ()
    """``count``: the value the counted rows have ((``table.column``, value); a paged lister's filter)."""

    @property
    def column(self) -> str:
        asked = self.asked + "".join(f"|{ref}" for ref, _ in self.where)
        return asked or ",".join(sorted([c for c, _ in self.values] + [c for c, _, _ in self.refs]))


@dataclass
class Chain:
    shape: str
    calls: list[ToolCall]
    facts: list[str]
    """What the user wants, as lines of facts (no ids)."""
    must_state: list[Any]
    """Values the request must contain (natural-key values, new values, conditions)."""
    hidden: list[Any] = field(default_factory=list)
    """Values the request must not contain (surrogate ids, the answer)."""
    answer: dict[str, Any] | None = None
    sources: list[dict[str, str]] = field(default_factory=list)
    """Per call: argument -> ``stated``, ``$N.field`` (read from call N) or ``page`` (a page size or offset the
    agent picks to read every page of a paged lister)."""
    goals: list[Goal] = field(default_factory=list)
    """What the user wants, as data (the facts' content)."""
    rules: list[dict[str, Any]] = field(default_factory=list)
    """The environment's rules the chain exercises: ``{"id", "verdict": "allows" | "forbids", "tool", "arguments"}``
    per rule governing a write asked for or done (``pipeline.stages.tasks.planner.rules``; an exception's forbidden write
    also has ``instead``: the alternative's tool and arguments); empty for other chains."""

    @property
    def asked(self) -> str:
        """The columns the chain asks about or sets, goal by goal."""
        return "/".join(g.column for g in self.goals)

    @property
    def spread_key(self) -> tuple[str, tuple[str, ...], str]:
        """(shape, tool chain, asked column): a bank repeats one only when no other is left."""
        return self.shape, tuple(c.tool for c in self.calls), self.asked

    @property
    def steps(self) -> int:
        return len(self.calls)

    @property
    def tier(self) -> int:
        if self.steps >= 4 or self.shape in ("decide_write", "aggregate", "compound", "compound_rule", "exception"):
            return 3
        return 2 if self.steps >= 2 else 1

    @property
    def dependent(self) -> bool:
        return any(s.startswith("$") for src in self.sources for s in src.values())

    def read_values(self) -> list[Any]:
        """Argument values the chain reads from earlier calls (ids and the like): a request must not state them."""
        out = []
        for call, src in zip(self.calls, self.sources, strict=False):
            for k, how in src.items():
                v = call.arguments.get(k)
                if how.startswith("$") and v not in out and v not in self.must_state:
                    out.append(v)
        return out

    def signature(self) -> str:
        """The shape and the calls; for a chain whose reference only reads (a refusal), the writes it is asked for
        too (two refusals may read the same rows)."""
        sig = self.shape + ":" + "|".join(f"{c.tool}{sorted(c.arguments.items())}" for c in self.calls)
        if self.shape == "refuse_rule":
            sig += "!" + "|".join(f"{r['tool']}{sorted(r['arguments'].items())}" for r in self.rules)
        return sig


def rotate(rows: list[Any], k: int) -> list[Any]:
    """``rows`` starting at its ``k``-th item (modulo its length), the items before it at the end."""
    return rows[k % len(rows):] + rows[: k % len(rows)] if rows else rows


def _label(col: str) -> str:
    return col.split(".")[-1].replace("_", " ")


def thing(table: str) -> str:
    """One row of ``table`` in words: the table's name with spaces, its last word singular ("overdue_fines" ->
    "overdue fine"). The planner's intents say this, never the table's name, "row" or "table"."""
    words = table.replace("_", " ").split()
    return " ".join(words[:-1] + [singular(words[-1])]) if words else table


def said(value: Any) -> str:
    """A value as a person writes it in a sentence: text in quotes, a date or a number as it is."""
    if isinstance(value, str) and not _DATE.match(value):
        return repr(value)
    return str(value)


def by_name(pairs: Sequence[tuple[str, Any]]) -> bool:
    """Whether one text value names a row by itself ("the book 'Emma'"), not a date or a number."""
    return len(pairs) == 1 and isinstance(pairs[0][1], str) and not _DATE.match(pairs[0][1])


def spoken(table: str, desc: Sequence[tuple[str, Any]], stated: Sequence[Any]) -> list[tuple[str, Any]]:
    """``desc`` (the facts that name a row of ``table``, its parents' keys included: :func:`describe`) without the
    row's own facts that the calls reaching it do not state, when they state any of ``desc``: a person gives what
    the agent needs to find the row, not every key column (issue 40's audit, 2026-11-30: "the renewal of the member
    Melissa Brown for the loan with loan date November 25, 2025, with renewal date November 29, 2025", a loan's only
    renewal, which its loan finds alone). The calls single the row out with what they state
    (:meth:`Planner.reach`). The parents' facts stay: they say what the row is about (an allergy's medication)."""
    def said(v: Any) -> bool:
        return any(v == s and isinstance(v, bool) == isinstance(s, bool) for s in stated)

    if not any(said(v) for _, v in desc):
        return list(desc)
    return [(ref, v) for ref, v in desc if said(v) or ref.rpartition(".")[0] not in ("", table)]


def row_parts(table: str, facts: Sequence[tuple[str, Any]]
              ) -> tuple[list[tuple[str, Any]], list[tuple[str, list[tuple[str, Any]]]]]:
    """``facts`` (``("table.column", value)``, :func:`describe`'s) split into the row's own and, in order, each
    parent row's (a table's facts that follow one another name one row)."""
    own: list[tuple[str, Any]] = []
    parents: list[tuple[str, list[tuple[str, Any]]]] = []
    for ref, v in facts:
        t = ref.rpartition(".")[0]
        if not t or t == table:
            own.append((ref, v))
        elif parents and parents[-1][0] == t:
            parents[-1][1].append((ref, v))
        else:
            parents.append((t, [(ref, v)]))
    return own, parents


def row_words(table: str, facts: Sequence[tuple[str, Any]]) -> str:
    """How a person names the row of ``table`` that ``facts`` name: by a name ("the book 'Emma'"), by its parents
    ("the loan of the book 'Emma' and the member 'Bob Stone'") and by its own columns in words ("the payment with
    amount 12.5"); no id, no table or column name. In English: what the planner's intents say (the request written
    by code says it with ``prompts/wording.md``'s sections, :meth:`pipeline.stages.tasks.code_wording._Words.what`)."""
    own, parents = row_parts(table, facts)
    if not parents and by_name(own):
        return f"the {thing(table)} {said(own[0][1])}"
    text = f"the {thing(table)}"
    if parents:
        text += " of " + " and ".join(_row_of(t, pairs) for t, pairs in parents)
    if own:
        text += (", with " if parents else " with ") + " and ".join(f"{_label(c)} {said(v)}" for c, v in own)
    return text


def _row_of(table: str, pairs: list[tuple[str, Any]]) -> str:
    if by_name(pairs):
        return f"the {thing(table)} {said(pairs[0][1])}"
    return f"the {thing(table)} with " + " and ".join(f"{_label(c)} {said(v)}" for c, v in pairs)


def answer_type(info: TableInfo, col: str, value: Any, enum: list[Any] | None) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if enum:
        return "enum"
    if isinstance(value, str) and _DATE.match(value):
        return "date"
    return "text"


class Planner:
    """Chains over one environment's tools and initial rows (``conn`` must hold the initial state and is
    only read: the read tools run on it)."""

    def __init__(self, env: Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
                 shapes: dict[str, ToolShape], keys: dict[str, NaturalKey], call: Any):
        self.env, self.conn, self.infos, self.shapes, self.keys = env, conn, infos, shapes, keys
        self._call = call  # (tool, args) -> response dict, on an instance whose state is the initial one
        self._cache: dict[str, Any] = {}
        self.examples_first = False
        """:meth:`window` hands over the model's example rows first (writes a rule allows only on them)."""
        self.refusing: int | None = None
        """With a number ``k``: a change of a status-like column asks for the ``k``-th state the row may not move to
        (:func:`~pipeline.dbmodel.lifecycle.behind`: the state it holds, then the earlier ones), a write
        only a rule's refusal makes sense of (``shapes.refused_writes``); None: forward only."""
        self.over: dict[str, Any] | None = None
        """Values some parameters of a write take whatever the rows say (``shapes.over_limit_writes``: the amount a
        rule on the request's own amount forbids); None: the rows' values."""
        self.pinned: ToolCall | None = None
        """A call a write must be (``shapes.recorded_writes``: a rule's recorded forbidden or allowed call): its tool
        alone, the rows its arguments name, its values, none of its optional parameters it leaves out; None: the
        rows' choice."""
        self.memo: dict[Any, Any] = {}
        """What a shape found for a seed, kept for the shapes that ask for it again (``shapes.writes``,
        ``rules._governed_writes``): a pure function of the rows the planner hands over."""

    # ------------------------------------------------------------ helpers

    def call(self, tool: str, args: dict[str, Any]) -> list[dict[str, Any]] | None:
        key = tool + repr(sorted(args.items()))
        if key not in self._cache:
            resp = self._call(tool, dict(args))
            res = resp.get("result") if resp.get("ok") else None
            rows = res if isinstance(res, list) else [res] if isinstance(res, dict) else None
            self._cache[key] = rows
        return self._cache[key]

    def rows(self, table: str, limit: int = 60) -> list[dict[str, Any]]:
        """At most ``limit`` rows of ``table`` (all with -1) in an order shuffled over the whole table, fixed per
        table, the model's example rows (:meth:`examples`) after all the others: they come first in the table and
        often are placeholders, and the rows other tables' examples point at are examples too (an example loan is
        of an example member), so a plain shuffle still named them several times as often as other rows."""
        key = "rows:" + table
        if key not in self._cache:
            info = self.infos[table]
            order = "rowid" if info.key == ("rowid",) else ", ".join(qi(k) for k in info.key)
            every = [dict(zip(info.columns, r, strict=True))
                     for r in self.conn.execute(f"SELECT * FROM {qi(table)} ORDER BY {order}").fetchall()]
            random.Random(key).shuffle(every)
            self._cache[key] = self.examples_last(table, every)
        every = self._cache[key]
        return list(every if limit < 0 else every[:limit])

    def window(self, table: str, seed: int, n: int) -> list[dict[str, Any]]:
        """The rows a shape tries for ``seed``: ``n`` of the others (:meth:`rows`, rotated by ``seed``), then the
        model's examples, for a shape to take only when none of the others gives it a chain (:meth:`is_example`):
        an example row is named only where no other row would do (the renewals a rule allows are often the
        examples' alone, dated "today"). With :attr:`examples_first`: the rows :meth:`rows` puts last first."""
        every = self.rows(table, -1)
        ex = self.examples(table)
        key = self.infos[table].key
        others = [r for r in every if tuple(r.get(k) for k in key) not in ex]
        mine = [r for r in every if tuple(r.get(k) for k in key) in ex]
        mine = rotate(mine, seed)
        if self.examples_first and mine:  # :func:`~pipeline.stages.tasks.planner.shapes.example_writes`: the rows
            # put last first (those of other tables' examples, then the examples), then the others
            near = [r for r in others if self._of_examples(table, r)]
            return rotate(near, seed) + mine + rotate([r for r in others[:60] if r not in near], seed)[:n]
        return rotate(others[:60], seed)[:n] + mine

    def _of_examples(self, table: str, row: dict[str, Any]) -> bool:
        """Whether ``row`` points at one of the model's example rows of another table (its request would name it:
        "the keg K-1016 of the batch HS-0107")."""
        for c, p, pc in self.infos[table].foreign_keys:
            if p == table or p not in self.infos or len(self.infos[p].key) != 1 or pc not in ("", self.infos[p].key[0]):
                continue
            if (row.get(c),) in self.examples(p):
                return True
        return False

    def is_example(self, table: str, row: dict[str, Any]) -> bool:
        return tuple(row.get(k) for k in self.infos[table].key) in self.examples(table)

    def examples_last(self, table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` in their order, those :meth:`examples` names moved after the others, and before them the rows that
        point at another table's examples (:meth:`_of_examples`)."""
        ex = self.examples(table)
        key = self.infos[table].key
        return sorted(rows, key=lambda r: (tuple(r.get(k) for k in key) in ex, self._of_examples(table, r)))

    def examples(self, table: str) -> frozenset[tuple[Any, ...]]:
        """The keys of ``table``'s rows the LLM wrote as examples (the first ``plan.examples`` rows of its seed,
        before code made the rest at scale); none when the rows stage made no rows by code (every row is then the
        model's) or the examples do not give their key."""
        cache = "examples:" + table
        if cache not in self._cache:
            info = self.infos.get(table)
            found: set[tuple[Any, ...]] = set()
            for s in self.env.seed:
                if s.table != table or s.plan is None or info is None or s.plan.examples >= len(s.rows):
                    continue  # every row is the model's: none to prefer
                for r in s.rows[: s.plan.examples]:
                    if all(k in r for k in info.key):
                        found.add(tuple(r[k] for k in info.key))
            self._cache[cache] = frozenset(found)
        out: frozenset[tuple[Any, ...]] = self._cache[cache]
        return out

    def parent(self, table: str, col: str, value: Any) -> tuple[str, dict[str, Any]] | None:
        for c, p, pc in self.infos[table].foreign_keys:
            if c == col and p in self.infos and value is not None:
                pinfo = self.infos[p]
                r = self.conn.execute(f"SELECT * FROM {qi(p)} WHERE {qi(pc or pinfo.key[0])} = ?", (value,)).fetchone()
                return (p, dict(zip(pinfo.columns, r, strict=True))) if r else None
        return None

    def is_surrogate(self, col: Col) -> bool:
        t, c = col
        return t in self.infos and c in surrogate_columns(self.infos[t])

    def describe(self, table: str, row: dict[str, Any]) -> list[tuple[str, Any]] | None:
        return describe(self.conn, self.infos, self.keys, table, row)

    def named(self, table: str, row: dict[str, Any], desc: list[tuple[str, Any]], stated: list[Any]) -> Named:
        """``desc`` and the other ``stated`` values that name ``row``, each labelled by the column of the row (or
        of a parent row) that holds it; a value no column holds is left out (a request states it anyway)."""
        out = list(desc)
        for v in stated:
            if isinstance(v, bool) or any(v == w for _, w in out):
                continue
            holders = [(table, row)] + [par for c, _, _ in self.infos[table].foreign_keys
                                        if (par := self.parent(table, c, row.get(c))) is not None]
            label = next((f"{t}.{c}" for t, r in holders for c, w in r.items()
                          if w == v and not isinstance(w, bool) and not self.is_surrogate((t, c))), None)
            if label is not None:
                out.append((label, v))
        return tuple(out)

    def row_key(self, table: str, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row.get(k) for k in self.infos[table].key)

    # ------------------------------------------------------------ reaching a row

    def _value_for(self, col: Col, table: str, row: dict[str, Any]) -> tuple[str, dict[str, Any], str] | None:
        """Where the value a parameter compared with ``col`` must take to reach ``row`` of ``table`` comes
        from: ``(table, row, column)`` of the row itself, of a parent row (through a foreign key of
        ``row``), or of ``row`` when ``col`` is a child's foreign key pointing at it."""
        t, c = col
        if t == table and c in row:
            return table, row, c
        for fk, p, _pc in self.infos[table].foreign_keys:
            if p == t:
                par = self.parent(table, fk, row.get(fk))
                if par is not None and c in par[1]:
                    return par[0], par[1], c
        if t in self.infos:
            for fk, p, pc in self.infos[t].foreign_keys:
                if fk == c and p == table:
                    return table, row, pc or self.infos[table].key[0]
        return None

    def id_source(self, col: Col, t2: str, r2: dict[str, Any], c2: str, depth: int, skip: frozenset[str]):
        """Calls that read the id a surrogate parameter needs (the key ``c2`` of ``r2``, or the parent row a
        foreign key ``c2`` of ``r2`` points at). None when no tool path finds it."""
        value = r2.get(c2)
        if c2 not in self.infos[t2].key:
            par = self.parent(t2, c2, value)
            if par is None:
                return None
            t2, r2 = par
        if not self.infos[t2].int_pk:
            return None
        return self.reach(t2, r2, (t2, self.infos[t2].key[0]), depth + 1, skip)

    def reach(self, table: str, row: dict[str, Any], want: Col, depth: int = 0,
              skip: frozenset[str] = frozenset()) -> tuple[list[ToolCall], list[dict[str, str]], list[Any], str] | None:
        """The cheapest calls whose last result shows ``row`` with the field carrying ``want``:
        (calls, sources, stated values, result field). None when no tool path reaches it."""
        if depth > MAX_DEPTH:
            return None
        info = self.infos[table]
        skip = skip | {"__reach__:" + table + repr(sorted(row.items())) + repr(want)}
        best = None
        for name in sorted(self.shapes):
            shape = self.shapes[name]
            if shape.kind != "read" or name in skip:
                continue
            out_field = shape.output_for(want)
            if out_field is None:
                continue
            planned = self._fill_read(shape, table, row, depth, skip | {name})
            if planned is None:
                continue
            calls, sources, stated, args, my_src = planned
            result = self.call(name, args)
            if not result:
                continue
            pk = info.key
            mine = [r for r in result if all(r.get(shape.output_for((table, k)) or "", object()) == row.get(k)
                                             for k in pk if shape.output_for((table, k)))]
            if not mine or not any(shape.output_for((table, k)) for k in pk):
                # no key in the result: only usable when the result is this one row
                if not (len(result) == 1 and result[0].get(out_field) == row.get(want[1])):
                    continue
            elif len(result) > 1 and not self._singles_out(shape, table, row, result, stated, args):
                continue
            total = calls + [ToolCall(tool=name, arguments=args)]
            cand = (total, sources + [my_src], stated, out_field)
            if best is None or len(total) < len(best[0]):
                best = cand
        return best

    def _singles_out(self, shape: ToolShape, table: str, row: dict[str, Any], result: list[dict[str, Any]],
                     stated: list[Any], args: dict[str, Any]) -> bool:
        """Whether the row's natural-key values, as the result shows them, tell it apart from the other rows
        (key columns the call already filtered by need not be shown)."""
        nk = self.keys.get(table)
        if nk is None:
            return False
        filtered = {c for c in nk.columns for prm, v in args.items() if v == row.get(c) and
                    any(u.column is not None and (u.column == (table, c) or self._points_at(table, c, u.column))
                        for u in shape.uses.get(prm, []))}
        cols = [(c, shape.output_for((table, c))) for c in nk.columns if c not in filtered]
        if any(f is None for _, f in cols):
            return False
        if any(self.is_surrogate((table, c)) for c, _ in cols):
            return False  # the agent would need the parent's id to tell rows apart
        same = [r for r in result if all(r.get(f or "") == row.get(c) for c, f in cols)]
        if len(same) != 1:
            return False
        for c, _ in cols:
            if row.get(c) not in stated:
                stated.append(row.get(c))
        return True

    def _points_at(self, table: str, col: str, target: Col) -> bool:
        """``table.col`` is a foreign key to ``target``."""
        return any(c == col and p == target[0] and (pc or self.infos[p].key[0]) == target[1]
                   for c, p, pc in self.infos[table].foreign_keys if p in self.infos)

    def _fill_read(self, shape: ToolShape, table: str, row: dict[str, Any], depth: int, skip: frozenset[str]):
        calls: list[ToolCall] = []
        sources: list[dict[str, str]] = []
        stated: list[Any] = []
        args: dict[str, Any] = {}
        my_src: dict[str, str] = {}
        tool = self.env.tool(shape.name)
        for p in tool.params:
            if not p.required:
                continue  # optional filters are left out: the natural key singles the row out
            col = shape.column_of(p.name)
            if col is None:
                return None
            target = self._value_for(col, table, row)
            if target is None:
                return None
            t2, r2, c2 = target
            value = r2.get(c2)
            if value is None:
                return None
            if self.is_surrogate(col):
                sub = self.id_source(col, t2, r2, c2, depth, skip)
                if sub is None:
                    return None
                s_calls, s_src, s_stated, s_field = sub
                base = len(calls)
                calls += s_calls
                sources += [{k: _shift(v, base) for k, v in s.items()} for s in s_src]
                stated += [v for v in s_stated if v not in stated]
                args[p.name] = value
                my_src[p.name] = f"${len(calls)}.{s_field}"
            else:
                args[p.name] = value
                my_src[p.name] = "stated"
                if value not in stated:
                    stated.append(value)
        ok, err = _valid(tool, args)
        return (calls, sources, stated, args, my_src) if ok else None


def _shift(src: str, base: int) -> str:
    m = re.match(r"^\$(\d+)\.(.+)$", src)
    return f"${int(m.group(1)) + base}.{m.group(2)}" if m else src


def _valid(tool: Any, args: dict[str, Any]) -> tuple[bool, str | None]:
    spec = tool.model_dump(mode="json")
    for p in spec["params"]:
        if p["name"] in args:
            _, err = engine.check_value(p, args[p["name"]])
            if err is not None:
                return False, err
    return True, None
