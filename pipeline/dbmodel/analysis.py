"""What each tool takes and gives, read from its SQL by a real parser (sqlglot), not from names.

For every parameter: the table column it is compared with (``filter``: it picks rows) or written into
(``value``: it sets a column). For every field of a tool's result: the table column it carries (or, for a
write without a ``returns`` query, ``last_id`` = the primary key of the inserted row). These are the edges
of the tool-dependency graph: a result field that carries column ``t.c`` feeds any parameter compared with
``t.c`` or with a foreign key pointing at it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Literal

import sqlglot
from sqlglot import exp

from pipeline.ir import Environment, Tool
from pipeline.runtime import engine
from pipeline.runtime.state import TableInfo

Col = tuple[str, str]
"""(table, column)."""


@dataclass(frozen=True)
class ParamUse:
    param: str
    column: Col | None
    role: Literal["filter", "value", "other"]
    direct: bool = True
    """The parameter is the whole compared/written expression (``col = :p``), not part of one."""
    whole: bool = False
    """The parameter is one whole side of a comparison of any kind (``col >= :p``, ``col LIKE :p``) or the whole
    written value."""


@dataclass
class ToolShape:
    name: str
    kind: Literal["read", "write"]
    op: Literal["read", "create", "update", "delete"]
    target: str | None
    """The table the tool writes first, or the first table its result reads."""
    uses: dict[str, list[ParamUse]] = field(default_factory=dict)
    outputs: dict[str, Col | None] = field(default_factory=dict)
    many: bool = True
    """The result is a list of rows (``returns`` mode ``all``)."""

    def column_of(self, param: str, role: str | None = None) -> Col | None:
        """The column a parameter is compared with or written into. A filter may be indirect (``LIKE``,
        ``>=``: the row's own value still finds the row); a written value must be the parameter itself."""
        uses = [u for u in self.uses.get(param, []) if u.column is not None and (role is None or u.role == role)]
        for u in uses:
            if u.direct:
                return u.column
        for u in uses:
            if u.role == "filter":
                return u.column
        return None

    def output_for(self, col: Col) -> str | None:
        """The result field that carries ``col``."""
        for name, c in self.outputs.items():
            if c == col:
                return name
        return None


def _parse(sql: str) -> exp.Expression | None:
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
        return tree if isinstance(tree, exp.Expression) else None
    except Exception:
        return None


def _aliases(tree: exp.Expression) -> dict[str, str]:
    out: dict[str, str] = {}
    for t in tree.find_all(exp.Table):
        out[t.alias_or_name.lower()] = t.name
        out[t.name.lower()] = t.name
    return out


def _scope_tables(node: exp.Expression, tree: exp.Expression) -> list[str]:
    sel = node.find_ancestor(exp.Select)
    scope = sel if sel is not None else tree
    names = []
    for t in scope.find_all(exp.Table):
        if t.find_ancestor(exp.Select) is (sel if sel is not None else None) or sel is None:
            names.append(t.name)
    return names or [t.name for t in tree.find_all(exp.Table)]


def _resolve(col: exp.Column, tree: exp.Expression, infos: dict[str, TableInfo]) -> Col | None:
    name = col.name
    if col.table:
        table = _aliases(tree).get(col.table.lower())
        return (table, name) if table in infos and name in infos[table].columns else None
    for t in _scope_tables(col, tree):
        if t in infos and name in infos[t].columns:
            return (t, name)
    return None


def _placeholder(node: exp.Expression) -> str | None:
    return node.name if isinstance(node, exp.Placeholder) and node.name else None


def _statement_uses(sql: str, infos: dict[str, TableInfo]) -> list[ParamUse]:
    tree = _parse(sql)
    if tree is None:
        return []
    uses: list[ParamUse] = []
    claimed: set[int] = set()
    if isinstance(tree, exp.Insert):
        schema = tree.this
        table = schema.this.name if isinstance(schema, exp.Schema) else getattr(schema, "name", None)
        cols = [c.name for c in schema.expressions] if isinstance(schema, exp.Schema) else []
        if table in infos and not cols:
            cols = list(infos[table].columns)
        values = tree.expression
        rows = values.expressions if isinstance(values, exp.Values) else []
        for row in rows[:1]:
            for col, v in zip(cols, row.expressions, strict=False):
                for ph in v.find_all(exp.Placeholder):
                    claimed.add(id(ph))
                    uses.append(ParamUse(ph.name, (table, col) if table in infos else None, "value",
                                         direct=ph is v, whole=ph is v))
    if isinstance(tree, exp.Update):
        table = tree.this.name
        for eq in tree.args.get("expressions") or []:
            if isinstance(eq, exp.EQ) and isinstance(eq.left, exp.Column):
                for ph in eq.right.find_all(exp.Placeholder):
                    claimed.add(id(ph))
                    uses.append(ParamUse(ph.name, (table, eq.left.name) if table in infos else None, "value",
                                         direct=ph is eq.right, whole=ph is eq.right))
    for cmp in tree.find_all(exp.EQ, exp.Like, exp.ILike, exp.GTE, exp.LTE, exp.GT, exp.LT):
        left, right = cmp.left, cmp.right
        for a, b in ((left, right), (right, left)):
            if not isinstance(a, exp.Column):
                continue
            for ph in b.find_all(exp.Placeholder):
                if id(ph) in claimed:
                    continue
                claimed.add(id(ph))
                uses.append(ParamUse(ph.name, _resolve(a, tree, infos), "filter",
                                     direct=ph is b and isinstance(cmp, exp.EQ), whole=ph is b))
    for ph in tree.find_all(exp.Placeholder):
        if id(ph) not in claimed and ph.name:
            uses.append(ParamUse(ph.name, None, "other", direct=False))
    return uses


def _outputs(sql: str, conn: sqlite3.Connection, infos: dict[str, TableInfo]) -> dict[str, Col | None]:
    try:
        names = engine.result_columns(conn, sql)
    except sqlite3.Error:
        return {}
    tree = _parse(sql)
    found: dict[str, Col | None] = {}
    if isinstance(tree, exp.Select):
        for proj in tree.expressions:
            if isinstance(proj, exp.Star) or (isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star)):
                tables = [proj.table] if isinstance(proj, exp.Column) and proj.table else None
                alias = _aliases(tree)
                for t in ([alias.get(tables[0].lower())] if tables else [x.name for x in tree.find_all(exp.Table)
                                                                            if x.find_ancestor(exp.Select) is tree]):
                    if t in infos:
                        for c in infos[t].columns:
                            found.setdefault(c, (t, c))
            elif isinstance(proj, exp.Alias) and isinstance(proj.this, exp.Column):
                found[proj.alias] = _resolve(proj.this, tree, infos)
            elif isinstance(proj, exp.Column):
                found[proj.name] = _resolve(proj, tree, infos)
    return {n: found.get(n) for n in names}


