"""Rules proposed by code from the schema and the seeded rows, and checked on real calls.

``propose(env, inst)`` reads each write tool's SQL with a parser (``pipeline.dbmodel.analysis``, through the
tool stage's :class:`~pipeline.stages.tools.exercise.Sampler`): a parameter that names a row (a key or a UNIQUE column it
is compared with, or a foreign key it writes) makes the row its *subject*. Candidates, each a read-only ``SELECT``
that returns a row when the call is forbidden:

* ``state``: the subject's CHECK-listed column holds one of its values (a status that blocks the write), or its
  parent's does (a write on a child of a row in that state); on a tool that updates the subject itself, also a
  listed column no tool changes (a frozen state, :meth:`Finder.frozen`: "a closed order may no longer be changed"),
  used only where the LLM's prose names its value;
* ``limit``: a create adds a child to the subject and the subject already has ``n`` children (``n`` the most any
  seeded row has: the seeded rows obey the cap), or ``n`` children with one value of a CHECK-listed column;
* ``approval``: the subject's number is above a threshold, or a number the call writes is (a threshold from the
  seeded values of its column);
* ``precondition``: the subject's date is past (or still to come), or a date the call writes is in the past; or
  (``linked``) a write that names two rows is forbidden when a row of another table already links the two (a
  prescription for a medication the patient has an allergy to: :meth:`Finder._linked`).

No candidate is on a column that names a row rather than measures it (:func:`key_column`: a primary key, a
foreign key, a column named ``id`` or ``*_id``), nor on one the schema stage's LLM classified as a personal
characteristic (``ir.Table.personal``: gender, religion...). A state or a threshold on a row is on a column some
tool's UPDATE changes (:meth:`Finder.state_like`): a state the row is in, not a whole category of what it is
("fiction books cannot be loaned"). Beyond that nothing reads meaning into names: which value, column
or threshold matters is left to the LLM's pick (``pipeline.stages.policy.house_rules``); code only makes sure each candidate
holds. :func:`check` runs the governed tool on argument sets drawn from the seeded rows (the Sampler's, plus the
probed parameter set to rows the condition holds and does not hold for), each call on the initial state, once
permissive and once with the rule as its first guard (``pipeline.runtime.policy``, the engine's read-only
authorizer): a candidate is kept only with a call that works and that the rule allows, and one that works and that
the rule refuses with its message.

Compliant alternatives (exception paths, :func:`alternatives`): for a candidate's write, every other write tool that
takes the same row (a parameter naming the same (table, key) as the governed tool's) and whose other parameters
are CHECK-listed or enum values, each combination of them fixed (``set_permit_status(status='suspended')`` instead
of ``renew_permit``); one is kept when it works and changes something where the candidate forbids its write, with
the candidates that would forbid it there (a policy picking one of them cannot offer it).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel import lifecycle
from pipeline.dbmodel.analysis import analyse
from pipeline.dbmodel.arguments import Sampler
from pipeline.dbmodel.columns import Column
from pipeline.dbmodel.keynames import id_named, singular
from pipeline.runtime import EnvInstance, engine, policy
from pipeline.runtime import static_checks as checks
from pipeline.runtime.replay import Watch
from pipeline.runtime.schemas import served_tools
from pipeline.runtime.state import qi

CHECK_MAX = 40
"""Candidates checked per environment (round-robin over the write tools)."""
PROBE_ROWS = 400
PROBES = 2
"""Probe values per side (allowed, forbidden) of a candidate."""
OPTION_SETS = 12
"""Argument sets of one alternative tool tried (combinations of its fixed values)."""
OPTIONS_MAX = 3
"""Alternatives kept per rule (the pick shows each; another tool before another value of one tool)."""
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
NUMBER = "\x00number\x00"
"""Where a threshold's or a cap's number goes in :attr:`Candidate.form`."""


@dataclass(frozen=True)
class Candidate:
    """A rule as code found it: ``words`` are the facts the wording needs (``section`` names the template of
    ``prompts/policy.md``), ``probe`` the parameter varied on the seeded ``values`` when it is checked."""

    key: str
    kind: ir.RuleKind
    tool: str
    condition: str
    probe: str
    values: tuple[Any, ...]
    words: dict[str, str] = field(default_factory=dict)
    tried: tuple[dict[str, Any], ...] = ()
    """Argument sets tried besides the Sampler's and the probes: the calls a rule was last checked on, when it is
    checked again after a repair (:func:`pipeline.stages.policy.house_rules.recheck_policy`)."""
    form: tuple[tuple[Any, ...], str] | None = None
    """A candidate on a number (a threshold, a cap): the parts of its key and its condition with :data:`NUMBER` in
    place of the number, so that :meth:`at` sets another one (the number a prose rule states)."""

    @property
    def number(self) -> float | int | None:
        """The number a threshold or a cap compares with (None for a state or a date)."""
        if self.form is None:
            return None
        x = float(self.words["value"])
        return int(x) if x.is_integer() else x

    def at(self, x: float | int, probe: bool = True) -> Candidate:
        """This candidate comparing with ``x`` instead (its key, condition and words); with ``probe``, a threshold
        on the request's own value is probed with ``x`` and the next round number above it too (:func:`above`), so
        that calls on both sides of it are tried even where no seeded value is above it."""
        assert self.form is not None, self.key
        x = int(x) if float(x).is_integer() else float(x)
        parts, condition = self.form
        values = self.values
        if probe and self.words.get("section") == "value_over":
            integer = all(isinstance(v, int) for v in values)
            values = tuple(sorted({*values, x, above(x, integer)}))
        return replace(self, key=_slug(*(x if p == NUMBER else p for p in parts)),
                       condition=condition.replace(NUMBER, repr(x)), values=values,
                       words={**self.words, "value": number_text(x)})

    def rule(self, rule_id: str, message: str, worded_by: str = "code") -> ir.Rule:
        return ir.Rule(id=rule_id, kind=self.kind, tools=[self.tool], condition=self.condition, message=message,
                       worded_by=worded_by)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Option:
    """A compliant alternative as code found it (``words``: the facts of the ``prompts/policy.md`` section
    ``section`` that words it)."""

    alternative: ir.Alternative
    words: dict[str, str] = field(default_factory=dict)
    conflicts: frozenset[str] = frozenset()
    """Keys of candidates that forbid this alternative where the rule it is offered for forbids its write."""


@dataclass(frozen=True)
class Checked:
    """A candidate that holds: real calls it allows and forbids (arguments of its tool)."""

    candidate: Candidate
    allowed: tuple[dict[str, Any], ...]
    forbidden: tuple[dict[str, Any], ...]


def label(name: str) -> str:
    return name.replace("_", " ").strip()


def thing(table: str) -> str:
    return singular(label(table))


def _sql_text(value: Any) -> str:
    return "'" + value.replace("'", "''") + "'" if isinstance(value, str) else repr(value)


def _round(x: float, digits: int) -> float | int:
    """``x`` rounded to ``digits`` significant digits (an integer when it is one: 566 is 600 or 570, 6.24 is 6 or
    6.2)."""
    if x == 0:
        return 0
    r = round(x, digits - 1 - int(f"{abs(x):e}".split("e")[1]))
    return int(r) if float(r).is_integer() else r


def _threshold(values: list[float]) -> float | int | None:
    """A round number (two significant digits, else one) some of ``values`` are above and some are not, near the
    upper quartile (else the median, the 90th percentile, the lower quartile): 570, not the 566 that a quantile of
    the seeded amounts happens to be (seen on a project billing domain, 2026-11-28). A rule in prose states its own
    number, which the rule takes where it holds (:func:`pipeline.stages.policy.house_rules.at_stated`)."""
    vals = sorted(values)
    for q in (0.75, 0.5, 0.9, 0.25):
        for digits in (2, 1):
            x = _round(vals[min(len(vals) - 1, int(len(vals) * q))], digits)
            if any(v > x for v in vals) and any(v <= x for v in vals):
                return x
    return None


def number_text(x: float | int) -> str:
    """A number as a rule states it: an integer without a decimal point ("1200", not "1200.0")."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def above(x: float | int, integer: bool) -> float | int:
    """The next round number above ``x`` at its last significant digit (1200 -> 1300, 6.2 -> 6.3, 5 -> 6): a value
    a call may state to be just over a threshold."""
    text = number_text(x)
    step = 10.0 ** -len(text.split(".")[1]) if "." in text else 10.0 ** (len(text) - len(text.rstrip("0")))
    y = float(x) + max(step, 1.0 if integer else step)
    return int(y) if integer or y.is_integer() else round(y, 6)


