"""Tool parameters named for the column they meet (``[stages.build] fix_param_names``).

A parameter compared with a column or written into one stands for that column's value, so an agent reads its
name as what to pass: ``find_commission_record(artist_name)`` compared with ``commission_records.artist_id``
makes a reference solution pass ``artist_name: "7"``. Which column a parameter meets is read from the tool's SQL
(``pipeline.dbmodel.analysis``), never from its name; whether the name fits compares ``_``/camelCase
segments only (no words of a language): a name fits a column when the segments of one are a run of the other's
(``artist_id`` and ``id``, ``new_status`` and ``status``), and a parameter meeting a reference also fits the key
it holds (``member_id`` for ``loans.borrower_id REFERENCES members(member_id)``).

A parameter that fits none of its columns is renamed by code, consistently in the parameters, every statement's
placeholders, the error messages' ``{fields}`` and the tool's name where it spells the old name:

- compared for equality or written as a whole (``col = :p``, ``SET col = :p``): it takes the column's name
  (numbered when taken) and a description saying which record it identifies;
- a whole side of another comparison (``col >= :p``, ``col LIKE :p``): the column's name is put before its own
  (``start`` -> ``due_date_start``).

A key parameter (a table's integer id or a reference) whose description names neither the table nor the key
gets them appended. Each change is recorded.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from pipeline import ir
from pipeline.dbmodel.analysis import Col, ParamUse, analyse_tool
from pipeline.dbmodel.keynames import segments
from pipeline.dbmodel.ops import tool_op
from pipeline.dbmodel.paging import free_name, taken_names
from pipeline.runtime import engine, static_checks
from pipeline.runtime.state import TableInfo

STAGE = "tools"


def _run(a: list[str], b: list[str]) -> bool:
    """Whether ``b`` is a contiguous run of ``a``."""
    return bool(b) and any(a[i:i + len(b)] == b for i in range(len(a) - len(b) + 1))


def name_fits(param: str, name: str) -> bool:
    """Whether ``param`` is named for ``name``: the segments of one are a run of the other's."""
    p, n = segments(param), segments(name)
    return _run(p, n) or _run(n, p)


def _key_of(col: Col, infos: dict[str, TableInfo]) -> tuple[str, str] | None:
    """The (table, key column) a key column identifies a row of: its own table for an integer primary key, the
    parent for a reference; else None."""
    t, c = col
    info = infos.get(t)
    if info is None:
        return None
    for cc, parent, pc in info.foreign_keys:
        if cc == c:
            pinfo = infos.get(parent)
            return parent, pc or (pinfo.key[0] if pinfo else c)
    return (t, c) if info.int_pk and c == info.key[0] else None


def fits(param: str, col: Col, infos: dict[str, TableInfo]) -> bool:
    """Whether ``param`` is named for column ``col`` (or for the key a reference holds)."""
    key = _key_of(col, infos)
    return name_fits(param, col[1]) or (key is not None and name_fits(param, key[1]))


def _sub_outside_literals(sql: str, pattern: re.Pattern[str], repl: dict[str, str], fmt: str) -> str:
    out, pos = [], 0
    for m in engine._LITERALS.finditer(sql):
        out.append(pattern.sub(lambda x: fmt.format(repl[x.group(1)]) if x.group(1) in repl else x.group(0),
                               sql[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(pattern.sub(lambda x: fmt.format(repl[x.group(1)]) if x.group(1) in repl else x.group(0), sql[pos:]))
    return "".join(out)


_PLACEHOLDER = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_])")


def rename_in_sql(sql: str, renames: dict[str, str]) -> str:
    """``sql`` with its ``:name`` placeholders renamed (string literals and comments untouched)."""
    return _sub_outside_literals(sql, _PLACEHOLDER, renames, ":{}")


def rename_tool(tool: ir.Tool, renames: dict[str, str], descriptions: dict[str, str], name: str) -> ir.Tool:
    """``tool`` with parameters renamed everywhere they are read, new descriptions, and a new name."""
    params = [p.model_copy(update={"name": renames.get(p.name, p.name),
                                   "description": descriptions.get(p.name, p.description)}) for p in tool.params]

    def message(text: str | None) -> str | None:
        if text is None:
            return None
        return engine._FIELD.sub(lambda m: "{" + renames.get(m.group(1), m.group(1)) + "}", text)

    steps = [s.model_copy(update={"sql": rename_in_sql(s.sql, renames), "error": message(s.error)})
             for s in tool.steps]
    returns = tool.returns.model_copy(update={"sql": rename_in_sql(tool.returns.sql, renames)}) \
        if tool.returns else None
    description = tool.description
    for old, new in renames.items():
        if "_" in old:  # an identifier, not a word of the text
            description = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(old)}(?![A-Za-z0-9_])", new, description)
    return ir.Tool(name=name, description=description, kind=tool.kind, params=params, steps=steps,
                   returns=returns)


