"""Build-time checks of tools and schema DDL, decided by SQLite's authorizer (``engine.Guard``).

``check_tool(conn, tool)`` and ``check_tools(conn, tools)`` check tool programs against the schema
on ``conn``; ``check_ddl(conn, ddl)`` checks schema DDL. Each returns problems as sentences that
name the tool and step (or the statement), ready to feed back to the model. Statements are
prepared (never run) under a fresh authorizer, which refuses writes in read statements, SQLite's
internals (``sqlite_master``, ``pragma_*``), PRAGMA, ATTACH and ``load_extension``, and reports
every function called: ``random()``, ``randomblob()`` and CURRENT_DATE/TIME/TIMESTAMP are
rejected, and date/time functions are rejected when given ``'now'`` (that structural question
is answered by sqlglot, ``sqlshape.clock_calls``). Tools use the built-in ``:now`` / ``:today``.

Static: a statement is prepared, never run (the tools stage runs tools on seeded rows,
``pipeline.stages.tools.exercise``). These used to live in the engine, which every ``server.py`` embeds; a served
environment never runs them (the engine's docstring still calls this module ``pipeline.runtime.checks``, its
name before: that text is embedded in every ``server.py`` and export, byte for byte).
"""

import sqlite3

from pipeline.runtime.engine import (
    _FIELD,
    _LITERALS,
    _OTHER_STYLE,
    BUILTINS,
    DDL,
    OPEN,
    READ,
    READ_VERBS,
    WRITE,
    WRITE_VERBS,
    Guard,
    _number,
    _refused,
    _short,
    check_value,
    leading_keyword,
    placeholders,
    result_columns,
)
from pipeline.runtime.sqlshape import (
    CLOCK_FUNCTIONS,
    clock_calls,
    date_arithmetic,
    dated_outputs,
    escaping_disjuncts,
    nondeterministic_calls,
)
from pipeline.runtime.state import qi
from pipeline.runtime.values import _ISO_VALUE

NONDETERMINISTIC = {
    "random": "random() gives a different value on every run",
    "randomblob": "randomblob() gives a different value on every run",
    "current_date": "CURRENT_DATE reads the wall clock",
    "current_time": "CURRENT_TIME reads the wall clock",
    "current_timestamp": "CURRENT_TIMESTAMP reads the wall clock",
}
CLOCK_ADVICE = ("environments run on a fixed clock: use the built-in :now / :today parameters "
                "(e.g. date(:today, '+7 days')) instead")
RANDOM_ADVICE = "environments must be deterministic (the same call on the same state gives the same result)"
DATE_ADVICE = ("SQLite reads date/time text as the number it starts with ('2026-01-15' + 1 is 2027): shift a date "
               "with date(x, '+1 day') or datetime(x, '+2 hours') (e.g. date(:today, '+7 days')), and take the days "
               "between two dates as julianday(a) - julianday(b)")
DATED_ROWS = 50
DDL_ADVICE = ("a schema must not depend on when or how often it runs: let the tools store such values "
              "(from :now / :today) or compare with fixed values")


def _nondeterministic(functions, sql, clock=True):
    """What makes a statement non-deterministic: the functions the authorizer reported, and for
    date/time functions the calls the parser finds reading the wall clock (``'now'``)."""
    found = [NONDETERMINISTIC[f] for f in sorted(functions) if f in NONDETERMINISTIC]
    if clock and functions & set(CLOCK_FUNCTIONS):
        found.extend(f"{call} reads the wall clock" for call in clock_calls(sql))
    return list(dict.fromkeys(found))


def _advice(problem):
    return RANDOM_ADVICE if "random" in problem else CLOCK_ADVICE


def _explain(conn, sql, names):
    return conn.execute("EXPLAIN " + sql, {n: None for n in names}).fetchall()


def _escaping(sql):
    """An OR branch of a WHERE that escapes its sibling's parameter filter (``sqlshape.escaping_disjuncts``)."""
    return [f'its WHERE has an OR whose branch "{branch}" filters no column by a parameter while its sibling '
            f'"{sibling}" does; AND binds tighter than OR, so that branch matches rows whatever the parameters '
            f'are: bracket the OR so the filter applies to every branch ("... AND (x OR y)")'
            for branch, sibling in escaping_disjuncts(sql)]


