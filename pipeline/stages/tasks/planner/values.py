"""Values a planned write states: a new value for a column that differs from the current one and fits the
parameter, or a plain value for a parameter that is not a column (see ``shapes``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from datetime import date, timedelta
from typing import Any

from pipeline import ir
from pipeline.dbmodel import lifecycle as states
from pipeline.dbmodel.draws import drawn, made_new, sources_of
from pipeline.dbmodel.lifecycle import enum_of, example_rows
from pipeline.hashing import content_hash
from pipeline.meaning import relations
from pipeline.runtime.state import qi
from pipeline.stages.tasks.planner.chains import _DATE, Planner, rotate  # noqa: F401 (rotate: re-exported)


def new_value(p: Planner, table: str, col: str, current: Any, param: Any, unique: bool) -> Any | None:
    """A value for ``table.col`` that differs from ``current`` and fits the parameter; for a status-like column whose
    order of states is known (:func:`~pipeline.dbmodel.lifecycle.later`), the next state after ``current``
    (None from the last one: no row moves back to where it started). With :attr:`Planner.refusing` ``k``: the
    ``k``-th state the row may not move to (:func:`~pipeline.dbmodel.lifecycle.behind`), None past the
    last (other columns as without it); the write is then one for a rule to forbid (``shapes.refused_writes``)."""
    enum = list(param.enum or []) or (enum_of(p, table, col) or [])
    back = states.behind(p, table, col, current) if p.refusing is not None else None
    if back is not None:
        fits = [s for s in back if not enum or s in enum]
        return fits[p.refusing] if p.refusing is not None and p.refusing < len(fits) else None
    ahead = states.later(p, table, col, current)
    if ahead is not None:
        fits = [s for s in ahead if not enum or s in enum]
        return fits[0] if fits else None
    if enum:
        others = [e for e in enum if e != current]
        return others[0] if others else None
    if param.type == "boolean":
        return not bool(current)
    if isinstance(current, bool):
        return not current
    if isinstance(current, int) and current in (0, 1) and yes_no(p, table, col):
        return 1 - current  # a yes/no held as 0/1: the other one, not "change the availability to 4"
    if isinstance(current, int):
        cand = current + 3 if param.maximum is None or current + 3 <= param.maximum else current - 1
        return cand if cand != current else None
    if isinstance(current, float):
        if current.is_integer():  # a whole amount held as REAL (a stock of 100.0, 4.0 tablets): a whole one, as
            # people count (issue 40's audit: "change the quantity to 101.5" of a medication's stock)
            whole = current + 3 if param.maximum is None or current + 3 <= param.maximum else current - 1
            return float(whole) if whole != current else None
        return round(current + 1.5, 2)
    if isinstance(current, str) and _DATE.match(current):
        from datetime import date, timedelta

        try:
            d = date.fromisoformat(current[:10]) + timedelta(days=7)
        except ValueError:
            return None
        return d.isoformat() + current[10:]
    if isinstance(current, str):
        if not unique:
            vals = [r[0] for r in p.conn.execute(
                f"SELECT DISTINCT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL AND {qi(col)} != ? ORDER BY 1 LIMIT 1",
                (current,))]
            if vals:
                return vals[0]
        taken = {r[0] for r in p.conn.execute(f"SELECT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL")}
        made = generator_of(p, table, col)
        if made is None and taken and all(isinstance(v, str) and _EMAIL.fullmatch(v) for v in taken):
            made = (ir.ColumnGenerator(column=col, kind="email"), 0)  # no plan: e-mail addresses, as every row holds
        return fresh_text(current, taken, made, locale_of(p))
    return None


def yes_no(p: Planner, table: str, col: str) -> bool:
    """Whether ``table.col`` holds yes/no as 0/1: the rows stage drew it as a boolean, or (no plan) every row holds 0
    or 1 and some row each (a count that happens to be 0 or 1 in every row is rare at scale). Read from the plan and
    the rows, no name."""
    made = generator_of(p, table, col)
    if made is not None:
        return made[0].kind == "boolean"
    held = {r[0] for r in p.conn.execute(f"SELECT DISTINCT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL")}
    return held == {0, 1}


def plain_value(param: Any) -> Any:
    """A value for a parameter that is not a column value: the first enum value, or a small number."""
    if param.enum:
        return param.enum[0]
    if param.type in ("integer", "number"):
        lo = param.minimum if param.minimum is not None else 1
        v = max(lo, min(7, param.maximum if param.maximum is not None else 7))
        return int(v) if param.type == "integer" else float(v)
    return None


_DIGITS = re.compile(r"\d+")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
FRESH_DRAWS = 40
"""Values drawn from a column's generator for a new one before giving up (each checked against the rows)."""


