"""envfoundry tool engine: the one implementation of tool semantics.

This file is embedded verbatim into every generated ``server.py``, which must run with no other
project file, so it uses only the standard library and works on plain dicts
(``Tool.model_dump(mode="json")``). The in-process runtime (``pipeline.runtime.EnvInstance``)
imports it as a module; a parity test proves both paths agree.

A tool call is ``run_tool(conn, tool, arguments, now=...)``:

1. the arguments are validated against the tool's parameters (strict JSON types: no bool for an
   integer, no ``"3"`` for an integer; enum, minimum/maximum, max_length, required; unknown
   arguments rejected). The error names the parameter;
2. the steps run in order inside one savepoint, rolled back on any failure:
   ``query`` binds its first row's columns as ``:<bind>_<col>`` (no row: NULLs, or a ``not_found``
   failure when the step has an ``error``); ``guard`` fails with its ``error`` unless its
   ``must`` (exist / not_exist) holds; ``write`` runs INSERT/UPDATE/DELETE and binds ``:last_id``
   and ``:changes``. ``:now`` and ``:today`` come from the environment clock. Parameters and
   built-ins are never overwritten by a bound column;
3. ``returns`` (``one``: a row object, ``all``: a list) or ``{"changes": n, "last_id": id}``.

Every outcome is a JSON-able dict: ``{"ok": True, "result": ...}`` or ``{"ok": False, "error":
message, "parameter": name or None, "kind": "validation" | "guard" | "not_found" | "sql"}``.
No exception escapes ``run_tool``. ``check_tool`` is the static checker used by synthesis.
"""

import json
import math
import re
import sqlite3
import time

ENGINE_VERSION = 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
BUILTINS = ("now", "today", "last_id", "changes")
READ_VERBS = ("SELECT", "WITH", "VALUES")
WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "WITH")
SAVEPOINT = "envfoundry_tool_call"
DEFAULT_TIMEOUT_S = 10.0

_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
_LITERALS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/", re.S)
_NAMED = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)")
_OTHER_STYLE = re.compile(r"(?<![\w])(\?\d*|[@$][A-Za-z_][A-Za-z0-9_]*)")
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WRITE_OPCODES = {"OpenWrite", "Insert", "Delete", "IdxInsert", "IdxDelete"}


class ToolFailure(Exception):
    """Raised inside a tool program to stop it; carries the failure dict returned to the caller."""

    def __init__(self, kind, error, parameter=None):
        super().__init__(error)
        self.payload = failure(kind, error, parameter)


def success(result):
    return {"ok": True, "result": result}


def failure(kind, error, parameter=None):
    return {"ok": False, "error": error, "parameter": parameter, "kind": kind}