def dated_columns(conn):
    """The ``(table, column)`` pairs of ``conn`` whose values are dates or date-times: every non-NULL value of
    the first ``DATED_ROWS`` rows is ISO text (``YYYY-MM-DD``, optionally with ``HH:MM[:SS]``), and there is one."""
    out = set()
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        for col in [r[1] for r in conn.execute(f"PRAGMA table_info({qi(table)})")]:
            vals = [r[0] for r in conn.execute(f"SELECT {qi(col)} FROM {qi(table)} WHERE {qi(col)} IS NOT NULL "
                                               f"ORDER BY rowid LIMIT {DATED_ROWS}")]
            if vals and all(isinstance(v, str) and _ISO_VALUE.match(v) for v in vals):
                out.add((table, col))
    return out


def _date_arithmetic(sql, dated, names):
    return [f"{e} does arithmetic on a date/time value; {DATE_ADVICE}" for e in date_arithmetic(sql, dated, names)]


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


class _Checking:
    """A fresh authorizer on ``conn`` for the duration of a check. Installing an authorizer expires
    every cached statement, so each statement checked is authorized (and its functions reported)
    again; the connection's own authorizer (or none) is restored afterwards."""

    def __init__(self, conn):
        self.conn, self.guard = conn, Guard()

    def __enter__(self):
        self.conn.set_authorizer(self.guard)
        return self.guard

    def __exit__(self, *exc):
        previous = getattr(self.conn, "guard", None)
        if not isinstance(previous, Guard):
            previous = None
        writes = getattr(self.conn, "writes", None)  # a pipeline.runtime.reward.WriteLog in front of the guard: keep it
        if previous is not None and writes is not None and getattr(writes, "inner", None) is previous:
            previous = writes
        self.conn.set_authorizer(previous)


def check_tool(conn, tool, dated=()):
    """Problems with one tool against the schema on ``conn`` (empty list: the tool looks sound).

    Each statement is EXPLAINed (prepared, not run) with every placeholder bound to NULL under
    the engine's authorizer: read statements may not write, no statement may read SQLite's
    internals, run a PRAGMA, attach a file or load an extension, and none may be
    non-deterministic (``random()``, the wall clock: tools use ``:now`` / ``:today``). Placeholders
    must name a parameter, a built-in or a column bound by an earlier step; error messages may
    only use known fields; write tools must write; an OR in a WHERE must not escape the parameter
    filter of its sibling branch (``sqlshape.escaping_disjuncts``: ``a = :a AND b OR c``); no
    ``+ - * /`` may take a date/time operand (``sqlshape.date_arithmetic``): ``:now`` / ``:today``, a
    column among ``dated`` (``(table, column)`` pairs whose values are dates: ``dated_columns`` of the
    seeded rows), a bound column a query step took from one, a ``date()`` call. Never
    raises: a malformed tool dict is reported as a problem. Each problem names the tool and the step.
    """
    try:
        with _Checking(conn) as guard:
            return _check_tool(conn, guard, tool, dated)
    except Exception as exc:
        name = tool.get("name", "?") if isinstance(tool, dict) else "?"
        return [f"tool '{name}' is malformed: {type(exc).__name__}: {exc}"]


def _check_tool(conn, guard, tool, dated=()):
    name = tool.get("name", "?")
    params = [p.get("name") for p in tool.get("params") or []]
    problems = []
    for p in tool.get("params") or []:
        problems.extend(_check_param(p))
    known = set(params) | {"now", "today"}
    dates = {"now", "today"}  # the placeholders holding a date/time value
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
        guard.begin(READ if read else WRITE)
        guard.functions = set()
        try:
            _explain(conn, sql, names)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            reason = guard.reason()
            problems.append(f"{where}: {reason if reason and _refused(exc) else exc}")
            return False
        finally:
            guard.mode = OPEN
        if guard.reason() is not None:
            problems.append(f"{where}: {guard.reason()}")
            return False
        for p in _nondeterministic(guard.functions, sql):
            problems.append(f"{where}: {p}; {_advice(p)}")
        problems.extend(f"{where}: {p}" for p in _escaping(sql))
        problems.extend(f"{where}: {p}" for p in _date_arithmetic(sql, dated, dates))
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
            dates.update(f"{bind}_{col}" for col in dated_outputs(sql, dated) if f"{bind}_{col}" not in params)
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


