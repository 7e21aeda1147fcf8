"""envfoundry tool engine: the one implementation of tool semantics.

This file is embedded verbatim into every generated ``server.py``, which must run with no other
project file, so it uses only the standard library and works on plain dicts
(``Tool.model_dump(mode="json")``). The in-process runtime (``pipeline.runtime.EnvInstance``)
imports it as a module; a parity test proves both paths agree.

A tool call is ``run_tool(conn, tool, arguments, now=...)``:

1. the arguments are validated against the tool's parameters (strict JSON types: no bool for an
   integer, no ``"3"`` for an integer; enum, minimum/maximum, max_length (``MAX_STRING_LENGTH``
   when a string declares none), a date or date-time format (ISO text only), required; unknown
   arguments rejected). The error names the parameter (and the tool, for a format);
2. the steps run in order inside one savepoint, rolled back on any failure:
   ``query`` binds its first row's columns as ``:<bind>_<col>`` (no row: NULLs, or a ``not_found``
   failure when the step has an ``error``); ``guard`` fails with its ``error`` unless its
   ``must`` (exist / not_exist) holds; ``write`` runs INSERT/UPDATE/DELETE and binds ``:last_id``
   and ``:changes``. ``:now`` and ``:today`` come from the environment clock. Parameters and
   built-ins are never overwritten by a bound column;
3. ``returns`` (``one``: a row object, ``all``: a list of at most ``MAX_ROWS``) or
   ``{"changes": n, "last_id": id}``.

SQLite itself decides what a statement may do: every statement of a tool is prepared under a
``sqlite3`` authorizer (``Guard``), prepared again at every run (engine connections cache no
statements, ``CACHED_STATEMENTS``). Reads (queries, guards, returns) may not write at all: the
authorizer refuses every action of theirs but reading tables and calling functions (no
``PRAGMA query_only`` besides); no statement may read SQLite's internals (``sqlite_master``,
``pragma_*`` functions), run a PRAGMA, attach a file, load an extension or control the
transaction. The authorizer also reports every function a statement calls, which the build-time
checks (``pipeline.runtime.checks``: ``check_tool``, ``check_ddl``) use to reject
non-deterministic SQL (``random()``, the wall clock). Limits: ``timeout`` seconds per call (a progress handler), ``MAX_ROWS`` rows returned,
``MAX_VALUE_BYTES`` per string or blob (``sqlite3`` limits; ``printf``/``format`` are checked
before they run), ``BUSY_TIMEOUT_S`` waiting for a lock held by another connection.

Every outcome is a JSON-able dict: ``{"ok": True, "result": ...}`` or ``{"ok": False, "error":
message, "parameter": name or None, "kind": "validation" | "guard" | "not_found" | "sql" |
"busy"}`` (``busy``: the database stayed locked by another connection; retrying may succeed).
No exception escapes ``run_tool``.
"""

import datetime
import json
import math
import re
import sqlite3
import threading
import time

ENGINE_VERSION = 2
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BUILTINS = ("now", "today", "last_id", "changes")
READ_VERBS = ("SELECT", "WITH", "VALUES")
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")
SAVEPOINT = "envfoundry_tool_call"
DEFAULT_TIMEOUT_S = 10.0
BUSY_TIMEOUT_S = 5.0
# Prepared statements an engine connection keeps: none. A server holds one connection per open session, and
# the statements of one episode's calls took ~30 KiB of it in the cache, while preparing them at each run
# did not make an episode measurably slower (issue 32).
CACHED_STATEMENTS = 0
MAX_ROWS = 1000
MAX_STRING_LENGTH = 10_000
MAX_VALUE_BYTES = 1 << 22

_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
_LITERALS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/", re.S)
_NAMED = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)")
_OTHER_STYLE = re.compile(r"(?<![\w])(\?\d*|[@$][A-Za-z_][A-Za-z0-9_]*)")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ToolFailure(Exception):
    """Raised inside a tool program to stop it; carries the failure dict returned to the caller."""

    def __init__(self, kind, error, parameter=None):
        super().__init__(error)
        self.payload = failure(kind, error, parameter)


