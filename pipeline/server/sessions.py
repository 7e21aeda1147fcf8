"""Sessions of every generated server.py: one database per caller, so rollouts never see each other.

Embedded into ``server.py`` by ``pipeline.render`` (without the import block below, whose names the
engine above provides); standard library and the engine only.

* The *default session* is the ``--db`` file: HTTP requests without a session header use it, and
  every successful call is committed to the file (``synchronous = OFF``), as trainers and the
  contract checker expect.
* Every other session is an in-memory copy of the state the server started with (the SQLite backup
  API, well under a millisecond for a few thousand rows), keyed by ``X-Session-Id: <id>`` on HTTP
  (``x:<id>``) or by the MCP session (``mcp:<Mcp-Session-Id>``; HTTP requests may send that header
  too, to reach an MCP session's state). It is created on first use, reset by ``reset``, freed by
  ``close``, by the end of its MCP session, or after ``idle_timeout`` seconds without a call.
* At most ``max_sessions`` copies exist at once (default 1,024, sized for a training step's rollouts;
  ``--max-sessions`` or ``ENVFOUNDRY_MAX_SESSIONS``); one more is refused (``SessionsFull``, HTTP 429, with how
  to raise the cap) until one closes or expires. ``measure`` weighs one session at start-up (the resident memory
  a few fresh copies add), so the server can say what the cap costs.

Each session has its own lock: calls in one session run one at a time, sessions run in parallel
(on the server's small pool of worker threads, which queues a session's calls before they take a worker).
"""

# envfoundry:engine-import-begin (render drops this block: the engine above defines these names)
from pipeline.runtime.engine import (
    BUSY_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    connect,
    failure,
    re,
    run_tool,
    served_tool,
    threading,
    time,
)

# envfoundry:engine-import-end

SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
DEFAULT_MAX_SESSIONS = 1024
MAX_SESSIONS_VAR = "ENVFOUNDRY_MAX_SESSIONS"
DEFAULT_IDLE_TIMEOUT_S = 1800.0
MEASURE_COPIES = 16


def resident_kib():
    """This process's resident memory in KiB (Linux ``/proc/self/statm``), or None where it cannot be read."""
    import os  # here, not at the top: server.py's own imports (after this section) import os too

    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def database_kib(conn):
    """The pages of the database ``conn`` holds, in KiB (what an in-memory copy of it stores at least)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    return pages * conn.execute("PRAGMA page_size").fetchone()[0] / 1024


def max_sessions_default(environ=None):
    """``ENVFOUNDRY_MAX_SESSIONS`` when set, else ``DEFAULT_MAX_SESSIONS``; ValueError naming the variable when it
    is not a positive integer."""
    import os  # as in resident_kib

    value = (os.environ if environ is None else environ).get(MAX_SESSIONS_VAR, "").strip()
    if not value:
        return DEFAULT_MAX_SESSIONS
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{MAX_SESSIONS_VAR}={value!r} is not a positive integer")
    return int(value)


def raise_cap_hint(max_sessions, session_kib=None):
    """How to raise the cap, and what one session costs when measured."""
    cost = f"; each takes about {session_kib:.0f} KiB" if session_kib else ""
    return (f"start the server with a higher cap: --max-sessions N or {MAX_SESSIONS_VAR}=N (now {max_sessions}"
            f"{cost})")


class SessionsFull(Exception):
    """No room for one more session database."""


class Session:
    def __init__(self, key, conn):
        self.key, self.conn = key, conn
        self.lock = threading.Lock()
        self.last_used = time.monotonic()
        self.closed = False


class Sessions:
    """The default session (the ``--db`` file) and the isolated in-memory sessions."""

    def __init__(self, env, schemas, db_path, max_sessions=DEFAULT_MAX_SESSIONS, idle_timeout=DEFAULT_IDLE_TIMEOUT_S,
                 call_timeout=DEFAULT_TIMEOUT_S, busy_timeout=BUSY_TIMEOUT_S):
        self.env = env
        self.tools = {t["name"]: served_tool(t, schemas.get(t["name"])) for t in env["tools"]}
        self.max_sessions, self.idle_timeout, self.call_timeout = max_sessions, idle_timeout, call_timeout
        conn = connect(db_path, timeout=busy_timeout)
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        self.default = Session(None, conn)
        self.pristine = connect(":memory:")
        conn.backup(self.pristine)
        self.pristine_lock = threading.Lock()
        self.lock = threading.Lock()
        self.open = {}
        self.session_kib = None

    def measure(self, copies=MEASURE_COPIES):
        """What one session costs, in KiB: the resident memory ``copies`` fresh session databases add (measured on
        real copies, then freed), at least the database's own pages; kept as ``session_kib``."""
        floor = database_kib(self.pristine)
        before = resident_kib()
        conns = []
        for _ in range(copies):
            conn = connect(":memory:")
            self._copy_into(conn)
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            conns.append(conn)
        after = resident_kib()
        for conn in conns:
            conn.close()
        grown = (after - before) / copies if before is not None and after is not None else 0.0
        self.session_kib = max(grown, floor)
        return self.session_kib

    def __len__(self):
        return len(self.open)

    def _copy_into(self, conn):
        with self.pristine_lock:
            self.pristine.backup(conn)

    def get(self, key):
        """The session for ``key`` (None: the default session), created on first use."""
        if key is None:
            return self.default
        self.expire()
        with self.lock:
            session = self.open.get(key)
            if session is None:
                if len(self.open) >= self.max_sessions:
                    raise SessionsFull(f"all {self.max_sessions} sessions are in use; close one (POST /close, or end "
                                       f"its MCP session), wait until an idle one expires, or "
                                       f"{raise_cap_hint(self.max_sessions, self.session_kib)}")
                conn = connect(":memory:")
                self._copy_into(conn)
                session = self.open[key] = Session(key, conn)
            session.last_used = time.monotonic()
            return session

    def call(self, key, name, arguments):
        """Run tool ``name`` in the session ``key``: the engine's outcome dict (never raises)."""
        tool = self.tools.get(name)
        if tool is None:
            return failure("not_found", f"unknown tool {name!r} (available: {', '.join(self.tools)})")
        try:
            session = self.get(key)
        except SessionsFull as exc:
            return failure("session", str(exc))
        with session.lock:
            if session.closed:
                return failure("session", "the session was closed while this call waited; start a new one")
            out = run_tool(session.conn, tool, arguments, now=self.env["clock"], timeout=self.call_timeout)
            session.last_used = time.monotonic()
            return out

    def reset(self, key):
        """Put the session ``key`` back in the initial state (creating it if it does not exist)."""
        session = self.get(key)
        with session.lock:
            if session.conn.in_transaction:
                session.conn.execute("ROLLBACK")
            self._copy_into(session.conn)

    def close(self, key):
        """Free the session ``key``; False when there was none."""
        with self.lock:
            session = self.open.pop(key, None)
        if session is None:
            return False
        with session.lock:
            session.closed = True
            session.conn.close()
        return True

    def expire(self):
        """Close the sessions idle for longer than ``idle_timeout``; returns how many."""
        if self.idle_timeout is None:
            return 0
        cutoff = time.monotonic() - self.idle_timeout
        with self.lock:
            stale = [k for k, s in self.open.items() if s.last_used < cutoff and not s.lock.locked()]
        return sum(self.close(k) for k in stale)

    def close_all(self):
        for key in list(self.open):
            self.close(key)
        self.default.conn.close()
        self.pristine.close()
