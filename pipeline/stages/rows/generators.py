"""Rows at scale: the LLM decides what each column *is*, code makes the values.

``fill_table(scenario, table, conn, client, settings, locale) -> Made``: after the LLM's example rows of ``table``
are in ``conn``, one structured request asks, for every column that is neither the generated id nor a foreign key,
for a generator from a typed menu (``ir.GeneratorKind``: people, companies and places of a locale, dates in a range
or some days after another date of the row, numbers with a distribution, a CHECK list with weights, a code
pattern, text drawn from a pool the LLM writes in the domain's own words). The first table's request also picks
the scenario's locale (``LOCALES``, which Faker supports). Foreign keys are references to a parent's keys, chosen
by code (``pipeline.stages.rows.maker``: fan-out from the first parent, skewed popularity for the others).

Nothing here reads meaning into column names: the choice is the LLM's and code checks it against the column's
SQLite type and constraints (:func:`check_column`: a text generator on an INTEGER column, an enum outside the
CHECK list, a reversed range, a pool too small for a UNIQUE column are refused), then on sample rows inserted
into the database and rolled back (:func:`trial`: a CHECK that the values break). Refusals go back to the LLM in
the same conversation (``ask_with_feedback``); a column still failing after ``max_attempts`` gets a generator
derived from its type, its constraints and the example rows only (:func:`fallback`), recorded as a Rejection.
"""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3
from dataclasses import dataclass
from datetime import date
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import BuildSettings
from pipeline.stages.feedback import ask_with_feedback, render_section, user
from pipeline.stages.rows.maker import Shape, ValueMaker, derive_seed, fill, key_sets, table_shape

STAGE = "seed_data"
LOCALES = ("en_US", "en_GB", "en_CA", "en_AU", "en_IE", "de_DE", "fr_FR", "es_ES", "es_MX", "it_IT", "nl_NL",
           "pt_BR", "pt_PT", "pl_PL", "sv_SE")
DEFAULT_LOCALE = "en_US"
POOL_MIN, POOL_MAX, VALUES_MAX = 8, 20, 20
TRIAL_ROWS = 24
FAKER_KINDS = ("person_name", "first_name", "last_name", "company", "street_address", "city", "postcode",
               "country", "email", "phone")
TEXT_KINDS = (*FAKER_KINDS, "date", "datetime", "date_after", "code", "text_pool", "text_combo")
MENU = tuple(k for k in get_args(ir.GeneratorKind) if k != "reference")
FITS = {**{k: ("TEXT",) for k in TEXT_KINDS}, "integer": ("INTEGER", "REAL"), "boolean": ("INTEGER", "REAL"),
        "amount": ("REAL", "INTEGER")}
CAPACITY = {"country": 200, "boolean": 2}
PLACEHOLDER = re.compile(r"^(john|jane) (doe|smith)$|\b(work|item|product|route|room|book|artist|customer|user) "
                         r"[a-z0-9]$|anytown|\bmain st\b|lorem|^test\b|^sample\b", re.I)
"""Text that looks like placeholder data (the measure of issue 26); such pool items are left out."""
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?")


class Choice(BaseModel):
    kind: Literal[MENU]  # type: ignore[valid-type]
    min: float | None = None
    max: float | None = None
    start: str | None = None
    end: str | None = None
    after: str | None = None
    distribution: Literal["uniform", "normal", "skewed"] | None = None
    values: list[str | int | float] | None = Field(default=None, min_length=1, max_length=VALUES_MAX)
    weights: list[float] | None = Field(default=None, min_length=1, max_length=VALUES_MAX)
    pattern: str | None = Field(default=None, max_length=40)
    pool: list[str] | None = Field(default=None, min_length=POOL_MIN, max_length=POOL_MAX)
    pool2: list[str] | None = Field(default=None, min_length=3, max_length=POOL_MAX)