def success(result):
    return {"ok": True, "result": result}


def failure(kind, error, parameter=None):
    return {"ok": False, "error": error, "parameter": parameter, "kind": kind}


# ---------------------------------------------------------------- the authorizer

OPEN, READ, WRITE, DDL = "open", "read", "write", "ddl"
# A connection that caches statements (by their text; a cached statement is not authorized again: a plain
# ``sqlite3`` connection given to ``run_tool``) gets each mode's own text, so a statement prepared under one
# mode is never reused under another.
_TAGS = {READ: "\n-- envfoundry:read", WRITE: "\n-- envfoundry:write", DDL: ""}
_WRITES = (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE)
_TABLE_ACTIONS = (sqlite3.SQLITE_READ, *_WRITES)
_ALWAYS_OK = (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE)
_SCHEMA_ACTIONS = {
    getattr(sqlite3, name)
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_")) or name in ("SQLITE_ALTER_TABLE", "SQLITE_REINDEX", "SQLITE_ANALYZE")
}
_DENIED_ACTIONS = {
    sqlite3.SQLITE_PRAGMA: "runs PRAGMA {arg1} (SQLite's internals are off limits to tools)",
    sqlite3.SQLITE_ATTACH: "attaches a database file",
    sqlite3.SQLITE_DETACH: "detaches a database",
    sqlite3.SQLITE_TRANSACTION: "controls the transaction (the engine runs each call in its own)",
    sqlite3.SQLITE_SAVEPOINT: "controls the transaction (the engine runs each call in its own)",
}
DENIED_FUNCTIONS = ("load_extension",)


_SCHEMA_TABLES = ("sqlite_master", "sqlite_temp_master")


class Guard:
    """The ``sqlite3`` authorizer of engine connections.

    ``mode`` decides what a statement being prepared may do: ``open`` allows everything (the
    project's own statements: savepoints, schema set-up, verifier queries); ``read`` and
    ``write`` are tool statements; ``ddl`` is schema DDL under ``check_ddl``. In every mode but
    ``open``: no PRAGMA (statements or ``pragma_*`` functions), no ATTACH/DETACH, no
    ``load_extension``; tool statements may not read SQLite's internal tables, change the schema
    or control the transaction, and reads may not write at all. ``denied`` holds why the last
    statement was refused; ``functions`` every function name prepared since it was cleared;
    ``refused`` the statements refused after preparing (a cached statement is not authorized again).
    Ephemeral b-trees SQLite builds for DISTINCT, ORDER BY, IN, UNION, CTEs or window functions
    are not authorized actions, so every SELECT form passes.
    """

    def __init__(self):
        self.mode = OPEN
        self.denied = []
        self.functions = set()
        self.refused = {}  # statement text -> reason, for statements refused after preparing

    def begin(self, mode):
        self.mode, self.denied = mode, []

    def _deny(self, reason):
        if reason not in self.denied:
            self.denied.append(reason)
        return sqlite3.SQLITE_DENY

    def __call__(self, action, arg1, arg2, dbname, source):
        mode = self.mode
        if mode == OPEN or action in _ALWAYS_OK:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            self.functions.add(name)
            if name in DENIED_FUNCTIONS:
                return self._deny(f"calls {name}(), which is not allowed")
            return sqlite3.SQLITE_OK
        if action in _DENIED_ACTIONS:
            return self._deny(_DENIED_ACTIONS[action].format(arg1=arg1))
        if mode == DDL:
            return sqlite3.SQLITE_OK
        if action in _TABLE_ACTIONS:
            table = (arg1 or "").lower()
            if table.startswith("pragma_"):
                return self._deny(f"runs PRAGMA {table[len('pragma_'):]} (SQLite's internals are off limits to tools)")
            if table.startswith("sqlite_"):
                reason = f"uses SQLite's internal table {arg1} (tools may only use the environment's tables)"
                if action == sqlite3.SQLITE_READ or (action == sqlite3.SQLITE_UPDATE and table in _SCHEMA_TABLES):
                    # SQLite touches its schema table itself while preparing some statements (pragma_*
                    # functions); refusing here would hide the real reason. The value reads as NULL and
                    # the statement is refused once prepared (``_statement``, the checks).
                    if reason not in self.denied:
                        self.denied.append(reason)
                    return sqlite3.SQLITE_IGNORE
                return self._deny(reason)
            if action in _WRITES and mode == READ:
                verb = {sqlite3.SQLITE_INSERT: "inserts into", sqlite3.SQLITE_UPDATE: "updates", sqlite3.SQLITE_DELETE: "deletes from"}[action]
                return self._deny(f"{verb} table {arg1}: a read statement must not modify the database")
            return sqlite3.SQLITE_OK
        if action in _SCHEMA_ACTIONS:
            return self._deny("changes the schema (only INSERT, UPDATE and DELETE may write)")
        return self._deny(f"does something a tool may not do (authorizer action {action})")

    def reason(self):
        """Why the last statement was refused, or None."""
        pragma = [r for r in self.denied if r.startswith("runs PRAGMA")]
        chosen = pragma or self.denied
        return "; ".join(chosen) if chosen else None


