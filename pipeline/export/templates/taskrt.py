"""envfoundry task runtime: fresh databases, tool calls and scoring for an exported task bank.

Copied verbatim into every exported artefact (the verifiers package, the OpenEnv server, the veRL
tool module), next to two other files copied verbatim: ``engine.py`` (the tool engine) and
``reward.py`` (the one reward implementation, envfoundry's ``verify/reward.py``). All three use only
the standard library and import each other relatively, so the export runs in a trainer's Python
where envfoundry is not installed. This file evaluates nothing itself: scores come from ``reward``.

A *bundle* is a directory holding ``env.json`` (the environment IR), ``initial.db``,
``tasks.jsonl`` (task records) and ``task_info.json`` (per task: ``split``, ``tier``,
``pass_rate``, ...). ``Bundle.fresh_db()`` gives every rollout its own in-memory copy of the
initial database; ``Bundle.call`` runs a tool through the engine; ``Bundle.score`` scores a
rollout's final database (and final reply) with ``reward.score``.
"""

import base64
import json
import sqlite3
import zlib
from pathlib import Path

from . import engine, reward  # type: ignore[attr-defined]  # siblings in the exported package

RUNTIME_VERSION = 2


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
        self._initial_snapshot = None

    def task(self, task_id):
        try:
            return self.tasks[task_id]
        except KeyError:
            raise BundleError(
                f"unknown task_id {task_id!r} in {self.root} (it has {len(self.tasks)} tasks)"
            ) from None

    def task_info(self, task_id):
        """``{"split", "tier", "pass_rate", ...}`` written at export time (empty when absent)."""
        return dict(self.info.get(task_id) or {})

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
                self._initial_snapshot = reward.snapshot(conn)
            finally:
                conn.close()
        return self._initial_snapshot

    def call(self, conn, name, arguments):
        """Run tool ``name``; the engine's outcome dict (never raises)."""
        tool = self.tools.get(name)
        if tool is None:
            return engine.failure("not_found", f"unknown tool {name!r} (available: {', '.join(self.tools)})")
        return engine.run_tool(conn, tool, arguments if arguments is not None else {}, now=self.clock)

    def score(self, task, conn, answer=None, partial=False):
        """``reward.Score`` of the task's verifier on ``conn`` (and the agent's final ``answer``)."""
        return reward.score(
            task["verifier"], conn, initial=self.initial_snapshot(), answer=answer, partial=partial
        )

    def replay(self, calls):
        """A fresh database with ``calls`` ([{"tool", "arguments"}]) applied; (conn, outcomes)."""
        conn = self.fresh_db()
        outcomes = [self.call(conn, c.get("tool"), c.get("arguments") or {}) for c in calls]
        return conn, outcomes

    def check_reference(self, task_id, partial=False):
        """Replay a task's reference solution and score it, the final reply being the one written
        at export time (``task_info.json``'s ``reference_reply``): the ``reward.Score``."""
        task = self.task(task_id)
        conn, outcomes = self.replay(task.get("reference_solution") or [])
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