def reply_model(table: str, columns: list[str], with_locale: bool,
                kinds: dict[str, tuple[str, ...]] | None = None) -> type[BaseModel]:
    """``{"locale"?, "columns": {<column>: Choice, ...}}`` with every asked column required (fields are aliased:
    a column may be called ``json`` or ``copy``); ``after`` names one of these columns; ``kinds`` narrows a
    column's menu to the generators that can fill it (:func:`kinds_for`), so the grammar keeps a small model
    from picking one that cannot."""
    after = Literal[tuple(columns)] | None  # type: ignore[valid-type]

    def choice(i: int, name: str) -> Any:
        menu = (kinds or {}).get(name)
        extra: dict[str, Any] = {"kind": (Literal[menu], ...)} if menu else {}  # type: ignore[valid-type]
        return create_model(f"Choice_{table}_{i}", after=(after, None), **extra,  # type: ignore[arg-type]
                            __base__=Choice)

    cols = create_model(f"Columns_{table}", **{f"c{i}": (choice(i, n), Field(alias=n)) for i, n in enumerate(columns)},
                        __base__=BaseModel)  # type: ignore[call-overload]
    fields: dict[str, Any] = {"columns": (cols, ...)}
    if with_locale:
        fields = {"locale": (Literal[LOCALES], ...), **fields}  # type: ignore[valid-type]
    return create_model(f"Generators_{table}", **fields, __base__=BaseModel)  # type: ignore[call-overload]


# ------------------------------------------------------------------ checks


@dataclass(frozen=True)
class Context:
    """What a choice is checked against: the rows the table will hold, its single-column key sets, and the
    example rows' values per column."""

    rows: int
    singles: frozenset[str]
    examples: dict[str, list[Any]]


def kinds_for(col: Column, ctx: Context) -> tuple[str, ...]:
    """The generators of the menu that can fill ``col``: those whose values its SQLite type stores (a CHECK list
    takes only ``enum``), and for a column no two rows may share, those that give enough different values for
    the table's rows (no pool, list or yes/no). The LLM picks among them; nothing is read from names."""
    st = storage(col)
    if col.enum:
        return ("enum", "boolean") if set(col.enum) <= {0, 1} else ("enum",)
    fits = [k for k in MENU if k != "enum" and (st == "ANY" or st in FITS.get(k, ()))]
    if col.name in ctx.singles:
        small = {"text_pool": POOL_MAX, "boolean": 2, **CAPACITY}
        fits = [k for k in fits if small.get(k, ctx.rows) >= ctx.rows]
    return tuple(fits) or MENU


def storage(col: Column) -> str:
    return "INTEGER" if col.type in ("INTEGER", "INT") else col.type if col.type in ("REAL", "TEXT") else "ANY"


def _fits(value: Any, kind: str) -> bool:
    if kind == "INTEGER":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "REAL":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return kind == "ANY" or isinstance(value, str)


def capacity(g: ir.ColumnGenerator) -> int | None:
    """How many different values ``g`` can give (None: more than any table here needs)."""
    if g.kind == "enum":
        return len(g.values or [])
    if g.kind == "text_pool":
        return len(g.pool or [])
    if g.kind == "text_combo":
        return len(g.pool or []) * len(g.pool2 or [])
    if g.kind == "code":
        p = g.pattern or ""
        return 10 ** p.count("#") * 26 ** p.count("?")
    if g.kind == "integer" and g.min is not None and g.max is not None:
        return max(0, math.floor(g.max) - math.ceil(g.min) + 1)
    if g.kind in ("date", "datetime") and g.start and g.end:
        try:
            return (date.fromisoformat(g.end[:10]) - date.fromisoformat(g.start[:10])).days + 1
        except ValueError:
            return None
    return CAPACITY.get(g.kind)


def _range_error(g: ir.ColumnGenerator) -> str | None:
    if g.min is None or g.max is None:
        return f'{g.kind} needs "min" and "max"'
    if not (math.isfinite(g.min) and math.isfinite(g.max)) or max(abs(g.min), abs(g.max)) > 1e12:
        return f"min and max must be ordinary numbers (got {g.min}, {g.max})"
    if g.min > g.max or (g.kind == "integer" and math.ceil(g.min) > math.floor(g.max)):
        return f"min ({g.min:g}) is above max ({g.max:g})"
    return None


def _dates_error(g: ir.ColumnGenerator) -> str | None:
    try:
        start, end = date.fromisoformat((g.start or "")[:10]), date.fromisoformat((g.end or "")[:10])
    except ValueError:
        return f"{g.kind} needs \"start\" and \"end\" as 'YYYY-MM-DD' (got {g.start!r}, {g.end!r})"
    if start > end:
        return f"start ({start}) is after end ({end})"
    if start.year < 1900 or end.year > 2100:
        return f"dates between {start} and {end} are not plausible for this data"
    return None