class EngineConnection(sqlite3.Connection):
    """A ``sqlite3`` connection that carries its authorizer (``guard``)."""

    guard = None


# ---------------------------------------------------------------- limits


_PRINTF_PROBLEM = threading.local()
_PRINTF_SPEC = re.compile(r"%([-+ #!0,]*)(\*|\d+)?(?:\.(\*|\d+)?)?(?:ll|l)?(.?)", re.S)


def _as_int(value):
    try:
        if isinstance(value, (bytes, str)):
            m = re.match(r"\s*[-+]?\d+", value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
            return int(m.group(0)) if m else 0
        return int(value) if value is not None else 0
    except (ValueError, OverflowError):
        return 0


def _safe_printf(fmt, *args):
    """SQLite's ``printf``/``format`` with a fast refusal of widths and precisions above the value
    limit (SQLite would loop over all of them before noticing, for seconds)."""
    if fmt is None:
        return None
    text = fmt.decode("utf-8", "replace") if isinstance(fmt, bytes) else str(fmt)
    i = 0
    for m in _PRINTF_SPEC.finditer(text):
        if m.group(4) == "%":
            continue
        for size in (m.group(2), m.group(3)):
            if size == "*":
                size, i = (_as_int(args[i]) if i < len(args) else 0), i + 1
            if size is not None and abs(int(size)) > MAX_VALUE_BYTES:
                _PRINTF_PROBLEM.text = (f"printf() width or precision {abs(int(size))} is over the limit of "
                                        f"{MAX_VALUE_BYTES} characters")
                raise ValueError(_PRINTF_PROBLEM.text)
        i += 1
    helper = getattr(_PRINTF_PROBLEM, "conn", None)
    if helper is None:
        helper = _PRINTF_PROBLEM.conn = sqlite3.connect(":memory:", check_same_thread=False)
        helper.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    marks = ", ".join("?" * (len(args) + 1))
    return helper.execute(f"SELECT printf({marks})", (fmt, *args)).fetchone()[0]


def _apply_limits(conn):
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    for name in ("printf", "format"):
        conn.create_function(name, -1, _safe_printf, deterministic=True)


def connect(path=":memory:", timeout=BUSY_TIMEOUT_S):
    """A connection as the engine expects it: autocommit (the engine manages transactions),
    foreign keys enforced, usable from any thread (callers serialise access), the engine's
    authorizer and limits installed, and ``timeout`` seconds of waiting on another connection's
    lock before a call fails as ``busy``."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False,
                           cached_statements=CACHED_STATEMENTS, factory=EngineConnection)
    _apply_limits(conn)
    conn.guard = Guard()
    conn.set_authorizer(conn.guard)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


# ---------------------------------------------------------------- values and messages


def jsonable(value):
    """A SQLite value as JSON: BLOBs become hex strings, non-finite floats become strings."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def display(value):
    """How a value appears inside an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(jsonable(value))


def format_message(template, values):
    """Fill ``{name}`` fields from ``values``; unknown fields are left as they are (never raises)."""

    def field(m):
        name = m.group(1)
        return display(values[name]) if name in values else m.group(0)

    return _FIELD.sub(field, str(template))


def clean(text):
    """``text`` with lone surrogates escaped, so it always encodes as UTF-8."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _short(value, limit=60):
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    text = clean(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def leading_keyword(sql):
    """The first SQL keyword of a statement (after comments and parentheses), upper-cased."""
    m = _LEADING.match(sql or "")
    return m.group(1).upper() if m else ""


def placeholders(sql):
    """Named ``:param`` placeholders in a statement (string literals and comments ignored)."""
    stripped = _LITERALS.sub(" ", sql or "")
    return sorted(set(_NAMED.findall(stripped)))


# ---------------------------------------------------------------- argument validation

_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "an array", dict: "an object"}


def _type_name(value):
    return "null" if value is None else _TYPE_NAMES.get(type(value), type(value).__name__)


# A string parameter bound to a column whose seeded values are all ISO dates (or date-times) has that format
# (``pipeline.runtime.schemas``): its JSON schema says ``"format": "date"`` (or ``"pattern": DATETIME_PATTERN``)
# and the engine refuses any other text, naming the form expected. ASCII digits only, as JSON schema reads them.
DATE_FORMAT, DATETIME_FORMAT = "date", "date-time"
DATE_FORM, DATETIME_FORM = "YYYY-MM-DD", "YYYY-MM-DD HH:MM[:SS]"
DATETIME_PATTERN = ("^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]"
                    "(:[0-5][0-9])?$")
_DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME_TEXT = re.compile(DATETIME_PATTERN[1:-1])


def _format_error(fmt, value):
    """Why ``value`` (a string) is not written in format ``fmt`` (``date`` or ``date-time``), or None."""
    if fmt == DATE_FORMAT:
        if _DATE_TEXT.fullmatch(value):
            try:
                datetime.date.fromisoformat(value)
                return None
            except ValueError:
                return f"not a calendar date: {_short(value)} (expected a date written {DATE_FORM})"
        return f"expected a date written {DATE_FORM}, got {_short(value)}"
    if fmt == DATETIME_FORMAT and not _DATETIME_TEXT.fullmatch(value):
        return f"expected a date and time written {DATETIME_FORM} (or with T between them), got {_short(value)}"
    return None


def check_value(param, value):
    """Check one non-null argument against its parameter spec: (value to bind, error or None)."""
    ptype = param.get("type")
    if ptype == "string":
        if not isinstance(value, str):
            return None, f"expected a string, got {_type_name(value)}: {_short(value)}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None, "not valid Unicode text (it contains a lone surrogate)"
        max_length = param.get("max_length")
        max_length = MAX_STRING_LENGTH if max_length is None else max_length
        if len(value) > max_length:
            return None, f"too long: {len(value)} characters (the maximum is {max_length})"
        problem = _format_error(param.get("format"), value)
        if problem is not None:
            return None, problem
    elif ptype == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return None, f"expected an integer, got {_type_name(value)}: {_short(value)}"
        if not INT64_MIN <= value <= INT64_MAX:
            return None, "out of range for a 64-bit integer"
    elif ptype == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"expected a number, got {_type_name(value)}: {_short(value)}"
        if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
            try:
                value = float(value)
            except OverflowError:
                return None, "too large"
        if isinstance(value, float) and not math.isfinite(value):
            return None, "must be a finite number"
    elif ptype == "boolean":
        if not isinstance(value, bool):
            return None, f"expected a boolean (true/false), got {_type_name(value)}: {_short(value)}"
    else:
        return None, f"unsupported parameter type {ptype!r}"
    enum = param.get("enum")
    if enum is not None and value not in enum:
        return None, f"must be one of {', '.join(_short(e) for e in enum)}; got {_short(value)}"
    minimum, maximum = param.get("minimum"), param.get("maximum")
    if minimum is not None and ptype in ("integer", "number") and value < minimum:
        return None, f"must be >= {_number(minimum)}; got {display(value)}"
    if maximum is not None and ptype in ("integer", "number") and value > maximum:
        return None, f"must be <= {_number(maximum)}; got {display(value)}"
    return value, None


def _number(value):
    return str(int(value)) if isinstance(value, float) and value.is_integer() else display(value)


def validate_arguments(tool, arguments):
    """Validate ``arguments`` for ``tool``: (values for every parameter, None) or (None, failure dict).

    Absent optional parameters (and optional ones given as null) are bound as NULL.
    """
    name = tool.get("name", "?")
    params = tool.get("params") or []
    if not isinstance(arguments, dict):
        return None, failure("validation", f"arguments for tool '{name}' must be a JSON object, got {_type_name(arguments)}")
    known = {p["name"]: p for p in params}
    for key in arguments:
        if key not in known:
            accepted = ", ".join(known) or "none"
            return None, failure("validation", f"unknown argument {_short(key)} for tool '{name}' (accepted: {accepted})", clean(str(key)[:100]))
    values = {}
    for p in params:
        pname = p["name"]
        value = arguments.get(pname)
        if value is None:
            if p.get("required", True):
                what = "missing required argument" if pname not in arguments else "null given for required argument"
                desc = f": {p['description']}" if p.get("description") else ""
                return None, failure("validation", f"{what} '{pname}' ({p.get('type')}{desc})", pname)
            values[pname] = None
            continue
        checked, error = check_value(p, value)
        if error is not None:
            where = f"argument '{pname}' of tool '{name}'" if p.get("format") else f"argument '{pname}'"
            return None, failure("validation", f"{where}: {error}", pname)
        values[pname] = checked
    return values, None


def served_tool(tool, schema):
    """``tool`` with the parameter rules of its published JSON input ``schema`` (``enum``,
    ``minimum``, ``maximum``, ``maxLength``, a date or date-time format), so a server enforces what its
    schemas say."""
    props = (schema or {}).get("properties") or {}
    params = []
    for p in tool.get("params") or []:
        rules = dict(p)
        prop = props.get(p.get("name")) or {}
        if "enum" in prop:
            rules["enum"] = [v for v in prop["enum"] if v is not None]
        for key, name in (("minimum", "minimum"), ("maximum", "maximum"), ("max_length", "maxLength")):
            if name in prop:
                rules[key] = prop[name]
        if prop.get("format") == DATE_FORMAT:
            rules["format"] = DATE_FORMAT
        elif prop.get("pattern") == DATETIME_PATTERN:
            rules["format"] = DATETIME_FORMAT
        params.append(rules)
    return {**tool, "params": params}


# ---------------------------------------------------------------- running a tool


class Denied(Exception):
    """The authorizer refused a statement; the message says what it tried to do."""


def _bind_row(values, bind, columns, row, protected):
    for i, col in enumerate(columns):
        key = f"{bind}_{col}"
        if key not in protected:
            values[key] = None if row is None else row[i]


def _refused(exc):
    return getattr(exc, "sqlite_errorname", None) == "SQLITE_AUTH" or str(exc) == "not authorized"


def _statement(conn, guard, sql, values, mode):
    """Prepare and start ``sql`` with the authorizer in ``mode`` (raises ``Denied`` when refused)."""
    text = sql + _TAGS[mode]
    if text in guard.refused:
        raise Denied(guard.refused[text])
    guard.begin(mode)
    try:
        cur = conn.execute(text, values)
    except sqlite3.DatabaseError as exc:
        reason = guard.reason()
        if reason is not None and _refused(exc):
            raise Denied(reason) from None
        raise
    finally:
        guard.mode = OPEN
    reason = guard.reason()
    if reason is not None:  # prepared with internal values read as NULL: refuse it now and from now on
        cur.close()
        if len(guard.refused) < 1000:
            guard.refused[text] = reason
        raise Denied(reason)
    return cur, [d[0] for d in cur.description] if cur.description else []


def _read(conn, guard, sql, values, where, fetch):
    """Run a read statement, prepared in ``READ`` mode (the authorizer refuses any write); ``fetch(cursor)``
    takes its rows. (No ``PRAGMA query_only`` around it: setting it expires every prepared statement of the
    connection, and the authorizer alone refuses every write.)"""
    verb = leading_keyword(sql)
    if verb not in READ_VERBS:
        raise ToolFailure("sql", f"{where} must be a SELECT statement, not {verb or 'empty'} (tool definition error)")
    try:
        cur, columns = _statement(conn, guard, sql, values, READ)
        try:
            return columns, fetch(cur)
        finally:
            cur.close()
    except Denied as exc:
        raise ToolFailure("sql", f"{where} {exc} (tool definition error)") from None


def _sql_message(exc, where, timeout):
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        hints = {
            "FOREIGN KEY": "a referenced record does not exist, or other records still refer to this one",
            "UNIQUE": "a record with this value already exists",
            "NOT NULL": "a value is required",
            "CHECK": "the value is not allowed",
            "datatype mismatch": "a value does not match its column type",
        }
        hint = next((h for k, h in hints.items() if text.startswith(k)), "")
        return f"rejected by the database: {text}" + (f" ({hint})" if hint else "")
    if text == "interrupted":
        return f"the tool took too long and was stopped (the limit is {_number(float(timeout))} s per call)"
    if text == "string or blob too big":
        return f"rejected by the database: {text} (a value may hold at most {MAX_VALUE_BYTES} bytes)"
    if text == "user-defined function raised exception":
        problem = getattr(_PRINTF_PROBLEM, "text", None)
        _PRINTF_PROBLEM.text = None
        if problem:
            return f"rejected by the database: {problem}"
    return f"{where} failed (tool definition error): {type(exc).__name__}: {text}"


def _busy(exc):
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or str(exc).startswith(("database is locked", "database table is locked"))


BUSY_MESSAGE = "the database stayed locked by another connection for longer than the busy timeout; retry the call"


def _rollback(conn, began):
    try:
        conn.execute(f"ROLLBACK TO {SAVEPOINT}")
        conn.execute(f"RELEASE {SAVEPOINT}")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return
    if began and conn.in_transaction:
        conn.execute("ROLLBACK")


def _program(conn, guard, tool, values):
    name = tool.get("name", "?")
    protected = set(values)
    steps = tool.get("steps") or []
    if not tool.get("returns") and not any(s.get("kind") == "write" for s in steps):
        raise ToolFailure("sql", f"tool '{name}' has neither a write step nor a returns query (tool definition error)")
    for i, step in enumerate(steps, 1):
        kind, sql = step.get("kind"), step.get("sql", "")
        where = f"step {i} ({kind}) of tool '{name}'"
        if kind == "write":
            verb = leading_keyword(sql)
            if tool.get("kind") == "read":
                raise ToolFailure("sql", f"{where}: a read tool may not write (tool definition error)")
            if verb not in WRITE_VERBS:
                raise ToolFailure("sql", f"{where} must be INSERT, UPDATE or DELETE, not {verb or 'empty'} (tool definition error)")
            try:
                cur, _ = _statement(conn, guard, sql, values, WRITE)
            except Denied as exc:
                raise ToolFailure("sql", f"{where} {exc} (tool definition error)") from None
            cur.fetchall()
            changes = max(cur.rowcount, 0)
            values["changes"] = changes
            if changes and (verb in ("INSERT", "REPLACE") or (verb == "WITH" and re.search(r"\b(INSERT|REPLACE)\b", sql, re.I))):
                values["last_id"] = cur.lastrowid
            cur.close()
            continue
        if kind not in ("query", "guard"):
            raise ToolFailure("sql", f"{where}: unknown step kind (tool definition error)")
        columns, row = _read(conn, guard, sql, values, where, lambda cur: cur.fetchone())
        if step.get("bind"):
            _bind_row(values, step["bind"], columns, row, protected)
        if kind == "query" and row is None and step.get("error"):
            raise ToolFailure("not_found", format_message(step["error"], values))
        if kind == "guard":
            holds = row is not None if step.get("must") == "exist" else row is None
            if not holds:
                raise ToolFailure("guard", format_message(step.get("error") or f"{where}: condition not met", values))
    returns = tool.get("returns")
    if not returns:
        return {"changes": values["changes"], "last_id": values["last_id"]}
    where = f"the returns query of tool '{name}'"
    one = returns.get("mode", "all") == "one"
    columns, rows = _read(conn, guard, returns.get("sql", ""), values, where,
                          lambda cur: cur.fetchmany(1) if one else cur.fetchmany(MAX_ROWS + 1))
    if len(rows) > MAX_ROWS:
        raise ToolFailure("sql", f"{where} returned more than {MAX_ROWS} rows; a tool returns at most {MAX_ROWS} "
                                 "(narrow the query or add a limit parameter)")
    objects = [{c: jsonable(v) for c, v in zip(columns, r, strict=False)} for r in rows]
    if one:
        if not objects:
            given = {k: v for k, v in values.items() if k in protected and k not in BUILTINS and v is not None}
            raise ToolFailure("not_found", f"no matching record found ({name} with {_short(given, 200)})")
        return objects[0]
    return objects


def _prepare(conn):
    """The connection's authorizer, installing one (and the limits) on a connection that did not
    come from ``connect``; returns (guard, installed here)."""
    guard = getattr(conn, "guard", None)
    if isinstance(guard, Guard):
        return guard, False
    guard = Guard()
    if hasattr(conn, "setlimit"):
        _apply_limits(conn)
    conn.set_authorizer(guard)
    return guard, True


def run_tool(conn, tool, arguments, now="2026-01-15T09:00:00", timeout=DEFAULT_TIMEOUT_S):
    """Run one tool call on ``conn``; returns the result dict and never raises.

    Outside a transaction, a write tool starts one with ``BEGIN IMMEDIATE`` (waiting up to the
    connection's busy timeout for another writer) and commits it on success; inside the caller's
    transaction the call only uses a savepoint. On any failure every change the call made is
    rolled back. ``timeout`` (seconds) stops runaway queries.
    """
    try:
        values, error = validate_arguments(tool, arguments)
        if error is not None:
            return error
        values.update({"now": now, "today": str(now)[:10], "last_id": None, "changes": 0})
    except Exception as exc:  # defensive: a malformed tool dict must not crash the caller
        return failure("sql", f"tool '{tool.get('name', '?') if isinstance(tool, dict) else '?'}' is malformed: {exc}")
    deadline = time.monotonic() + timeout
    where = f"tool '{tool.get('name', '?')}'"
    installed = began = False
    try:
        guard, installed = _prepare(conn)
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 20000)
        if tool.get("kind") == "write" and not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
            began = True
        conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            result = _program(conn, guard, tool, values)
        except ToolFailure as exc:
            _rollback(conn, began)
            return exc.payload
        except (sqlite3.Error, sqlite3.Warning) as exc:
            _rollback(conn, began)
            if _busy(exc):
                return failure("busy", BUSY_MESSAGE)
            return failure("sql", _sql_message(exc, where, timeout))
        except Exception as exc:
            _rollback(conn, began)
            return failure("sql", f"{where} failed: {type(exc).__name__}: {exc}")
        conn.execute(f"RELEASE {SAVEPOINT}")
        if began:
            conn.execute("COMMIT")
        return success(result)
    except Exception as exc:
        try:
            if conn.in_transaction and began:
                conn.execute("ROLLBACK")
        except Exception:
            pass
        if isinstance(exc, sqlite3.Error) and _busy(exc):
            return failure("busy", BUSY_MESSAGE)
        return failure("sql", f"{where} could not run: {type(exc).__name__}: {exc}")
    finally:
        try:
            conn.set_progress_handler(None, 0)
            if installed:
                conn.set_authorizer(None)
        except Exception:
            pass


# ---------------------------------------------------------------- introspection


def result_columns(conn, sql):
    """Column names a SELECT returns (run with every placeholder NULL and LIMIT 0)."""
    names = placeholders(sql)
    body = sql.strip().rstrip(";")
    cur = conn.execute(f"SELECT * FROM (\n{body}\n) LIMIT 0", {n: None for n in names})
    columns = [d[0] for d in cur.description]
    cur.close()
    return columns
