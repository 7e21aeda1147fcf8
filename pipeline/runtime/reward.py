"""The one reward: does a final database (and a final answer) satisfy a task's verifier.

This module is the single implementation used by the proofs, the tester, ``envfoundry eval`` and every
export. It is **stdlib only** and imports nothing from envfoundry, so exports copy it verbatim and trainers
run it without envfoundry installed.

A verifier (the task record's ``verifier`` object)::

    {"assertions": [{"sql": "SELECT ...", "expect": <json>, "description": "..."},                 # a goal
                    {"sql": "SELECT ...", "expect": <json>, "description": "...", "name": "gate"}], # a gate
     "mutable_tables": ["loans", ...],
     "answer": null | {"type": "number" | "text" | "enum" | "date" | "boolean" | "list",
                       "value": <number | string | bool | [strings]>,
                       "others": [<values the reply must not also name>],
                       "stated": [<values the request itself states; a reply may repeat them>],
                       "tolerance": <number, optional>}}

The value of an assertion's query is its single cell for a 1x1 result, else the list of its rows (each a
list). Rules:

* **gates** never earn credit, they only take it away: an assertion named ``"gate"`` that fails, or a change
  to a table outside ``mutable_tables`` (when the initial snapshot is given), scores 0;
* **goals** earn it: every other assertion and, for questions, the answer. Reward 1.0 when all hold; with
  ``partial=True`` the share that holds; else 0. Derivation keeps no goal that holds on the initial state,
  so doing nothing scores 0.
* **answers** are typed and extracted strictly: the reply must give exactly one value of the expected type
  (one number, one date, ...), words match as whole words ("fiction" is not "non-fiction"), and a reply that
  also names another candidate (``others``) fails, so a pasted list of candidates or of tool output cannot
  pass. Values the request states (``stated``) may be repeated freely.

An assertion without ``name: "gate"`` is a goal. A plain-string ``answer`` (older task banks) is typed by its form:
a number, an ISO date, yes/no, items separated by ``"; "`` (a list), else text.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from typing import Any

Key = tuple
Snapshot = dict  # table -> {key tuple: {column: value}}
Layouts = dict  # table -> (columns, key columns)

ANSWER_TYPES = ("number", "text", "enum", "date", "boolean", "list")


# ---------------------------------------------------------------- state


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def jsonable(value: Any) -> Any:
    """A SQLite value as JSON carries it (blobs as hex, non-finite floats as text)."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def query_value(conn: sqlite3.Connection, sql: str) -> Any:
    """The single cell of a 1x1 result, else the list of row lists."""
    rows = conn.execute(sql).fetchall()
    if len(rows) == 1 and len(rows[0]) == 1:
        return jsonable(rows[0][0])
    return [[jsonable(v) for v in r] for r in rows]


def table_keys(conn: sqlite3.Connection) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``{table: (columns, key columns)}`` of the user tables; the key is the primary key or ``("rowid",)``."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    out = {}
    for name in names:
        cols = conn.execute(f"PRAGMA table_info({_qi(name)})").fetchall()
        pk = tuple(c[1] for c in sorted((c for c in cols if c[5]), key=lambda c: c[5]))
        out[name] = (tuple(c[1] for c in cols), pk or ("rowid",))
    return out


def snapshot(conn: sqlite3.Connection, tables: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None) -> Snapshot:
    """Every row of every user table by key: ``{table: {key: {column: value}}}``."""
    out: Snapshot = {}
    for name, (columns, key) in (tables if tables is not None else table_keys(conn)).items():
        extra = ", rowid" if key == ("rowid",) else ""
        rows = {}
        for r in conn.execute(f"SELECT *{extra} FROM {_qi(name)}").fetchall():
            row = dict(zip(columns, r[: len(columns)], strict=True))
            rows[(r[-1],) if extra else tuple(row[k] for k in key)] = row
        out[name] = rows
    return out