def _after_error(g: ir.ColumnGenerator, gens: dict[str, ir.ColumnGenerator]) -> str | None:
    if g.after == g.column or g.after not in gens:
        return f'date_after needs "after": another date column of this table (one of {sorted(set(gens) - {g.column})})'
    seen, cur = {g.column}, gens[g.after]
    while cur.kind == "date_after" and cur.after in gens and cur.after not in seen:
        seen.add(cur.column)
        cur = gens[cur.after]
    if cur.kind not in ("date", "datetime") or cur.column in seen:
        return f"{g.after} is not a date column with its own dates (its generator is {gens[g.after].kind})"
    if g.min is None or g.max is None or not 0 <= g.min <= g.max <= 3650:
        return f'date_after needs "min" and "max" days with 0 <= min <= max <= 3650 (got {g.min}, {g.max})'
    return None


def check_column(col: Column, g: ir.ColumnGenerator, ctx: Context, gens: dict[str, ir.ColumnGenerator]) -> str | None:
    """Why generator ``g`` cannot fill ``col`` (its SQLite type, CHECK list, ranges, UNIQUE), or None."""
    st, k = storage(col), g.kind
    if k != "enum" and st != "ANY" and st not in FITS.get(k, ()):
        fit = [m for m in MENU if st in FITS.get(m, ("TEXT", "INTEGER", "REAL"))]
        return f"{k} makes {'text' if k in TEXT_KINDS else 'numbers'} but the column is {col.type}: pick one of {', '.join(fit)}"
    if col.enum and k != "enum" and not (k == "boolean" and set(col.enum) <= {0, 1}):
        return f"the column only takes its CHECK list {list(col.enum)}: pick enum with those values"
    if k == "enum":
        vals = g.values or []
        bad = [v for v in vals if not _fits(v, st) or (col.enum is not None and v not in col.enum)]
        if not vals or len({repr(v) for v in vals}) != len(vals):
            return 'enum needs "values", each once'
        if bad:
            allowed = f"its CHECK list {list(col.enum)}" if col.enum else f"{col.type} values"
            return f"enum values {bad} are not {allowed}"
        if g.weights is not None and (len(g.weights) != len(vals) or not all(w > 0 for w in g.weights)):
            return f'"weights" must give one positive number per value ({len(vals)})'
    elif k in ("integer", "amount"):
        err = _range_error(g)
        if err:
            return err
    elif k in ("date", "datetime"):
        err = _dates_error(g)
        if err:
            return err
    elif k == "date_after":
        err = _after_error(g, gens)
        if err:
            return err
    elif k == "code" and not re.search(r"[#?]", g.pattern or ""):
        return "code needs a \"pattern\" with '#' (a digit) or '?' (a capital letter), e.g. \"AB-####\""
    elif k == "text_pool" and len(g.pool or []) < POOL_MIN:
        return f'text_pool needs a "pool" of {POOL_MIN} to {POOL_MAX} different, real values (got {len(g.pool or [])})'
    elif k == "text_combo" and min(len(g.pool or []), len(g.pool2 or [])) < 3:
        return 'text_combo needs "pool" and "pool2", each with 3 or more different values'
    elif k in ("text_pool", "text_combo") and (_numbered(g.pool) or _numbered(g.pool2)):
        return (f'the "pool" values differ only by a number ({", ".join(repr(v) for v in (g.pool or [])[:3])}, ...): '
                "write different real values in the domain's own words, or pick code for numbered identifiers")
    elif k == "boolean" and g.weights is not None and (len(g.weights) != 2 or min(g.weights) < 0 or sum(g.weights) <= 0):
        return 'boolean "weights" are two numbers: [false, true]'
    cap = capacity(g)
    if col.name in ctx.singles and cap is not None and cap < ctx.rows:
        many = ("person_name, company, email, phone, street_address, code (enough '#') or text_combo"
                if storage(col) in ("TEXT", "ANY") else "a wider range")
        return (f"no two rows may share a value here and the table gets {ctx.rows} rows, but {k} gives at most {cap} "
                f"different values: pick one that gives thousands ({many})")
    return None


