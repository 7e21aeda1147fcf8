"""Argument sets for a tool drawn from the seeded rows (:class:`Sampler`), and values close to a given one
(:func:`variants`): what the tools stage exercises a tool with, and the policy stage checks a rule on.

``Sampler(conn, tables, today).arguments(tool, k)`` draws ``k`` argument sets. Which column a parameter stands
for is read from the tool's SQL by a parser (``pipeline.dbmodel.analysis``: the column it is compared
with or written into), never from its name; values come from that column's seeded rows, spread over the table.
A write tool also gets a set whose values for UNIQUE columns are unused (a create-style tool is not refused as
a duplicate) and a set mixing rows (an assignment already in the seed changes nothing). A parameter an ``UPDATE``
sets as a whole (``SET c = :p``) drawn as the value every row its ``WHERE`` names already holds takes another, when
the column allows one: from the parameter's enum, else the column's ``CHECK`` list, else the parent's keys (a
reference), else the other rows' values of the column it stands for (a UNIQUE column: an unused one) and values
counted from it (:func:`variants`), the first for which a row named holds something else; drawn from the target
row itself, a working tool would change nothing. When no other value exists,
:meth:`Sampler.held` says so (:class:`Held`), so that a call changing nothing is not blamed on the tool's rows.
For each listed value such a parameter can take, :meth:`Sampler.reach` gives argument sets naming a row that holds
another value (from the drawn sets, else a seeded row looked up by the columns the ``WHERE`` compares directly):
the tools stage checks that a working tool sets each of them (:class:`Reach`).

(Moved out of the tools stage's ``exercise`` and the rows stage's ``maker``, which use them with the policy stage.)
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel.analysis import ParamUse, analyse_tool
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.runtime.state import table_infos

_DIGITS = re.compile(r"\d+")


def variants(value: Any) -> Any:
    """Values close to ``value``, in order: a number counts up; a date ('YYYY-MM-DD', a time after it kept)
    counts its days up, each a day of the calendar (its last digits counted up made '2025-10-55'); a text with
    digits counts its last digits up (same width: a phone number stays a phone number); an address with '@' gets
    a digit before it; any other text gets a digit appended. No words of any language are involved."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        for k in range(1, 1000):
            yield value + k
        return
    text = str(value)
    day = _calendar_day(text)
    if day is not None:
        for k in range(1, 1000):
            try:
                yield (day + dt.timedelta(days=k)).isoformat() + text[10:]
            except OverflowError:  # past year 9999
                return
        return
    runs = list(_DIGITS.finditer(text))
    if runs:
        m = runs[-1]
        width, start = len(m.group(0)), int(m.group(0))
        for k in range(1, 1000):
            digits = str(start + k).zfill(width)
            yield text[: m.start()] + digits + text[m.end():]
        return
    at = text.find("@")
    for k in range(2, 1000):
        yield f"{text[:at]}{k}{text[at:]}" if at > 0 else f"{text} {k}"


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
TRIED = 8
"""The other values of its domain tried for a parameter an ``UPDATE`` sets (:meth:`Sampler.arguments`)."""


def _calendar_day(text: str) -> dt.date | None:
    """The day ``text`` begins with ('YYYY-MM-DD', then nothing or a time), or None."""
    if not _DATE.match(text) or (len(text) > 10 and text[10] not in "T "):
        return None
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        return None


def _equal(stored: Any, given: Any) -> bool:
    """Whether a stored value is the given argument (a boolean is stored as 0/1, numbers compare as numbers)."""
    if isinstance(given, bool):
        given = int(given)
    if isinstance(stored, int | float) and isinstance(given, int | float):
        return float(stored) == float(given)
    return bool(stored == given)


