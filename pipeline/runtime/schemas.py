"""The JSON schemas a served environment publishes: tool inputs (HTTP, MCP, OpenAPI) and results.

``tool_schemas(env)`` starts from each tool's IR schema (``Tool.input_schema``) and adds what the
engine enforces anyway, so that a client can see it:

* every string parameter has a ``maxLength`` (``engine.MAX_STRING_LENGTH`` unless the IR sets one),
  every integer parameter the 64-bit bounds SQLite can store unless it has tighter ones;
* an optional parameter also accepts ``null`` (the engine treats null as absent);
* a parameter bound to a table column (``col = :p``, ``col IN (:p)``, ``SET col = :p``,
  ``INSERT (col) VALUES (:p)``, through ``COALESCE``/``IFNULL`` too) and used in no other way takes
  that column's CHECK rules: ``enum`` for ``CHECK (col IN (...))``, ``minimum``/``maximum`` for
  numeric bounds, ``maxLength`` for ``length(col) <= n``. What the IR declares itself wins;
* a string parameter bound to, or compared with (``col >= :p``), columns whose every seeded value is
  an ISO date (``column_formats``), and used in no other way, has ``"format": "date"`` (date-times:
  ``"pattern": engine.DATETIME_PATTERN``) and a description naming the form with a seeded example, so
  ``"January 15, 2026"`` is refused with a 422 naming the tool, the parameter and the form.

``described_tools(env)`` gives the tools as a model or a trainer is shown them (``Tool.openai_schema``: the tasks'
``tools``, the exports; the tester's tool list and JSON-action grammar): each date (or date-time) parameter carries
the served ``format`` and description, read from ``tool_schemas`` itself, so both say the same.

``engine.served_tool`` turns a schema back into the parameter rules the engine validates, so
``server.py`` and ``EnvInstance`` enforce exactly what the schemas say. ``result_schemas(env)``
describes each tool's ``result`` (row objects with the returns query's columns, or
``{changes, last_id}``) for the OpenAPI document. Both are deterministic: same IR (and sqlglot
version), same schemas.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from typing import Any

from pipeline.ir import Environment, Tool
from pipeline.runtime import engine, sqlshape

CELL = {"type": ["string", "integer", "number", "null"]}  # a SQLite value as JSON (blobs as hex text)


def _tables(env: Environment) -> tuple[dict[str, list[str]], dict[str, dict[str, dict[str, Any]]]]:
    columns: dict[str, list[str]] = {}
    rules: dict[str, dict[str, dict[str, Any]]] = {}
    for table in env.tables:
        parsed = sqlshape.parse_table(table.ddl)
        if parsed is not None:
            name, cols, found = parsed
            columns[name], rules[name] = cols, found
    return columns, rules


def _bound(tool: Tool, columns: dict[str, list[str]], rules: dict[str, dict[str, dict[str, Any]]],
           formats: dict[tuple[str, str], tuple[str, str]]) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, str]]]:
    """``(checks, dates)`` for ``tool``, from one walk of its SQL's column bindings: ``checks`` the merged CHECK
    rules per parameter bound (``=``, ``IN``, ``SET``, ``INSERT``) only to constrained columns; ``dates`` the
    ``(format, example)`` of each string parameter bound to or compared with dated columns of one format only
    (:func:`column_formats`), used in no other way."""
    exact: sqlshape.Bindings = {}
    near: sqlshape.Bindings = {}  # bound or compared
    others: set[str] = set()
    others_near: set[str] = set()
    for sql in [s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else []):
        found, other, found_near, other_near = sqlshape.param_uses(sql, columns)
        for into, got in ((exact, found), (near, found_near)):
            for name, targets in got.items():
                into.setdefault(name, set()).update(targets)
        others |= other
        others_near |= other_near
    checks: dict[str, dict[str, Any]] = {}
    dates: dict[str, tuple[str, str]] = {}
    for param in tool.params:
        bound = sorted(exact.get(param.name, ()))
        per_target = [rules.get(table, {}).get(column) for table, column in bound]
        if bound and "*" not in others and param.name not in others and all(r is not None for r in per_target):
            merged: dict[str, dict[str, Any]] = {}
            for rule in per_target:
                sqlshape._merge(merged, "p", rule or {})
            checks[param.name] = merged.get("p", {})
        bound = sorted(near.get(param.name, ()))
        if param.type != "string" or not bound or "*" in others_near or param.name in others_near:
            continue
        dated = [formats.get(target) for target in bound]
        if None not in dated and len({f[0] for f in dated if f is not None}) == 1:
            dates[param.name] = dated[0] or ("", "")
    return checks, dates


def column_formats(env: Environment) -> dict[tuple[str, str], tuple[str, str]]:
    """``{(table, column): (format, example)}`` for the columns whose every seeded non-NULL value (there is
    one at least) is an ISO date (``date``) or date and time (``date-time``); names lower-cased, the example
    is the first seeded value."""
    values: dict[tuple[str, str], list[Any]] = {}
    for seed in env.seed:
        for row in seed.rows:
            for col, value in row.items():
                if value is not None:
                    values.setdefault((seed.table.lower(), col.lower()), []).append(value)
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for key, vals in values.items():
        for fmt in (engine.DATE_FORMAT, engine.DATETIME_FORMAT):
            if all(isinstance(v, str) and engine._format_error(fmt, v) is None for v in vals):
                out[key] = (fmt, vals[0])
                break
    return out


def _format_note(fmt: str, example: str) -> str:
    """How a date (or date-time) parameter's value is written, with an example: ``a date written YYYY-MM-DD,
    e.g. 2026-01-15``."""
    if fmt == engine.DATE_FORMAT:
        return f"a date written {engine.DATE_FORM}, e.g. {example}"
    form = "YYYY-MM-DD" + example[10:11] + ("HH:MM:SS" if len(example) > 16 else "HH:MM")
    return f"a date and time written {form}, e.g. {example}"


def _apply_format(schema: dict[str, Any], fmt: str, example: str) -> None:
    if "enum" in schema:
        return
    if fmt == engine.DATE_FORMAT:
        schema["format"] = engine.DATE_FORMAT
        form = engine.DATE_FORM
    else:
        schema["pattern"] = engine.DATETIME_PATTERN
        form = "YYYY-MM-DD"
    text = schema.get("description", "")
    if form not in text:
        note = _format_note(fmt, example)
        schema["description"] = f"{text} ({note})" if text else note


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _apply(schema: dict[str, Any], ptype: str, rule: dict[str, Any]) -> None:
    enum = rule.get("enum")
    if enum and "enum" not in schema:
        fits = {"string": lambda v: isinstance(v, str), "integer": _is_int,
                "number": lambda v: _is_int(v) or isinstance(v, float)}.get(ptype)
        if fits is not None and all(fits(v) for v in enum):
            schema["enum"] = list(enum)
    if ptype in ("integer", "number"):
        lo, hi = rule.get("minimum"), rule.get("maximum")
        if ptype == "integer":
            if "xminimum" in rule:
                x = math.floor(rule["xminimum"]) + 1
                lo = x if lo is None else max(lo, x)
            if "xmaximum" in rule:
                x = math.ceil(rule["xmaximum"]) - 1
                hi = x if hi is None else min(hi, x)
        if lo is not None and "minimum" not in schema:
            schema["minimum"] = lo
        if hi is not None and "maximum" not in schema:
            schema["maximum"] = hi
        if schema.get("minimum") is not None and schema.get("maximum") is not None and schema["minimum"] > schema["maximum"]:
            schema.pop("minimum"), schema.pop("maximum")
    if ptype == "string" and rule.get("max_length") is not None and rule["max_length"] >= 0:
        schema["maxLength"] = min(schema["maxLength"], rule["max_length"])
    if ptype == "string" and rule.get("format"):
        _apply_format(schema, rule["format"], rule.get("example", ""))


def tool_schema(tool: Tool, derived: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One tool's served input schema (``derived``: CHECK rules per parameter, see module doc)."""
    schema = tool.input_schema()
    for param in tool.params:
        prop = schema["properties"][param.name]
        if param.type == "string":
            prop["maxLength"] = param.max_length if param.max_length is not None else engine.MAX_STRING_LENGTH
        _apply(prop, param.type, (derived or {}).get(param.name, {}))
        if param.type == "integer":  # what SQLite can store
            prop.setdefault("minimum", engine.INT64_MIN)
            prop.setdefault("maximum", engine.INT64_MAX)
        if not param.required:
            prop["type"] = [param.type, "null"]
            if "enum" in prop:
                prop["enum"] = [*prop["enum"], None]
    return schema