def _numbered(pool: list[str] | None) -> bool:
    """Whether half or more of ``pool`` are one text with another number ("Depot 1", "Depot 2", ...): a
    placeholder in any language."""
    if not pool or len(pool) < 3:
        return False
    stems = [re.sub(r"\d+", "#", p) for p in pool]
    stem = max(set(stems), key=stems.count)
    return "#" in stem and any(ch.isalpha() for ch in stem) and 2 * stems.count(stem) >= len(pool)


def generator_of(name: str, c: Choice, col: Column) -> ir.ColumnGenerator:
    """The reply's choice as an IR record: pools without blanks, repeats and placeholder-looking items; a number
    written as text in a numeric column's enum made a number."""
    def clean(pool: list[str] | None) -> list[str] | None:
        if pool is None:
            return None
        items = [p.strip() for p in pool if p.strip() and not PLACEHOLDER.search(p.strip())]
        return list(dict.fromkeys(items))

    values = c.values
    if values is not None and storage(col) in ("INTEGER", "REAL"):
        values = [int(v) if isinstance(v, str) and re.fullmatch(r"-?\d+", v) else v for v in values]
    return ir.ColumnGenerator(column=name, kind=c.kind, min=c.min, max=c.max, start=c.start, end=c.end,
                              after=c.after, distribution=c.distribution, values=values, weights=c.weights,
                              pattern=c.pattern, pool=clean(c.pool), pool2=clean(c.pool2))


# ------------------------------------------------------------------ fallback: type, constraints, examples only


def fallback(col: Column, ctx: Context, note: str) -> ir.ColumnGenerator | None:
    """A generator from the column's type, CHECK list and example values (no names read); None leaves a nullable
    column without example values empty."""
    base: dict[str, Any] = {"column": col.name, "by": "fallback", "note": note}
    ex = [v for v in ctx.examples.get(col.name, []) if v is not None]
    unique = col.name in ctx.singles
    if col.enum:
        return ir.ColumnGenerator(kind="enum", values=list(col.enum), **base)
    st = storage(col)
    nums = [v for v in ex if isinstance(v, int | float) and not isinstance(v, bool)]
    if st in ("INTEGER", "REAL") or (ex and len(nums) == len(ex)):
        lo, hi = (min(nums), max(nums)) if nums else (1, 100)
        hi = max(hi if hi > lo else lo + 10, lo + 10 * ctx.rows if unique else lo)
        return ir.ColumnGenerator(kind="integer" if st == "INTEGER" else "amount", min=lo, max=hi, **base)
    texts = [str(v) for v in ex]
    if not texts:
        return None if not col.notnull else ir.ColumnGenerator(kind="code", pattern="??-######", **base)
    dated: tuple[tuple[ir.GeneratorKind, re.Pattern[str]], ...] = (("date", _DATE), ("datetime", _DATETIME))
    for kind, shape in dated:
        if all(shape.fullmatch(t) for t in texts):
            days = sorted(date.fromisoformat(t[:10]) for t in texts)
            lo_d = min(days[0], date.fromordinal(days[-1].toordinal() - 180))
            return ir.ColumnGenerator(kind=kind, start=lo_d.isoformat(), end=days[-1].isoformat(), **base)
    if all(_EMAIL.fullmatch(t) for t in texts):
        return ir.ColumnGenerator(kind="email", **base)
    shapes = {re.sub(r"\d", "#", t) for t in texts}
    if len(shapes) == 1 and "#" in next(iter(shapes)):
        pattern = next(iter(shapes))
        while unique and 10 ** pattern.count("#") < 10 * ctx.rows:
            pattern = pattern.replace("#", "##", 1)
        return ir.ColumnGenerator(kind="code", pattern=pattern, **base)
    return ir.ColumnGenerator(kind="text_pool", pool=list(dict.fromkeys(texts))[:POOL_MAX], **base)


# ------------------------------------------------------------------ trial on sample rows


