"""envfoundry task runtime: fresh databases, tool calls and verifier scoring for exported task banks.

Copied verbatim (with ``engine.py`` beside it) into every exported artefact — the verifiers
package, the OpenEnv server, the veRL tool module — which run in a trainer's Python where
envfoundry is not installed. So this file uses only the standard library and plain dicts.

A *bundle* is a directory holding ``env.json`` (the environment IR), ``initial.db`` and
``tasks.jsonl`` (task records). ``Bundle.fresh_db()`` gives every rollout its own in-memory copy
of the initial database; ``Bundle.call`` runs a tool through the engine; ``Bundle.score``
decides a task's verifier on the rollout's final database with the same semantics as
``verify.evaluate``:

1. each assertion's query returns its ``expect`` (the single cell of a 1x1 result, else the list
   of row lists; a query error fails the assertion);
2. every table outside ``mutable_tables`` is unchanged from the initial state (rows keyed by
   primary key, or rowid when the table has none; values compared with their SQLite types);
3. when the verifier has an ``answer``, the agent's final text states every item of it.

The reward is 1.0 when all hold, else 0.0; with ``partial=True`` it is the share of those checks
that hold (each assertion, the unchanged-tables constraint, the answer).
"""

import base64
import json
import math
import re
import sqlite3
from pathlib import Path

try:  # inside an exported package, engine.py sits beside this file
    from . import engine
except ImportError:  # inside envfoundry itself
    from pipeline.runtime import engine

RUNTIME_VERSION = 1
ANSWER_SEP = "; "
YES = {"yes", "true", "y"}
NO = {"no", "false", "n"}
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_WORD = re.compile(r"[a-z]+")


# ---------------------------------------------------------------- values and snapshots


def jsonable(value):
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def query_value(conn, sql):
    """The value of a query as assertions see it: a 1x1 result's cell, else a list of row lists."""
    rows = conn.execute(sql).fetchall()
    if len(rows) == 1 and len(rows[0]) == 1:
        return jsonable(rows[0][0])
    return [[jsonable(v) for v in r] for r in rows]


def _qi(name):
    return '"' + name.replace('"', '""') + '"'


def table_keys(conn):
    """{table: key columns}: the primary key, or ``None`` for tables keyed by rowid."""
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    out = {}
    for name in names:
        cols = conn.execute(f"PRAGMA table_info({_qi(name)})").fetchall()
        pk = [c[1] for c in sorted((c for c in cols if c[5]), key=lambda c: c[5])]
        out[name] = ([c[1] for c in cols], pk or None)
    return out


def snapshot(conn, keys=None):
    """Every row of every table, keyed: ``{table: {key tuple: {column: value}}}``."""
    keys = keys if keys is not None else table_keys(conn)
    out = {}
    for name, (columns, pk) in keys.items():
        extra = ", rowid" if pk is None else ""
        rows = {}
        for r in conn.execute(f"SELECT *{extra} FROM {_qi(name)}").fetchall():
            row = dict(zip(columns, r[: len(columns)], strict=False))
            key = (r[-1],) if pk is None else tuple(row[k] for k in pk)
            rows[key] = row
        out[name] = rows
    return out


def _row_differs(a, b):
    return any(a.get(c) != b.get(c) or type(a.get(c)) is not type(b.get(c)) for c in set(a) | set(b))


def changed_tables(before, after, tables):
    """The tables among ``tables`` whose rows differ between two snapshots."""
    out = []
    for t in sorted(tables):
        old, new = before.get(t, {}), after.get(t, {})
        if set(old) != set(new) or any(_row_differs(old[k], new[k]) for k in old):
            out.append(t)
    return out


# ---------------------------------------------------------------- answers


