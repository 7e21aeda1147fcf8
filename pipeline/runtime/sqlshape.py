"""Structural questions about SQL that SQLite's authorizer cannot answer, answered with sqlglot.

The authorizer (``engine.Guard``) reports *which* functions a statement calls and which tables it
touches; what it cannot say is how a statement is built. These questions need that:

* ``clock_calls(sql)``: which date/time calls read the wall clock (``date('now')``, ``datetime()``:
  ``'now'`` anywhere among their arguments, or no argument at all); ``nondeterministic_calls``
  adds CURRENT_* and ``random()`` for DDL, parts of which SQLite does not resolve at CREATE;
* ``column_rules(ddl)``: what a table's CHECK constraints allow per column (``status IN ('a',
  'b')``, ``qty >= 0``, ``qty BETWEEN 1 AND 9``, ``length(code) <= 8``);
* ``param_columns(sql, columns)``: which table column each ``:param`` of a statement is bound to
  (compared with ``=`` or ``IN``, assigned by ``SET``, inserted by ``INSERT``; ``COALESCE(:p, col)``
  and ``IFNULL`` count as binding ``:p``; with ``compared``, ``<``, ``>``, ``<>`` and ``BETWEEN`` too), and
  which parameters are also used in other ways; ``param_uses`` gives both views from one walk.
* ``escaping_disjuncts(sql)``: which OR branches of a WHERE escape a sibling branch's parameter
  filter (``a = :a AND b OR c`` is ``(a = :a AND b) OR c``: ``c`` matches rows of every ``a``).
* ``date_arithmetic(sql, dated, names)``: which ``+ - * /`` expressions have a date/time operand
  (``:today + 1`` is ``2027`` in SQLite); ``dated_outputs`` says which result columns of a query are dates.

Everything here is deterministic for a given sqlglot version (pinned in pyproject.toml): the
rules it derives are rendered into ``server.py``. Anything sqlglot cannot parse yields no rule.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from typing import Any

CLOCK_FUNCTIONS = ("date", "time", "datetime", "julianday", "strftime", "unixepoch", "timediff")
CLOCK_KEYWORDS = ("current_date", "current_time", "current_timestamp")
RANDOM_FUNCTIONS = ("random", "randomblob")
DIALECT = "sqlite"


@cache
def _sqlglot() -> Any:
    import sqlglot  # lazily: only build-time and render-time callers need it

    return sqlglot


def parse(sql: str) -> Any:
    """``sql`` parsed as one SQLite statement (a sqlglot expression), or None where it does not parse: the one
    parse the tools stage's readers of a statement share."""
    sqlglot = _sqlglot()
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except Exception:
        return None
    return tree if isinstance(tree, sqlglot.exp.Expression) else None


def _tokens(sql: str) -> list[Any]:
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise(DIALECT).tokenize(sql)


def _calls(sql: str) -> list[tuple[str, str, bool]]:
    """Every function call and CURRENT_* keyword in ``sql``: ``(name, text as written, reads 'now')``.

    ``reads 'now'``: the string ``'now'`` (any case) is among the call's arguments, at any depth, or
    the call has no argument. Uses sqlglot's SQLite tokenizer, so names inside strings, comments or
    quoted identifiers never match.
    """
    from sqlglot.tokens import TokenType

    try:
        tokens = _tokens(sql)
    except Exception:
        return []
    out = []
    for i, tok in enumerate(tokens):
        if tok.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        name = tok.text.lower()
        if name in CLOCK_KEYWORDS:
            out.append((name, tok.text, True))
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth, j, now = 0, i + 1, False
        empty = i + 2 < len(tokens) and tokens[i + 2].token_type == TokenType.R_PAREN
        while j < len(tokens):
            t = tokens[j]
            if t.token_type == TokenType.L_PAREN:
                depth += 1
            elif t.token_type == TokenType.R_PAREN:
                depth -= 1
                if depth == 0:
                    break
            elif t.token_type == TokenType.STRING and t.text.strip().lower() == "now":
                now = True
            j += 1
        end = tokens[j].end if j < len(tokens) else len(sql) - 1
        out.append((name, sql[tok.start : end + 1], now or empty))
    return out


def clock_calls(sql: str) -> list[str]:
    """The date/time function calls in ``sql`` that read the wall clock, as written
    (``date('now')``, ``datetime()``, ``strftime('%Y', coalesce(:d, 'now'))``)."""
    return [text for name, text, now in _calls(sql) if name in CLOCK_FUNCTIONS and now]


