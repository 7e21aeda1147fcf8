"""The real rows tasks are built from: row labels, samples shown to the task agent, and lookups a
user could ask about (planned by code, so a small model only has to phrase the question)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pipeline.ir import Environment, ToolCall
from pipeline.runtime import engine
from verify.derive import COUNT, extract_answer, tables_used
from verify.replay import Run
from verify.state import TableInfo, id_table, qi, singular_forms

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
MAX_ROWS = 3


def _value(v: Any) -> Any:
    return v[:57] + "..." if isinstance(v, str) and len(v) > 60 else v


def shown_rows(env: Environment, tools: list[str], index: int, conn: Any, infos: dict[str, TableInfo],
               per_table: int) -> str:
    """Up to ``per_table`` rows of every table the tools touch (rotated by ``index`` for variety)."""
    tables = tables_used(env, tools)
    for name in tools:
        for p in env.tool(name).params:
            t = id_table(infos, p.name)
            if t and t not in tables:
                tables.append(t)
    blocks = []
    for table in tables:
        info = infos[table]
        total = conn.execute(f"SELECT COUNT(*) FROM {qi(table)}").fetchone()[0]
        if not total:
            blocks.append(f"{table}: (no rows)")
            continue
        offset = ((index - 1) * 2) % total if total > per_table else 0
        order = "rowid" if info.key == ("rowid",) else ", ".join(qi(k) for k in info.key)
        rows = conn.execute(
            f"SELECT * FROM {qi(table)} ORDER BY {order} LIMIT {per_table} OFFSET {offset}"
        ).fetchall()
        if len(rows) < per_table and total > per_table:
            rows += conn.execute(f"SELECT * FROM {qi(table)} ORDER BY {order} LIMIT {per_table - len(rows)}").fetchall()
        lines = [json.dumps({c: _value(v) for c, v in zip(info.columns, r, strict=True)}, ensure_ascii=False) for r in rows]
        blocks.append(f"{table} ({total} rows):\n" + "\n".join(lines))
    return "\n\n".join(blocks)


def row_labels(conn: Any, info: TableInfo, limit: int = 200) -> tuple[str, dict[str, Any]] | None:
    """A text column naming each row uniquely (``name``/``title`` first): (column, {label: key})."""
    if len(info.key) != 1 or info.key == ("rowid",):
        return None
    key = info.key[0]
    cols = [c for c, t in zip(info.columns, info.types, strict=True) if t.upper().startswith("TEXT") and c != key]
    cols.sort(key=lambda c: 0 if re.search(r"name|title", c, re.I) else 1)
    for col in cols:
        rows = conn.execute(f"SELECT {qi(col)}, {qi(key)} FROM {qi(info.name)} ORDER BY {qi(key)} LIMIT {limit + 1}").fetchall()
        labels = [r[0] for r in rows]
        if not rows or len(rows) > limit or len(set(labels)) != len(labels):
            continue
        if all(isinstance(x, str) and x.strip() and not _DATE.match(x) and "@" not in x for x in labels):
            return col, dict(rows)
    return None


def answer_columns(cols: list[str], searched: set[str]) -> list[str]:
    """Result columns a user could ask about: not internal ids, not what the question searches by."""
    keep = [c for c in cols if c.lower() != "id" and not c.lower().endswith("_id") and c not in searched]
    return keep or cols


@dataclass(frozen=True)
class Lookup:
    """A question planned by code: the read call, the result field that answers it, and its subject
    in words (``the member Dan Wu``), for the LLM to phrase."""

    call: ToolCall
    answer_field: str
    answer: str
    subject: str

    @property
    def counts(self) -> bool:
        return self.answer_field == COUNT


def _target_table(env: Environment, tool_name: str, infos: dict[str, TableInfo], cols: list[str]) -> str | None:
    tool = env.tool(tool_name)
    for p in tool.params:
        t = id_table(infos, p.name)
        if t and p.type == "integer" and p.required:
            return t
    used = tables_used(env, [tool_name])
    scored = sorted(used, key=lambda t: (-len(set(cols) & set(infos[t].columns)), t))
    return scored[0] if scored else None


def _fill(env: Environment, tool_name: str, table: str, row: dict[str, Any], infos: dict[str, TableInfo],
          label_col: str | None) -> dict[str, Any] | None:
    args: dict[str, Any] = {}
    for p in env.tool(tool_name).params:
        t = id_table(infos, p.name)
        if t is not None and p.type == "integer":
            if t == table:
                args[p.name] = row[infos[table].key[0]]
            elif p.name in row and row[p.name] is not None:
                args[p.name] = row[p.name]
            elif p.required:
                return None
        elif p.type == "string" and not p.enum and isinstance(row.get(p.name), str):
            args[p.name] = row[p.name]
        elif p.required:
            if p.type == "string" and not p.enum and label_col:
                args[p.name] = row[label_col]
            elif p.enum:
                args[p.name] = p.enum[0]
            else:
                return None
    return args


def _subject(table: str, row: dict[str, Any], label_col: str | None, args: dict[str, Any]) -> str:
    """The question's subject in words: ``the member 'Dan Wu'``, else the arguments."""
    noun = min(singular_forms(table), key=len)
    if label_col is not None:
        return f"the {noun} {row[label_col]!r}"
    return ", ".join(f"{k.replace('_', ' ')} {v!r}" for k, v in args.items())