def generator_of(p: Planner, table: str, col: str) -> tuple[ir.ColumnGenerator, int] | None:
    """How the rows stage made ``table.col`` (its ``SeedRows.plan``) and the plan's seed; None without a plan."""
    for s in p.env.seed:
        if s.table == table and s.plan is not None:
            g = next((g for g in s.plan.generators if g.column == col), None)
            return (g, s.plan.seed) if g is not None else None
    return None


def locale_of(p: Planner) -> str:
    return next((s.plan.locale for s in p.env.seed if s.plan is not None), "en_US")


def fresh_text(value: str, taken: Set[Any] = frozenset(),
               made: tuple[ir.ColumnGenerator, int] | None = None, locale: str = "en_US") -> str | None:
    """A new value for the column of ``value`` that no row has (``taken``), or None (the planner then picks another
    task): an item of the column's own vocabulary that no row uses (``made``: its generator and the plan's seed; a
    list the rows stage continued from the examples), else a value of its generator (people, companies, places,
    phones, e-mail addresses, code patterns) drawn with a seed from the plan's and the value, else, for a code or
    number written as text, its last digits moved on (``K-004`` -> ``K-005``, ``555-0101`` -> ``555-0102``, the
    same width). Never a suffix ("The Great Gatsby II", "jane2@example.com": a value made unique, not a real one).
    Deterministic."""
    seed = int(content_hash({"value": value, "seed": made[1] if made else 0}, 12), 16)
    if made is not None:
        g = made[0]
        if g.kind == "text_pool" and g.pool and not (g.pattern and g.max):  # a list-valued column is no vocabulary
            unused = [v for v in g.pool if v not in taken]
            if unused:
                return unused[seed % len(unused)]
        fresh = [v for v in drawn(g, locale, seed, FRESH_DRAWS) if v not in taken and v != value]
        if fresh:
            return fresh[0]
    runs = list(_DIGITS.finditer(value))
    if runs:
        m = runs[-1]
        for step in range(1, 200):
            digits = str(int(m.group()) + step).zfill(len(m.group()))
            cand = value[:m.start()] + digits + value[m.end():]
            if cand not in taken:
                return cand
    return None


OWN_KINDS = ("phone", "email", "derived", "street_address", "code")
"""Generators whose value is the row's own when no two rows share one: how to reach it (a phone number, an e-mail
address, a street address), a value made of another column of the row, a code; a new row takes such a value from no
other row (:func:`own_value`). Not a name (a person's, a company's, a city's: a new prescription by the template
row's doctor, a blood request from a hospital already on file, both fine), though the rows stage draws one per row."""


def own_value(p: Planner, table: str, col: str) -> bool:
    """Whether a new row of ``table`` needs a value of ``col`` that no row holds, UNIQUE or not: the rows stage drew
    it per row (:data:`OWN_KINDS`) and no two rows share one (a customer's phone number; not a city two customers
    live in). A new row otherwise copies its template row's value (``shapes._write_args``): another customer's phone
    for the new one (the board game cafe's, 2026-11-29)."""
    cache = f"own:{table}.{col}"
    if cache not in p._cache:
        made = generator_of(p, table, col)
        own = False
        if made is not None and made[0].kind in OWN_KINDS:
            n, distinct = p.conn.execute(
                f"SELECT COUNT({qi(col)}), COUNT(DISTINCT {qi(col)}) FROM {qi(table)}").fetchone()
            own = n >= 2 and n == distinct
        p._cache[cache] = own
    out: bool = p._cache[cache]
    return out