def _slug(*parts: Any) -> str:
    text = "_".join(re.sub(r"[^A-Za-z0-9]+", "_", str(p)).strip("_") for p in parts if str(p))
    return (text if re.match(r"^[A-Za-z_]", text) else "r_" + text)[:64].rstrip("_") or "rule"


def _updates(tool: ir.Tool) -> Iterator[exp.Update]:
    """The UPDATE statements of ``tool``'s write steps (none the parser cannot read)."""
    for step in tool.steps:
        try:
            tree = sqlglot.parse_one(step.sql, read="sqlite") if step.kind == "write" else None
        except Exception:  # noqa: BLE001 - a statement the parser cannot read sets nothing known
            continue
        if isinstance(tree, exp.Update):
            yield tree


def updated_columns(env: ir.Environment) -> set[tuple[str, str]]:
    """The (table, column) pairs some write tool's UPDATE sets: what changes over a row's life."""
    return {(tree.this.name, e.left.name) for tool in env.tools for tree in _updates(tool)
            for e in tree.args.get("expressions") or [] if isinstance(e, exp.EQ) and isinstance(e.left, exp.Column)}


def updated_tables(tool: ir.Tool) -> set[str]:
    """The tables ``tool``'s UPDATE statements change."""
    return {tree.this.name for tree in _updates(tool)}


def _tables(sql: str) -> set[str]:
    """The tables a statement names (none when the parser cannot read it)."""
    try:
        return {t.name for t in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Table)}
    except Exception:  # noqa: BLE001 - a statement the parser cannot read names no table known
        return set()


def key_column(c: Column) -> bool:
    """A column that names a row rather than measures it: a primary key (or part of one), a foreign key, or a
    column named as an id (``court_id`` left without its ``REFERENCES`` when the table it named was dropped). No
    threshold, limit or state is proposed on one ("court id cannot be above 12")."""
    return bool(c.pk) or c.ref is not None or id_named(c.name)