def nondeterministic_calls(sql: str) -> list[str]:
    """Everything in ``sql`` that gives a different value from run to run: wall-clock date/time
    calls, CURRENT_DATE/TIME/TIMESTAMP, ``random()`` and ``randomblob()``; for schema DDL, whose
    DEFAULTs and trigger bodies SQLite does not resolve when the table is created."""
    out = []
    for name, text, now in _calls(sql):
        if name in CLOCK_FUNCTIONS and now:
            out.append(f"{text} reads the wall clock")
        elif name in CLOCK_KEYWORDS:
            out.append(f"{name.upper()} reads the wall clock")
        elif name in RANDOM_FUNCTIONS:
            out.append(f"{name}() gives a different value on every run")
    return list(dict.fromkeys(out))


# ---------------------------------------------------------------- CHECK constraints


def literal_value(node: Any) -> tuple[bool, Any]:
    """Whether a parsed SQL expression is a literal (a string, a number, a negated number, in parentheses or
    not), and its Python value."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return literal_value(node.this)
    if isinstance(node, exp.Neg):
        ok, value = literal_value(node.this)
        return (ok and isinstance(value, (int, float)) and not isinstance(value, bool)), (-value if ok else None)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return True, node.this
        text = node.this
        try:
            return True, int(text)
        except ValueError:
            try:
                return True, float(text)
            except ValueError:
                return False, None
    return False, None


def _column_name(node: Any) -> str | None:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return node.name.lower() if isinstance(node, exp.Column) else None


def _merge(rules: dict[str, dict[str, Any]], column: str, rule: dict[str, Any]) -> None:
    have = rules.setdefault(column, {})
    if "enum" in rule:
        have["enum"] = [v for v in have["enum"] if v in rule["enum"]] if "enum" in have else list(rule["enum"])
    for key, pick in (("minimum", max), ("xminimum", max), ("maximum", min), ("xmaximum", min), ("max_length", min)):
        if key in rule:
            have[key] = pick(have[key], rule[key]) if key in have else rule[key]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _comparison(node: Any, rules: dict[str, dict[str, Any]]) -> None:
    """A ``column <op> number`` (either side) or ``length(column) <op> number`` fact."""
    from sqlglot import exp

    ops = {exp.GTE: ">=", exp.GT: ">", exp.LTE: "<=", exp.LT: "<"}
    flipped = {">=": "<=", ">": "<", "<=": ">=", "<": ">"}
    op = ops[type(node)]
    left, right = node.this, node.expression
    ok, value = literal_value(right)
    if not ok:
        ok, value = literal_value(left)
        left, op = right, flipped[op]
    if not ok or not _number(value):
        return
    inner = left.this if isinstance(left, exp.Paren) else left
    if isinstance(inner, exp.Length):
        column = _column_name(inner.this)
        if column and op in ("<=", "<") and isinstance(value, int):
            _merge(rules, column, {"max_length": value if op == "<=" else value - 1})
        return
    column = _column_name(left)
    if column is None:
        return
    key = {">=": "minimum", "<=": "maximum", ">": "xminimum", "<": "xmaximum"}[op]
    _merge(rules, column, {key: value})


def _facts(node: Any, rules: dict[str, dict[str, Any]]) -> None:
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        _facts(node.this, rules)
    elif isinstance(node, exp.And):
        _facts(node.this, rules)
        _facts(node.expression, rules)
    elif isinstance(node, exp.Or):
        # "col IS NULL OR <fact about col>": NULL is always accepted by a CHECK anyway
        for side, other in ((node.this, node.expression), (node.expression, node.this)):
            inner = side.this if isinstance(side, exp.Paren) else side
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null) and _column_name(inner.this):
                sub: dict[str, dict[str, Any]] = {}
                _facts(other, sub)
                for col, rule in sub.items():
                    if col == _column_name(inner.this):
                        _merge(rules, col, rule)
    elif isinstance(node, exp.In) and not node.args.get("query"):
        column = _column_name(node.this)
        values = [literal_value(e) for e in node.expressions]
        if column and values and all(ok for ok, _ in values):
            _merge(rules, column, {"enum": list(dict.fromkeys(v for _, v in values))})
    elif isinstance(node, exp.Between):
        column = _column_name(node.this)
        (lo_ok, lo), (hi_ok, hi) = literal_value(node.args["low"]), literal_value(node.args["high"])
        if column and lo_ok and hi_ok and _number(lo) and _number(hi):
            _merge(rules, column, {"minimum": lo, "maximum": hi})
    elif isinstance(node, (exp.GTE, exp.GT, exp.LTE, exp.LT)):
        _comparison(node, rules)


def parse_table(ddl: str) -> tuple[str, list[str], dict[str, dict[str, Any]]] | None:
    """``(table, columns, rules)`` of one ``CREATE TABLE``; rules as in ``column_rules``."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(ddl, read=DIALECT)
    except Exception:
        return None
    schema = tree.this if isinstance(tree, exp.Create) else None
    if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table):
        return None
    columns: list[str] = []
    rules: dict[str, dict[str, Any]] = {}
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(item.name.lower())
            for constraint in item.args.get("constraints") or []:
                if isinstance(constraint.args.get("kind"), exp.CheckColumnConstraint):
                    _facts(constraint.args["kind"].this, rules)
        elif isinstance(item, exp.CheckColumnConstraint):
            _facts(item.this, rules)
        elif isinstance(item, exp.Constraint):
            for sub in item.expressions:
                if isinstance(sub, exp.CheckColumnConstraint):
                    _facts(sub.this, rules)
    known = {k: v for k, v in rules.items() if k in columns}
    return schema.this.name.lower(), columns, known


