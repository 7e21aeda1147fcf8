"""envfoundry task runtime: fresh databases, tool calls and scoring for an exported task bank.

Copied verbatim into every exported artefact (the verifiers package, the OpenEnv server, the veRL
tool module), next to two other files copied verbatim: ``engine.py`` (the tool engine) and
``reward.py`` (the one reward implementation, envfoundry's ``pipeline/runtime/reward.py``). All three use only
the standard library and import each other relatively, so the export runs in a trainer's Python
where envfoundry is not installed. This file evaluates nothing itself: scores come from ``reward``.

A *bundle* is a directory holding ``env.json`` (the environment IR), ``initial.db``,
``tasks.jsonl`` (task records) and ``task_info.json`` (per task: ``split``, ``tier``,
``pass_rate``, ...). ``Bundle.fresh_db()`` gives every rollout its own in-memory copy of the
initial database; an export made with sampled tasks by level also holds ``pool.jsonl`` (their records) and
``pool.json`` (per level its ``task_ids``, per task its info): ``Bundle.pool`` maps each level to its task ids,
``Bundle.pool_task(level, index)`` draws one, and ``task`` / ``task_info`` find pool tasks as bank tasks; ``Bundle.call`` runs a tool through the engine; ``Bundle.score`` scores a
rollout's final database (and final reply) with ``reward.score``.

What a rollout costs is kept small: the initial snapshot and the table layouts are read once per
bundle, and a database from ``fresh_db`` carries a ``reward.WriteLog`` (``conn.writes``), so scoring it
reads only the tables outside the task's ``mutable_tables`` that one of its statements may have
written (a database from ``load_db`` has none: every such table is read). The reward is the same.

A server's ``Session`` also knows what its episode wrote: the successful write calls, in order, from its
initial state. The engine is deterministic (a fixed clock, no ``random()`` nor wall clock: the build checks
reject them), so two episodes that made the same write calls from the same state end on the same database, and
``Bundle.score(..., session=)`` reuses the verifier's checks on it (``reward.db_checks``: its queries' outcomes,
the tables that moved) from an earlier episode of the same task with the same writes: a group of rollouts of one
task that make the same writes (each correct one, and every one that writes nothing) pays for the verifier's
queries once. Any write makes another key; the answer is checked each time. Not reused: an episode whose
transaction SQLite rolled back (its writes replayed), or whose arguments are not plain JSON values, and a
bundle whose tools, schema or verifier SQL name a function that is not a function of the database and the
arguments (``NONDETERMINISTIC``). ``ENVFOUNDRY_REWARD_MEMO`` (default 4096 checks kept, 0: off).
"""

import base64
import json
import os
import re
import sqlite3
import threading
import zlib
from pathlib import Path

from . import engine, reward  # type: ignore[attr-defined]  # siblings in the exported package

RUNTIME_VERSION = 2
# What makes SQL depend on more than the database and the call's arguments: random values, the wall clock
# ('now', CURRENT_*), and the connection's history (changes(), total_changes(), last_insert_rowid()).
NONDETERMINISTIC = re.compile(
    r"\b(?:random|randomblob|changes|total_changes|last_insert_rowid)\s*\(|\bcurrent_(?:date|time|timestamp)\b|'now'",
    re.IGNORECASE)
MEMO_SIZE = int(os.environ.get("ENVFOUNDRY_REWARD_MEMO", "4096") or 0)