def tool_schemas(env: Environment) -> dict[str, dict[str, Any]]:
    """Every tool's served input schema, by tool name (see the module doc)."""
    columns, rules = _tables(env)
    formats = column_formats(env)
    out = {}
    for t in env.tools:
        derived, dates = _bound(t, columns, rules, formats)
        for name, (fmt, example) in dates.items():
            derived[name] = {**derived.get(name, {}), "format": fmt, "example": example}
        out[t.name] = tool_schema(t, derived)
    return out


_DESCRIBED: dict[str, list[Tool]] = {}
_DESCRIBED_LOCK = threading.Lock()


def described_tools(env: Environment) -> list[Tool]:
    """``env.tools`` as a model or a trainer is shown them: each string parameter the server serves with a date
    or date-time form (:func:`tool_schemas`) has that ``format`` and the served description (``... (a date
    written YYYY-MM-DD, e.g. 2026-01-15)``), so ``Tool.openai_schema`` (tasks' ``tools``, the exports), the tester's
    tool list and its JSON-action grammar say what the server says. Other parameters are as in the IR. Remembered
    per environment id (the last 64): every attempt of the tester asks."""
    key = env.env_id
    with _DESCRIBED_LOCK:
        hit = _DESCRIBED.get(key)
    if hit is not None:
        return list(hit)
    schemas = tool_schemas(env)
    tools = []
    for tool in env.tools:
        props = schemas[tool.name]["properties"]
        params = []
        for p in tool.params:
            prop = props[p.name]
            fmt = (engine.DATE_FORMAT if prop.get("format") == engine.DATE_FORMAT
                   else engine.DATETIME_FORMAT if prop.get("pattern") == engine.DATETIME_PATTERN else None)
            params.append(p if fmt is None else p.model_copy(update={"format": fmt, "description": prop["description"]}))
        tools.append(tool if params == tool.params else tool.model_copy(update={"params": params}))
    with _DESCRIBED_LOCK:
        if len(_DESCRIBED) >= 64:
            _DESCRIBED.pop(next(iter(_DESCRIBED)))
        _DESCRIBED[key] = tools
    return list(tools)