def made_in_row(p: Planner, table: str, row: Mapping[str, Any], columns: Set[str]) -> dict[str, str | None]:
    """The values of ``columns`` of a row of ``table`` (``row``: column -> its value, a new row's stated ones or an
    existing row's with the write's) that the rows stage makes of another column of the same row
    (:func:`pipeline.dbmodel.draws.sources_of`: an e-mail address of the person's name), made so of ``row``'s, each
    one that no row of the table holds: the new member "Angel Morgan" gets angel.morgan@..., not the address drawn
    for another name ("christopher.brewer@...", the library of 2026-11-29); a member's changed address is still
    theirs. Only for columns whose source is in ``row``; None for one that no draw makes a new value of (the planner
    then picks another task). Deterministic."""
    plan = next((s.plan for s in p.env.seed if s.table == table and s.plan is not None), None)
    if plan is None:
        return {}
    out: dict[str, str | None] = {}
    for g in plan.generators:
        sources = [c for c in sources_of(g, plan.generators) if c in row]
        if g.column not in columns or not sources:
            continue
        taken = {r[0] for r in p.conn.execute(
            f"SELECT {qi(g.column)} FROM {qi(table)} WHERE {qi(g.column)} IS NOT NULL")}
        seed = int(content_hash({"row": {c: row[c] for c in sources}, "column": g.column, "seed": plan.seed}, 12), 16)
        out[g.column] = made_new(g, plan.generators, {c: row[c] for c in sources}, plan.locale, seed, taken,
                                 FRESH_DRAWS)
    return out


def unique_cols(p: Planner, table: str) -> set[str]:
    from pipeline.dbmodel.keys import _unique_columns

    return {c for cols in _unique_columns(p.conn, table) if len(cols) == 1 for c in cols}


# ---------------------------------------------------------------- time, as the seed's examples show it


def today_of(p: Planner) -> date:
    return date.fromisoformat(p.env.clock[:10])


def _parent_rows(p: Planner, parent: str, key: str) -> dict[Any, dict[str, Any]]:
    cache = f"parent_rows:{parent}.{key}"
    if cache not in p._cache:
        cols = p.infos[parent].columns
        p._cache[cache] = {r[cols.index(key)]: dict(zip(cols, r, strict=True))
                           for r in p.conn.execute(f"SELECT * FROM {qi(parent)}")}
    out: dict[Any, dict[str, Any]] = p._cache[cache]
    return out


def time_relations(p: Planner, table: str) -> relations.RowRelations:
    """The relations between dates that ``table``'s example rows show (:func:`pipeline.meaning.relations.row_relations`:
    their order, each date's window around the clock, a date against the parent row a reference names), the same the
    rows stage held for the seeded rows; inferred from values, never from names."""
    cache = "time:" + table
    if cache not in p._cache:
        parents = {c: _parent_rows(p, pt, pc or p.infos[pt].key[0]) for c, pt, pc in p.infos[table].foreign_keys
                   if pt in p.infos and pt != table and (pc or len(p.infos[pt].key) == 1)}
        p._cache[cache] = relations.row_relations(example_rows(p, table), today_of(p), parents)
    out: relations.RowRelations = p._cache[cache]
    return out


def _dated(v: Any) -> bool:
    return isinstance(v, str) and bool(_DATE.match(v)) and relations.as_date(v) is not None