def _renamed_tool_name(name: str, renames: dict[str, str]) -> str:
    """``name`` with each old parameter name it spells (as a run of whole segments) replaced by the new one."""
    parts = name.split("_")
    for old, new in renames.items():
        o = old.split("_")
        for i in range(len(parts) - len(o) + 1):
            if parts[i:i + len(o)] == o:
                parts = parts[:i] + new.split("_") + parts[i + len(o):]
                break
    return "_".join(parts)


def _identifies(col: Col, key: tuple[str, str]) -> str:
    return f"the {key[1]} of the {key[0]} row ({col[0]}.{col[1]})"


def _param_fix(p: ir.Param, uses: list[ParamUse], infos: dict[str, TableInfo], taken: set[str]
               ) -> tuple[str | None, str | None, str | None]:
    """(new name or None, new description or None, what changed) for one parameter."""
    cols = [u for u in uses if u.column is not None and (u.direct or u.whole)]
    equal = next((u.column for u in cols if u.direct), None)
    key = _key_of(equal, infos) if equal is not None else None
    if not cols or any(fits(p.name, u.column, infos) for u in cols if u.column is not None):
        if equal is None or key is None:
            return None, None, None
        desc = p.description.strip()
        if any(x.lower() in desc.lower() for x in (key[0], key[1], equal[0])):
            return None, None, None
        desc = f"{desc.rstrip('.')} ({key[0]}.{key[1]})" if desc else _identifies(equal, key)
        return None, desc, f"parameter {p.name} described as {desc!r}"
    new_desc: str | None = None
    if equal is not None:
        new = free_name(equal[1], taken)
        new_desc = _identifies(equal, key) if key is not None else f"the {equal[1]} ({equal[0]}.{equal[1]})"
        col = equal
    else:
        col = next(u.column for u in cols if u.column is not None)
        new = free_name(f"{col[1]}_{p.name}", taken)
    if not re.fullmatch(ir.IDENT.pattern, new) or new in ir.RESERVED_PARAMS:
        return None, None, None
    return new, new_desc, f"parameter {p.name} renamed {new}: it is compared with or written into {col[0]}.{col[1]}"


def fix_tool(tool: ir.Tool, env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo],
             tool_names: set[str]) -> tuple[ir.Tool, list[str]]:
    """``tool`` with its parameters named for the columns they meet (see module doc), and what changed."""
    shape = analyse_tool(tool, conn, infos, tool_op(env.model_copy(update={"tools": [tool]}), tool.name))
    taken = taken_names(tool)
    renames: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    changes: list[str] = []
    for p in tool.params:
        new, desc, change = _param_fix(p, shape.uses.get(p.name, []), infos, taken)
        if new is not None:
            taken.add(new)
            renames[p.name] = new
        if desc is not None:
            descriptions[p.name] = desc
        if change is not None:
            changes.append(change)
    if not changes:
        return tool, []
    name = _renamed_tool_name(tool.name, renames)
    if name != tool.name and (name in tool_names or not re.fullmatch(ir.IDENT.pattern, name)):
        name = tool.name
    if name != tool.name:
        changes.append(f"tool renamed {name}")
    try:
        fixed = rename_tool(tool, renames, descriptions, name)
    except ValueError:
        return tool, []
    if static_checks.check_tool(conn, fixed.model_dump(mode="json")):
        return tool, []
    return fixed, changes


def fix_param_names(env: ir.Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo]
                    ) -> tuple[list[ir.Tool], list[ir.Rejection]]:
    """Every tool of ``env`` with its parameters named for their columns (``conn``: the schema, rows optional),
    and one note per changed tool."""
    names = {t.name for t in env.tools}
    out: list[ir.Tool] = []
    notes: list[ir.Rejection] = []
    for tool in env.tools:
        fixed, changes = fix_tool(tool, env, conn, infos, names)
        if fixed.name != tool.name:
            names = (names - {tool.name}) | {fixed.name}
        out.append(fixed)
        if changes:
            notes.append(ir.Rejection(stage=STAGE, item=tool.name, reason="names fixed by code: " + "; ".join(changes),
                                      evidence={"tool": fixed.name, "params": [p.name for p in fixed.params]}))
    return out, notes


def misnamed(tools: Sequence[ir.Tool], env: ir.Environment, conn: sqlite3.Connection,
             infos: dict[str, TableInfo]) -> list[str]:
    """``tool(param) meets table.column`` for each parameter that meets columns and is named for none of them."""
    out = []
    for tool in tools:
        shape = analyse_tool(tool, conn, infos, tool_op(env.model_copy(update={"tools": [tool]}), tool.name))
        for p in tool.params:
            cols = [u.column for u in shape.uses.get(p.name, []) if u.column is not None and (u.direct or u.whole)]
            if cols and not any(fits(p.name, c, infos) for c in cols):
                out.append(f"{tool.name}({p.name}) meets {cols[0][0]}.{cols[0][1]}")
    return out