def served_tools(env: Environment) -> dict[str, dict[str, Any]]:
    """The tool dicts the engine runs for ``env``: the IR with each tool's served parameter rules."""
    schemas = tool_schemas(env)
    return {t.name: engine.served_tool(t.model_dump(mode="json"), schemas[t.name]) for t in env.tools}


def result_schemas(env: Environment) -> dict[str, dict[str, Any]]:
    """The JSON schema of each tool's ``result``, by tool name."""
    changes = {"type": "object", "properties": {"changes": {"type": "integer"}, "last_id": {"type": ["integer", "null"]}},
               "required": ["changes", "last_id"], "additionalProperties": False}
    conn = engine.connect(":memory:")
    try:
        for table in env.tables:
            try:
                conn.execute(table.ddl)
            except sqlite3.Error:
                pass
        out: dict[str, dict[str, Any]] = {}
        for tool in env.tools:
            if tool.returns is None:
                out[tool.name] = changes
                continue
            try:
                cols = list(dict.fromkeys(engine.result_columns(conn, tool.returns.sql)))
                row: dict[str, Any] = {"type": "object", "properties": {c: CELL for c in cols}, "required": cols,
                                       "additionalProperties": False}
            except (sqlite3.Error, sqlite3.Warning):
                row = {"type": "object", "additionalProperties": CELL}
            out[tool.name] = row if tool.returns.mode == "one" else {"type": "array", "items": row, "maxItems": engine.MAX_ROWS}
        return out
    finally:
        conn.close()