def connect(path=":memory:"):
    """A connection as the engine expects it: autocommit (the engine manages savepoints),
    foreign keys enforced, usable from any thread (callers serialise access)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, cached_statements=512)
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
        if max_length is not None and len(value) > max_length:
            return None, f"too long: {len(value)} characters (the maximum is {max_length})"
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
            return None, failure("validation", f"argument '{pname}': {error}", pname)
        values[pname] = checked
    return values, None


# ---------------------------------------------------------------- running a tool


def _bind_row(values, bind, columns, row, protected):
    for i, col in enumerate(columns):
        key = f"{bind}_{col}"
        if key not in protected:
            values[key] = None if row is None else row[i]


def _execute(conn, sql, values):
    cur = conn.execute(sql, values)
    columns = [d[0] for d in cur.description] if cur.description else []
    return cur, columns


def _read(conn, sql, values, where):
    verb = leading_keyword(sql)
    if verb not in READ_VERBS:
        raise ToolFailure("sql", f"{where} must be a SELECT statement, not {verb or 'empty'} (tool definition error)")
    before = conn.total_changes
    cur, columns = _execute(conn, sql, values)
    return cur, columns, before


def _sql_message(exc, where):
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
        return "the tool took too long and was stopped"
    return f"{where} failed (tool definition error): {type(exc).__name__}: {text}"


def _rollback(conn):
    try:
        conn.execute(f"ROLLBACK TO {SAVEPOINT}")
        conn.execute(f"RELEASE {SAVEPOINT}")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _program(conn, tool, values):
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
            cur, _ = _execute(conn, sql, values)
            cur.fetchall()
            changes = max(cur.rowcount, 0)
            values["changes"] = changes
            if changes and (verb in ("INSERT", "REPLACE") or (verb == "WITH" and re.search(r"\b(INSERT|REPLACE)\b", sql, re.I))):
                values["last_id"] = cur.lastrowid
            cur.close()
            continue
        if kind not in ("query", "guard"):
            raise ToolFailure("sql", f"{where}: unknown step kind (tool definition error)")
        cur, columns, before = _read(conn, sql, values, where)
        row = cur.fetchone()
        cur.close()
        if conn.total_changes != before:
            raise ToolFailure("sql", f"{where} modified the database; only write steps may (tool definition error)")
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
    cur, columns, before = _read(conn, returns.get("sql", ""), values, where)
    if returns.get("mode", "all") == "one":
        row = cur.fetchone()
        rows = [] if row is None else [row]
    else:
        rows = cur.fetchall()
    cur.close()
    if conn.total_changes != before:
        raise ToolFailure("sql", f"{where} modified the database (tool definition error)")
    objects = [{c: jsonable(v) for c, v in zip(columns, r, strict=False)} for r in rows]
    if returns.get("mode", "all") == "one":
        if not objects:
            given = {k: v for k, v in values.items() if k in protected and k not in BUILTINS and v is not None}
            raise ToolFailure("not_found", f"no matching record found ({name} with {_short(given, 200)})")
        return objects[0]
    return objects


def run_tool(conn, tool, arguments, now="2026-01-15T09:00:00", timeout=DEFAULT_TIMEOUT_S):
    """Run one tool call on ``conn`` in a savepoint; returns the result dict and never raises.

    On success the savepoint is released, which commits when ``conn`` had no open transaction
    (an ``isolation_level=None`` connection, see ``connect``). On any failure every change the
    call made is rolled back. ``timeout`` (seconds) stops runaway queries.
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
    try:
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 20000)
        conn.execute(f"SAVEPOINT {SAVEPOINT}")
        try:
            result = _program(conn, tool, values)
        except ToolFailure as exc:
            _rollback(conn)
            return exc.payload
        except (sqlite3.Error, sqlite3.Warning) as exc:
            _rollback(conn)
            return failure("sql", _sql_message(exc, where))
        except Exception as exc:
            _rollback(conn)
            return failure("sql", f"{where} failed: {type(exc).__name__}: {exc}")
        conn.execute(f"RELEASE {SAVEPOINT}")
        return success(result)
    except Exception as exc:
        try:
            _rollback(conn)
        except Exception:
            pass
        return failure("sql", f"{where} could not run: {type(exc).__name__}: {exc}")
    finally:
        try:
            conn.set_progress_handler(None, 0)
        except Exception:
            pass


# ---------------------------------------------------------------- static checks


def _explain(conn, sql, names):
    return conn.execute("EXPLAIN " + sql, {n: None for n in names}).fetchall()


def result_columns(conn, sql):
    """Column names a SELECT returns (run with every placeholder NULL and LIMIT 0)."""
    names = placeholders(sql)
    body = sql.strip().rstrip(";")
    cur = conn.execute(f"SELECT * FROM (\n{body}\n) LIMIT 0", {n: None for n in names})
    columns = [d[0] for d in cur.description]
    cur.close()
    return columns


def _check_param(p):
    problems = []
    pname, ptype = p.get("name"), p.get("type")
    for e in p.get("enum") or []:
        _, error = check_value({"type": ptype}, e)
        if error is not None:
            problems.append(f"parameter '{pname}': enum value {_short(e)} {error}")
    lo, hi = p.get("minimum"), p.get("maximum")
    if (lo is not None or hi is not None) and ptype not in ("integer", "number"):
        problems.append(f"parameter '{pname}': minimum/maximum only apply to integer or number parameters")
    if lo is not None and hi is not None and lo > hi:
        problems.append(f"parameter '{pname}': minimum {_number(lo)} is greater than maximum {_number(hi)}")
    if p.get("max_length") is not None and ptype != "string":
        problems.append(f"parameter '{pname}': max_length only applies to string parameters")
    return problems