def analyse_tool(tool: Tool, conn: sqlite3.Connection, infos: dict[str, TableInfo], op: str) -> ToolShape:
    uses: dict[str, list[ParamUse]] = {p.name: [] for p in tool.params}
    target: str | None = None
    # what a write statement does with a parameter comes first, then guards and queries
    for step in sorted(tool.steps, key=lambda s: s.kind != "write"):
        for u in _statement_uses(step.sql, infos):
            if u.param in uses:
                uses[u.param].append(u)
    for step in tool.steps:
        if step.kind == "write" and target is None:
            tree = _parse(step.sql)
            t = tree.find(exp.Table) if tree is not None else None
            target = t.name if t is not None and t.name in infos else None
    outputs: dict[str, Col | None] = {}
    many = True
    if tool.returns is not None:
        for u in _statement_uses(tool.returns.sql, infos):
            if u.param in uses:
                uses[u.param].append(u)
        outputs = _outputs(tool.returns.sql, conn, infos)
        many = tool.returns.mode == "all"
        if target is None:
            firsts = [c for c in outputs.values() if c is not None]
            target = firsts[0][0] if firsts else None
    else:
        many = False
        outputs = {"changes": None, "last_id": None}
        if op == "create" and target is not None and infos[target].int_pk:
            outputs["last_id"] = (target, infos[target].key[0])
    # prefer, per parameter, the uses that name a column and are direct
    for p in uses:
        uses[p].sort(key=lambda u: (u.column is None, not u.direct))
    return ToolShape(tool.name, tool.kind, op, target, uses, outputs, many)  # type: ignore[arg-type]


def analyse(env: Environment, conn: sqlite3.Connection, infos: dict[str, TableInfo]) -> dict[str, ToolShape]:
    from pipeline.dbmodel.ops import tool_op

    return {t.name: analyse_tool(t, conn, infos, tool_op(env, t.name)) for t in env.tools}