# What may write a table: SQLite asks the authorizer about every table a statement (its triggers and
# foreign-key actions included) may insert into, update, delete from, drop or alter when it prepares it.
_WRITE_ACTIONS = {sqlite3.SQLITE_INSERT: 1, sqlite3.SQLITE_UPDATE: 1, sqlite3.SQLITE_DELETE: 1,
                  sqlite3.SQLITE_DROP_TABLE: 1, sqlite3.SQLITE_DROP_TEMP_TABLE: 1, sqlite3.SQLITE_ALTER_TABLE: 2}


class WriteLog:
    """An authorizer recording every table a statement prepared on the connection may write, then
    deciding as ``inner`` (the connection's own authorizer, if any) does. SQLite authorizes what a
    statement's triggers and foreign-key actions write when it prepares the statement, and a statement
    runs only once prepared, so ``tables`` holds every table whose rows may have changed since
    :func:`track_writes` installed it (more, never fewer: a refused or rolled-back write is listed too)."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner
        self.tables: set[str] = set()

    def __call__(self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        which = _WRITE_ACTIONS.get(action)
        if which is not None:
            name = arg1 if which == 1 else arg2
            self.tables.add((name or "").lower())
        return self.inner(action, arg1, arg2, db, source) if self.inner is not None else sqlite3.SQLITE_OK


def track_writes(conn: sqlite3.Connection, inner: Any = None) -> WriteLog:
    """Install a :class:`WriteLog` on ``conn`` (in front of ``inner``, the authorizer it had) before it
    prepares any statement that writes, and return it: its ``tables`` go to :func:`score` as ``written``."""
    log = WriteLog(inner)
    conn.set_authorizer(log)
    return log


def _typed(row: dict) -> tuple:
    return tuple(sorted((k, type(v).__name__, v) for k, v in row.items()))


def changed_tables(initial: Snapshot, now: Snapshot, tables: list[str]) -> list[str]:
    """Which of ``tables`` differ between two snapshots (type-sensitive: 1 is not 1.0)."""
    out = []
    for t in tables:
        a, b = initial.get(t, {}), now.get(t, {})
        if set(a) != set(b) or any(_typed(a[k]) != _typed(b[k]) for k in a):
            out.append(t)
    return out


# ---------------------------------------------------------------- scoring


@dataclass(frozen=True)
class Score:
    reward: float
    passed: bool
    gates_ok: bool
    goals: tuple[bool, ...]
    """Per goal assertion, then the answer check last when the task has an answer."""
    failures: tuple[str, ...] = field(default_factory=tuple)

    def summary(self) -> str:
        return "passed" if self.passed else "; ".join(self.failures)

    def to_json(self) -> dict[str, Any]:
        return {"reward": self.reward, "passed": self.passed, "gates_ok": self.gates_ok,
                "goals": list(self.goals), "failures": list(self.failures)}


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same(got: Any, expect: Any) -> bool:
    if isinstance(got, float) and isinstance(expect, int | float) and not isinstance(expect, bool):
        return abs(got - expect) < 1e-9
    return got == expect


def frozen_moved(verifier: dict, conn: sqlite3.Connection, initial: Snapshot, *, layouts: Layouts | None = None,
                 written: set[str] | None = None) -> list[str]:
    """The tables outside ``mutable_tables`` whose rows differ from ``initial``. Only those tables are read,
    and with ``written`` (a :class:`WriteLog`'s tables) only those of them a statement may have written:
    a table no statement could write holds its initial rows. ``layouts`` (:func:`table_keys` of the same
    schema, e.g. cached per template) saves reading the schema."""
    frozen = sorted(set(initial) - set(verifier.get("mutable_tables") or []))
    if written is not None:
        frozen = [t for t in frozen if t.lower() in written]
    if not frozen:
        return []
    layouts = layouts if layouts is not None else table_keys(conn)
    now: Snapshot = {}
    for t in frozen:
        if t in layouts:
            try:
                now.update(snapshot(conn, {t: layouts[t]}))
            except sqlite3.Error:  # the table is gone: its rows are
                pass
    return changed_tables(initial, now, frozen)


@dataclass(frozen=True)
class Checks:
    """What the database says of a verifier: per assertion ``(gate, number, what, held, problem)`` in order, and
    the tables outside ``mutable_tables`` that changed (None when no initial snapshot was given). With the
    answer, it decides the :class:`Score` (:func:`score_checks`). It depends on the database's content only, so
    a caller that knows two databases hold the same content may reuse one's checks for the other (the
    exports' task runtime does, for episodes that made the same writes from the same state)."""

    assertions: tuple[tuple[bool, int, str, bool, str | None], ...]
    moved: tuple[str, ...] | None = None


def db_checks(verifier: dict, conn: sqlite3.Connection, *, initial: Snapshot | None = None,
              layouts: Layouts | None = None, written: set[str] | None = None,
              known: dict[int, tuple[bool, str | None]] | None = None) -> Checks:
    """Run the verifier's assertions on ``conn`` and, with ``initial``, find the tables outside
    ``mutable_tables`` that changed (:func:`frozen_moved`; ``layouts`` and ``written`` only make that cheaper).
    ``known``: assertion number (from 1) -> ``(held, problem)`` already known for this database (e.g. on the
    initial state, for a deterministic query reading only tables no statement wrote); those are not run."""
    out = []
    for i, a in enumerate(verifier.get("assertions") or [], 1):
        what = a.get("description") or a.get("sql", "")
        if known and i in known:
            out.append((a.get("name") == "gate", i, what, *known[i]))
            continue
        try:
            got = query_value(conn, a["sql"])
            held = _same(got, a.get("expect"))
            problem = None if held else f"expected {_short(a.get('expect'))}, got {_short(got)}"
        except sqlite3.Error as e:
            held, problem = False, f"errored: {e}"
        out.append((a.get("name") == "gate", i, what, held, problem))
    moved = None
    if initial is not None:
        moved = tuple(frozen_moved(verifier, conn, initial, layouts=layouts, written=written))
    return Checks(tuple(out), moved)


def score_checks(verifier: dict, checks: Checks, *, answer: str | None = None, partial: bool = False) -> Score:
    """The :class:`Score` of ``checks`` (:func:`db_checks` of the verifier on a database) and the final answer."""
    failures: list[str] = []
    goals: list[bool] = []
    gates_ok = True
    for gate, i, what, held, problem in checks.assertions:
        if gate:
            if not held:
                gates_ok = False
                failures.append(f"gate {i} ({what}) {problem}")
        else:
            goals.append(held)
            if not held:
                failures.append(f"goal {i} ({what}) {problem}")
    if checks.moved:
        gates_ok = False
        failures.append(f"tables outside mutable_tables changed: {', '.join(checks.moved)}")
    if verifier.get("answer") is not None:
        ok, why = check_answer(verifier["answer"], answer)
        goals.append(ok)
        if not ok:
            failures.append(f"answer: {why}")
    met = sum(goals)
    passed = gates_ok and bool(goals) and met == len(goals)
    if not gates_ok or not goals:
        reward = 0.0
    elif passed:
        reward = 1.0
    else:
        reward = met / len(goals) if partial else 0.0
    if not goals:
        failures.append("the verifier has no goal: nothing can earn the reward")
    return Score(reward, passed, gates_ok, tuple(goals), tuple(failures))


def score(verifier: dict, conn: sqlite3.Connection, *, initial: Snapshot | None = None,
          answer: str | None = None, partial: bool = False, layouts: Layouts | None = None,
          written: set[str] | None = None) -> Score:
    """Score a final database (``conn``) and final answer against ``verifier`` (see the module docstring).
    ``layouts`` and ``written`` only make the check of tables outside ``mutable_tables`` cheaper
    (:func:`frozen_moved`); the score is the same."""
    checks = db_checks(verifier, conn, initial=initial, layouts=layouts, written=written)
    return score_checks(verifier, checks, answer=answer, partial=partial)


# ---------------------------------------------------------------- answers

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_TOKEN_EDGE = "\"'`*_()[]{}<>.,;:!?\u00bf\u00a1"
_NUMBER = re.compile(r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_CURRENCY = "$\u20ac\u00a3\u00a5\u20b9%"
_MONTHS = {m: i for i, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
    ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
    ("dec", "december")), 1) for m in names}