class Finder:
    """The candidates of one environment, read from the initial state on ``conn``."""

    def __init__(self, env: ir.Environment, conn: Any) -> None:
        self.env, self.conn = env, conn
        self.sampler = Sampler(conn, env.tables, env.clock, example_rows(env))
        self.infos = self.sampler.infos
        self.updated = updated_columns(env)
        self.personal = {(t.name, c) for t in env.tables for c in t.personal}
        self._rows: lifecycle.Evidence | None = None

    def initial(self, table: str, col: str) -> Any:
        """The state a new row of ``table`` holds in ``col`` (:func:`pipeline.dbmodel.lifecycle.initial_state`: its
        DEFAULT, else the state of the model's example rows made "today", else the state of the clearly youngest
        rows), None when the evidence does not say. A tool that changes the row itself is never forbidden on it
        (:meth:`_on_row`): the row is in it because it was just made, so the rule would freeze every new row where
        it starts ("once a case is open, its status may no longer be changed": no case could ever be worked on).
        Seen 2026-11-30 on an outside support-case build. Another write that only names the row may wait for it to
        move on ("a batch still fermenting cannot fill kegs"): that rule stays a candidate."""
        if self._rows is None:
            self._rows = lifecycle.Evidence(self.env, self.conn, self.infos, analyse(self.env, self.conn, self.infos))
        return lifecycle.initial_state(self._rows, table, col)

    def state_like(self, table: str, c: Column) -> bool:
        """Whether a rule may turn on column ``c`` of ``table``: some tool's UPDATE sets it (a state of the row that
        changes, not a category of what the row is: "fiction books cannot be loaned" is no rule a library has)
        and the LLM did not classify it as a personal characteristic (no rule turns on a person's gender)."""
        return (table, c.name) in self.updated and (table, c.name) not in self.personal

    def own_states(self, tool: ir.Tool) -> set[str]:
        """The keys of ``tool``'s state candidates on a column its own UPDATE sets, one per value the seeded rows
        hold (:meth:`enums`) but the one a new row is made in (:meth:`initial`): a guard against setting a row's
        state when it is already in one ("a member cannot
        return a book already returned"), each value as likely a rule as the first. :func:`proposals` ranks each
        of them as a first (:func:`_firsts`), so the budget of checks does not cut the second value of a status
        after every date and threshold of the tools (the example library's 'returned', 42nd of 50, 2026-11-30)."""
        sets = {(tree.this.name, e.left.name) for tree in _updates(tool) for e in tree.args.get("expressions") or []
                if isinstance(e, exp.EQ) and isinstance(e.left, exp.Column)}
        return {_slug(tool.name, table, c.name, v) for table in {t for t, _ in sets} if table in self.infos
                for c, held in self.enums(table) if (table, c.name) in sets for v in held
                if v != self.initial(table, c.name)}

    def column(self, table: str, col: str) -> Column | None:
        return self.sampler.cols.get((table, col))

    def columns(self, table: str) -> list[Column]:
        return [c for (t, _), c in self.sampler.cols.items() if t == table]

    def values(self, table: str, col: str, limit: int = PROBE_ROWS) -> list[Any]:
        return [r[0] for r in self.conn.execute(f"SELECT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL "
                                                f"ORDER BY rowid LIMIT {limit}")]

    def dated(self, table: str, col: str) -> bool:
        vals = self.values(table, col, 20)
        return bool(vals) and all(isinstance(v, str) and _DATE.match(v) for v in vals)

    def numeric(self, c: Column) -> bool:
        """A number column a threshold can be set on: not a key, not a reference, not listed."""
        return c.type.upper() in ("INTEGER", "REAL", "INT") and not key_column(c) and c.enum is None

    def enums(self, table: str) -> list[tuple[Column, list[Any]]]:
        """CHECK-listed columns of ``table`` (not keys nor references) that are states (:meth:`state_like`) and whose
        seeded rows hold at least two of the listed values."""
        out = []
        for c in self.columns(table):
            if c.enum and not key_column(c) and self.state_like(table, c):
                held = [v for v in c.enum if self.conn.execute(
                    f"SELECT 1 FROM {qi(table)} WHERE {qi(c.name)} = ? LIMIT 1", (v,)).fetchone()]
                if len(held) >= 2:
                    out.append((c, held))
        # a column some tool updates (a status: it changes) first, then listed text before listed numbers
        return sorted(out, key=lambda e: ((table, e[0].name) not in self.updated,
                                          not all(isinstance(v, str) for v in e[1])))

    def frozen(self, table: str) -> list[tuple[Column, list[Any]]]:
        """CHECK-listed columns of ``table`` (not keys, references nor personal characteristics) that no tool's UPDATE
        sets and whose seeded rows hold at least two of the listed values: a row's state the tools never move (an
        order's status, 'open' or 'closed', on a pharmacy whose only update sets an order's quantity). Each value
        makes a frozen-state candidate on a tool that updates the row itself (:meth:`_on_row`: "the quantity of a
        closed order may no longer be changed"); nothing in the structure tells such a state from a category of
        what the row is (a book's genre), so one is used only where the LLM's own prose rule names its value
        (:func:`pipeline.stages.policy.house_rules.ground`), never by code's pick (``words['frozen']``)."""
        out = []
        for c in self.columns(table):
            if c.enum and not key_column(c) and (table, c.name) not in self.updated \
                    and (table, c.name) not in self.personal:
                held = [v for v in c.enum if self.conn.execute(
                    f"SELECT 1 FROM {qi(table)} WHERE {qi(c.name)} = ? LIMIT 1", (v,)).fetchone()]
                if len(held) >= 2:
                    out.append((c, held))
        return sorted(out, key=lambda e: not all(isinstance(v, str) for v in e[1]))

    def kin(self, table: str, col: str) -> str:
        """The other columns of ``table`` that measure it (not keys), as labels joined by commas: the words a rule's
        message on ``col`` must not rest on alone (:func:`pipeline.stages.policy.house_rules.unsaid`: "loan date"
        does not say "due date")."""
        return ",".join(label(c.name) for c in self.columns(table) if c.name != col and not key_column(c))

    def subject(self, tool: ir.Tool, p: ir.Param) -> tuple[str, str] | None:
        """The (table, column) of the row parameter ``p`` names: a key or UNIQUE column it is compared with, or
        the parent key of a foreign key it writes."""
        uses = [u for u in self.sampler.uses(tool).get(p.name, []) if u.column is not None and u.direct]
        src = self.sampler.source(tool, p.name)
        if not uses or src is None or p.enum:
            return None
        first = self.column(*uses[0].column)  # type: ignore[misc]
        if uses[0].role == "value" and (first is None or first.ref is None):
            return None  # a plain value of the row written, not a row named
        table, col = src[0], src[1]
        if col.pk or (table, col.name) in self.sampler.unique:
            return table, col.name
        return None

    def written(self, tool: ir.Tool, p: ir.Param) -> tuple[str, Column] | None:
        """The column parameter ``p`` is written into as a whole (not a key, not a reference)."""
        for u in self.sampler.uses(tool).get(p.name, []):
            if u.role == "value" and u.direct and u.column is not None:
                c = self.column(*u.column)
                if c is not None and not key_column(c) and (u.column not in self.sampler.unique):
                    return u.column[0], c
        return None

    def about(self, c: Candidate) -> set[str]:
        """The tables candidate ``c`` is about: those its tool writes, those its condition reads, and the table of
        the row its probed parameter names (a cap on a book's loans is about the book too)."""
        tool = self.env.tool(c.tool)
        out = {t for s in tool.steps if s.kind == "write" for t in _tables(s.sql)} | _tables(c.condition)
        prm = next((q for q in tool.params if q.name == c.probe), None)
        if prm is not None and (subj := self.subject(tool, prm)) is not None:
            out.add(subj[0])
        return out & {t.name for t in self.env.tables}

    def table_text(self, table: ir.Table) -> str:
        """A table in words, for MiniLM: its name, the columns that measure it (not keys) and its description."""
        cols = ", ".join(label(c.name) for c in self.columns(table.name) if not key_column(c))
        return f"{label(table.name)}: {cols}" + (f". {table.description.strip()}" if table.description.strip() else "")

    # ------------------------------------------------------------------ the candidates of one tool

    def of_tool(self, tool: ir.Tool) -> Iterator[Candidate]:
        """The candidates of ``tool``, each with the action it governs in its words (``action``: the tool's
        description to its first ``;``, as code's wording of a rule names it)."""
        action = tool.description.strip().split(";")[0].strip().rstrip(".").strip() or label(tool.name)
        for c in self._of_tool(tool):
            yield replace(c, words={**c.words, "action": action[:1].upper() + action[1:]})

    def _of_tool(self, tool: ir.Tool) -> Iterator[Candidate]:
        for p in tool.params:
            subj = self.subject(tool, p)
            if subj is not None:
                yield from self._on_row(tool, p, *subj)
            elif (got := self.written(tool, p)) is not None:
                yield from self._on_value(tool, p, *got)
        yield from self._linked(tool)

    def _linked(self, tool: ir.Tool) -> Iterator[Candidate]:
        """A write that names two rows (two parameters, each a row of its own table: a patient and a medication)
        forbidden when a row of another table already links the same two (``linked``: an allergy of that patient to
        that medication). The link table is one the tool does not write, with a foreign key to each of the two
        tables. Its probe is the first row's parameter; the argument sets tried include the seeded links (``tried``,
        the Sampler's first set with the pair of a link row), so a call the condition forbids is among them.

        Nothing reads meaning into the link: which one a business refuses on is the LLM's prose to say (it grounds
        only where the prose names the link table, :func:`pipeline.stages.policy.house_rules.may_ground`). Seen
        2026-11-30 on the pharmacy of the committed example: "A prescription cannot be filled if the patient's
        allergies do not match the medication." grounded in nothing (no candidate read the allergies) and a task
        prescribed a patient the drug they had just been recorded as allergic to."""
        if tool.kind != "write":
            return
        named: dict[str, tuple[str, str]] = {}  # table -> (parameter, key) of each row the tool names
        for p in tool.params:
            subj = self.subject(tool, p)
            if subj is not None and subj[0] not in named:
                named[subj[0]] = (p.name, subj[1])
        if len(named) < 2:
            return
        written = {t for s in tool.steps if s.kind == "write" for t in _tables(s.sql)}
        order = [p.name for p in tool.params]
        for link in sorted(self.infos):
            if link in written or link in named:
                continue
            fks: dict[str, str] = {}  # parent table -> the link's column that references it (one per parent)
            for col, parent, pcol in self.infos[link].foreign_keys:
                if parent in named and parent not in fks and (pcol is None or pcol == named[parent][1]):
                    fks[parent] = col
            for a, b in itertools.combinations(sorted(fks, key=lambda t: order.index(named[t][0])), 2):
                (pa, ka), (pb, _kb) = named[a], named[b]
                pairs = self.conn.execute(f"SELECT {qi(fks[a])}, {qi(fks[b])} FROM {qi(link)} WHERE {qi(fks[a])} IS "
                                          f"NOT NULL AND {qi(fks[b])} IS NOT NULL ORDER BY rowid LIMIT {PROBES}"
                                          ).fetchall()
                if not pairs:
                    continue
                base = self.sampler.arguments(tool, 1, past_examples=True)[0]
                yield Candidate(
                    _slug(tool.name, link, "linked"), "precondition", tool.name,
                    f"SELECT 1 FROM {qi(link)} WHERE {qi(link)}.{qi(fks[a])} = :{pa} AND {qi(link)}.{qi(fks[b])} = :{pb}",
                    pa, tuple(self.values(a, ka)),
                    {"section": "linked", "first": thing(a), "second": thing(b), "label": label(link),
                     "items": label(link), "thing": thing(a), "kin": ""},
                    tried=tuple({**base, pa: x, pb: y} for x, y in pairs))

    def _on_row(self, tool: ir.Tool, p: ir.Param, table: str, key: str) -> Iterator[Candidate]:
        keys = tuple(self.values(table, key))
        where = f"{qi(table)}.{qi(key)} = :{p.name}"
        base = {"thing": thing(table)}
        changes_row = table in updated_tables(tool)
        for c, held in self.enums(table):
            for v in held:
                if changes_row and v == self.initial(table, c.name):
                    continue
                yield Candidate(_slug(tool.name, table, c.name, v), "state", tool.name,
                                f"SELECT 1 FROM {qi(table)} WHERE {where} AND {qi(c.name)} = {_sql_text(v)}",
                                p.name, keys, {**base, "section": "state", "label": label(c.name), "value": str(v)})
        if changes_row:  # the tool changes the row itself: a state it never moves may freeze it
            for c, held in self.frozen(table):
                for v in held:
                    if v == self.initial(table, c.name):
                        continue
                    yield Candidate(_slug(tool.name, table, c.name, v), "state", tool.name,
                                    f"SELECT 1 FROM {qi(table)} WHERE {where} AND {qi(c.name)} = {_sql_text(v)}",
                                    p.name, keys, {**base, "section": "state", "label": label(c.name),
                                                   "value": str(v), "frozen": "1"})
        for col, parent, pcol in self.infos[table].foreign_keys:
            pkey = pcol or (self.infos[parent].key[0] if parent in self.infos else "")
            if parent not in self.infos or not pkey:
                continue
            for c, held in self.enums(parent):
                for v in held:
                    yield Candidate(
                        _slug(tool.name, parent, c.name, v), "state", tool.name,
                        f"SELECT 1 FROM {qi(table)} JOIN {qi(parent)} ON {qi(parent)}.{qi(pkey)} = "
                        f"{qi(table)}.{qi(col)} WHERE {where} AND {qi(parent)}.{qi(c.name)} = {_sql_text(v)}",
                        p.name, keys, {**base, "section": "parent_state", "owner": thing(parent),
                                       "label": label(c.name), "value": str(v)})
        yield from self._limits(tool, p, table, key, keys)
        for c in self.columns(table):
            if self.numeric(c) and (table, c.name) not in self.sampler.unique and self.state_like(table, c):
                nums = [v for v in self.values(table, c.name) if isinstance(v, int | float)]
                x = _threshold(nums) if nums else None
                if x is not None:
                    parts = (tool.name, table, c.name, "over", NUMBER)
                    form = f"SELECT 1 FROM {qi(table)} WHERE {where} AND {qi(c.name)} > {NUMBER}"
                    yield Candidate("", "approval", tool.name, "", p.name, keys,
                                    {**base, "section": "row_over", "label": label(c.name), "rows": table,
                                     "measured": c.name, "kin": self.kin(table, c.name)},
                                    form=(parts, form)).at(x, probe=False)
            elif c.type.upper() == "TEXT" and not key_column(c) and c.enum is None \
                    and self.dated(table, c.name):
                for op, section in (("<", "row_past"), (">", "row_future")):
                    yield Candidate(_slug(tool.name, table, c.name, section), "precondition", tool.name,
                                    f"SELECT 1 FROM {qi(table)} WHERE {where} AND {qi(c.name)} {op} :today", p.name,
                                    keys, {**base, "section": section, "label": label(c.name),
                                           "kin": self.kin(table, c.name)})

    def _limits(self, tool: ir.Tool, p: ir.Param, parent: str, key: str, keys: tuple[Any, ...]) -> Iterator[Candidate]:
        """A cap on the children a create adds to the row ``p`` names."""
        uses = [u for u in self.sampler.uses(tool).get(p.name, []) if u.role == "value" and u.column is not None]
        if tool.kind != "write" or not uses:
            return
        child, fk = uses[0].column  # type: ignore[misc]
        if child == parent or not any(c == fk and pp == parent for c, pp, _ in self.infos[child].foreign_keys):
            return
        # the other tables its items belong to ("5 books" counts the loans of a member)
        others = ",".join(label(pp) for _c, pp, _k in self.infos[child].foreign_keys if pp != parent)
        filters: list[tuple[str, str, Any]] = [("", "", None)]
        filters += [(f" AND {qi(c.name)} = {_sql_text(v)}", c.name, v) for c, held in self.enums(child) for v in held]
        for extra, col, v in filters:
            counts = [r[0] for r in self.conn.execute(
                f"SELECT (SELECT COUNT(*) FROM {qi(child)} WHERE {qi(child)}.{qi(fk)} = {qi(parent)}.{qi(key)}{extra}) "
                f"FROM {qi(parent)} ORDER BY rowid LIMIT {PROBE_ROWS}")]
            if not counts or max(counts) == min(counts) or max(counts) < 1:
                continue
            # what the fullest seeded row holds (every row, not the PROBE_ROWS counted above): the rows obey it
            most = self.conn.execute(
                f"SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM {qi(child)} WHERE {qi(fk)} IS NOT NULL"
                f"{extra} GROUP BY {qi(fk)})").fetchone()[0]
            cap = int(max(max(counts), most))
            words = {"section": "limit_where" if col else "limit", "thing": thing(parent), "items": label(child),
                     "label": label(col), "which": str(v), "table": child, "column": fk, "where": extra,
                     "parent": parent, "parent_key": key, "others": others}
            form = f"SELECT 1 WHERE (SELECT COUNT(*) FROM {qi(child)} WHERE {qi(fk)} = :{p.name}{extra}) >= {NUMBER}"
            parts = (tool.name, child, "max", NUMBER, col, v if col else "")
            yield Candidate("", "limit", tool.name, "", p.name, keys, words, form=(parts, form)).at(cap, probe=False)

    def _on_value(self, tool: ir.Tool, p: ir.Param, table: str, c: Column) -> Iterator[Candidate]:
        if (table, c.name) in self.personal:
            return
        if p.type in ("integer", "number") and self.numeric(c):
            nums = [v for v in self.values(table, c.name) if isinstance(v, int | float)]
            x = _threshold(nums) if nums else None
            if x is not None:
                yield Candidate("", "approval", tool.name, "", p.name, tuple(sorted(set(nums))),
                                {"section": "value_over", "label": label(c.name), "table": table, "column": c.name,
                                 "kin": self.kin(table, c.name)},
                                form=((tool.name, p.name, "over", NUMBER), f"SELECT 1 WHERE :{p.name} > {NUMBER}")
                                ).at(x, probe=False)
        elif p.type == "string" and self.dated(table, c.name):
            today = dt.date.fromisoformat(self.env.clock[:10])
            dates = {str(v) for v in self.values(table, c.name)}
            dates |= {(today + dt.timedelta(days=d)).isoformat() for d in (-7, 7)}
            yield Candidate(_slug(tool.name, p.name, "past"), "precondition", tool.name,
                            f"SELECT 1 WHERE :{p.name} < :today", p.name, tuple(sorted(dates)),
                            {"section": "value_past", "label": label(c.name), "kin": self.kin(table, c.name)})


    # ------------------------------------------------------------------ compliant alternatives

    def options(self, tool: ir.Tool) -> Iterator[Option]:
        """Other write tools called on the row ``tool`` names, with the rest of their parameters fixed to values of
        a CHECK list or an enum (each combination, at most :data:`OPTION_SETS` per tool): what a clerk could offer
        instead of ``tool`` ("put the permit on hold"). A tool with a required parameter that is neither is no
        option (its value is not the policy's to fix)."""
        rows = {p.name: s for p in tool.params if (s := self.subject(tool, p)) is not None}
        for other in sorted(self.env.tools, key=lambda t: t.name):
            if other.kind != "write" or other.name == tool.name:
                continue
            same: dict[str, str] = {}
            choices: list[tuple[str, list[Any], str, str | None]] = []  # (param, values, label, table written)
            for q in other.params:
                subj = self.subject(other, q)
                named = next((name for name, s in rows.items() if subj is not None and s == subj), None)
                if named is not None and q.name not in same:
                    same[q.name] = named
                    continue
                into = self.written(other, q)
                values: list[Any] = list(q.enum or []) or list((into[1].enum if into is not None else None) or [])
                if values:
                    choices.append((q.name, values, label(into[1].name if into else q.name),
                                    into[0] if into else None))
                elif q.required:
                    break
            else:
                if not same or not choices:
                    continue
                subject = rows[next(iter(same.values()))][0]
                for combo in itertools.islice(itertools.product(*(c[1] for c in choices)), OPTION_SETS):
                    fixed = {c[0]: v for c, v in zip(choices, combo, strict=True)}
                    name, _, lab, table = choices[0]
                    words = {"section": "instead_set" if table == subject else "instead", "thing": thing(subject),
                             "label": lab, "value": str(fixed[name]).replace("_", " "),
                             "action": other.description.strip().rstrip(".")}
                    yield Option(ir.Alternative(tool=other.name, same=same, fixed=fixed, value=fixed[name]), words)