_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def plan_lookup(env: Environment, tool_name: str, index: int, run: Run) -> Lookup | None:
    """A question about a real row for read tool ``tool_name``: arguments filled from the row, the call run,
    and an answer field picked from the result (rotated by ``index``). None when the tool cannot be
    filled from a row or never returns 1-3 rows."""
    tool = env.tool(tool_name)
    if tool.kind != "read" or tool.returns is None:
        return None
    conn, infos = run.inst.conn, run.infos
    cols = engine.result_columns(conn, tool.returns.sql)
    table = _target_table(env, tool_name, infos, cols)
    if table is None:
        return None
    info = infos[table]
    labelled = row_labels(conn, info)
    order = "rowid" if info.key == ("rowid",) else ", ".join(qi(k) for k in info.key)
    rows = [dict(zip(info.columns, r, strict=True)) for r in conn.execute(f"SELECT * FROM {qi(table)} ORDER BY {order} LIMIT 200")]
    searched = {p.name for p in tool.params}
    label_col = labelled[0] if labelled else None
    count: Lookup | None = None
    for k in range(len(rows) if tool.params else 1):
        row = rows[(index * 3 + k) % len(rows)] if rows else {}
        args = _fill(env, tool_name, table, row, infos, label_col) if rows else ({} if not tool.params else None)
        if args is None:
            return None
        resp = run.inst.call(tool_name, args)
        result = resp.get("result") if resp.get("ok") else None
        found = result if isinstance(result, list) else [result] if isinstance(result, dict) else []
        if len(found) > MAX_ROWS and isinstance(result, list) and count is None:
            what = _subject(table, row, label_col, args) if args else ""
            count = Lookup(ToolCall(tool=tool_name, arguments=args), COUNT, str(len(found)), what)
        if not 1 <= len(found) <= MAX_ROWS:
            continue
        fields = [c for c in answer_columns(cols, searched) if all(r.get(c) is not None for r in found)]
        fields = [c for c in fields if not any(_DATETIME.match(str(r.get(c))) for r in found)] or fields
        if labelled:
            fields = [c for c in fields if c != labelled[0]]  # not "the title of the book 'Emma'"
        if not fields:
            continue
        field = fields[index % len(fields)]
        answer, err = extract_answer(result, field)
        if answer is None or err:
            continue
        return Lookup(ToolCall(tool=tool_name, arguments=args), field, answer, _subject(table, row, label_col, args))
    return count  # a list too long to ask about row by row: ask how many