def trial(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], gens: list[ir.ColumnGenerator],
          shape: Shape, locale: str, seed: int, examples: dict[str, list[Any]]) -> dict[str, str]:
    """Insert ``TRIAL_ROWS`` sample rows made by ``gens`` and roll them back; column -> what SQLite said, for the
    columns named by the errors of at least a quarter of the rows (repeats are the capacity check's business)."""
    names = [c.name for c in cols if not c.auto_id]
    fixed = [{}] * TRIAL_ROWS if shape.primary is None else shape.fixed[:TRIAL_ROWS]
    if not fixed:
        return {}
    maker = ValueMaker(locale, seed + 1, gens, cols, examples)
    maker.references(shape.refs)
    quoted = ", ".join(f'"{n}"' for n in names)
    sql = f'INSERT INTO "{table.name}" ({quoted}) VALUES ({", ".join("?" for _ in names)})'
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    conn.execute("SAVEPOINT rowgen_trial")
    try:
        for fx in fixed:
            row = maker.row(fx, shape.refs)
            try:
                conn.execute(sql, [row.get(n) for n in names])
            except sqlite3.Error as e:
                msg = str(e)
                if "UNIQUE" in msg:
                    continue
                for n in names:
                    if re.search(rf"\b{re.escape(n)}\b", msg):
                        counts[n] = counts.get(n, 0) + 1
                        first.setdefault(n, f"{msg} (e.g. {n} = {json.dumps(row.get(n), ensure_ascii=False)})")
    finally:
        conn.execute("ROLLBACK TO rowgen_trial")
        conn.execute("RELEASE rowgen_trial")
    return {n: f"SQLite refused {k} of {len(fixed)} sample rows: {first[n]}" for n, k in counts.items()
            if 4 * k >= len(fixed)}


# ------------------------------------------------------------------ the request and the table


@dataclass(frozen=True)
class Made:
    """What :func:`fill_table` did: the plan (stored with the rows), rejections, LLM attempts."""

    plan: ir.RowPlan
    rejections: list[ir.Rejection]
    attempts: int


def _describe(col: Column, ctx: Context) -> str:
    parts = [col.type] + (["NOT NULL"] if col.notnull else []) + (["UNIQUE"] if col.name in ctx.singles else [])
    if col.enum:
        parts.append("one of " + ", ".join(json.dumps(v) for v in col.enum))
    elif col.name in ctx.singles:
        parts.append("generator: " + " or ".join(kinds_for(col, ctx)))
    return f"{col.name} ({', '.join(parts)})"


def _prompt(scenario: ir.Scenario, table: ir.Table, asked: list[Column], ctx: Context, settings: BuildSettings,
            with_locale: bool) -> str:
    n_examples = len(ctx.examples[asked[0].name])
    shown = [{c.name: ctx.examples[c.name][i] for c in asked} for i in range(min(3, n_examples))]
    key = ("\n" + render_section("seed_data", "key", columns=", ".join(table.natural_key))
           if table.natural_key else "")
    locale = ("\n" + render_section("seed_data", "generators_locale", locales=", ".join(LOCALES))
              if with_locale else "")
    return render_section(
        "seed_data", "generators", name=scenario.name, description=scenario.description, table=table.name,
        rows=ctx.rows, today=settings.clock[:10], ddl=table.ddl, key=key, locale=locale,
        examples="\n".join(json.dumps(r, ensure_ascii=False) for r in shown) or "(none)",
        columns="; ".join(_describe(c, ctx) for c in asked), shape='"locale": ..., ' if with_locale else "")