def check_tool(conn, tool):
    """Problems with one tool against the schema on ``conn`` (empty list: the tool looks sound).

    Each statement is EXPLAINed with every placeholder bound to NULL; placeholders must name a
    parameter, a built-in or a column bound by an earlier step; error messages may only use known
    fields; read tools may not write and write tools must; read steps may not modify anything.
    Never raises: a malformed tool dict is reported as a problem.
    """
    try:
        return _check_tool(conn, tool)
    except Exception as exc:
        name = tool.get("name", "?") if isinstance(tool, dict) else "?"
        return [f"tool '{name}' is malformed: {type(exc).__name__}: {exc}"]


def _check_tool(conn, tool):
    name = tool.get("name", "?")
    params = [p.get("name") for p in tool.get("params") or []]
    problems = []
    for p in tool.get("params") or []:
        problems.extend(_check_param(p))
    known = set(params) | {"now", "today"}
    has_write = False

    def check_sql(sql, where, read):
        verb = leading_keyword(sql)
        allowed = READ_VERBS if read else WRITE_VERBS
        if verb not in allowed:
            problems.append(f"{where}: must start with {'/'.join(allowed)}, found {verb or 'nothing'}")
            return False
        stripped = _LITERALS.sub(" ", sql)
        for other in sorted(set(_OTHER_STYLE.findall(stripped))):
            problems.append(f"{where}: placeholder {other} is not allowed; use :name placeholders")
        names = placeholders(sql)
        for n in names:
            if n in ("last_id", "changes") and not has_write:
                problems.append(f"{where}: uses :{n} before any write step (it would be NULL/0)")
            elif n not in known and n not in ("last_id", "changes"):
                problems.append(f"{where}: unknown placeholder :{n} (known: {', '.join(sorted(known))})")
        try:
            ops = {row[1] for row in _explain(conn, sql, names)}
        except (sqlite3.Error, sqlite3.Warning) as exc:
            problems.append(f"{where}: {exc}")
            return False
        if read and ops & _WRITE_OPCODES:
            problems.append(f"{where}: a read statement must not modify the database")
        return True

    def check_message(text, where):
        for field in sorted(set(_FIELD.findall(text or ""))):
            if field not in known and not (has_write and field in ("last_id", "changes")):
                usable = ", ".join(f"{{{k}}}" for k in sorted(known)) or "none"
                problems.append(f"{where}: error message uses {{{field}}}, which is not a parameter or a bound "
                                f"name of this tool (usable: {usable}); write the message without it")

    for i, step in enumerate(tool.get("steps") or [], 1):
        kind, sql = step.get("kind"), step.get("sql") or ""
        where = f"tool '{name}' step {i} ({kind})"
        if kind == "write":
            if tool.get("kind") == "read":
                problems.append(f"{where}: a read tool has a write step (declare the tool as kind 'write')")
            check_sql(sql, where, read=False)
            has_write = True
            continue
        if kind not in ("query", "guard"):
            problems.append(f"{where}: unknown step kind {kind!r}")
            continue
        valid = check_sql(sql, where, read=True)
        bind = step.get("bind")
        if bind and valid:
            try:
                columns = result_columns(conn, sql)
            except (sqlite3.Error, sqlite3.Warning) as exc:
                problems.append(f"{where}: cannot determine its columns: {exc}")
                columns = []
            for col in columns:
                key = f"{bind}_{col}"
                if key in params or key in BUILTINS:
                    problems.append(f"{where}: bound column :{key} has the name of a parameter/built-in and is ignored; rename the bind or alias the column")
                known.add(key)
        if step.get("error"):
            check_message(step["error"], where)
        if kind == "guard" and step.get("must") not in ("exist", "not_exist"):
            problems.append(f"{where}: guard 'must' should be 'exist' or 'not_exist'")
    returns = tool.get("returns")
    if returns:
        check_sql(returns.get("sql") or "", f"tool '{name}' returns", read=True)
    if tool.get("kind") == "write" and not has_write:
        problems.append(f"tool '{name}': declared 'write' but has no write step")
    if not returns and not has_write:
        problems.append(f"tool '{name}': has neither a write step nor a returns query")
    return problems


def check_tools(conn, tools):
    """``check_tool`` for each tool: {tool name: problems} for the tools that have problems."""
    out = {}
    for tool in tools:
        problems = check_tool(conn, tool)
        if problems:
            out[tool.get("name", "?") if isinstance(tool, dict) else "?"] = problems
    return out