def _child_breaks(p: Planner, table: str, row: Mapping[str, Any], changed: Mapping[str, Any]) -> bool:
    """Whether ``changed`` dates of ``row`` put it on the wrong side of a child row's date that was on the right
    side before (a loan moved past its renewals), by the orders the child table's examples show."""
    for child, info in p.infos.items():
        for c, pt, pc in info.foreign_keys:
            if pt != table or child == table:
                continue
            key = pc or p.infos[table].key[0]
            for po in time_relations(p, child).parents:
                if po.via != c or po.parent_column not in changed:
                    continue
                for (v,) in p.conn.execute(f"SELECT {qi(po.column)} FROM {qi(child)} WHERE {qi(c)} = ?",
                                           (row.get(key),)):
                    if po.holds(v, row.get(po.parent_column)) and not po.holds(v, changed[po.parent_column]):
                        return True
    return False


def _update_breaks(p: Planner, table: str, row: Mapping[str, Any], changed: Mapping[str, Any]) -> bool:
    """Whether ``changed`` values of an existing ``row`` break a relation between dates that held before it (one
    the seeded row already broke is not the task's doing)."""
    rel = time_relations(p, table)
    full = {**row, **changed}

    def parents_of(r: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        return {c: par[1] for c, _, _ in p.infos[table].foreign_keys if (par := p.parent(table, c, r.get(c)))}

    before, after = parents_of(row), parents_of(full)
    for o in rel.orders:
        if (o.first in changed or o.second in changed) and relations.violations([full], o) \
                and not relations.violations([row], o):
            return True
    for po in rel.parents:
        if po.column not in changed and po.via not in changed or po.via not in after:
            continue
        held = po.via not in before or po.holds(row.get(po.column), before[po.via].get(po.parent_column))
        if held and not po.holds(full.get(po.column), after[po.via].get(po.parent_column)):
            return True
    return _child_breaks(p, table, row, changed)


def fit_dates(p: Planner, table: str, row: Mapping[str, Any] | None, values: Mapping[str, Any],
              parents: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The new values of a write on ``table`` (column -> value) with their dates where the table's example rows
    put them (:func:`time_relations`) and a new row's status-like columns in the state new rows have
    (:func:`~pipeline.dbmodel.lifecycle.initial_state`): a new row (``row`` None) dated in the examples' window around the clock, its
    dates in their order, a child's after its parent's (``parents``: reference column -> the existing or new row it
    names); a changed date of an existing ``row`` moved back a week instead of on when on breaks an order (its own
    row's, its parent's or a child's), None when neither way keeps them (the planner then picks another task)."""
    out = dict(values)
    dated = {c: v for c, v in values.items() if _dated(v)}
    if row is None:
        for c in values:  # a new row starts in the state new rows have
            first = states.initial_state(p, table, c)
            if first is not None:
                out[c] = first
        out.update(relations.fit_new_row(time_relations(p, table), dated, parents, today_of(p)))
        return out
    if not dated or not _update_breaks(p, table, row, dated):
        return out
    for c, v in dated.items():
        cur = row.get(c)
        if not isinstance(cur, str) or not _dated(cur):
            continue
        back = relations.moved(cur, date.fromisoformat(cur[:10]) - timedelta(days=7))
        if back != cur and back != v:
            out[c] = back
    changed = {c: out[c] for c in dated}
    return None if changed == dated or _update_breaks(p, table, row, changed) else out


def parent_fits(p: Planner, table: str, via: str, parent: Mapping[str, Any]) -> bool:
    """Whether a new row of ``table`` naming ``parent`` through ``via`` can keep both its dates' windows around the
    clock and its orders against that parent (:func:`time_relations`): a renewal only for a loan not yet past due
    when the examples renew loans before their due date, and today."""
    rel = time_relations(p, table)
    windows = {c: (lo, hi) for c, lo, hi in rel.windows}
    today = today_of(p)
    for po in rel.parents:
        pd = relations.as_date(parent.get(po.parent_column))
        if po.via != via or po.column not in windows or pd is None:
            continue
        lo, hi = windows[po.column]
        step = int(po.strict)
        if po.after and (pd - today).days + step > hi or not po.after and (pd - today).days - step < lo:
            return False
    return True