def choose(scenario: ir.Scenario, table: ir.Table, conn: sqlite3.Connection, cols: list[Column], asked: list[Column],
           ctx: Context, shape: Shape, refs: list[ir.ColumnGenerator], client: LLMClientProtocol, settings: BuildSettings,
           locale: str | None, seed: int) -> tuple[dict[str, ir.ColumnGenerator | None], str, int]:
    """One request (with feedback) for the generators of ``asked``; returns (column -> generator, or None for a
    column left empty), the locale and the LLM attempts. Columns never chosen well fall back."""
    with_locale = locale is None
    model = reply_model(table.name, [c.name for c in asked], with_locale, {c.name: kinds_for(c, ctx) for c in asked})
    good: dict[str, ir.ColumnGenerator] = {}
    errors: dict[str, str] = {}
    picked = [locale or DEFAULT_LOCALE]

    def settled(errs: dict[str, str]) -> dict[str, ir.ColumnGenerator | None]:
        return {c.name: good[c.name] if c.name in good else fallback(c, ctx, errs.get(c.name, "")) for c in asked}

    def check(reply: Any) -> tuple[dict[str, ir.ColumnGenerator | None] | None, str | None]:
        if with_locale:
            picked[0] = reply.locale
        got = {c.name: generator_of(c.name, getattr(reply.columns, f"c{i}"), c) for i, c in enumerate(asked)}
        errors.clear()
        for c in asked:
            err = check_column(c, got[c.name], ctx, {**good, **got})
            if err is None:
                good[c.name] = got[c.name]
            elif c.name not in good:
                errors[c.name] = err
        for c in asked:  # a kept date_after must still stand on a kept date
            g = good.get(c.name)
            if g is not None and g.kind == "date_after" and _after_error(g, good):
                errors[c.name] = _after_error(g, good) or ""
                del good[c.name]
        gens = [*refs, *(g for g in settled(errors).values() if g is not None)]
        for name, err in trial(conn, table, cols, gens, shape, picked[0], seed, ctx.examples).items():
            if name in good:
                errors[name] = err
                del good[name]
        if not errors:
            return settled({}), None
        lines = "\n".join(f"- {n}: {e}" for n, e in errors.items())
        return settled(errors), render_section("seed_data", "generators_feedback", errors=lines)

    out = ask_with_feedback(
        client, model, user(_prompt(scenario, table, asked, ctx, settings, with_locale)),
        check, stage=STAGE, max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature,
        max_tokens=max(settings.max_tokens_rows, 60 * len(asked) + 16 * POOL_MAX), feedback=lambda e: e)
    if out.value is not None:
        return out.value, picked[0], out.attempts
    why = out.error or "no reply"
    return {c.name: good.get(c.name) or fallback(c, ctx, errors.get(c.name, why)) for c in asked}, picked[0], \
        out.attempts


def fill_table(scenario: ir.Scenario, table: ir.Table, conn: sqlite3.Connection, client: LLMClientProtocol, settings: BuildSettings,
               locale: str | None = None) -> Made:
    """Add code-made rows to ``table`` (its example rows already in ``conn``, its parents filled)."""
    cols = table_columns(conn, table)
    names = [c.name for c in cols if not c.auto_id]
    quoted = ", ".join(f'"{n}"' for n in names)
    rows = conn.execute(f'SELECT {quoted} FROM "{table.name}"').fetchall() if names else []  # insertion order
    examples = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    seed = derive_seed(scenario, table.name)
    sets = key_sets(conn, table, names)
    shape = table_shape(conn, table, cols, sets, len(rows), settings, random.Random(seed))
    ctx = Context(rows=len(rows) + len(shape.fixed), singles=frozenset(s[0] for s in sets if len(s) == 1),
                  examples=examples)
    refs = [ir.ColumnGenerator(column=c.name, kind="reference", by="code", parent=c.ref[0], key=c.ref[1],
                               min=settings.child_fanout[0] if c.name == shape.primary else None,
                               max=settings.child_fanout[1] if c.name == shape.primary else None)
            for c in cols if c.ref is not None]
    asked = [c for c in cols if not c.auto_id and c.ref is None]
    chosen: dict[str, ir.ColumnGenerator | None] = {}
    attempts = 0
    if asked:
        chosen, locale, attempts = choose(scenario, table, conn, cols, asked, ctx, shape, refs, client, settings,
                                          locale, seed)
    by_col = {g.column: g for g in [*refs, *(g for g in chosen.values() if g is not None)]}
    gens = [by_col[c.name] for c in cols if c.name in by_col]
    locale = locale or DEFAULT_LOCALE
    filled = fill(conn, table, cols, ValueMaker(locale, seed, gens, cols, examples), shape, sets)
    rejections = [ir.Rejection(stage=STAGE, item=f"{table.name}.{c.name}",
                               reason=f"generator choice failed, fell back to one from the column's type and "
                                      f"constraints: {g.kind if g else 'left empty'}",
                               evidence={"error": (g.note if g else "") or ""})
                  for c in asked for g in [chosen.get(c.name)] if g is None or g.by == "fallback"]
    if filled.dropped:
        rejections.append(ir.Rejection(
            stage=STAGE, item=table.name,
            reason=f"{sum(filled.dropped.values())} code-made rows dropped after {len(shape.fixed)} planned"
                   + (" (stopped: the generators gave no new distinct rows)" if filled.stopped else ""),
            evidence={"errors": dict(filled.dropped.most_common(5))}))
    plan = ir.RowPlan(locale=locale, seed=seed, examples=len(rows), generators=gens)
    return Made(plan, rejections, attempts)