def column_rules(ddl: str) -> dict[str, dict[str, Any]]:
    """What the CHECK constraints of one ``CREATE TABLE`` allow, per (lower-case) column:
    ``{"enum": [...]}``, ``{"minimum": x, "maximum": y}`` (``>=``, ``<=``, BETWEEN), ``{"xminimum": x,
    "xmaximum": y}`` (exclusive: ``>``, ``<``), ``{"max_length": n}`` (``length(col) <= n``). Constraints joined by AND all count;
    OR only as ``col IS NULL OR ...``; anything else is ignored."""
    parsed = parse_table(ddl)
    return parsed[2] if parsed else {}


# ---------------------------------------------------------------- parameter bindings


def _placeholder(node: Any) -> str | None:
    """The parameter a value expression passes through: ``:p``, ``COALESCE(:p, ...)``, ``IFNULL(:p, ...)``."""
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Placeholder) and node.this:
        return str(node.this)
    if isinstance(node, exp.Coalesce):
        return _placeholder(node.this)
    return None


Bindings = dict[str, set[tuple[str, str]]]


def param_columns(sql: str, columns: dict[str, list[str]],
                  compared: bool = False) -> tuple[Bindings, set[str]]:
    """``(bindings, other_uses)`` for one statement: each ``:param`` bound to a table column (as
    ``{param: {(table, column)}}``) and the parameters also used in a way that binds no column
    (``:p IS NULL`` does not count). ``columns`` is the schema: ``{table: [column, ...]}``. With
    ``compared``, a parameter compared with a column (``col >= :p``, ``col BETWEEN :a AND :b``) is
    bound to it too (values of the column's kind, as a date for a date column).
    A statement sqlglot cannot parse gives ``({}, {"*"})``."""
    both = param_uses(sql, columns)
    return both[2:] if compared else both[:2]