def _fits(p: ir.Param, v: Any) -> bool:
    """Whether ``v`` is within the parameter's own bounds (minimum, maximum, length)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (p.minimum is None or v >= p.minimum) and (p.maximum is None or v <= p.maximum)
    return not (isinstance(v, str) and p.max_length is not None and len(v) > p.max_length)


@dataclass(frozen=True)
class SetUse:
    """``UPDATE table SET column = :param WHERE ...`` in a write step: ``select`` reads the column's values in the
    rows the ``WHERE`` names (``SELECT DISTINCT column FROM table WHERE ...``)."""

    param: str
    table: str
    column: str
    select: str
    placeholders: tuple[str, ...]


@dataclass(frozen=True)
class Held:
    """An argument set's parameter ``param`` equals ``value``, which ``table.column`` already holds in every row the
    ``UPDATE`` names, and the parameter can take no other value. ``domain``: the values it can take, when they are
    a closed list (its enum, the column's CHECK list, the parent's keys, a truth value); empty when the values tried
    (other rows', counted ones) were all outside the parameter's bounds."""

    param: str
    table: str
    column: str
    value: Any
    domain: tuple[Any, ...]


@dataclass(frozen=True)
class Reach:
    """Argument sets (``sets``) that give ``use.param`` the listed value ``value`` and name a row of ``use.table``
    whose ``use.column`` holds another value: a working tool sets the value on that row (:meth:`Sampler.reach`)."""

    use: SetUse
    value: Any
    sets: tuple[dict[str, Any], ...]


def set_uses(tool: ir.Tool) -> list[SetUse]:
    """Every ``SET column = :param`` (the parameter as the whole value) of ``tool``'s ``UPDATE`` steps (parsed; an
    ``UPDATE`` that reads other tables in a ``FROM`` or a ``WITH`` is left out)."""
    out: list[SetUse] = []
    for step in tool.steps:
        if step.kind != "write":
            continue
        try:
            tree = sqlglot.parse_one(step.sql, read="sqlite")
        except Exception:  # noqa: BLE001 - SQL the parser refuses is the static checks' to report
            continue
        if not isinstance(tree, exp.Update) or not isinstance(tree.this, exp.Table) \
                or any(tree.args.get(k) for k in ("from", "from_", "joins", "with")):
            continue
        where = tree.args.get("where")
        for eq in tree.expressions:
            if not (isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Placeholder)):
                continue
            select = exp.select(exp.column(eq.this.name, quoted=True)).distinct().from_(tree.this.copy())
            if where is not None:
                select = select.where(where.this.copy())
            names = tuple(dict.fromkeys(ph.name for ph in select.find_all(exp.Placeholder)))
            out.append(SetUse(eq.expression.name, tree.this.name, eq.this.name, select.sql(dialect="sqlite"), names))
    return out


class Sampler:
    """Argument sets for a tool drawn from the seeded rows of ``conn`` (deterministic)."""

    def __init__(self, conn: sqlite3.Connection, tables: tuple[ir.Table, ...] | list[ir.Table], today: str,
                 examples: dict[str, int] | None = None) -> None:
        self.conn = conn
        self.examples = dict(examples or {})
        """Per table, how many of its first rows the LLM wrote as examples (``ir.RowPlan.examples``), for
        :meth:`arguments` ``past_examples``."""
        self.clock = today
        self.today = dt.date.fromisoformat(today[:10])
        self.tables = tuple(tables)
        self.infos = table_infos(conn)
        self.cols: dict[tuple[str, str], Column] = {}
        self.unique: set[tuple[str, str]] = set()
        self.table_cols: dict[str, list[str]] = {}
        for t in self.tables:
            for c in table_columns(conn, t):
                self.table_cols.setdefault(t.name, []).append(c.name)
                self.cols[(t.name, c.name)] = c
                if c.pk == 1 and not c.auto_id:
                    self.unique.add((t.name, c.name))
            for idx in conn.execute(f'PRAGMA index_list("{t.name}")').fetchall():
                if idx[2]:
                    cols = conn.execute(f'PRAGMA index_info("{idx[1]}")').fetchall()
                    if len(cols) == 1:
                        self.unique.add((t.name, cols[0][2]))
        self._uses: dict[str, dict[str, list[ParamUse]]] = {}
        self._set_uses: dict[str, list[SetUse]] = {}

    def uses(self, tool: ir.Tool) -> dict[str, list[ParamUse]]:
        key = tool.model_dump_json()
        if key not in self._uses:
            self._uses[key] = analyse_tool(tool, self.conn, self.infos, "read" if tool.kind == "read" else "update").uses
        return self._uses[key]

    def source(self, tool: ir.Tool, pname: str) -> tuple[str, Column] | None:
        """The seeded column parameter ``pname`` of ``tool`` stands for: the one its SQL writes it into or
        compares it with (a direct use first); for a foreign key, the parent's key column."""
        uses = [u for u in self.uses(tool).get(pname, []) if u.column is not None and u.column in self.cols]
        uses.sort(key=lambda u: (not u.direct, u.role != "value"))
        if not uses:
            return None
        t, c = uses[0].column  # type: ignore[misc]
        ref = self.cols[(t, c)].ref
        if ref is not None and ref in self.cols:  # a reference stands for a row of its parent: any of them
            return ref[0], self.cols[ref]
        return t, self.cols[(t, c)]

    def _row_value(self, table: str, col: str, i: int, k: int, past: bool = False) -> Any:
        n = self.conn.execute(f'SELECT COUNT(*) FROM "{table}" WHERE "{col}" IS NOT NULL').fetchone()[0]
        if not n:
            return None
        lead = self.examples.get(table, 0) if past else 0
        lead = lead if 0 < lead < n else 0
        offset = lead + (i * max(1, (n - lead) // k)) % (n - lead)
        return self.conn.execute(f'SELECT "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL ORDER BY rowid '
                                 f"LIMIT 1 OFFSET {offset}").fetchone()[0]

    def _drawn(self, tool: ir.Tool, p: ir.Param, i: int, k: int, past: bool = False) -> Any:
        """The ``i``-th of ``k`` values for ``p``: from its enum, else from the seeded column it stands for
        (spread over the table; ``past``: over its rows after the LLM's examples), else None."""
        if p.enum:
            return p.enum[i % len(p.enum)]
        src = self.source(tool, p.name)
        return None if src is None else self._coerce(p, self._row_value(src[0], src[1].name, i, k, past))

    def _fallback(self, tool: ir.Tool, p: ir.Param, i: int) -> Any:
        """A value for a parameter the seeded rows give none for, by its type. A text parameter that stands for
        no column (date arithmetic) or for an empty one (a date still to be filled in) gets a date after today;
        later date columns of a table get later dates (end after start)."""
        if p.type == "string":
            src = self.source(tool, p.name)
            rank = 0
            if src is not None:
                dates = [c for c in self.table_cols.get(src[0], []) if self._looks_dated(src[0], c)]
                rank = dates.index(src[1].name) + 1 if src[1].name in dates else 0
            if src is None or rank or not self._has_values(src[0], src[1].name):
                return (self.today + dt.timedelta(days=7 + i + 2 * rank)).isoformat()
            return f"{src[1].name} {i + 1}"
        if p.type == "integer":
            return 1 + i
        if p.type == "number":
            return 10.0 * (i + 1)
        return i % 2 == 0

    def _has_values(self, table: str, col: str) -> bool:
        return bool(self.conn.execute(f'SELECT 1 FROM "{table}" WHERE "{col}" IS NOT NULL LIMIT 1').fetchone())

    def _looks_dated(self, table: str, col: str) -> bool:
        vals = [r[0] for r in self.conn.execute(f'SELECT "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL LIMIT 5')]
        return bool(vals) and all(isinstance(v, str) and _DATE.match(v) for v in vals)

    @staticmethod
    def _coerce(p: ir.Param, v: Any) -> Any:
        if v is None:
            return None
        if p.type == "string":
            return v if isinstance(v, str) else str(v)
        if p.type == "integer":
            if isinstance(v, float) and v.is_integer():
                return int(v)
            if isinstance(v, str) and v.lstrip("-").isdigit():
                return int(v)
            return v if isinstance(v, int) else None
        if p.type == "number":
            return v if isinstance(v, (int, float)) else None
        return bool(v) if isinstance(v, int) else None

    def _unused(self, table: str, col: str, value: Any) -> Any:
        for v in variants(value):
            if not self.conn.execute(f'SELECT 1 FROM "{table}" WHERE "{col}" = ? LIMIT 1', (v,)).fetchone():
                return v
        return value

    def _targets(self, use: SetUse, args: dict[str, Any]) -> list[Any] | None:
        """The distinct values ``use.column`` holds in the rows its ``UPDATE`` names for ``args`` (at most two),
        or None when that cannot be read here (a value bound by an earlier step, SQL SQLite refuses)."""
        known = {**args, "now": self.clock, "today": self.clock[:10]}
        if any(n not in known for n in use.placeholders):
            return None
        try:
            rows = self.conn.execute(f"{use.select} LIMIT 2", {n: known[n] for n in use.placeholders}).fetchall()
        except sqlite3.Error:
            return None
        return [r[0] for r in rows]

    def _domain(self, tool: ir.Tool, p: ir.Param, use: SetUse, value: Any) -> tuple[list[Any], bool]:
        """The values ``p`` can take in ``use.column``, in the order they are tried (see the module docstring), and
        whether the list is the whole domain (an enum, a CHECK list, a parent's keys, a truth value) rather than
        other rows' values and the first values counted from ``value``."""
        col = self.cols.get((use.table, use.column))
        listed: tuple[Any, ...] = tuple(p.enum or ()) or (col.enum if col is not None and col.enum else ())
        if listed:
            return list(listed), True
        if p.type == "boolean":
            return [True, False], True
        if col is not None and col.ref is not None and col.ref in self.cols:  # a reference: a parent's key
            return self._distinct(*col.ref), True
        if (use.table, use.column) in self.unique:  # another row's value would be refused: an unused one
            return [self._unused(use.table, use.column, value)], False
        src = self.source(tool, p.name)
        rows = self._distinct(*(src[0], src[1].name) if src is not None else (use.table, use.column))
        return [*rows, *(v for _, v in zip(range(3), variants(value), strict=False))], False

    def _distinct(self, table: str, col: str) -> list[Any]:
        """The values of ``table.col`` in the seeded rows, each once, in row order."""
        return [r[0] for r in self.conn.execute(f'SELECT "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL '
                                                f'GROUP BY "{col}" ORDER BY MIN(rowid)')]

    def _moved(self, tool: ir.Tool, args: dict[str, Any]) -> tuple[dict[str, Any], list[Held]]:
        """``args`` with each parameter an ``UPDATE`` sets given another value of its domain when, as drawn, the
        rows the ``UPDATE`` names (for these arguments) already hold it: the first other value for which some named
        row holds something else (tried in order, at most :data:`TRIED`; a ``WHERE`` that reads the parameter
        itself names other rows for another value). Also the parameters that have no other value (:class:`Held`)."""
        out, held = dict(args), []
        params = {p.name: p for p in tool.params}
        key = tool.model_dump_json()
        if key not in self._set_uses:
            self._set_uses[key] = set_uses(tool)
        for use in self._set_uses[key]:
            p, value = params.get(use.param), out.get(use.param)
            if p is None or value is None:
                continue
            named = self._targets(use, out)
            if named is None or any(not _equal(v, value) for v in named):
                continue  # not readable here, or some row named holds another value: the call changes it
            domain, whole = self._domain(tool, p, use, value)
            fitting = [c for v in domain if (c := self._coerce(p, v)) is not None and _fits(p, c)
                       and not _equal(c, value)]
            for c in fitting[:TRIED]:
                if any(not _equal(v, c) for v in self._targets(use, {**out, use.param: c}) or []):
                    out[use.param] = c
                    break
            if named and not fitting:  # the rows named hold the only value the parameter can take
                held.append(Held(use.param, use.table, use.column, value, tuple(domain) if whole else ()))
        return out, held

    def held(self, tool: ir.Tool, args: dict[str, Any]) -> list[Held]:
        """The parameters of ``args`` that an ``UPDATE`` of ``tool`` sets to what every row it names already holds,
        with no other value to take: a call with ``args`` cannot change those rows, whatever the tool does."""
        return self._moved(tool, args)[1]

    def reach(self, tool: ir.Tool, pool: list[dict[str, Any]], per_value: int = 2) -> list[Reach]:
        """For each listed value (the parameter's enum, else the column's ``CHECK`` list) that a parameter an
        ``UPDATE`` of ``tool`` sets as a whole can take: at most ``per_value`` argument sets of ``pool`` with the
        parameter given that value, each naming a row that holds another value. A value for which no set of
        ``pool`` names such a row (the seeded rows all hold it, or the rows named cannot be read here) is left out."""
        params = {p.name: p for p in tool.params}
        out: list[Reach] = []
        for use in set_uses(tool):
            p, col = params.get(use.param), self.cols.get((use.table, use.column))
            listed: tuple[Any, ...] = tuple(p.enum or ()) if p is not None else ()
            listed = listed or (tuple(col.enum) if col is not None and col.enum else ())
            if p is None or not listed:
                continue
            for v in listed:
                c = self._coerce(p, v)
                if c is None or not _fits(p, c):
                    continue
                sets: list[dict[str, Any]] = []
                for base in pool:
                    args = {**base, use.param: c}
                    named = self._targets(use, args)
                    if named and any(not _equal(x, c) for x in named) and args not in sets:
                        sets.append(args)
                    if len(sets) >= per_value:
                        break
                if not sets and pool:
                    sets = self._other_rows(tool, use, {**pool[0], use.param: c}, per_value)
                if sets and not any(r.use == use and _equal(r.value, c) for r in out):
                    out.append(Reach(use, c, tuple(sets)))
        return out

    def _other_rows(self, tool: ir.Tool, use: SetUse, base: dict[str, Any], k: int) -> list[dict[str, Any]]:
        """At most ``k`` argument sets that name, through the parameters ``use``'s ``WHERE`` compares directly with
        columns of ``use.table``, a seeded row whose ``use.column`` holds another value than ``base`` gives it."""
        value = base[use.param]
        filters = {n: u.column[1] for n in use.placeholders if n != use.param and n in base
                   for u in self.uses(tool).get(n, [])[:1]
                   if u.role == "filter" and u.direct and u.column is not None and u.column[0] == use.table}
        if not filters:
            return []
        params = {p.name: p for p in tool.params}
        cols = ", ".join(f'"{c}"' for c in filters.values())
        out: list[dict[str, Any]] = []
        for row in self.conn.execute(f'SELECT {cols} FROM "{use.table}" WHERE "{use.column}" IS NOT NULL AND '
                                     f'"{use.column}" <> ? ORDER BY rowid LIMIT ?', (value, 4 * k)).fetchall():
            args = {**base, **{n: self._coerce(params[n], v) for n, v in zip(filters, row, strict=True)}}
            named = self._targets(use, args)
            if named and any(not _equal(x, value) for x in named) and args not in out:
                out.append(args)
            if len(out) >= k:
                break
        return out

    def grounded(self, tool: ir.Tool) -> bool:
        """Whether every argument comes from an enum or a column of the seeded rows."""
        return all(p.enum or self.source(tool, p.name) is not None for p in tool.params)

    def arguments(self, tool: ir.Tool, k: int, past_examples: bool = False) -> list[dict[str, Any]]:
        """``k`` sets from existing rows (spread over each table), plus, for write tools, a set whose
        values for UNIQUE columns are unused (so a create-style tool is not refused as a duplicate) and one mixing
        rows; a value an ``UPDATE`` sets differs from what the rows it names hold, where the column allows.
        ``past_examples``: values spread over each table's rows after the LLM's example rows (:attr:`examples`), for
        calls a request will name (the model's examples are no likelier to be named than any other row)."""
        sets: list[dict[str, Any]] = []
        fresh: dict[str, Any] = {}
        for i in range(k):
            args: dict[str, Any] = {}
            for p in tool.params:
                v = self._drawn(tool, p, i, k, past_examples)
                src = None if p.enum else self.source(tool, p.name)
                if i == 0 and v is not None and src is not None and (src[0], src[1].name) in self.unique \
                        and src[1].ref is None:
                    fresh[p.name] = self._coerce(p, self._unused(src[0], src[1].name, v))
                args[p.name] = self._fallback(tool, p, i) if v is None else v
            if args not in sets:
                sets.append(args)
        if tool.kind == "write" and len(tool.params) > 1:
            # one more set whose arguments come from different rows: drawn from the same row, an "assign
            # mechanic 1 to order 1" may be what the seed already says, and a tool that works changes nothing
            mixed = {p.name: v if (v := self._drawn(tool, p, j, k, past_examples)) is not None
                     else self._fallback(tool, p, j) for j, p in enumerate(tool.params)}
            if mixed not in sets:
                sets.append(mixed)
        if tool.kind == "write" and sets and fresh:
            sets.insert(0, {**sets[0], **fresh})
        if tool.kind == "write":
            moved = [self._moved(tool, s)[0] for s in sets]
            sets = [s for i, s in enumerate(moved) if s not in moved[:i]]
        return sets or [{}]