def check_tools(conn, tools, dated=()):
    """``check_tool`` for each tool: {tool name: problems} for the tools that have problems."""
    out = {}
    for tool in tools:
        problems = check_tool(conn, tool, dated)
        if problems:
            out[tool.get("name", "?") if isinstance(tool, dict) else "?"] = problems
    return out


def split_statements(sql):
    """The statements of a SQL script, as SQLite's own ``complete_statement`` delimits them."""
    out, start = [], 0
    for i, ch in enumerate(sql):
        if ch == ";" and sqlite3.complete_statement(sql[start : i + 1]):
            out.append(sql[start : i + 1].strip())
            start = i + 1
    if sql[start:].strip():
        out.append(sql[start:].strip())
    return out


def _ddl_label(stmt):
    """``CREATE TABLE permits``, ``CREATE TRIGGER t_at``...: how a DDL statement is named in problems."""
    words = _LITERALS.sub(" ", stmt).replace("(", " ( ").split()
    for i, word in enumerate(words):
        if word.upper() in ("TABLE", "INDEX", "VIEW", "TRIGGER"):
            j = i + 1
            while j < len(words) and words[j].upper() in ("IF", "NOT", "EXISTS"):
                j += 1
            name = words[j] if j < len(words) and words[j] != "(" else ""
            return " ".join([*words[: i + 1], name]).strip()
    return " ".join(words)[:60] or "statement"


def check_ddl(conn, ddl):
    """Problems with schema DDL (one or more statements) on ``conn``, which holds the tables it
    may reference (not its own): SQL errors, PRAGMA / ATTACH / load_extension, and
    non-deterministic SQL — ``random()``, CURRENT_DATE/TIME/TIMESTAMP, date/time functions given
    ``'now'`` — in CHECK constraints, DEFAULTs, generated columns, indexes, views and triggers
    (the authorizer reports the functions each statement and each DEFAULT calls). The DDL runs
    inside a savepoint that is rolled back: ``conn`` is left as it was. Never raises.
    """
    try:
        with _Checking(conn) as guard:
            return _check_ddl(conn, guard, ddl)
    except Exception as exc:
        return [f"the schema could not be checked: {type(exc).__name__}: {exc}"]


def _check_ddl(conn, guard, ddl):
    problems = []
    savepoint = "envfoundry_check_ddl"
    conn.execute(f"SAVEPOINT {savepoint}")
    try:
        for stmt in split_statements(ddl or ""):
            label = _ddl_label(stmt)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            guard.begin(DDL)
            guard.functions = set()
            try:
                conn.execute(stmt).fetchall()
            except (sqlite3.Error, sqlite3.Warning) as exc:
                reason = guard.reason()
                problems.append(f"{label}: {reason if reason and _refused(exc) else exc}")
                continue
            finally:
                guard.mode = OPEN
            # what SQLite resolves at CREATE (CHECK, generated columns, indexes) plus what it resolves
            # only later (DEFAULTs, trigger bodies), found by the parser
            found = _nondeterministic(guard.functions, stmt) + nondeterministic_calls(stmt)
            located = []
            created = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'") if r[0] not in tables]
            for table in created:
                quoted = table.replace('"', '""')
                for col in conn.execute(f'PRAGMA table_xinfo("{quoted}")').fetchall():
                    if col[4] is None:
                        continue
                    guard.begin(DDL)
                    guard.functions = set()
                    try:
                        conn.execute(f"EXPLAIN SELECT {col[4]}").fetchall()
                    except (sqlite3.Error, sqlite3.Warning):
                        continue
                    finally:
                        guard.mode = OPEN
                    located.extend((f"column {col[1]} DEFAULT {col[4]}", p) for p in _nondeterministic(guard.functions, col[4]))
            placed = {p for _, p in located}
            for where, p in located:
                problems.append(f"{label}: {where}: {p}; {DDL_ADVICE}")
            for p in dict.fromkeys(found):
                if p not in placed:
                    problems.append(f"{label}: {p}; {DDL_ADVICE}")
    finally:
        conn.execute(f"ROLLBACK TO {savepoint}")
        conn.execute(f"RELEASE {savepoint}")
    return problems