def _firsts(found: list[Candidate], own: Collection[str] = ()) -> list[Candidate]:
    """``found`` with the first candidate of each (template, column, parameter) before any second one; a state
    candidate whose key is in ``own`` (a value of a column its own tool sets, :meth:`Finder.own_states`) ranks as a
    first whatever its value: 'returned' as well as 'pending' on the tool that sets a loan's status."""
    seen: dict[tuple[str, ...], int] = {}
    rank = []
    for c in found:
        shape: tuple[str, ...] = (c.words.get("section", ""), c.words.get("label", ""), c.probe)
        if c.words.get("section") == "state" and c.key in own:
            shape = (*shape, c.key)
        seen[shape] = seen.get(shape, -1) + 1
        rank.append(seen[shape])
    return [c for _, c in sorted(zip(rank, found, strict=True), key=lambda e: e[0])]


def propose(env: ir.Environment, conn: Any) -> list[Candidate]:
    """Every candidate of ``env`` (initial state on ``conn``), at most ``CHECK_MAX``, the write tools in turn."""
    return proposals(env, conn)[0]


def proposals(env: ir.Environment, conn: Any) -> tuple[list[Candidate], list[Candidate]]:
    """The candidates :func:`propose` checks, and those past ``CHECK_MAX`` that it leaves unchecked (the policy stage
    says which: the example library's only rule, a returned loan frozen, was candidate 41 of 50 once the tools stage
    kept three more tools, and it vanished from the report)."""
    finder = Finder(env, conn)
    tools = sorted((t for t in env.tools if t.kind == "write"), key=lambda t: t.name)
    found = [list(finder.of_tool(t)) for t in tools]
    per_tool = [_firsts([c for c in cs if c.words.get("section") != "linked"], finder.own_states(t))
                for cs, t in zip(found, tools, strict=True)]
    # a link (:meth:`Finder._linked`) after every other candidate: it takes only the checks the others leave (on
    # an older pharmacy fixture two links pushed a listed state of a medication past the cap)
    per_tool.append([c for cs in found for c in cs if c.words.get("section") == "linked"])
    out: list[Candidate] = []
    left: list[Candidate] = []
    seen: set[str] = set()
    for group in (per_tool[:-1], per_tool[-1:]):
        for i in range(max(map(len, group), default=0)):
            for cands in group:
                if i < len(cands) and cands[i].condition + cands[i].tool not in seen:
                    seen.add(cands[i].condition + cands[i].tool)
                    (out if len(out) < CHECK_MAX else left).append(cands[i])
    return out, left