def write_key(name, arguments):
    """A write call as a memo key's part: its tool and its arguments as canonical JSON, or None when the
    arguments are not plain JSON values (then the episode's checks are not reused)."""
    def plain(v):
        if v is None or type(v) in (str, int, float, bool):
            return True
        if type(v) is list:
            return all(plain(x) for x in v)
        return type(v) is dict and all(type(k) is str and plain(x) for k, x in v.items())

    args = arguments if arguments is not None else {}
    if not plain(args):
        return None
    return name, json.dumps(args, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def render_result(out):
    """What the agent reads for a tool outcome: the JSON result, or ``Error: <message>``."""
    if out.get("ok"):
        return json.dumps(out.get("result"), ensure_ascii=False, sort_keys=False)
    return "Error: " + str(out.get("error"))


def dump_db(conn):
    """The whole database as text (base64 of zlib-compressed SQLite serialization): state that can
    travel in JSON or a pickle."""
    return base64.b64encode(zlib.compress(conn.serialize(), 6)).decode("ascii")


def load_db(text):
    """A fresh in-memory connection holding a database produced by ``dump_db``."""
    conn = engine.connect(":memory:")
    conn.deserialize(zlib.decompress(base64.b64decode(text.encode("ascii"))))
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Session:
    """One connection for a sequence of episodes (a server's session): each episode runs inside one
    transaction, and ``reset`` puts the initial state back by rolling it back, so nothing is copied.
    Every tool call still behaves as on its own committed database:
    when SQLite rolls back the whole transaction itself (a write stopped by the time limit), the
    episode's successful writes are replayed, leaving what a rollback of the failed call alone leaves.
    ``state``: the initial state the episodes start from (a file of ``states/``, None for ``initial.db``);
    ``reset(state=...)`` with another one copies that state in."""

    def __init__(self, bundle, state=None):
        self.bundle = bundle
        self.state = state
        self.conn = bundle.fresh_db(state)
        self._writes = []
        self._history = []  # write_key of each successful write call of the episode, None: not reusable
        self.conn.execute("BEGIN")

    def reset(self, state=None, switch=False):
        """Back to the initial state (``switch``: to ``state``'s, copied in when it is not the current one)."""
        target = state if switch else self.state
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
            if target != self.state:
                self.bundle.restore(self.conn, target)
        else:  # not expected: put the initial state back by copying it
            self.bundle.restore(self.conn, target)
        self.state = target
        self._writes = []
        self._history = []
        if not engine.CACHED_STATEMENTS:
            # The initial state again: no table differs from it. Every statement is prepared (so its writes
            # logged) again when it next runs, so the log need not carry the past episodes' tables, which
            # would have a reused session's reward read them all again.
            self.conn.writes.tables.clear()
        self.conn.execute("BEGIN")

    def call(self, name, arguments, timeout=engine.DEFAULT_TIMEOUT_S):
        """``Bundle.call`` on this session's database."""
        out = self.bundle.call(self.conn, name, arguments, timeout=timeout)
        if not self.conn.in_transaction:  # SQLite rolled the episode back to its initial state
            self.conn.execute("BEGIN")
            for past in self._writes:
                self.bundle.call(self.conn, *past, timeout=timeout)
            self._history = None  # the same writes, but not reused: nothing proves the replay ended the same
        if out.get("ok") and (self.bundle.tools.get(name) or {}).get("kind") == "write":
            self._writes.append((name, dict(arguments) if isinstance(arguments, dict) else arguments))
            if self._history is not None:
                key = write_key(name, arguments)
                self._history = None if key is None else [*self._history, key]
        return out

    def memo_key(self):
        """(state, the episode's write calls) when the episode's verifier checks may be reused, else None."""
        return None if self._history is None else (self.state, tuple(self._history))

    def close(self):
        self.conn.close()


def resident_kib():
    """This process's resident memory in KiB (Linux ``/proc/self/statm``), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class BundleError(Exception):
    """An exported bundle that cannot be read; the message names the file and line."""


class Bundle:
    """One environment's exported data: its IR, initial database, tasks and their metadata."""

    def __init__(self, root):
        self.root = Path(root)
        env_path = self.root / "env.json"
        try:
            self.env = json.loads(env_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"{env_path}: cannot read the environment: {exc}") from exc
        self.env_id = self.env.get("env_id", self.root.name)
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
                except (ValueError, KeyError, TypeError) as exc:
                    raise BundleError(f"{tasks_path}:{lineno}: invalid task record: {exc}") from exc
        info_path = self.root / "task_info.json"
        self.info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.is_file() else {}
        self.pool_tasks, self.pool, self.pool_manifest = self._read_pool()
        self._snapshots = {}
        self._layouts = None
        self._pristines = {}
        self._pristine_lock = threading.Lock()
        self._memo = {}
        self._memo_lock = threading.Lock()
        self._deterministic = None
        self._verifiers = {}
        self._initial_checks = {}

    def _read_pool(self):
        """The sampled tasks (``pool.jsonl``), ``{level: [task_id, ...]}`` and the manifest (``pool.json``);
        empty when the export has none."""
        path, manifest_path = self.root / "pool.jsonl", self.root / "pool.json"
        if not manifest_path.is_file():
            return {}, {}, {}
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            levels = {int(k): list(v["task_ids"]) for k, v in manifest["levels"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BundleError(f"{manifest_path}: invalid pool manifest: {exc!r}") from exc
        tasks = {}
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                task = json.loads(line)
                tasks[task["task_id"]] = task
            except (ValueError, KeyError, TypeError) as exc:
                raise BundleError(f"{path}:{lineno}: invalid task record: {exc}") from exc
        for level, ids in levels.items():
            missing = [i for i in ids if i not in tasks]
            if missing:
                raise BundleError(f"{manifest_path}: level {level} names task {missing[0]!r}, which {path} lacks")
        return tasks, {k: v for k, v in sorted(levels.items()) if v}, manifest

    def levels(self):
        """The levels that hold sampled tasks, lowest first."""
        return list(self.pool)

    def pool_task(self, level, index):
        """The task id at ``index`` (modulo the pool's size) of ``level``'s pool, in the sampler's order."""
        ids = self.pool.get(level)
        if not ids:
            have = ", ".join(map(str, self.pool)) or "none: exported without --sample-per-level"
            raise BundleError(f"level {level!r} has no sampled tasks in {self.root} (levels with tasks: {have})")
        return ids[index % len(ids)]

    def task(self, task_id):
        found = self.tasks.get(task_id) or self.pool_tasks.get(task_id)
        if found is None:
            raise BundleError(
                f"unknown task_id {task_id!r} in {self.root} (it has {len(self.tasks)} tasks"
                + (f" and {len(self.pool_tasks)} sampled ones)" if self.pool_tasks else ")")
            )
        return found

    def task_info(self, task_id):
        """``{"split", "tier", "pass_rate", ...}`` written at export time (empty when absent); a sampled task's
        also has its ``level`` and ``axes``."""
        return dict(self.info.get(task_id) or (self.pool_manifest.get("info") or {}).get(task_id) or {})

    def state_of(self, task_id):
        """The initial state a task starts from: its ``state`` (a database of ``states/`` stored once by content
        hash, for a task sampled on a perturbed state; ``task_info``), or None for ``initial.db``."""
        return self.task_info(task_id).get("state") or None

    def state_path(self, state=None):
        """The database file of ``state`` (None: ``initial.db``); a name outside the bundle is an error."""
        if state is None:
            return self.initial_path
        path = (self.root / state).resolve()
        if self.root.resolve() not in path.parents or not path.is_file():
            raise BundleError(f"state {state!r}: no such database in {self.root}")
        return path

    def fresh_db(self, state=None):
        """A new in-memory copy of the initial database (of ``state``'s, a file of ``states/``; one per rollout),
        with a ``reward.WriteLog`` as ``conn.writes`` in front of the engine's authorizer (and ``conn.state``, the
        state it was copied from: the writes it logs are relative to that state)."""
        conn = engine.connect(":memory:")
        conn.writes = reward.track_writes(conn, conn.guard)
        self.restore(conn, state)
        return conn

    def restore(self, conn, state=None):
        """Put a database from ``fresh_db`` back in the initial state (``state``'s; a new rollout on the same
        connection: its ``WriteLog`` is kept, and grows, so it still names every table that may differ
        from the initial state)."""
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        with self._pristine_lock:
            pristine = self._pristines.get(state)
            if pristine is None:
                src = sqlite3.connect(f"file:{self.state_path(state)}?mode=ro", uri=True)
                try:
                    pristine = sqlite3.connect(":memory:", check_same_thread=False)
                    src.backup(pristine)
                finally:
                    src.close()
                self._pristines[state] = pristine
            pristine.backup(conn)
        conn.execute("PRAGMA foreign_keys = ON")
        if isinstance(getattr(conn, "writes", None), reward.WriteLog):
            conn.state = state

    def measure_session_kib(self, copies=16):
        """What one server session costs, in KiB: the resident memory ``copies`` fresh ``Session`` objects add
        (each with its own database copy; measured on real ones, then closed), at least the database's own pages."""
        probe = self.fresh_db()
        try:
            floor = probe.execute("PRAGMA page_count").fetchone()[0] * probe.execute("PRAGMA page_size").fetchone()[0]
        finally:
            probe.close()
        before = resident_kib()
        sessions = [Session(self) for _ in range(copies)]
        after = resident_kib()
        for s in sessions:
            s.close()
        grown = (after - before) / copies if before is not None and after is not None else 0.0
        return max(grown, floor / 1024)

    def initial_snapshot(self, state=None):
        """``reward.snapshot`` of the initial database (``state``'s), read once."""
        snap = self._snapshots.get(state)
        if snap is None:
            conn = self.fresh_db(state)
            try:
                if self._layouts is None:
                    self._layouts = reward.table_keys(conn)
                snap = self._snapshots[state] = reward.snapshot(conn, self._layouts)
            finally:
                conn.close()
        return snap

    def layouts(self):
        """``reward.table_keys`` of the initial database (every rollout's database has its schema)."""
        self.initial_snapshot()
        return self._layouts

    def call(self, conn, name, arguments, timeout=engine.DEFAULT_TIMEOUT_S):
        """Run tool ``name`` (stopped after ``timeout`` seconds); the engine's outcome dict (never raises)."""
        tool = self.tools.get(name)
        if tool is None:
            return engine.failure("not_found", f"unknown tool {name!r} (available: {', '.join(self.tools)})")
        return engine.run_tool(conn, tool, arguments if arguments is not None else {}, now=self.clock, timeout=timeout)

    def deterministic(self):
        """Whether the schema (triggers, defaults, views) and every write tool's SQL depend only on the
        database and the call's arguments (no ``NONDETERMINISTIC`` name): then the same write calls from the
        same state end on the same database."""
        if self._deterministic is None:
            conn = self.fresh_db()
            try:
                schema = [r[0] or "" for r in conn.execute("SELECT sql FROM sqlite_master")]
            finally:
                conn.close()
            tools = [str(step.get("sql") or "") for t in self.tools.values() if t.get("kind") == "write"
                     for step in [*(t.get("steps") or []), t.get("returns") or {}] if isinstance(step, dict)]
            self._deterministic = not any(NONDETERMINISTIC.search(text) for text in schema + tools)
        return self._deterministic

    def _reusable(self, verifier):
        """Whether a verifier's checks may be reused (:meth:`deterministic`, and no ``NONDETERMINISTIC`` name in
        its SQL); decided once per verifier."""
        known = self._verifiers.get(id(verifier))
        if known is None or known[0] is not verifier:
            sql = [str(a.get("sql") or "") for a in verifier.get("assertions") or [] if isinstance(a, dict)]
            known = self._verifiers[id(verifier)] = (
                verifier, self.deterministic() and not any(NONDETERMINISTIC.search(q) for q in sql))
        return known[1]

    def initial_checks(self, verifier, state=None):
        """Per assertion number (from 1): ``(tables it reads, held, problem)`` on ``state``'s initial database, for
        each assertion whose query is deterministic (:meth:`_reusable`) and reads only user tables (SQLite's
        authorizer names them when it prepares the query); decided once per verifier and state. Such an
        assertion holds on a rollout's database as on the initial one when none of its tables was written."""
        found = self._initial_checks.get((state, id(verifier)))
        if found is not None and found[0] is verifier:
            return found[1]
        out = {}
        if self._reusable(verifier):
            tables = {t.lower() for t in self.layouts()}
            conn = self.fresh_db(state)
            try:
                for i, a in enumerate(verifier.get("assertions") or [], 1):
                    reads, other = set(), []

                    def collect(action, arg1, arg2, db, source, reads=reads, other=other):
                        if action == sqlite3.SQLITE_READ:
                            reads.add((arg1 or "").lower())
                        elif action not in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE):
                            other.append(action)
                        return sqlite3.SQLITE_OK

                    conn.set_authorizer(collect)
                    try:
                        (_, _, _, held, problem), = reward.db_checks({"assertions": [a]}, conn).assertions
                    finally:
                        conn.set_authorizer(None)
                    if not other and reads <= tables:
                        out[i] = (frozenset(reads), held, problem)
            finally:
                conn.close()
        self._initial_checks[(state, id(verifier))] = (verifier, out)
        return out

    def score(self, task, conn, answer=None, partial=False, session=None):
        """``reward.Score`` of the task's verifier on ``conn`` (and the agent's final ``answer``). With
        ``session`` (whose connection ``conn`` is), the verifier's checks of an earlier episode of the task that
        made the same write calls from the same state are reused (see the module's docstring)."""
        writes = getattr(conn, "writes", None)
        key = session.memo_key() if session is not None and session.conn is conn and MEMO_SIZE > 0 else None
        verifier = task["verifier"]
        if key is not None:
            if not self._reusable(verifier):
                key = None
            else:
                key = (task.get("task_id"), id(verifier), *key)
                checks = self._memo.get(key)
                if checks is not None and checks[0] is verifier:
                    return reward.score_checks(verifier, checks[1], answer=answer, partial=partial)
        state = self.state_of(task.get("task_id"))
        initial = self.initial_snapshot(state)
        written = writes.tables if isinstance(writes, reward.WriteLog) else None
        known = None
        if written is not None and getattr(conn, "state", False) == state:  # the log is relative to this state
            known = {i: (held, problem) for i, (reads, held, problem) in self.initial_checks(verifier, state).items()
                     if not reads & written}
        checks = reward.db_checks(verifier, conn, initial=initial, layouts=self.layouts(), written=written,
                                  known=known)
        if key is not None:
            with self._memo_lock:
                if len(self._memo) >= MEMO_SIZE:
                    self._memo.pop(next(iter(self._memo)))  # the oldest
                self._memo[key] = (verifier, checks)
        return reward.score_checks(verifier, checks, answer=answer, partial=partial)

    def replay(self, calls, state=None):
        """A fresh database (``state``'s) with ``calls`` ([{"tool", "arguments"}]) applied; (conn, outcomes)."""
        conn = self.fresh_db(state)
        outcomes = [self.call(conn, c.get("tool"), c.get("arguments") or {}) for c in calls]
        return conn, outcomes

    def check_reference(self, task_id, partial=False):
        """Replay a task's reference solution and score it, the final reply being the one written
        at export time (``task_info.json``'s ``reference_reply``): the ``reward.Score``."""
        task = self.task(task_id)
        conn, outcomes = self.replay(task.get("reference_solution") or [], self.state_of(task_id))
        try:
            failed = [i for i, o in enumerate(outcomes, 1) if not o.get("ok")]
            reply = self.task_info(task_id).get("reference_reply")
            score = self.score(task, conn, answer=reply, partial=partial)
        finally:
            conn.close()
        if failed:
            return reward.Score(0.0, False, score.gates_ok, score.goals, (
                *score.failures, f"reference calls {failed} failed on replay"))
        return score