def param_uses(sql: str, columns: dict[str, list[str]]) -> tuple[Bindings, set[str], Bindings, set[str]]:
    """Both views of :func:`param_columns` from one parse and walk of ``sql``: ``(bindings, other_uses)``
    without and then with ``compared``."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except Exception:
        tree = None
    if tree is None:
        return {}, {"*"}, {}, {"*"}
    schema = {t.lower(): [c.lower() for c in cols] for t, cols in columns.items()}
    aliases: dict[str, str] = {}
    in_scope: list[str] = []
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name in schema:
            aliases[(table.alias or table.name).lower()] = name
            aliases[name] = name
            in_scope.append(name)

    def owner(col: Any) -> tuple[str, str] | None:
        cname = col.name.lower()
        if col.table:
            table = aliases.get(col.table.lower())
            return (table, cname) if table and cname in schema[table] else None
        holders = sorted({t for t in in_scope if cname in schema[t]})
        return (holders[0], cname) if len(holders) == 1 else None

    bindings: Bindings = {}
    bound_nodes: set[int] = set()
    compared: Bindings = {}  # the bindings by comparison alone (``col >= :p``)
    compared_nodes: set[int] = set()

    def bind(param_node: Any, target: tuple[str, str] | None, comparison: bool = False) -> None:
        name = _placeholder(param_node)
        if name is None or target is None:
            return
        (compared if comparison else bindings).setdefault(name, set()).add(target)
        for ph in ([param_node] if isinstance(param_node, exp.Placeholder) else param_node.find_all(exp.Placeholder)):
            if ph.this == name:
                (compared_nodes if comparison else bound_nodes).add(id(ph))
                break

    for node in tree.walk():
        if isinstance(node, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            for col, val in ((node.this, node.expression), (node.expression, node.this)):
                if isinstance(col, exp.Column):
                    bind(val, owner(col), comparison=not isinstance(node, exp.EQ))
        elif isinstance(node, exp.Between) and isinstance(node.this, exp.Column):
            for val in (node.args.get("low"), node.args.get("high")):
                if val is not None:
                    bind(val, owner(node.this), comparison=True)
        elif isinstance(node, exp.In) and isinstance(node.this, exp.Column) and not node.args.get("query"):
            for val in node.expressions:
                bind(val, owner(node.this))
        elif isinstance(node, exp.Is) and isinstance(node.this, exp.Placeholder) and isinstance(node.expression, exp.Null):
            bound_nodes.add(id(node.this))
    if isinstance(tree, exp.Insert) and isinstance(tree.this, exp.Schema) and isinstance(tree.this.this, exp.Table):
        table = tree.this.this.name.lower()
        names = [c.name.lower() for c in tree.this.expressions]
        source = tree.expression
        rows = source.expressions if isinstance(source, exp.Values) else [source] if isinstance(source, exp.Select) else []
        for row in rows:
            values = row.expressions if isinstance(row, (exp.Tuple, exp.Select)) else []
            if table in schema and len(values) == len(names):
                for cname, val in zip(names, values, strict=True):
                    bind(val, (table, cname) if cname in schema[table] else None)
    placeholders = [ph for ph in tree.find_all(exp.Placeholder) if ph.this]
    others = {str(ph.this) for ph in placeholders if id(ph) not in bound_nodes}
    with_compared = {name: set(targets) for name, targets in bindings.items()}
    for name, targets in compared.items():
        with_compared.setdefault(name, set()).update(targets)
    others_compared = {str(ph.this) for ph in placeholders if id(ph) not in bound_nodes | compared_nodes}
    return bindings, others, with_compared, others_compared


# ---------------------------------------------------------------- OR precedence


def _unwrap(node: Any) -> Any:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _split(node: Any, kind: Any) -> list[Any]:
    """The top-level operands of ``node`` joined by ``kind`` (``exp.Or`` or ``exp.And``), parentheses unwrapped."""
    node = _unwrap(node)
    if isinstance(node, kind):
        return _split(node.this, kind) + _split(node.expression, kind)
    return [node]


def _own_nodes(node: Any, kind: Any) -> list[Any]:
    """The ``kind`` nodes of ``node`` outside any nested query (a subquery's columns are not this level's)."""
    from sqlglot import exp

    out = []
    for sub in node.walk(prune=lambda n: n is not node and isinstance(n, (exp.Select, exp.Subquery, exp.Union))):
        if isinstance(sub, kind) and not (sub is not node and isinstance(sub, (exp.Select, exp.Subquery, exp.Union))):
            out.append(sub)
    return out


def _param_valued(node: Any) -> bool:
    """A value fixed by the call's parameters: a ``:param`` (or an expression or subquery using one) reading no
    column of the row being filtered."""
    from sqlglot import exp

    node = _unwrap(node)
    return node.find(exp.Placeholder) is not None and not _own_nodes(node, exp.Column)


def _filters(conjunct: Any) -> bool:
    """``column = <param value>`` (either side) or ``column IN (<param value>, ...)``."""
    from sqlglot import exp

    if isinstance(conjunct, exp.EQ):
        left, right = _unwrap(conjunct.this), _unwrap(conjunct.expression)
        return (isinstance(left, exp.Column) and _param_valued(right)) or \
            (isinstance(right, exp.Column) and _param_valued(left))
    if isinstance(conjunct, exp.In) and isinstance(_unwrap(conjunct.this), exp.Column):
        query = conjunct.args.get("query")
        if query is not None:
            return _param_valued(query)
        return any(_param_valued(e) for e in conjunct.expressions)
    return False


def _gated(conjunct: Any) -> bool:
    """A test of the parameters alone (``:x IS NULL``, ``:mode = 'all'``): the branch applies only on such calls."""
    from sqlglot import exp

    return conjunct.find(exp.Placeholder) is not None and not _own_nodes(conjunct, exp.Column)


def escaping_disjuncts(sql: str) -> list[tuple[str, str]]:
    """The OR branches of a WHERE that escape the parameter filter of a sibling branch, as
    ``(escaping branch, filtered sibling)`` texts.

    For every WHERE of ``sql`` (subqueries included) the condition is split at its top-level ORs
    (parentheses unwrapped). A branch is *filtered* when one of its top-level AND conjuncts is
    ``column = :param`` or ``column IN (:param, ...)`` (either side; a value computed from
    parameters alone counts). A branch that reads a column, is not filtered and is not gated by a
    test of the parameters alone (``:x IS NULL``) is reported when a sibling is filtered: AND binds
    tighter than OR, so ``a = :a AND b OR c`` is ``(a = :a AND b) OR c``, and ``c`` matches rows
    whatever ``:a`` is. ``id = :id OR name = :name``, ``col = :x OR :x IS NULL``, ``s = 'a' OR s =
    'b'`` and ``a = :a AND (b OR c)`` are not reported. SQL sqlglot cannot parse gives nothing.
    """
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except Exception:
        return []
    if tree is None:
        return []
    out: list[tuple[str, str]] = []
    for where in tree.find_all(exp.Where):
        branches = _split(where.this, exp.Or)
        if len(branches) < 2:
            continue
        filtered = [b for b in branches if any(_filters(c) for c in _split(b, exp.And))]
        if not filtered:
            continue
        for branch in branches:
            conjuncts = _split(branch, exp.And)
            if branch in filtered or any(_gated(c) for c in conjuncts) or not _own_nodes(branch, exp.Column):
                continue
            out.append((branch.sql(dialect=DIALECT), filtered[0].sql(dialect=DIALECT)))
    return out


# ---------------------------------------------------------------- arithmetic on dates

DATE_VALUED_CALLS = ("date", "datetime", "time")  # calls whose result is date/time text


def _resolver(tree: Any, dated: Collection[tuple[str, str]]) -> Any:
    """A test of whether a column node of ``tree`` is one of the ``dated`` ``(table, column)`` pairs: a qualified
    column by its table or alias, an unqualified one when exactly one table of the statement has it dated."""
    from sqlglot import exp

    dated = {(t.lower(), c.lower()) for t, c in dated}
    aliases: dict[str, str] = {}
    in_scope: set[str] = set()
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        aliases[(table.alias or table.name).lower()] = name
        aliases[name] = name
        in_scope.add(name)

    def is_dated(col: Any) -> bool:
        cname = col.name.lower()
        if col.table:
            return (aliases.get(col.table.lower(), col.table.lower()), cname) in dated
        return len({t for t in in_scope if (t, cname) in dated}) == 1

    return is_dated


def _date_valued(node: Any, is_dated: Any, names: Collection[str]) -> bool:
    """A date/time value: a placeholder in ``names``, a dated column, or a ``date()``/``datetime()``/``time()`` call."""
    from sqlglot import exp

    node = _unwrap(node)
    if isinstance(node, exp.Placeholder):
        return str(node.this).lower() in names
    if isinstance(node, exp.Column):
        return bool(is_dated(node))
    if isinstance(node, exp.Date) or (isinstance(node, exp.Anonymous) and node.name.lower() in DATE_VALUED_CALLS):
        return True
    return False


def date_arithmetic(sql: str, dated: Collection[tuple[str, str]], names: Collection[str]) -> list[str]:
    """The ``+``, ``-``, ``*``, ``/`` expressions of ``sql`` with an operand that is a date/time value, as
    sqlglot writes them back: a placeholder in ``names`` (the clock's ``:today`` / ``:now``, bound date columns),
    a column among ``dated`` (``(table, column)``: its values are dates), or a ``date()``/``datetime()``/``time()``
    call. SQLite reads such text as the number it starts with: ``'2026-01-15' + 1`` is ``2027``.
    ``julianday(a) - julianday(b)`` and ``date(x, '+1 day')`` are not reported. SQL sqlglot cannot parse gives
    nothing."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except Exception:
        return []
    if tree is None:
        return []
    is_dated = _resolver(tree, dated)
    names = {n.lower() for n in names}
    out = []
    for node in tree.walk():
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)) and \
                any(_date_valued(side, is_dated, names) for side in (node.this, node.expression)):
            out.append(node.sql(dialect=DIALECT))
    return list(dict.fromkeys(out))


def dated_outputs(sql: str, dated: Collection[tuple[str, str]]) -> set[str]:
    """The result columns of a query that give a date/time value (a dated column, a date/time call or a clock
    placeholder, aliased or not; ``*`` of a table with dated columns), lower-case."""
    sqlglot = _sqlglot()
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except Exception:
        return set()
    if not isinstance(tree, exp.Select):
        return set()
    is_dated = _resolver(tree, dated)
    tables = {t.name.lower() for t in tree.find_all(exp.Table)}
    out = set()
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)):
            out |= {c.lower() for t, c in dated if t.lower() in tables}
        elif _date_valued(inner, is_dated, ("now", "today")):
            out.add(item.alias_or_name.lower())
    return out