# ------------------------------------------------------------------ the check on real calls


def example_rows(env: ir.Environment) -> dict[str, int]:
    """Per table, its first rows the LLM wrote as examples (``ir.RowPlan.examples``) where code made more: the calls
    a rule is checked on and recorded with (a rule-bound task's request names their rows) are drawn from the others.
    The committed pharmacy of 2026-11-30 recorded patient 1, medication 1 and quantity 0.5 (the first
    prescription's), and both its compound tasks asked for a fill of quantity 0.5, which only the examples hold."""
    return {s.table: s.plan.examples for s in env.seed if s.plan is not None and 0 < s.plan.examples < len(s.rows)}


def _binding(tool: ir.Tool, args: dict[str, Any], clock: str) -> dict[str, Any]:
    return {**{p.name: args.get(p.name) for p in tool.params}, "now": clock, "today": clock[:10]}


def _spread(items: list[Any], k: int) -> list[Any]:
    if len(items) <= k:
        return items
    return [items[i * (len(items) - 1) // (k - 1)] for i in range(k)] if k > 1 else items[:1]


def argument_sets(c: Candidate, tool: ir.Tool, sampler: Sampler, conn: Any, clock: str) -> list[dict[str, Any]]:
    """The Sampler's argument sets for the tool, and its first one with ``c.probe`` set to seeded values the
    condition holds for and values it does not (``PROBES`` of each, spread over the table); then ``c.tried``."""
    sets = sampler.arguments(tool, 3, past_examples=True)
    base = sets[0]
    hit: list[Any] = []
    miss: list[Any] = []
    for v in c.values:
        args = {**base, c.probe: v}
        try:
            (hit if conn.execute(c.condition, _binding(tool, args, clock)).fetchone() else miss).append(v)
        except Exception:  # noqa: BLE001 - a condition SQLite refuses is reported by the static check
            break
    hits = _spread(hit, PROBES)
    probes = [{**base, c.probe: v} for v in hits + _spread(miss, PROBES)]
    # a row the condition holds for, with each other listed value of the tool's own parameters: a state guard's
    # forbidden call is one that moves the row out of its state (setting the state it is in again changes nothing)
    listed = [p for p in tool.params if p.enum and p.name != c.probe]
    probes += [{**base, c.probe: v, p.name: x} for v in hits for p in listed for x in p.enum or ()
               if x != base.get(p.name)]
    every = probes + sets + [dict(a) for a in c.tried]
    return [s for i, s in enumerate(every) if s not in every[:i]]


def check(env: ir.Environment, candidates: list[Candidate]) -> tuple[list[Checked], list[ir.Rejection]]:
    """The candidates that hold on real calls (see the module docstring), and why each other one is dropped."""
    kept: list[Checked] = []
    dropped: list[ir.Rejection] = []
    tools = served_tools(env)
    with EnvInstance(env) as base, EnvInstance(env) as live:
        sampler = Sampler(base.conn, env.tables, env.clock, example_rows(env))
        watch = Watch(live)
        for c in candidates:
            tool = tools[c.tool]
            rule = {"condition": c.condition, "message": f"rule {c.key}", "tools": [c.tool]}
            guarded = policy.guarded_tools([tool], [rule])[0]
            problems = checks.check_tool(base.conn, guarded)
            if problems:
                dropped.append(_drop(c, "its condition is not a sound read: " + "; ".join(problems[:3]), 0))
                continue
            allowed: list[dict[str, Any]] = []
            forbidden: list[dict[str, Any]] = []
            sets = argument_sets(c, env.tool(c.tool), sampler, base.conn, env.clock)
            for args in sets:
                live.reset()
                res = live.call(c.tool, args)
                if not res.get("ok") or not watch.changes():
                    continue  # not a call that works: it says nothing about the rule
                live.reset()
                ruled = engine.run_tool(live.conn, guarded, args, now=env.clock)
                if ruled.get("ok"):
                    allowed.append(args)
                elif ruled.get("kind") == "guard" and ruled.get("error") == rule["message"]:
                    forbidden.append(args)
            live.reset()
            if allowed and forbidden:
                kept.append(Checked(c, tuple(allowed), tuple(forbidden)))
            else:
                side = "forbids" if not forbidden else "allows"
                dropped.append(_drop(c, f"no real call of {c.tool} that works is one it {side} "
                                        f"({len(sets)} argument sets from the seeded rows tried, "
                                        f"{len(allowed)} allowed, {len(forbidden)} forbidden)"
                                        + (_unmet(c, env.tool(c.tool), sets, base.conn, env.clock)
                                           if not forbidden else ""), len(sets)))
    return kept, dropped


def _unmet(c: Candidate, tool: ir.Tool, sets: list[dict[str, Any]], conn: Any, clock: str) -> str:
    """Why a candidate forbade no call, when it is that no call tried meets its condition on the seeded rows (no
    medication has expired, no loan is returned yet: the rule may be real, the seed holds no row it applies to),
    else "". Said, not silent: a precondition the domain has ("no order for an expired medication") is then
    dropped for the seed's sake, not the rule's."""
    for args in sets:
        try:
            if conn.execute(c.condition, _binding(tool, args, clock)).fetchone():
                return ""
        except Exception:  # noqa: BLE001 - a condition SQLite refuses is reported by the static check
            return ""
    return ": none of them meets its condition on the seeded rows (the seed holds no row the rule applies to)"


def _drop(c: Candidate, reason: str, tried: int) -> ir.Rejection:
    return ir.Rejection(stage="policy", item=c.key, reason=f"rule dropped: {reason}",
                        evidence={"tool": c.tool, "condition": c.condition, "kind": c.kind, "calls": tried})


# ------------------------------------------------------------------ compliant alternatives, checked


def alternatives(env: ir.Environment, checked: list[Checked]) -> dict[str, list[Option]]:
    """Per candidate of ``checked`` (by key), the options (:meth:`Finder.options`) that hold as its alternative:
    called instead of each of its forbidden calls (on the same row, on the initial state) the option works, and it
    changes something for at least one of them. Each carries the keys of the candidates of ``checked`` that would
    forbid it on one of those rows (``conflicts``: a policy keeping one of them cannot offer it). At most
    :data:`OPTIONS_MAX` per candidate, other tools before other values of one tool; none without conflicts
    before one with."""
    out: dict[str, list[Option]] = {}
    with EnvInstance(env) as base, EnvInstance(env) as live:
        finder = Finder(env, base.conn)
        watch = Watch(live)
        governing: dict[str, list[Candidate]] = {}
        for c in checked:
            governing.setdefault(c.candidate.tool, []).append(c.candidate)
        for c in checked:
            found: list[Option] = []
            for opt in finder.options(env.tool(c.candidate.tool)):
                conflicts = _holds(env, opt.alternative, c, governing.get(opt.alternative.tool, []), base.conn,
                                   watch)
                if conflicts is not None:
                    found.append(replace(opt, conflicts=conflicts))
            live.reset()
            found.sort(key=lambda o: bool(o.conflicts))
            if found:
                out[c.candidate.key] = _spread_tools(found)[:OPTIONS_MAX]
    return out


def _spread_tools(options: list[Option]) -> list[Option]:
    """``options`` with the first of each tool before any tool's second (otherwise in their order)."""
    seen: dict[str, int] = {}
    rank = []
    for o in options:
        seen[o.alternative.tool] = seen.get(o.alternative.tool, -1) + 1
        rank.append(seen[o.alternative.tool])
    return [o for _, o in sorted(zip(rank, options, strict=True), key=lambda e: e[0])]


def offered_conflicts(env: ir.Environment, alt: ir.Alternative, c: Checked, rules: list[Candidate]
                      ) -> frozenset[str] | None:
    """Whether ``alt`` still holds as ``c``'s alternative, on fresh instances of ``env`` (:func:`_holds`): the keys of
    ``rules`` that forbid it instead of one of ``c``'s forbidden calls, or None when it fails there or changes
    nothing on any of them."""
    with EnvInstance(env) as base, EnvInstance(env) as live:
        return _holds(env, alt, c, rules, base.conn, Watch(live))


def _holds(env: ir.Environment, alt: ir.Alternative, c: Checked, rules: list[Candidate], conn: Any,
           watch: Watch) -> frozenset[str] | None:
    """The keys of ``rules`` that forbid ``alt`` instead of one of ``c``'s forbidden calls, or None when ``alt``
    fails there (a missing argument, an error) or changes nothing on any of them."""
    tool = env.tool(alt.tool)
    changed = False
    conflicts: set[str] = set()
    for args in c.forbidden:
        call = alt.call(args)
        if any(v is None for v in call.arguments.values()):
            return None
        binding = _binding(tool, call.arguments, env.clock)
        for r in rules:
            try:
                if conn.execute(r.condition, binding).fetchone():
                    conflicts.add(r.key)
            except Exception:  # noqa: BLE001 - a condition that cannot be read on these arguments forbids it
                conflicts.add(r.key)
        watch.inst.reset()
        res = watch.inst.call(alt.tool, dict(call.arguments))
        if not res.get("ok"):
            return None
        changed = changed or bool(watch.changes())
    return frozenset(conflicts) if changed else None


def broken_by_rows(conn: Any, c: Candidate) -> int:
    """How many seeded rows a candidate would have forbidden writing (on the initial state on ``conn``): rows of the
    column a threshold on the request's own value is on with a value above it, the children of a row past a cap
    (``limit``, ``limit_where``: the children counted past the cap). 0 for a state or a date (a row's state, or a
    date passing, is no write forbidden) and for a threshold on a row's state (it forbids a write on the row, not
    the row)."""
    w = c.words
    table, column, x = w.get("table"), w.get("column"), c.number
    if not table or not column or x is None:
        return 0
    if w.get("section") == "value_over":
        return int(conn.execute(f"SELECT COUNT(*) FROM {qi(table)} WHERE {qi(column)} > ?", (x,)).fetchone()[0])
    if w.get("section") in ("limit", "limit_where"):
        counts = (f"SELECT COUNT(*) AS n FROM {qi(table)} WHERE {qi(column)} IS NOT NULL{w.get('where', '')} "
                  f"GROUP BY {qi(column)}")
        return int(conn.execute(f"SELECT COALESCE(SUM(n - ?), 0) FROM ({counts}) WHERE n > ?", (x, x)).fetchone()[0])
    return 0


def most_held(conn: Any, c: Candidate) -> int:
    """The most items a cap (``limit``, ``limit_where``) counts that one seeded row it groups by holds, on the initial
    state on ``conn`` (over every row, the model's own example rows among them); 0 for any other candidate."""
    w = c.words
    if w.get("section") not in ("limit", "limit_where") or not w.get("table") or not w.get("column"):
        return 0
    counts = (f"SELECT COUNT(*) AS n FROM {qi(w['table'])} WHERE {qi(w['column'])} IS NOT NULL{w.get('where', '')} "
              f"GROUP BY {qi(w['column'])}")
    return int(conn.execute(f"SELECT COALESCE(MAX(n), 0) FROM ({counts})").fetchone()[0])


def usual_calls(conn: Any, c: Candidate) -> tuple[int, int]:
    """(forbidden, of): how many of the calls drawn from the seeded rows a threshold or a cap forbids, on the
    initial state on ``conn``: a cap, a call adding a child to each seeded row it groups by (forbidden where that row
    already has the cap's count); a threshold on the request's own value, each seeded value of its column asked for
    again; a threshold on a row's number, a call on each seeded row. (0, 0) for a state or a date, whose share of
    forbidden calls is the seed's state, not a number the rule chose."""
    w, x = c.words, c.number
    section = w.get("section", "")
    if x is None:
        return 0, 0
    if section in ("limit", "limit_where") and w.get("parent") and w.get("parent_key"):
        per = (f"(SELECT COUNT(*) FROM {qi(w['table'])} AS c WHERE c.{qi(w['column'])} = "
               f"p.{qi(w['parent_key'])}{w.get('where', '')})")
        row = conn.execute(f"SELECT COALESCE(SUM({per} >= ?), 0), COUNT(*) FROM {qi(w['parent'])} AS p",
                           (x,)).fetchone()
        return int(row[0]), int(row[1])
    table, column = ((w.get("table"), w.get("column")) if section == "value_over"
                     else (w.get("rows"), w.get("measured")))
    if section not in ("value_over", "row_over") or not table or not column:
        return 0, 0
    row = conn.execute(f"SELECT COALESCE(SUM({qi(column)} > ?), 0), COUNT({qi(column)}) FROM {qi(table)}",
                       (x,)).fetchone()
    return int(row[0]), int(row[1])