def _norm(text):
    text = text.casefold().replace("\u2019", "'")
    text = re.sub(r"[\"'`\u201c\u201d]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def answer_matches(expected, given):
    """Whether ``given`` states every item of ``expected`` (items separated by ``"; "``).

    Numbers match numerically anywhere in the text; yes/no items match their synonyms as words;
    other items match as case-insensitive substrings (quotes ignored).
    """
    if given is None:
        return False
    g = _norm(given)
    if not g:
        return False
    numbers = [float(n) for n in _NUM.findall(g.replace(",", ""))]
    words = set(_WORD.findall(g))
    for item in (s.strip() for s in expected.split(ANSWER_SEP)):
        if not item:
            continue
        e = _norm(item)
        num = _number(e)
        if num is not None and _NUM.fullmatch(e.replace(",", "")):
            if not any(abs(n - num) < 1e-6 for n in numbers):
                return False
        elif e in YES or e in NO:
            want, other = (YES, NO) if e in YES else (NO, YES)
            if not (words & want) or (words & other):
                return False
        elif e not in g:
            return False
    return True


# ---------------------------------------------------------------- verifier


def evaluate(verifier, conn, initial=None, answer=None):
    """Decide ``verifier`` (a dict) on ``conn``: {"passed", "checks", "assertions", "failures"}.

    ``initial`` is the snapshot of the initial database (enables the unchanged-tables constraint).
    ``checks`` lists every check's outcome in order: assertions, then the constraint (when
    ``initial`` is given), then the answer (when the verifier has one).
    """
    failures, held = [], []
    for i, a in enumerate(verifier.get("assertions") or [], 1):
        label = a.get("description") or a.get("sql")
        try:
            got = query_value(conn, a["sql"])
        except sqlite3.Error as exc:
            held.append(False)
            failures.append(f"assertion {i} ({label}) errored: {exc}")
            continue
        ok = got == a.get("expect")
        held.append(ok)
        if not ok:
            failures.append(f"assertion {i} ({label}): expected {a.get('expect')!r}, got {got!r}"[:300])
    checks = list(held)
    if initial is not None:
        frozen = set(initial) - set(verifier.get("mutable_tables") or [])
        changed = changed_tables(initial, snapshot(conn), frozen)
        checks.append(not changed)
        if changed:
            failures.append(f"tables outside mutable_tables changed: {', '.join(changed)}")
    expected = verifier.get("answer")
    if expected is not None:
        ok = answer_matches(expected, answer)
        checks.append(ok)
        if not ok:
            failures.append(f"answer {answer!r} does not state the expected answer")
    return {"passed": not failures, "checks": checks, "assertions": held, "failures": failures}


def reward(evaluation, partial=False):
    """1.0 when the verifier passed, else 0.0; with ``partial`` the share of checks that held."""
    if evaluation["passed"]:
        return 1.0
    if not partial or not evaluation["checks"]:
        return 0.0
    return sum(1 for c in evaluation["checks"] if c) / len(evaluation["checks"])


# ---------------------------------------------------------------- databases


def dump_db(conn):
    """The whole database as text (base64 of SQLite's serialization): state that can travel."""
    return base64.b64encode(conn.serialize()).decode("ascii")


def load_db(text):
    """A fresh in-memory connection holding a database produced by ``dump_db``."""
    conn = engine.connect(":memory:")
    conn.deserialize(base64.b64decode(text.encode("ascii")))
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def render_result(out):
    """What the agent reads for a tool outcome: the JSON result, or ``Error: <message>``."""
    if out.get("ok"):
        return json.dumps(out.get("result"), ensure_ascii=False, sort_keys=False)
    return "Error: " + str(out.get("error"))


class BundleError(Exception):
    pass


class Bundle:
    """One environment's exported data: its IR, initial database and tasks."""

    def __init__(self, root):
        self.root = Path(root)
        env_path = self.root / "env.json"
        try:
            self.env = json.loads(env_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"{env_path}: cannot read the environment: {exc}") from exc
        self.initial_path = self.root / "initial.db"
        if not self.initial_path.is_file():
            raise BundleError(f"{self.initial_path}: missing initial database")
        self.clock = self.env.get("clock") or "2026-01-15T09:00:00"
        self.tools = {t["name"]: t for t in self.env.get("tools") or []}
        self.tasks = {}
        tasks_path = self.root / "tasks.jsonl"
        if tasks_path.is_file():
            for lineno, line in enumerate(tasks_path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    task = json.loads(line)
                    self.tasks[task["task_id"]] = task
                except (ValueError, KeyError) as exc:
                    raise BundleError(f"{tasks_path}:{lineno}: invalid task record: {exc}") from exc
        self._initial_snapshot = None

    def task(self, task_id):
        try:
            return self.tasks[task_id]
        except KeyError:
            raise BundleError(
                f"unknown task_id {task_id!r} (this bundle has {len(self.tasks)} tasks)"
            ) from None

    def fresh_db(self):
        """A new in-memory copy of the initial database (one per rollout)."""
        src = sqlite3.connect(f"file:{self.initial_path}?mode=ro", uri=True)
        try:
            conn = engine.connect(":memory:")
            src.backup(conn)
        finally:
            src.close()
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def initial_snapshot(self):
        if self._initial_snapshot is None:
            conn = self.fresh_db()
            try:
                self._initial_snapshot = snapshot(conn)
            finally:
                conn.close()
        return self._initial_snapshot

    def call(self, conn, name, arguments):
        """Run tool ``name``; the engine's outcome dict (never raises)."""
        tool = self.tools.get(name)
        if tool is None:
            return engine.failure("not_found", f"unknown tool {name!r} (available: {', '.join(self.tools)})")
        return engine.run_tool(conn, tool, arguments if arguments is not None else {}, now=self.clock)

    def evaluate(self, task, conn, answer=None):
        return evaluate(task["verifier"], conn, initial=self.initial_snapshot(), answer=answer)

    def score(self, task, conn, answer=None, partial=False):
        """The task's reward on ``conn``'s state (and the agent's final ``answer``)."""
        return reward(self.evaluate(task, conn, answer), partial)

    def replay(self, calls):
        """A fresh database with ``calls`` ([{"tool", "arguments"}]) applied; (conn, outcomes)."""
        conn = self.fresh_db()
        outcomes = [self.call(conn, c.get("tool"), c.get("arguments") or {}) for c in calls]
        return conn, outcomes