_PASTED = re.compile(r'[{,]\s*"[^"\n]{1,64}"\s*:\s*["\d\[{tfn-]')
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)")
_DMY_DATE = re.compile(r"(?<!\d)(\d{1,2})[./-](\d{1,2})[./-](\d{4})(?!\d)")
_NAMED_DATE = re.compile(r"(?<![\w])(?:(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]{3,9})\.?,?\s+(\d{4})|([a-z]{3,9})\.?\s+(\d{1,2})"
                         r"(?:st|nd|rd|th)?,?\s+(\d{4}))(?![\w])")


def normalize_text(text: str) -> str:
    """Case-, quote-, accent-form- and whitespace-insensitive form used for word matching."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    text = re.sub(r"[*`]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _words_pattern(value: str) -> re.Pattern[str]:
    v = re.escape(normalize_text(value).strip(_TOKEN_EDGE + " "))
    v = v.replace(r"\ ", r"\s+")
    return re.compile(rf"(?<![\w-]){v}(?![\w-])")


def mentions(text: str, value: str) -> bool:
    """Whether ``value`` appears in ``text`` as whole words (``fiction`` is not in ``non-fiction``)."""
    v = normalize_text(str(value)).strip(_TOKEN_EDGE + " ")
    return bool(v) and bool(_words_pattern(v).search(normalize_text(text)))


def _without(text: str, values: list[str]) -> str:
    for v in sorted((normalize_text(str(x)) for x in values), key=len, reverse=True):
        if v.strip(_TOKEN_EDGE + " "):
            text = _words_pattern(v).sub(" ", text)
    return text


def _to_number(token: str) -> float | None:
    t = token.strip(_TOKEN_EDGE + _CURRENCY).replace("\u2212", "-")
    if not _NUMBER.fullmatch(t):
        return None
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return None


def numbers_in(text: str) -> list[tuple[float, int]]:
    """Numbers stated as whole tokens (``M-102`` and ``2026-01-05`` are not numbers): (value, decimals)."""
    out = []
    for token in normalize_text(text).split():
        n = _to_number(token)
        if n is not None:
            core = token.strip(_TOKEN_EDGE + _CURRENCY)
            out.append((n, len(core.split(".", 1)[1]) if "." in core else 0))
    return out


def dates_in(text: str) -> list[str]:
    """Dates in common formats, as ISO ``YYYY-MM-DD`` (ambiguous day/month orders are left out)."""
    t = normalize_text(text)
    found: list[str] = []

    def add(y: int, m: int, d: int) -> None:
        try:
            found.append(date(y, m, d).isoformat())
        except ValueError:
            pass

    for m in _ISO_DATE.finditer(t):
        add(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in _DMY_DATE.finditer(t):
        a, b, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if m.group(0)[2:3] == "." or a > 12 or a == b:  # 05.01.2026 is day-first; 13/01 can only be day-first
            add(y, b, a)
        elif b > 12:
            add(y, a, b)
    for m in _NAMED_DATE.finditer(t):
        day, mon, year = (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(5), m.group(4), m.group(6))
        if mon in _MONTHS:
            add(int(year), _MONTHS[mon], int(day))
    return found


def expected_answer(expected: Any) -> dict:
    """The typed form of an expected answer (a plain string is a text answer)."""
    if isinstance(expected, dict):
        if expected.get("type") not in ANSWER_TYPES:
            raise ValueError(f"answer type {expected.get('type')!r} is not one of {ANSWER_TYPES}")
        return expected
    if isinstance(expected, bool):
        return {"type": "boolean", "value": expected}
    if isinstance(expected, int | float):
        return {"type": "number", "value": expected}
    text = str(expected).strip()
    if "; " in text:  # an older plain answer listing one item per row
        return {"type": "list", "value": [x.strip() for x in text.split("; ") if x.strip()]}
    if _NUMBER.fullmatch(text):
        return {"type": "number", "value": float(text.replace(",", ""))}
    if text.casefold() in ("yes", "no", "true", "false"):
        return {"type": "boolean", "value": text.casefold() in ("yes", "true")}
    if _ISO_DATE.fullmatch(text):
        return {"type": "date", "value": text}
    return {"type": "text", "value": text}


def _number_ok(want: float, got: float, decimals: int, tolerance: float | None) -> bool:
    if tolerance is not None and abs(got - want) <= tolerance:
        return True
    if float(want).is_integer():
        return got == want
    want_decimals = len(repr(float(want)).split(".")[1].rstrip("0"))
    if decimals < min(2, want_decimals):
        return False
    return abs(got - want) <= 0.5 * 10 ** (-decimals) + 1e-12


def check_answer(expected: Any, given: str | None) -> tuple[bool, str]:
    """Whether the reply ``given`` gives exactly the expected typed value: ``(ok, reason)``."""
    spec = expected_answer(expected)
    if given is None or not normalize_text(given):
        return False, "no answer was given"
    kind, value = spec["type"], spec.get("value")
    if value is None:
        return False, "the expected answer has no value"
    stated = [str(s) for s in spec.get("stated") or []]
    others = [str(o) for o in spec.get("others") or [] if str(o).strip()]
    text = normalize_text(given)
    if _PASTED.search(given):
        return False, "the reply pastes tool output (a JSON object) instead of giving the answer"
    if kind == "number":
        stated_nums = {n for s in stated for n, _ in numbers_in(s)}
        nums = [(n, d) for n, d in numbers_in(text) if n not in stated_nums]
        distinct = {n for n, _ in nums}
        if not distinct:
            return False, f"the reply states no number (expected {value})"
        if len(distinct) > 1:
            return False, f"the reply states several numbers ({', '.join(_fmt(n) for n in sorted(distinct))}), not one answer"
        n, d = nums[0]
        if not _number_ok(float(value), n, max(d for m, d in nums if m == n), spec.get("tolerance")):
            return False, f"the reply's number {_fmt(n)} is not {value}"
        return True, "the number matches"
    if kind == "date":
        stated_dates = {d for s in stated for d in dates_in(s)}
        found = {d for d in dates_in(text) if d not in stated_dates}
        want = dates_in(str(value)) or [str(value)[:10]]
        if not found:
            return False, f"the reply states no date (expected {value})"
        if len(found) > 1:
            return False, f"the reply states several dates ({', '.join(sorted(found))}), not one answer"
        return (True, "the date matches") if found == {want[0]} else (False, f"the reply's date {found.pop()} is not {want[0]}")
    if kind == "boolean":
        words = set(re.findall(r"\w+", text)) - {w for s in stated for w in re.findall(r"\w+", normalize_text(s))}
        yes, no = bool(words & {"yes", "true"}), bool(words & {"no", "false"})
        if yes == no:
            return False, "the reply does not answer yes or no (exactly one of them)"
        return (True, "yes/no matches") if yes == bool(value) else (False, f"the reply says {'yes' if yes else 'no'}")
    items = [str(v) for v in value] if kind == "list" else [str(value)]
    missing = [i for i in items if not _words_pattern(i).search(text)]
    if missing:
        return False, f"the reply does not name {', '.join(repr(m) for m in missing)}"
    longer = [o for o in others if any(mentions(o, i) for i in items)]  # "Science Fiction" when "Fiction" is expected
    rest, rest_long = _without(text, items + stated), _without(text, stated)
    named = [o for o in others if o not in items and _words_pattern(o).search(rest_long if o in longer else rest)]
    if named:
        return False, f"the reply also names other candidates ({', '.join(repr(o) for o in named[:3])})"
    return True, "the answer matches"


def _fmt(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else repr(n)
