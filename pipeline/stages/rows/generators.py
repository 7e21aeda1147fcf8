"""Rows at scale: the LLM decides what each column *is*, code makes the values.

``fill_table(scenario, table, conn, client, settings, locale) -> Made``: after the LLM's example rows of ``table``
are in ``conn``, one structured request asks, for every column that is neither the generated id nor a foreign key,
for a generator from a typed menu (``ir.GeneratorKind``: people, companies and places of a locale, dates in a range
or some days after another date of the row, numbers with a distribution, a CHECK list with weights, a code
pattern, text drawn from a list continued from the examples in the domain's own words). The first table's request also picks
the scenario's locale (``LOCALES``, which Faker supports). Foreign keys are references to a parent's keys, chosen
by code (``pipeline.stages.rows.maker``: fan-out from the first parent, skewed popularity for the others).

Meaning is checked against the column's own example values (issue 40, :mod:`pipeline.meaning`): a generator
whose sample values do not look like them (:func:`unlike_examples`: character classes, words, length, MiniLM
similarity against other columns' examples) is refused, fed back without a list of options, and replaced by the
examples' own list if the model insists. Text no generator of people, companies, places, e-mail or phones makes
comes from a list the LLM continues from the examples (:func:`continue_list`, several short calls, cleaned of
placeholders, glued and suffixed values); list columns set in the same example rows, with a person or company
column the examples pair with one of them (:func:`tuple_columns`), are continued together as rows
(:func:`continue_tuples`: a title with its author, a make with its model) and drawn one row of them per generated
row (:func:`continue_together`), and so are the numbers and CHECK-list values whose examples vary with such a
tuple or a single list column of an entity (:func:`row_mates`: a book's year with its title, a medicine's strength
and dose frequency with its name; a category of an entity even where every example holds one value,
:func:`entity_category`: a book's genre; each checked by :func:`value_check`: a number in its generator's range, a value
of the CHECK list; where a continued reply wrote them as a sequence down its rows (:func:`in_sequence`), asked
again one row a call, given the row's name, :func:`complete_rows`, an example row's values copied refused); relations the examples show are made to hold by code (:func:`settle`:
date order, the clock, signs, list separators, a child's dates after its parent's) and numbers and dates agree
with the examples as soon as the model chooses them (:func:`fit_examples`: a range far wider than the examples
narrowed, a range or dates the reply lacks taken from them, no round trip); the model's example people,
phones and addresses are drawn again (:func:`rewrite_examples`); what remains is recorded as semantic findings.

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
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline import ir
from pipeline.dbmodel.columns import Column, table_columns
from pipeline.dbmodel.draws import code_capacity, name_part, phone_mask
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.llm.sampling import sampled
from pipeline.meaning import findings as semantic
from pipeline.meaning import profile as prof
from pipeline.meaning import relations, spans, vocab
from pipeline.settings import BuildSettings
from pipeline.stages.feedback import ask_with_feedback, render_section, user
from pipeline.stages.rows import single, tense
from pipeline.stages.rows.maker import (
    Apart,
    ChildRelations,
    Follow,
    Shape,
    Unplaceable,
    ValueMaker,
    apart_examples,
    child_relations,
    derive_seed,
    fill,
    followed,
    key_sets,
    sibling_apart,
    sibling_follow,
    table_shape,
)

STAGE = "seed_data"
LOCALES = ("en_US", "en_GB", "en_CA", "en_AU", "en_IE", "de_DE", "fr_FR", "es_ES", "es_MX", "it_IT", "nl_NL",
           "pt_BR", "pt_PT", "pl_PL", "sv_SE")
DEFAULT_LOCALE = "en_US"
POOL_MAX, VALUES_MAX = 20, 20
TRIAL_ROWS = 24
FAKER_KINDS = ("person_name", "first_name", "last_name", "company", "street_address", "city", "postcode",
               "country", "email", "phone")
TEXT_KINDS = (*FAKER_KINDS, "date", "datetime", "date_after", "code", "text_pool", "text_combo")
MENU = tuple(k for k in get_args(ir.GeneratorKind) if k not in ("reference", "text_combo", "derived"))
"""The generators the LLM picks from: no text_combo (a value glued from two pools: "1984 Charles Dickens"); it
stays readable in older plans. ``derived`` (a value made of another column's, as the examples show) is code's."""
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
    """What a choice is checked against: the rows the table will hold, its single-column key sets, the example
    rows' values per column, other columns' example texts ("table.column" -> texts, this scenario's tables so
    far) and the MiniLM vectors to compare them by (None: shapes only)."""

    rows: int
    singles: frozenset[str]
    examples: dict[str, list[Any]]
    others: dict[str, list[str]] = field(default_factory=dict)
    vectors: prof.Vectors | None = None
    today: date | None = None
    """The environment's clock (None: a range from the examples reaches back from the latest of them)."""
    drawn_as: dict[str, str] = field(default_factory=dict)
    """Earlier tables' columns ("table.column") that code drew from a generator their examples showed
    (:func:`shown_kind`: people, streets, cities), and that generator (:func:`shown_kinds`)."""


def kinds_for(col: Column, ctx: Context) -> tuple[str, ...]:
    """The generators of the menu that can fill ``col``: those whose values its SQLite type stores (a CHECK list
    takes only ``enum``), and for a column no two rows may share, those that give enough different values for
    the table's rows (no pool, list or yes/no); ``date_after`` only where another column's examples are dates
    (a books table with one date: the model chose date_after for it three times, 2026-11-28). The LLM picks among
    them; nothing is read from names."""
    st = storage(col)
    if col.enum:
        return ("enum", "boolean") if set(col.enum) <= {0, 1} else ("enum",)
    fits = [k for k in MENU if k != "enum" and (st == "ANY" or st in FITS.get(k, ()))]
    if ctx.examples and not [c for c in relations.date_columns(ctx.examples) if c != col.name]:
        fits = [k for k in fits if k != "date_after"]  # no other date in the row to count days from
    if col.name in ctx.singles:
        small = {"boolean": 2, **CAPACITY}
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
        return len(g.pool) if g.pool else None  # a list still to be continued from the examples
    if g.kind == "text_combo":
        return len(g.pool or []) * len(g.pool2 or [])
    if g.kind == "code":  # a date or a time of day in the pattern: its valid ones
        return code_capacity(g.pattern or "")
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


def _dates_error(g: ir.ColumnGenerator, examples: Sequence[Any] = ()) -> str | None:
    """Why ``g``'s start and end are unusable; years before 1900 or after 2100 only where no example of the
    column (``examples``) is dated there (a book of 1813 among the model's own examples)."""
    try:
        start, end = date.fromisoformat((g.start or "")[:10]), date.fromisoformat((g.end or "")[:10])
    except ValueError:
        return f"{g.kind} needs \"start\" and \"end\" as 'YYYY-MM-DD' (got {g.start!r}, {g.end!r})"
    if start > end:
        return f"start ({start}) is after end ({end})"
    years = [d.year for d in (relations.as_date(v) for v in examples) if d is not None]
    if start.year < min([1900, *years]) or end.year > max([2100, *years]):
        return f"dates between {start} and {end} are not plausible for this data"
    return None


def _after_error(g: ir.ColumnGenerator, gens: dict[str, ir.ColumnGenerator]) -> str | None:
    if g.after == g.column or g.after not in gens:
        return 'date_after needs "after": another date column of this table'
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
        return (f"{k} makes {'text' if k in TEXT_KINDS else 'numbers'} but the column is {col.type}: pick a generator "
                "whose values look like this column's example values")
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
        err = _dates_error(g, ctx.examples.get(col.name, []))
        if err:
            return err
    elif k == "date_after":
        err = _after_error(g, gens)
        if err:
            return err
    elif k == "code" and not re.search(r"[#?]", g.pattern or ""):
        return "code needs a \"pattern\" with '#' (a digit) or '?' (a capital letter), e.g. \"AB-####\""
    elif k in ("text_pool", "text_combo") and (_numbered(g.pool) or _numbered(g.pool2)):
        return (f'the "pool" values differ only by a number ({", ".join(repr(v) for v in (g.pool or [])[:3])}, ...): '
                "write different real values in the domain's own words, or pick code for numbered identifiers")
    elif k == "boolean" and g.weights is not None and (len(g.weights) != 2 or min(g.weights) < 0 or sum(g.weights) <= 0):
        return 'boolean "weights" are two numbers: [false, true]'
    cap = capacity(g)
    if col.name in ctx.singles and cap is not None and cap < ctx.rows:
        return (f"no two rows may share a value here and the table gets {ctx.rows} rows, but {k} gives at most {cap} "
                "different values")
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
                              pattern=c.pattern if c.kind == "code" else None,
                              pool=clean(getattr(c, "pool", None)), pool2=clean(getattr(c, "pool2", None)))


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
        kind: ir.GeneratorKind = "integer" if st == "INTEGER" else "amount"
        lo, hi = relations.number_range(nums, kind == "integer") or (1, 100)  # not only the 3-4 examples' values
        hi = max(hi if hi > lo else lo + 10, lo + 10 * ctx.rows if unique else lo)
        return ir.ColumnGenerator(kind=kind, min=lo, max=hi, **base)
    texts = [str(v) for v in ex]
    if not texts:  # no example: a list continued from the column's place in the schema
        return ir.ColumnGenerator(kind="text_pool", **base)
    dated: tuple[tuple[ir.GeneratorKind, re.Pattern[str]], ...] = (("date", _DATE), ("datetime", _DATETIME))
    for date_kind, shape in dated:
        if all(shape.fullmatch(t) for t in texts):
            start, end = _dates_of(texts, ctx, col, date_kind) or ("", "")
            return ir.ColumnGenerator(kind=date_kind, start=start, end=end, **base)
    if all(_EMAIL.fullmatch(t) for t in texts):
        return ir.ColumnGenerator(kind="email", **base)
    shapes = {re.sub(r"\d", "#", t) for t in texts}
    if len(shapes) == 1 and "#" in next(iter(shapes)):
        pattern = next(iter(shapes))
        while unique and 10 ** pattern.count("#") < 10 * ctx.rows:
            pattern = pattern.replace("#", "##", 1)
        return ir.ColumnGenerator(kind="code", pattern=pattern, **base)
    return ir.ColumnGenerator(kind="text_pool", pool=list(dict.fromkeys(texts))[:POOL_MAX], **base)


def _dates_of(texts: Sequence[Any], ctx: Context, col: Column, kind: str) -> tuple[str, str] | None:
    """The dates a column's rows are drawn from when only its examples say (:func:`pipeline.meaning.spans.
    example_span`: every example inside, at least half a year, on the clock's sides in the examples' shares; for a
    date column no two rows may share, the examples' spacing times the table's rows), as 'YYYY-MM-DD'; None
    without an example date."""
    rows = ctx.rows if kind == "date" and col.name in ctx.singles else None
    span = spans.example_span(texts, ctx.today, rows)
    return None if span is None else (span[0].isoformat(), span[1].isoformat())


def _shown(texts: Sequence[Any], span: tuple[str, str]) -> str:
    """"the examples' dates A..B, drawn from C..D" for a fallback's note (what the examples hold and what code made
    of them)."""
    days = sorted(d for d in (relations.as_date(t) for t in texts) if d is not None)
    return f"the examples' dates {days[0]}..{days[-1]}, drawn from {span[0]}..{span[1]}"


def fit_examples(col: Column, g: ir.ColumnGenerator, ctx: Context, gens: dict[str, ir.ColumnGenerator]
                 ) -> ir.ColumnGenerator:
    """The model's choice of a number or date generator made to agree with the column's example values, by code
    and at once (no feedback round trip: the embedded model sent ``{"kind": "integer", "weights": [1, 1]}`` back
    five times after being told it needs "min" and "max", 2026-11-28):

    - a number range missing or unusable: the examples' range (:func:`pipeline.meaning.relations.number_range`),
      recorded as a fallback (a rejection says so);
    - a number range that leaves an example out or is far wider than the examples spread
      (:func:`pipeline.meaning.relations.range_misfit`: invoices 0-1000 for examples of 50-100): narrowed to the
      examples' range, kept within the model's where the model's holds every example;
    - dates without a usable start and end (days given as "min" and "max"): the examples' dates, a fallback;
    - ``date_after`` without a usable "after" or days: the order and gaps the examples show with another date
      column (:func:`pipeline.meaning.relations.date_orders`), else the examples' own dates, a fallback.

    Values only: no column name is read. Without example values the choice is returned as it came (the checks
    and the feedback judge it)."""
    ex = ctx.examples.get(col.name, [])
    k = g.kind
    if k in ("integer", "amount"):
        integer = k == "integer"
        wide = relations.number_range(ex, integer)
        if wide is None:
            return g
        err = _range_error(g)
        if err:
            if col.name in ctx.singles and integer:  # enough different values for a UNIQUE column, as fallback's
                wide = (wide[0], max(wide[1], wide[0] + 10 * ctx.rows))
            return _fallback_of(g, f"the model's {k} had no usable range ({err}): the examples' range "
                                   f"{wide[0]:g}..{wide[1]:g}", min=wide[0], max=wide[1])
        assert g.min is not None and g.max is not None
        why = relations.range_misfit(g.min, g.max, ex)
        if why is None:
            return g
        lo, hi = wide
        reach = ""
        if all(g.min <= v <= g.max for v in relations.numbers(ex)):  # the model's range holds them: stay inside it
            lo, hi = max(lo, g.min), min(hi, g.max)
            top = relations.upper_reach(ex, lo, integer)
            if top is not None and min(top, g.max) > hi:  # positive numbers spread by factors, upwards
                hi = min(top, g.max)
                reach = ", reaching up by the examples' own ratio"
        if col.name in ctx.singles and integer and math.floor(hi) - math.ceil(lo) + 1 < ctx.rows:
            return g  # a UNIQUE column needs the model's wider range (the capacity check passed it)
        return _code(g, f"{why}: narrowed to the examples' range {lo:g}..{hi:g}{reach}", min=lo, max=hi)
    texts = [v for v in ex if isinstance(v, str)]
    if k in ("date", "datetime") and _dates_error(g, texts):
        span = _dates_of(texts, ctx, col, k)
        if span is None:
            return g
        return _fallback_of(g, f"the model's {k} had no usable dates ({_dates_error(g, texts)}): "
                               f"{_shown(texts, span)}", start=span[0], end=span[1], min=None, max=None)
    if k == "date_after" and _after_error(g, {**gens, col.name: g}):
        why = _after_error(g, {**gens, col.name: g})
        order = relations.nearest_before(relations.date_orders(
            {n: v for n, v in ctx.examples.items() if n == col.name or n in gens})).get(col.name)
        if order is not None:
            a, b = relations.gap_range(order)
            return _fallback_of(g, f"the model's date_after was unusable ({why}): {a}-{b} days after "
                                   f"{order.first}, the examples' {order.min_days}-{order.max_days} widened",
                                after=order.first, min=float(a), max=float(b), start=None, end=None)
        span = _dates_of(texts, ctx, col, "date")
        if span is None:
            return g
        return _fallback_of(g, f"the model's date_after was unusable ({why}): {_shown(texts, span)}", kind="date",
                            after=None, start=span[0], end=span[1], min=None, max=None)
    return g


def _fallback_of(g: ir.ColumnGenerator, note: str, **update: Any) -> ir.ColumnGenerator:
    """``g`` with settings code took from the examples where the model's were missing or unusable (a fallback:
    ``fill_table`` records a rejection with ``note``)."""
    return g.model_copy(update={"by": "fallback", "note": note, **update})


# ------------------------------------------------------------------ meaning: sample values against the examples

SAMPLED = (*FAKER_KINDS, "code")
REWRITTEN = ("person_name", "first_name", "last_name", "company", "street_address", "email", "phone")
"""Generators whose values replace the model's example values (where its placeholders live: "John Doe",
"123-456-7890", "Acme Corp"); a city or a country it wrote stays."""


def unlike_examples(col: Column, g: ir.ColumnGenerator, ctx: Context, locale: str, seed: int) -> str | None:
    """Why ``g``'s sample values do not look like ``col``'s example values (their character classes, lengths,
    word counts, and MiniLM similarity to these examples against other columns'), or None. Only generators that
    make text of their own are judged (a list continued from the examples is built from them)."""
    if g.kind not in SAMPLED:
        return None
    texts = prof.texts_of(ctx.examples.get(col.name, []))
    if len(texts) < 2 or relations.date_columns({col.name: texts}):
        return None
    p = prof.profile(texts)
    if p is None:
        return None
    maker = ValueMaker(locale if locale in LOCALES else DEFAULT_LOCALE, seed + 7, [g], [col], ctx.examples)
    samples = [str(maker.value(g, {}, {})) for _ in range(TRIAL_ROWS)]
    why = prof.contradiction(p, samples)
    if why:
        return f"{g.kind} does not fit: {why}"
    if ctx.vectors is not None:
        others = {k: v for k, v in ctx.others.items() if k != col.name}
        hit = prof.semantic_misfit(ctx.vectors, texts, others, samples)
        if hit:
            return (f"{g.kind} makes values like {samples[0]!r}, closer in meaning to the examples of {hit[0]} "
                    f"({hit[2]:.2f}) than to this column's own ({', '.join(repr(t) for t in texts[:3])}; {hit[1]:.2f})")
    return None


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
    """What :func:`fill_table` did: the plan (stored with the rows), rejections, LLM attempts, and for a table
    without foreign keys cut short by a UNIQUE column's list, the rows it holds (``short``, None otherwise)."""

    plan: ir.RowPlan
    rejections: list[ir.Rejection]
    attempts: int
    short: int | None = None


def _describe(col: Column, ctx: Context) -> str:
    parts = [col.type] + (["NOT NULL"] if col.notnull else []) + (["UNIQUE"] if col.name in ctx.singles else [])
    if col.enum:
        parts.append("one of " + ", ".join(json.dumps(v) for v in col.enum))
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
        for c in asked:  # numbers and dates agree with the examples, by code (no round trip)
            got[c.name] = fit_examples(c, got[c.name], ctx, {**good, **got})
        errors.clear()
        for c in asked:
            err = check_column(c, got[c.name], ctx, {**good, **got}) or unlike_examples(c, got[c.name], ctx,
                                                                                        picked[0], seed)
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


VOCAB_ASK = 12
"""Values asked per continuation call (several short calls rather than one long one)."""
VOCAB_ROUNDS = 2
"""Calls continuing the list of a text column that is not UNIQUE (a UNIQUE one's: ``[stages.build]
list_rounds_unique``)."""
VOCAB_WANT = 24
VOCAB_SHOWN = 8
"""Values shown per continuation call after the first: the examples' first two and a spread of the values kept so
far (:func:`pipeline.meaning.vocab.spread`, moved along each call). Shown the whole list so far, the embedded model
copies it back (2026-11-28: a third call on the books' titles returned the 11 values it was shown and no new one);
shown the newest kept, it continues them into variants of one value (2026-11-28: shown five editions of "The
Catcher in the Rye: The Complete Edition", it wrote ten more, "(ePub)", "(VHS)", "(Blu-ray Disc)", ...)."""
VOCAB_LOW = 3
"""A continuation call that adds fewer new values than this is a low one: the greedy model writes back what it was
shown, so every later call samples (``retry_temperature``, a seed of its own per call) rather than repeat it."""
VOCAB_DRY = 2
"""Calls in a row that add no new value before the list ends. Until 2026-11-30 two calls in a row adding fewer than
``VOCAB_LOW`` ended it: the library's books (four examples, a UNIQUE title, 246 rows planned) were continued in three
of the twelve calls allowed, the second writing back the eight rows it was shown and the third (sampled) adding one
("Brave New World"), and the table was cut to 11 books beside 232 members."""


class Values(BaseModel):
    values: list[str] = Field(min_length=1, max_length=VOCAB_ASK)


def value_tokens(seeds: Sequence[str]) -> int:
    """A generous token budget for one value like ``seeds`` in a JSON list: a digit is a token of its own in
    Qwen's vocabulary (a 13-digit code is ~15 tokens, where the old budget of a third of its characters cut the
    reply off at max_tokens), other text ~3 characters a token, plus quotes and comma."""
    longest = max(seeds, key=len, default="x" * 24)
    digits = sum(ch.isdigit() for ch in longest)
    return digits + (len(longest) - digits) // 3 + 8


def continue_list(scenario: ir.Scenario, table: ir.Table, column: str, seeds: list[str], want: int, rounds: int,
                  client: LLMClientProtocol, settings: BuildSettings, sep: str | None = None, shape: prof.Profile | None = None,
                  mates: Mapping[str, Sequence[str]] | None = None, vectors: prof.Vectors | None = None,
                  refused: dict[str, str] | None = None) -> tuple[list[str], int]:
    """New values (items, with ``sep``) continued by the LLM from ``seeds`` (the column's example values), at
    most ``rounds`` calls of ``VOCAB_ASK`` values until ``want`` are kept. The first call shows the examples;
    later ones show two of them and a spread of the values kept (``VOCAB_SHOWN``), and every call after one that
    added fewer than ``VOCAB_LOW`` samples (``retry_temperature``, a seed per call) rather than repeat the greedy
    reply; the list ends after ``VOCAB_DRY`` calls in a row that add nothing new. Kept:
    :func:`pipeline.meaning.vocab.clean` (no repeats of any value so far, placeholders, glued or suffixed values,
    variants of a value so far: the same with more words after it, or most of its beginning shared), with
    ``shape`` only values that look like the
    examples (on the first call unless that would keep fewer than half; on later calls, which sample and wander,
    every value must look like the examples and the values kept so far), with ``vectors`` no value far below the
    examples' own similarity to one another (:func:`pipeline.meaning.profile.strays`) and, with ``mates`` (the
    table's other columns' example values), none closer in meaning to another column's examples than to the seeds
    (:func:`pipeline.meaning.profile.closer_elsewhere`: an author or a genre among titles). ``refused``: given,
    each value refused by shape or meaning is put in it with why. Returns (values, calls)."""
    got: list[str] = []
    offered: list[str] = []
    calls = dry = 0
    low = False
    budget = VOCAB_ASK * value_tokens(seeds) + 40
    while len(got) < want and calls < rounds:
        shown = [*seeds, *got] if calls == 0 else [*seeds[:2], *vocab.spread(got, VOCAB_SHOWN - len(seeds[:2]), calls)]
        shown = shown[-30:]
        what = render_section("seed_data", "continue_items", sep=json.dumps(sep, ensure_ascii=False)) if sep else ""
        prompt = render_section(
            "seed_data", "continue", name=scenario.name, description=scenario.description, table=table.name,
            ddl=table.ddl, column=column, items=what, n=VOCAB_ASK,
            values="\n".join(f"- {v}" for v in shown) if shown else render_section("seed_data", "continue_none"))
        asker = client if not low else sampled(client, settings.retry_temperature,
                                               getattr(getattr(client, "settings", None), "seed", 0) + calls)
        calls += 1
        try:
            reply, _ = asker.structured_reply(Values, user(prompt), stage=STAGE, max_tokens=budget)
        except LLMUnavailable:
            raise
        except LLMError:
            break
        new = vocab.clean(reply.values, [*seeds, *got], offered)
        offered.extend(reply.values)
        if sep:
            new = [v for v in new if sep.strip() not in v]
        if shape is not None:
            now = shape if calls == 1 or not got else prof.profile([*seeds, *got]) or shape
            why = {v: w for v in new if (w := prof.misfit(now, v))}
            if calls > 1 or 2 * (len(new) - len(why)) >= len(new):
                new = [v for v in new if v not in why]
                _refuse(refused, why)
        if vectors is not None:
            unlike = _unlike(vectors, seeds, mates or {}, new)
            new = [v for v in new if v not in unlike]
            _refuse(refused, unlike)
        got.extend(new)
        low = low or len(new) < VOCAB_LOW
        dry = 0 if new else dry + 1
        if dry >= VOCAB_DRY:
            break
    return got, calls



def _unlike(vectors: prof.Vectors, seeds: Sequence[str], mates: Mapping[str, Sequence[str]], items: Sequence[str]
            ) -> dict[str, str]:
    """The continued ``items`` unlike the column's examples ``seeds`` by meaning, with why: far below the
    examples' own similarity to one another (:func:`pipeline.meaning.profile.strays`), or closer to another
    column's examples (``mates``) than to their own (:func:`pipeline.meaning.profile.closer_elsewhere`). One
    encoding of the items (:class:`pipeline.meaning.profile.Vectors` keeps each text's vector)."""
    if not items:
        return {}
    out = {v: f"MiniLM {sim} to its examples, whose own mean is {mean}"
           for v, (sim, mean) in prof.strays(vectors, seeds, items).items()}
    if mates:
        for v, (name, mine, theirs) in prof.closer_elsewhere(vectors, seeds, mates, items).items():
            out.setdefault(v, f"MiniLM {theirs} to {name}'s examples, {mine} to its own")
    return out


def _refuse(refused: dict[str, str] | None, why: Mapping[str, str]) -> None:
    if refused is not None:
        for v, w in why.items():
            refused.setdefault(v, w)


def refused_note(refused: Mapping[str, str], shown: int = 3) -> str:
    """A generator note's clause on the continued values refused (:func:`continue_list`), or ''."""
    if not refused:
        return ""
    some = "; ".join(f"{v!r} {w}" for v, w in list(refused.items())[:shown])
    return f"; {len(refused)} continued values refused as unlike the examples ({some})"


TUPLE_ASK = 8
"""Rows asked per call when several columns are continued together (each row holds several values)."""
TUPLE_MIN = 1
"""New rows a tuple continuation must give; with none the columns are continued one by one. A few true rows beat
many false ones (2026-11-28: the library's books gave 7 new (title, genre, author) rows, under the 8 asked then,
and each column continued alone gave "Moby Dick" by the invented "Cole Marks"); a UNIQUE key then makes fewer rows
(the short_list rejection says so), a key that may repeat draws the rows again."""
TUPLE_WIDTH = 4
"""At most this many columns continued together (the first in the table's order)."""
PAIR_MARGIN = 0.10
"""How much closer in meaning (MiniLM cosine) the examples' values of a person or company column sit to the values
of a list column in the same example row than to those of the other rows, for the two to be continued together
(measured 2026-11-28, four example rows each; matched minus mismatched): books and their authors 0.135 and 0.187,
makes and models 0.181, medicines and their descriptions 0.168; employees and their job titles 0.045 and -0.031,
products and the customers who ordered them 0.031, patients and their allergies 0.070. Missed (each column
continued alone, its people from the generator): songs and their artists 0.070, German books and authors 0.034."""


def rows_model(columns: list[str], ask: int) -> type[BaseModel]:
    """``{"rows": [{<column>: str, ...}, ...]}``, one to ``ask`` rows, each column required (aliased: a column may
    be called ``json``)."""
    row = create_model("TupleRow", **{f"c{i}": (str, Field(alias=n)) for i, n in enumerate(columns)},
                       __config__=ConfigDict(coerce_numbers_to_str=True))  # type: ignore[call-overload]
    return create_model("TupleRows", rows=(list[row], Field(min_length=1, max_length=ask)),  # type: ignore[valid-type]
                        __base__=BaseModel)


def _row_line(columns: list[str], row: Sequence[str]) -> str:
    return json.dumps(dict(zip(columns, row, strict=True)), ensure_ascii=False)


def continue_tuples(scenario: ir.Scenario, table: ir.Table, columns: list[str], seeds: list[tuple[str, ...]],
                    want: int, rounds: int, client: LLMClientProtocol, settings: BuildSettings,
                    distinct: Sequence[int] = (0,), shapes: Sequence[prof.Profile | None] = (),
                    mates: Mapping[str, Sequence[str]] | None = None, vectors: prof.Vectors | None = None,
                    checks: Sequence[Callable[[str], str | None] | None] = (),
                    replies: list[list[tuple[str, ...]]] | None = None, refused: dict[str, str] | None = None
                    ) -> tuple[list[tuple[str, ...]], int]:
    """New rows of ``columns`` (values that belong together: a title and its author) continued by the LLM from
    ``seeds`` (the example rows' values), as :func:`continue_list` does for one column: at most ``rounds`` calls
    of ``TUPLE_ASK`` rows until ``want`` are kept, the first call showing the examples and later ones two of them
    and a spread of the rows kept, every call after one that added fewer than ``VOCAB_LOW`` with a sampling
    temperature, the list ending after ``VOCAB_DRY`` calls in a row that add nothing new. Kept:
    :func:`pipeline.meaning.vocab.clean_tuples` (``distinct``: the places no two rows may share), and with ``shapes`` (a profile per column) only rows whose
    every value looks like its column's examples (on the first call unless that would keep fewer than half; on
    later calls like the examples and the rows kept so far), with ``vectors`` no row with a value far below its
    column's examples' own similarity to one another (:func:`pipeline.meaning.profile.strays`), and with ``mates`` (the
    table's columns' example values by name) no row with a value closer in meaning to the examples
    of a column outside the row than to its own column's (:func:`pipeline.meaning.profile.closer_elsewhere`; the
    row's own columns are paired by design, a model near its make, and one of their values in another place is
    refused by :func:`pipeline.meaning.vocab.clean_tuples`). ``checks``: per place None (a text) or a function
    giving the value as stored (a number in its column's range, a value of its CHECK list) or None to drop the row;
    such places are ``loose`` for :func:`pipeline.meaning.vocab.clean_tuples` and kept out of the meaning checks.
    ``replies``: given, each reply's rows as the model wrote them, in its order, are appended to it
    (:func:`in_sequence`). ``refused``: given, each value refused by shape or meaning is put in it with why.
    Returns (rows, calls)."""
    loose = [i for i, f in enumerate(checks) if f is not None]
    got: list[tuple[str, ...]] = []
    offered: list[tuple[str, ...]] = []
    calls = dry = 0
    low = False
    model = rows_model(columns, TUPLE_ASK)
    per_row = sum(value_tokens([s[i] for s in seeds]) + len(c) // 3 + 4 for i, c in enumerate(columns))
    budget = TUPLE_ASK * per_row + 40
    shape = ", ".join(f'"{c}": ...' for c in columns)
    while len(got) < want and calls < rounds:
        shown = [*seeds, *got] if calls == 0 else [*seeds[:2], *vocab.spread(got, VOCAB_SHOWN - len(seeds[:2]), calls)]
        shown = shown[-20:]
        prompt = render_section(
            "seed_data", "continue_rows", name=scenario.name, description=scenario.description, ddl=table.ddl,
            columns=", ".join(columns), n=TUPLE_ASK, shape=shape,
            values="\n".join(_row_line(columns, r) for r in shown))
        asker = client if not low else sampled(client, settings.retry_temperature,
                                               getattr(getattr(client, "settings", None), "seed", 0) + calls)
        calls += 1
        try:
            reply, _ = asker.structured_reply(model, user(prompt), stage=STAGE, max_tokens=budget)
        except LLMUnavailable:
            raise
        except LLMError:
            break
        rows = [tuple(getattr(r, f"c{i}") for i in range(len(columns))) for r in reply.rows]  # type: ignore[attr-defined]
        offered.extend(rows)
        if replies is not None:
            replies.append(list(rows))
        if checks:  # a number outside its column's range, a value not in its CHECK list: the row is dropped
            rows = [r for r in (tuple(v if f is None else f(v) for f, v in zip(checks, r, strict=False))
                                for r in rows) if None not in r]
        new = vocab.clean_tuples(rows, [*seeds, *got], offered, distinct, loose=loose)
        if shapes:
            now = shapes if calls == 1 or not got else [
                None if p is None else prof.profile([r[i] for r in [*seeds, *got]]) or p for i, p in enumerate(shapes)]
            why = [{r[i]: w for r in new if (w := prof.misfit(p, r[i]))} if p is not None and i < len(columns) else {}
                   for i, p in enumerate(now)]
            fit = [r for r in new if not any(r[i] in bad for i, bad in enumerate(why))]
            if calls > 1 or 2 * len(fit) >= len(new):
                new = fit
                for bad in why:
                    _refuse(refused, bad)
        if vectors is not None:
            others = {k: v for k, v in (mates or {}).items() if k not in columns}
            away = [{} if i in loose else _unlike(vectors, [s[i] for s in seeds], others, [r[i] for r in new])
                    for i in range(len(columns))]
            new = [r for r in new if not any(v in away[i] for i, v in enumerate(r))]
            for bad in away:
                _refuse(refused, bad)
        got.extend(new)
        low = low or len(new) < VOCAB_LOW
        dry = 0 if new else dry + 1
        if dry >= VOCAB_DRY:
            break
    return got, calls


def mates_of(examples: dict[str, list[Any]], names: Sequence[str]) -> dict[str, list[str]]:
    """The example values of the columns ``names`` as texts (numbers too: a year "1925" continued into the titles'
    list is the year column's kind of value), for :func:`pipeline.meaning.profile.closer_elsewhere`; a column
    whose examples hold fewer than two different values is left out."""
    out: dict[str, list[str]] = {}
    for n in names:
        texts = [str(v).strip() for v in examples.get(n, []) if v is not None and not isinstance(v, bool)
                 and str(v).strip()]
        if len(set(texts)) >= 2:
            out[n] = texts
    return out


def set_rows(values: Sequence[Any]) -> frozenset[int]:
    """The example rows (by position) in which a column holds text."""
    return frozenset(i for i, v in enumerate(values) if isinstance(v, str) and v.strip())


def paired(a: Sequence[str], b: Sequence[str], vectors: prof.Vectors) -> float:
    """How much closer in meaning each ``a[i]`` sits to its own row's ``b[i]`` than to the other rows' values of
    ``b`` (mean MiniLM cosine, matched minus mismatched); 0.0 with fewer than two rows."""
    n = len(a)
    if n < 2 or len(b) != n:
        return 0.0
    sims = vectors(list(a)) @ vectors(list(b)).T
    matched = float(sims.trace()) / n
    return matched - (float(sims.sum()) - matched * n) / (n * n - n)


def tuple_columns(examples: dict[str, list[Any]], lists: Sequence[str], people: Sequence[str],
                  vectors: prof.Vectors | None) -> list[str]:
    """The columns continued together (in the order of ``lists`` then ``people``, at most ``TUPLE_WIDTH``), or []:
    the list columns (``lists``: text the model continues) set in the same example rows (two or more; the largest
    such set of columns, the first on a tie), with the person and company columns (``people``) set in those rows
    whose values the examples pair with one of them (:func:`paired`, :data:`PAIR_MARGIN`: an author with their
    book, not a clerk with a job title). Decided by the example rows alone, no column name is read. Fewer than two
    columns, or no list column among them: []."""
    sets = {c: set_rows(examples.get(c, [])) for c in [*lists, *people]}
    groups: dict[frozenset[int], list[str]] = {}
    for c in lists:
        if len(sets[c]) >= 2:
            groups.setdefault(sets[c], []).append(c)
    if not groups:
        return []
    rows, group = max(groups.items(), key=lambda kv: len(kv[1]))  # max keeps the first on a tie
    ordered = sorted(rows)
    if vectors is not None:
        for p in people:
            if sets[p] != rows:
                continue
            mine = [str(examples[p][i]).strip() for i in ordered]
            if any(paired([str(examples[c][i]).strip() for i in ordered], mine, vectors) >= PAIR_MARGIN
                   for c in group):
                group.append(p)
    return group[:TUPLE_WIDTH] if len(group) >= 2 else []


PERSON_SIM, PERSON_MARGIN = 0.38, 0.08
"""How close (MiniLM, mean cosine to the examples' centroid) a person generator's samples must sit to a column's
examples, and by how much closer than the samples of a company, a street or a city, for a list the model chose to
be people instead (measured 2026-11-28: names 0.48, authors 0.42, German names 0.43; book titles 0.28, vehicles
0.23, medicines 0.12)."""
STREET_SIM, STREET_MARGIN = 0.33, 0.03
"""The same for a street generator's samples (measured 2026-11-28, 24 samples of each generator in the examples'
locale; street / best rival): the library's "123 Main St, Anytown, USA" 0.38 / 0.26 (city), "12 Baker Street"
0.43 / 0.36, "Calle Mayor 5, Madrid" (es_ES) 0.47 / 0.41, "Hauptstraße 12, 10115 Berlin" (de_DE) 0.35 / 0.31,
"12 rue de la Paix, Paris" (fr_FR) 0.56 / 0.31. Missed (stays a list): "10 Downing Street, London" (en_GB) 0.31 /
0.27. Other columns stay under it: warehouses ("North Warehouse", "Dock 4 Storage") 0.31 / 0.29, library branches
0.30 / 0.34 (city), bus routes 0.29, venues 0.28, book titles 0.14, medicines 0.07."""
CITY_SIM, CITY_MARGIN = 0.38, 0.08
"""The same for a city generator's samples: cities 0.40 / 0.24, German cities 0.42 / 0.30; near misses without
the margin: library branches 0.34 / 0.30 (street), venues 0.34 / 0.28, German book titles 0.34 / 0.30.
Companies are left to the model's choice: a company generator's samples sit no closer to company names than a
city's do ("Acme Corp" 0.25 / 0.23, "Northwind Traders" 0.28 / 0.28)."""
SHOWN_KINDS: dict[ir.GeneratorKind, tuple[float, float]] = {
    "person_name": (PERSON_SIM, PERSON_MARGIN), "street_address": (STREET_SIM, STREET_MARGIN),
    "city": (CITY_SIM, CITY_MARGIN)}
"""The generators a list the model chose may turn into, with the similarity and margin each needs."""
COMPARED: tuple[ir.GeneratorKind, ...] = ("person_name", "company", "street_address", "city")
"""Whose samples are compared with a column's examples (each kind's rivals are the others)."""


def digit_pattern(texts: Sequence[str], unique_rows: int | None) -> str | None:
    """The code pattern every example shares (each digit a '#', the examples' common beginning kept: "9780" of
    four ISBNs), or None when they differ in shape or hold fewer than three digits. For a UNIQUE column the kept
    beginning shrinks until the pattern gives ten values per row."""
    if len(texts) < 2 or relations.date_columns({"c": list(texts)}):  # dates have their own generators
        return None
    shapes = {re.sub(r"\d", "#", t) for t in texts}
    if len(shapes) != 1:
        return None
    shape = next(iter(shapes))
    if shape.count("#") < 3:
        return None
    keep = 0
    while keep < len(shape) and len({t[keep] for t in texts}) == 1:
        keep += 1
    keep = min(keep, len(shape) - 1)

    def made(k: int) -> str:
        return texts[0][:k] + shape[k:]

    while unique_rows and keep > 0 and code_capacity(made(keep)) < 10 * unique_rows:
        keep -= 1
    return made(keep) if "#" in made(keep) else None


def shown_kind(col: Column, texts: list[str], ctx: Context, locale: str, seed: int) -> ir.GeneratorKind | None:
    """The generator the column's example values show when the model chose a list for them: e-mail addresses
    (each one local part, '@' and a dotted domain), or people, streets or cities (:data:`SHOWN_KINDS`: that
    generator's samples close in meaning to the examples and closer by a margin than the samples of the other
    generators of :data:`COMPARED`; people also only when their samples look like the examples by shape). None: a
    list it is. A column whose examples are the person generator's own given names or surnames
    (:func:`pipeline.dbmodel.draws.name_part`: "John", "Jane", "Alice", "Bob") is a name split over two columns:
    that generator's part, not a list of a few dozen continued by the model."""
    if len(texts) < 2:
        return None
    if all(_EMAIL.fullmatch(t) for t in texts):
        return "email"
    part = name_part(texts, locale if locale in LOCALES else DEFAULT_LOCALE)
    if part == "first_name":
        return "first_name"
    if part == "last_name":
        return "last_name"
    if ctx.vectors is None:
        return None
    p = prof.profile(texts)
    if p is None:
        return None
    sims = kind_similarities(col, texts, ctx.vectors, locale, seed)
    for kind, (least, margin) in SHOWN_KINDS.items():
        rival = max(v for k, v in sims.items() if k != kind)
        if sims[kind] < least or sims[kind] < rival + margin:
            continue
        if kind == "person_name" and prof.contradiction(p, samples_of(col, kind, ctx, locale, seed)):
            continue
        return kind
    return None


SAME_EXAMPLES = 0.5
"""The share of a column's example values another column's examples hold for it to take that column's generator
(:func:`kind_of_same_examples`)."""


def shown_kinds(plans: Iterable[tuple[str, ir.RowPlan]]) -> dict[str, str]:
    """Per "table.column" of ``plans`` (table, plan), the generator code drew it from because its examples showed it
    (:data:`SHOWN_KINDS`: people, streets, cities), for :attr:`Context.drawn_as`."""
    return {f"{t}.{g.column}": g.kind for t, p in plans for g in p.generators
            if g.by == "code" and g.kind in SHOWN_KINDS}


def kind_of_same_examples(texts: Sequence[str], ctx: Context) -> ir.GeneratorKind | None:
    """The generator an earlier table's column was drawn from (:attr:`Context.drawn_as`) when at least
    :data:`SAME_EXAMPLES` of ``texts`` are among that column's own examples: the model wrote the same people in two
    tables ("John Doe", "Jane Smith", "Alice Johnson" as the tenants of a flat's viewings and of its leases; an
    outside build of 2026-11-30), and where :func:`shown_kind` missed the second by its margin, its list of 24
    names continued from those placeholders held 234 leases (Bob Brown 17, John Doe 13). Compared by the texts
    themselves; None when none matches."""
    mine = {vocab.norm(t) for t in texts if str(t).strip()}
    if len(mine) < 2:
        return None
    for key, kind in sorted(ctx.drawn_as.items()):
        theirs = {vocab.norm(t) for t in ctx.others.get(key, [])}
        if theirs and len(mine & theirs) >= SAME_EXAMPLES * len(mine):
            return kind  # type: ignore[return-value]
    return None


def samples_of(col: Column, kind: ir.GeneratorKind, ctx: Context | None, locale: str, seed: int) -> list[str]:
    """``TRIAL_ROWS`` values of generator ``kind`` for ``col`` in ``locale`` (deterministic in ``seed``)."""
    g = ir.ColumnGenerator(column=col.name, kind=kind)
    maker = ValueMaker(locale if locale in LOCALES else DEFAULT_LOCALE, seed + 13, [g], [col],
                       ctx.examples if ctx else {})
    return [str(maker.value(g, {}, {})) for _ in range(TRIAL_ROWS)]


def kind_similarities(col: Column, texts: Sequence[str], vectors: prof.Vectors, locale: str, seed: int
                      ) -> dict[ir.GeneratorKind, float]:
    """Mean MiniLM cosine of each :data:`COMPARED` generator's samples to the centroid of ``texts``."""
    centre = vectors.centroid(list(texts))
    return {k: float((vectors(samples_of(col, k, None, locale, seed)) @ centre).mean()) for k in COMPARED}


def joined_by(texts: Sequence[str]) -> str | None:
    """The separator (:data:`pipeline.meaning.vocab.SEPARATORS`) every example holds: an address written on one
    line as its places joined ("123 Main St, Anytown, USA"); None when some example holds none."""
    return next((sep for sep in vocab.SEPARATORS if texts and all(sep in t for t in texts)), None)


@dataclass
class Settled:
    """What code decided after the LLM's choice: generators, rows it cannot make (a short UNIQUE list), parent
    date bounds, columns whose example values are rewritten, LLM calls spent, notes."""

    gens: dict[str, ir.ColumnGenerator | None]
    cap: int | None = None
    related: ChildRelations = field(default_factory=ChildRelations)
    rewrite: list[str] = field(default_factory=list)
    calls: int = 0
    keep: set[str] = field(default_factory=set)
    together: list[str] = field(default_factory=list)
    """Columns continued together as rows (:func:`continue_together`), drawn as one tuple per row."""
    empty: dict[str, str] = field(default_factory=dict)
    """Columns left without a generator, and why."""


def _code(g: ir.ColumnGenerator, note: str, **update: Any) -> ir.ColumnGenerator:
    """``g`` changed by code (the LLM's choice keeps its kind only where the examples agree); a fallback stays a
    fallback, its note (why the choice failed) kept first."""
    return g.model_copy(update={"by": "code" if g.by == "llm" else g.by,
                                "note": f"{g.note}; {note}" if g.note else note, **update})


def _keeps_gaps(g: ir.ColumnGenerator, o: relations.DateOrder) -> bool:
    """Whether the model's ``date_after`` days keep the spread of the examples' gaps (``o``): from no fewer days
    than the shortest (a due date on the loan's day where no example is), to at least the longest (every leave as
    long as the shortest example's), and not :data:`pipeline.meaning.relations.SPREAD_MAX` times wider than they
    spread (:func:`pipeline.meaning.relations.range_misfit`)."""
    if g.min is None or g.max is None or g.min < o.min_days or g.max < o.max_days:
        return False
    scale = (o.max_days - o.min_days) or max(o.max_days, 1)  # their span, their length when all one
    return g.max - g.min <= relations.SPREAD_MAX * scale


def _dense(g: ir.ColumnGenerator, values: Sequence[Any], rows: int, today: date) -> ir.ColumnGenerator:
    """``g`` (a date column no two rows may share) widened to give ``rows`` dates as far apart as its examples are
    (:func:`pipeline.meaning.spans.dense_width`: four holidays 4 days apart on average, 275 rows: 1,100 days, where
    half a year made every day of it a holiday), on the clock's sides in the examples' shares
    (:func:`pipeline.meaning.spans.spread`). Unchanged when its range is wide enough, when it is no ``date`` range
    or when its examples hold no date."""
    if g.kind != "date" or not g.start or not g.end or not relations.date_columns({g.column: list(values)}):
        return g
    try:
        start, end = date.fromisoformat(g.start[:10]), date.fromisoformat(g.end[:10])
    except ValueError:
        return g
    width = spans.dense_width(values, rows)
    if (end - start).days >= width:
        return g
    lo, hi = spans.spread(start, end, width, spans.clock_counts(values, today), today)
    gap = spans.spacing(values)
    apart = f"{gap:.1f} days apart" if gap is not None else "one a day at most"
    return _code(g, f"{rows} different dates, {apart} as the examples: {lo}..{hi}", start=lo.isoformat(),
                 end=hi.isoformat())


def _reaches(gens: dict[str, ir.ColumnGenerator | None], start: str, target: str) -> bool:
    """Whether ``start``'s dates are drawn (through ``date_after`` links) from ``target``'s."""
    seen = set()
    cur = gens.get(start)
    while cur is not None and cur.kind == "date_after" and cur.after and cur.after not in seen:
        if cur.after == target:
            return True
        seen.add(cur.after)
        cur = gens.get(cur.after)
    return False


def _examples_range(g: ir.ColumnGenerator, values: Sequence[Any]) -> ir.ColumnGenerator:
    """``g`` (date or datetime) with the examples' format (no time where no example writes one) and, when none of
    the example dates falls in its range (birth dates drawn from the coming year where the examples were born in
    the 1990s), the examples' own range widened by its span (at least 180 days) on each side."""
    texts = [v for v in values if isinstance(v, str)]
    days = sorted(d for d in (relations.as_date(v) for v in texts) if d is not None)
    if not days:
        return g
    if g.kind == "datetime" and all(len(t) == 10 for t in texts):
        g = _code(g, "dates without a time, as every example", kind="date")
    try:
        start, end = date.fromisoformat((g.start or "")[:10]), date.fromisoformat((g.end or "")[:10])
    except ValueError:
        return g
    if any(start <= d <= end for d in days):
        return g
    span = timedelta(days=max(180, (days[-1] - days[0]).days))
    lo, hi = max(days[0] - span, date(1900, 1, 1)), min(days[-1] + span, date(2100, 12, 31))
    return _code(g, f"no example falls in {start}..{end}: the examples' range widened", start=lo.isoformat(),
                 end=hi.isoformat())


def elsewhere(column: str, table: str, others: dict[str, list[str]], gens: dict[str, ir.ColumnGenerator | None]
              ) -> set[str]:
    """Values (normalised) of the scenario's other text columns: their examples (``Context.others``) and this
    table's other lists. A continued value among them belongs to another column (the authors' list continued with
    the titles "Moby Dick" and "The Great Gatsby", 2026-11-28)."""
    out = {vocab.norm(t) for k, texts in others.items() if k not in (column, f"{table}.{column}") for t in texts}
    for name, g in gens.items():
        if name != column and g is not None and g.kind == "text_pool" and g.pool and not g.pattern:
            out.update(vocab.norm(t) for t in g.pool)
    return out


TUPLE_ROUNDS = 3
"""Calls for columns continued together when none of them is UNIQUE (``[stages.build] list_rounds_unique``
otherwise)."""
ALIGNED_KINDS: tuple[ir.GeneratorKind, ...] = ("integer", "amount", "enum")
"""Generators whose column joins a row's continued tuple (:func:`row_mates`): its values then come with the row's,
aligned with the key column's pool (``after`` names the key, ``values`` the values in the pool's order)."""
TUPLE_MATES_WIDTH = 5
"""At most this many columns continued together with the columns that vary with them (:func:`row_mates`)."""
SEQUENCE_MIN = 4
"""Rows of one reply at least before its values of a place are read as a sequence down the reply (:func:`in_sequence`)."""
NAMED_SPREAD = 1.5
"""How far (as a power of the examples' own ratio, largest over smallest) a number asked with its row's name may lie
beyond its positive examples (:func:`named_range`): 15-200 (a ratio of 13) gives 0.31-9,700, ages 25-40 give
12-81, years 1813-1960 give 1614-2201."""


def in_sequence(values: Sequence[Any]) -> bool:
    """Whether one reply's values of a place (a number, a CHECK list's value), in the reply's order, run as a
    sequence down its rows rather than each row's own: numbers strictly rising or strictly falling over all of at
    least :data:`SEQUENCE_MIN` rows (a pharmacy's strengths 30, 40, 60, 75, 80, 90, 100, 110), or values repeating
    with a period of their own number of distinct values, two at least, over two periods at least (daily, weekly,
    monthly, daily, weekly, monthly, ...). Eight values a model chose each for its own row rise or fall all the way
    one time in 20,000; three values drawn at random cycle twice over six rows one time in 120. Read from numbers
    and repetition only, no value's words."""
    if len(values) < SEQUENCE_MIN:
        return False
    nums: list[float] = []
    for v in values:
        try:
            nums.append(float(str(v).strip()))
        except ValueError:
            break
    if len(nums) == len(values):
        steps = [b - a for a, b in zip(nums, nums[1:], strict=False)]
        if all(d > 0 for d in steps) or all(d < 0 for d in steps):
            return True
    texts = [" ".join(str(v).split()).casefold() for v in values]
    period = len(set(texts))
    return (period >= 2 and len(texts) >= 2 * period and len(set(texts[:period])) == period
            and all(texts[i] == texts[i - period] for i in range(period, len(texts))))


def _stored_text(value: Any) -> str:
    """An example value as the model is shown it: a whole number without ".0" (a REAL column's 100.0 is "100")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _stored_value(g: ir.ColumnGenerator, text: str) -> str | int | float:
    """A continued value as its generator stores it: an int, a float, or the text of a CHECK list's value."""
    if g.kind == "integer":
        return int(float(text))
    if g.kind == "amount":
        return float(text)
    return text


def named_range(g: ir.ColumnGenerator, examples: Sequence[Any]) -> tuple[float | None, float | None]:
    """The range a number asked with its row's name (:func:`complete_rows`) may take: what the generator's range,
    the examples' padded range (:func:`pipeline.meaning.relations.number_range`) and, for examples that are all
    positive, their own ratio (largest over smallest) raised to :data:`NAMED_SPREAD` on each side (a ratio, since
    such numbers spread by factors: a strength of 500 or 0.5 where the examples hold 15-200) allow. A medicine's
    own strength lies outside the range the model chose for values drawn apart (2026-11-28: 10-200 for the
    pharmacy, where metformin is 500 and lorazepam 1); a year stays near its examples' (1813-1960 gives 1614-2201).
    (None, None) without a number."""
    nums = relations.numbers(examples)
    lows = [v for v in (g.min, *([min(nums)] if nums else [])) if v is not None]
    highs = [v for v in (g.max, *([max(nums)] if nums else [])) if v is not None]
    padded = relations.number_range(nums, g.kind == "integer")
    if padded is not None:
        lows.append(padded[0])
        highs.append(padded[1])
    if nums and min(nums) > 0:
        factor = (max(nums) / min(nums)) ** NAMED_SPREAD
        lows.append(min(nums) / factor)
        highs.append(max(nums) * factor)
    return (min(lows) if lows else None), (max(highs) if highs else None)


def value_check(col: Column, g: ir.ColumnGenerator | None, examples: Sequence[Any], named: bool = False
                ) -> Callable[[str], str | None] | None:
    """For a column whose values come with a continued tuple (an ``ALIGNED_KINDS`` generator): a function giving a
    continued value as it is kept ("1954.0" -> "1954", "Daily" -> "daily" of a CHECK list) or None when the value
    is no number, a number outside the generator's range (the examples' range when it has none; the range
    :func:`fit_examples` already narrowed to the examples), or no value of the column's CHECK list. ``named``: the
    value was asked with its row's name (:func:`complete_rows`): the range is :func:`named_range`, and a REAL
    column takes a fraction whatever its generator (lorazepam 0.5). None for a column whose continued values are
    text (a list, an enum without a CHECK list: the model's own vocabulary)."""
    if g is None or g.kind not in ALIGNED_KINDS:
        return None
    if g.kind == "enum":
        allowed = list(col.enum or ())
        if not allowed:
            return None
        by_fold = {str(v).casefold(): str(v) for v in allowed}
        return lambda text: by_fold.get(" ".join(str(text).split()).casefold())
    nums = [float(v) for v in examples if isinstance(v, int | float) and not isinstance(v, bool)]
    lo = g.min if g.min is not None else min(nums, default=None)
    hi = g.max if g.max is not None else max(nums, default=None)
    whole = g.kind == "integer"
    if named:
        lo, hi = named_range(g, examples)
        whole = whole and storage(col) != "REAL"

    def check(text: str) -> str | None:
        try:
            x = float(str(text).strip())
        except ValueError:
            return None
        if not math.isfinite(x) or (whole and not x.is_integer()):
            return None
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            return None
        return str(int(x)) if whole or x.is_integer() else str(x)

    return check


def row_mates(asked: Sequence[Column], gens: Mapping[str, ir.ColumnGenerator | None], examples: Mapping[str, list[Any]],
              rows: frozenset[int], entity: bool, singles: frozenset[str]) -> list[str]:
    """The columns whose example values vary with a tuple's (set in exactly its example ``rows``, not the same in
    all of them), drawn with it rather than apart (a book's year with its title, a medicine's strength and dose
    frequency with its name, a make the model listed as an enum with its model): numbers and enums
    (:data:`ALIGNED_KINDS`), no date, no UNIQUE column, no boolean. Where the tuple names an entity (``entity``:
    one of its columns UNIQUE or in the table's natural key, each row drawn once) all of them, and a category of
    the entity whose examples all hold one value (:func:`entity_category`: a book's genre, every example 'fiction');
    otherwise (a row drawn again and again) only an enum without a CHECK list, a vocabulary the model chose, since
    a number or a CHECK list's state (a vehicle's status) varies between rows of the same tuple. The columns that
    vary come first (:data:`TUPLE_MATES_WIDTH` keeps the first of them). Decided from the examples, the constraints and the
    generators' kinds, no column name read."""
    out, same = [], []
    for c in asked:
        g = gens.get(c.name)
        if g is None or g.kind not in ALIGNED_KINDS or c.name in singles or (g.kind == "enum" and not g.values):
            continue
        if not entity and (g.kind != "enum" or c.enum):
            continue
        values = examples.get(c.name, [])
        at = frozenset(i for i, v in enumerate(values) if v is not None and not isinstance(v, bool)
                       and str(v).strip())
        if at != rows:
            continue
        if g.kind != "enum" and not all(isinstance(values[i], int | float) for i in rows):  # a number as text
            continue
        if relations.date_columns({c.name: list(values)}):
            continue
        if len({_stored_text(values[i]) for i in rows}) >= 2:
            out.append(c.name)
        elif entity and entity_category(c, g, gens):
            same.append(c.name)
    return [*out, *same]


def entity_category(col: Column, g: ir.ColumnGenerator, gens: Mapping[str, ir.ColumnGenerator | None]) -> bool:
    """Whether a column of an entity's table whose examples all hold one value is continued with the entity's row
    anyway, as a category of it (a book's genre: the library's four example books all 'fiction', the genre drawn
    apart made 'Animal Farm' and 'The Hobbit' non-fiction, 2026-11-30) rather than a state its rows move through
    (a book's or a vehicle's status, every example in the one state a row starts in): an ``enum`` of named values
    (a CHECK list, each value held to it by :func:`value_check`, or the model's own vocabulary), and none of what
    marks a state: a DEFAULT (the value a new row starts in), a yes/no list (a CHECK of 0 and 1), a date column
    code draws in the table (where a short list is a state held to the clock, :func:`pipeline.stages.rows.tense.
    state_columns`, which leaves alone a column drawn with its row). A number the same in every example (copies,
    stock) stays drawn apart: a count rows change. The examples cannot tell a state without these marks from a
    category; continued, such a state is written by the model for each row, inside its CHECK list. From kinds and
    constraints only, no name or value read. The real model, shown the library's four 'fiction' books, wrote each
    of its next books' genre beside its title (3 calls, 10 novels kept, each 'fiction'; 'The Hobbit' given as
    'fantasy', no value of the CHECK list, dropped with its row: 2026-11-30)."""
    if g.kind != "enum" or col.has_default:
        return False
    if set(col.enum or g.values or ()) <= {0, 1}:
        return False
    return not any(o is not None and o.kind in ("date", "datetime", "date_after")
                   for n, o in gens.items() if n != col.name)


def rest_model(columns: list[str], places: Sequence[int], lists: Mapping[int, Sequence[str]]) -> type[BaseModel]:
    """``{<column>: ..., ...}`` for the ``places`` of a row asked with its name: a value of the CHECK list where
    ``lists`` gives one (the grammar keeps a small model inside it), a number otherwise."""
    fields: dict[str, Any] = {}
    for i in places:
        kind: Any = Literal[tuple(lists[i])] if lists.get(i) else float  # type: ignore[valid-type]
        fields[f"c{i}"] = (kind, Field(alias=columns[i]))
    return create_model("RowRest", **fields, __base__=BaseModel)  # type: ignore[call-overload]


def complete_rows(scenario: ir.Scenario, table: ir.Table, columns: list[str], seeds: list[tuple[str, ...]],
                  rows: list[tuple[str, ...]], places: Sequence[int], checks: Sequence[Callable[[str], str | None]],
                  lists: Mapping[int, Sequence[str]], client: LLMClientProtocol, most: int
                  ) -> tuple[list[tuple[str, ...]], int, int]:
    """``rows`` (continued together, :func:`continue_tuples`) with the values of their ``places`` (numbers and
    CHECK-list values: a medicine's strength and frequency) asked again of the LLM one row a call, given the row's
    other values (its name) and the example rows (``seeds``). Continued eight rows a call, the embedded model wrote
    these places as a sequence over the rows rather than as each name's own (2026-11-28, the pharmacy: frequencies
    cycling daily, weekly, monthly down the reply as in the examples, strengths climbing 30, 40, 60, 75, 80, 90,
    100, 110; lorazepam 75 daily in one reply, 20 weekly and 12 monthly in two others); a row on its own has no
    place in a sequence. Each value is checked by ``checks`` (per place: the value as kept, or None); a row whose
    reply fails (an error, a value refused, an example row's values copied: :func:`copied`) keeps the values it was
    continued with. :func:`continue_together` asks only where a continued reply wrote one of these places as a
    sequence (:func:`in_sequence`): the library's seven books asked again gave six years unchanged and one made wrong
    (2026-11-29). At most ``most`` rows are asked (``[stages.build] complete_rows_max``): one call each. Returns
    (rows, calls, rows completed)."""
    texts = [i for i in range(len(columns)) if i not in places]
    model = rest_model(columns, places, lists)
    budget = sum(value_tokens([s[i] for s in seeds]) + len(columns[i]) // 3 + 4 for i in places) + 16
    shown = "\n".join(_row_line(columns, r) for r in seeds)
    out: list[tuple[str, ...]] = []
    calls = done = 0
    for row in rows:
        if calls >= most:
            out.append(row)
            continue
        line = "{" + ", ".join(f"{json.dumps(c, ensure_ascii=False)}: "
                               + ("?" if i in places else json.dumps(row[i], ensure_ascii=False))
                               for i, c in enumerate(columns)) + "}"
        prompt = render_section(
            "seed_data", "complete_row", name=scenario.name, description=scenario.description, ddl=table.ddl,
            values=shown, missing=", ".join(columns[i] for i in places), row=line,
            known=", ".join(json.dumps(row[i], ensure_ascii=False) for i in texts),
            shape=", ".join(f'"{columns[i]}": ...' for i in places))
        calls += 1
        try:
            reply, _ = client.structured_reply(model, user(prompt), stage=STAGE, max_tokens=budget)
        except LLMUnavailable:
            raise
        except LLMError:
            out.append(row)
            continue
        got = {i: f(_stored_text(getattr(reply, f"c{i}"))) for i, f in zip(places, checks, strict=True)}
        if any(v is None for v in got.values()) or copied(seeds, row, got, texts, dict(zip(places, checks, strict=True))):
            out.append(row)
            continue
        out.append(tuple(str(got[i]) if i in got else v for i, v in enumerate(row)))
        done += 1
    return out, calls, done


FILLER_SHARE = 0.5
"""Share of the rows asked again with their name (:func:`complete_rows`) above which one answer of a place is read as
the model's filler rather than each row's own (:func:`unfilled`), where the examples and the continued rows hold it in
at most half that share. 2026-11-30, the pharmacy (/work/out/r18a): 28 of 39 medicines answered with the strength 10
(the examples 100, 50, 200, 15; the continued rows 30, 40, 60, 75, 20, 25 ...) and 39 of 39 with the frequency
"daily" (the examples daily, weekly, monthly, daily)."""
FILLER_MIN = 4
"""Rows holding one answer at least before it can be read as a filler (:func:`unfilled`)."""


def _same(a: str, b: str) -> bool:
    """Two kept values of a place equal: as numbers (10 and 10.0), else as folded text."""
    try:
        return float(a) == float(b)
    except ValueError:
        return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def unfilled(seeds: Sequence[tuple[str, ...]], continued: Sequence[tuple[str, ...]], asked: Sequence[tuple[str, ...]],
             places: Sequence[int], listed: Collection[int] = ()) -> tuple[list[tuple[str, ...]], dict[int, int]]:
    """``asked`` (:func:`complete_rows`: ``continued`` with its ``places`` asked again, a row a call) with a filler
    undone: where one value holds more than :data:`FILLER_SHARE` of the rows of a place (:data:`FILLER_MIN` at
    least) and at least twice its share of the examples (``seeds``) and of the continued rows, the rows that
    answered it keep the value they were continued with. The answers' spread then follows the model's own per-row
    values (a spread like the examples'), not one value filling most rows that no example row shows as often.
    Counts and equality only, no value's words. A ``listed`` place (a CHECK-listed column) is left as answered:
    one listed value for most rows can be the domain's own (most medicines are taken daily; continued 8 at a time,
    the pharmacy's frequencies cycled daily, weekly, monthly down the rows), where one number for most rows is a
    filler (28 of 39 dosages 10.0). Returns (rows, place -> rows given back their continued value)."""
    out = [list(r) for r in asked]
    undone: dict[int, int] = {}
    n = len(asked)
    if n != len(continued) or n < FILLER_MIN:
        return [tuple(r) for r in out], undone
    for i in places:
        if i in listed:
            continue
        counts = Counter(" ".join(r[i].split()).casefold() for r in asked)
        top, k = counts.most_common(1)[0]
        share = k / n

        def held(rows: Sequence[tuple[str, ...]], top: str = top, i: int = i) -> float:
            return sum(_same(r[i], top) for r in rows) / len(rows) if rows else 0.0
        if k < FILLER_MIN or share <= FILLER_SHARE or share < 2 * held(seeds) or share < 2 * held(continued):
            continue
        for j, (a, c) in enumerate(zip(asked, continued, strict=True)):
            if _same(a[i], top) and not _same(c[i], top):
                out[j][i] = c[i]
                undone[i] = undone.get(i, 0) + 1
    return [tuple(r) for r in out], undone


def copied(seeds: Sequence[tuple[str, ...]], row: tuple[str, ...], got: Mapping[int, str | None], texts: Sequence[int],
           checks: Mapping[int, Callable[[str], str | None]]) -> bool:
    """Whether the values ``got`` for a row asked with its name (:func:`complete_rows`) are an example row's own,
    copied from the example that shares one of the row's other values, where the row was continued with values of
    its own: every asked place equal to that example's (as its check keeps it), and the row's values there not all
    the same already. The library's "Brave New World" was continued with its author given as George Orwell and the
    year 1932; asked again, shown the example row of 1984 (George Orwell, 1949), the model answered 1949, the year of
    the example that shares the author (llm_cache.sqlite, 2026-11-29). Equality of values only, no words read."""
    if all(got[i] == row[i] for i in got):
        return False
    for s in seeds:
        if not any(vocab.norm(s[i]) == vocab.norm(row[i]) for i in texts if s[i].strip() and row[i].strip()):
            continue
        if all(got[i] == (checks[i](s[i]) or s[i]) for i in got):
            return True
    return False


def continue_together(scenario: ir.Scenario, table: ir.Table, names: list[str], ctx: Context,
                      client: LLMClientProtocol, settings: BuildSettings, n_examples: int, out: Settled,
                      mates: Mapping[str, Sequence[str]] | None = None, columns: Mapping[str, Column] | None = None
                      ) -> int:
    """Continue the columns ``names`` together (:func:`continue_tuples`) from the example rows that set them all,
    and make them one tuple per row: the key column (the first UNIQUE one, else the first of the table's natural
    key, else the one whose examples differ most) a list, the others lists aligned with it (``after`` names the key: the row maker draws the same place).
    With fewer than ``TUPLE_MIN`` new rows the columns are left to be continued one by one; with fewer rows than the
    table needs and a UNIQUE column among them, the table gets fewer rows (``out.cap``). ``mates``: the table's
    columns' example values (:func:`mates_of`). ``columns``: the table's columns by name; a number or a CHECK
    list's value among ``names`` (:func:`row_mates`) is checked by :func:`value_check` and drawn with its row.
    Returns calls."""
    ex, gens = ctx.examples, out.gens
    rows = sorted(set_rows(ex.get(names[0], [])))
    checks = [value_check(c, gens.get(c.name), ex.get(c.name, [])) if c is not None else None
              for c in ((columns or {}).get(n) for n in names)]
    loose = [i for i, f in enumerate(checks) if f is not None]
    seeds = vocab.clean_tuples([tuple(_stored_text(ex[n][i]) for n in names) for i in rows], distinct=(),
                               variants=False, loose=loose)
    if len(seeds) < 2:
        return 0
    uniques = [i for i, n in enumerate(names) if n in ctx.singles]
    named = [i for i, n in enumerate(names) if n in (table.natural_key or [])]
    texts = [i for i in range(len(names)) if i not in loose]
    key = (uniques or named or [max(texts, key=lambda i: (len({vocab.norm(r[i]) for r in seeds}), -i))])[0]
    distinct = sorted({key, *uniques})
    want = ctx.rows if uniques else VOCAB_WANT
    rounds = settings.list_rounds_unique if uniques else TUPLE_ROUNDS
    shapes = [None if i in loose else prof.profile([r[i] for r in seeds]) for i in range(len(names))]
    replies: list[list[tuple[str, ...]]] = []
    refused: dict[str, str] = {}
    more, calls = continue_tuples(scenario, table, names, seeds, want, rounds, client, settings, distinct, shapes,
                                  mates=mates_of(ex, list(ex)) if mates is None else mates, vectors=ctx.vectors,
                                  checks=checks if loose else (), replies=replies, refused=refused)
    taken = [set() if i in loose else elsewhere(n, table.name, ctx.others, gens) - {vocab.norm(r[i]) for r in seeds}
             for i, n in enumerate(names)]  # another column's value ("Moby Dick" as an author), the tuple's own aside
    more = [r for r in more if not any(vocab.norm(v) in taken[i] for i, v in enumerate(r))]
    if len(more) < min(TUPLE_MIN, want):
        return calls
    asked_note = ""
    runs = [names[i] for i in loose if any(in_sequence([r[i] for r in rep if i < len(r)]) for rep in replies)]
    if loose and columns and not runs:
        asked_note = (f"; kept as continued: no reply wrote {', '.join(names[i] for i in loose)} as a sequence down its"
                      " rows")
    if loose and columns and runs:  # each row's numbers and CHECK values asked again with its name, a row a call
        cols = [columns[n] for n in names]
        wide = [value_check(cols[i], gens.get(names[i]), ex.get(names[i], []), named=True) for i in loose]
        lists = {i: [str(v) for v in e] for i in loose
                 if (e := cols[i].enum) and all(isinstance(v, str) for v in e)}
        assert all(f is not None for f in wide)
        continued = more
        more, asked, done = complete_rows(scenario, table, names, seeds, more, loose,
                                          [f for f in wide if f is not None], lists, client,
                                          settings.complete_rows_max)
        calls += asked
        asked_note = (f"; {done} of {len(more)} continued rows' values asked again with their {names[key]}"
                      f" (a reply wrote {', '.join(runs)} as a sequence down its rows)")
        more, undone = unfilled(seeds, continued, more, loose, listed=lists)
        if undone:
            asked_note += "; " + ", ".join(
                f"{k} rows answering {names[i]} with the one value most answers gave kept their continued value"
                for i, k in undone.items())
    pool = [*seeds, *more]
    lead = names[key]
    replies_flat = [r for rep in replies for r in rep]
    for i, n in enumerate(names):
        g = gens[n]
        assert g is not None
        note = (f"continued by the LLM together with {', '.join(m for m in names if m != n)}, one row of them per row"
                + (f" (drawn as {lead}'s)" if i != key else "")
                + refused_note({v: w for v, w in refused.items() if any(r[i] == v for r in replies_flat)}))
        if i in loose:  # a number or a CHECK list's value of the row: its kind kept, its values aligned with the key's
            if g.kind == "integer" and any(not float(r[i]).is_integer() for r in pool):
                g = g.model_copy(update={"kind": "amount"})  # a REAL column's fraction asked with its name (0.5)
            values = [_stored_value(g, r[i]) for r in pool]
            nums = [float(v) for v in values if isinstance(v, int | float)]
            update: dict[str, Any] = {"min": min([*nums, *([g.min] if g.min is not None else [])]),
                                      "max": max([*nums, *([g.max] if g.max is not None else [])])} if nums else {}
            gens[n] = _code(g, note + asked_note, after=lead, values=values, weights=None, **update)
            continue
        gens[n] = _code(g, note, kind="text_pool", pool=[r[i] for r in pool], after=None if i == key else lead,
                        pattern=None, min=None, max=None, start=None, end=None, values=None, weights=None)
    out.together = list(names)
    if uniques:
        out.keep.update(names[i] for i in uniques)
        left = len(pool) - n_examples
        out.cap = left if out.cap is None else min(out.cap, left)
    return calls


def derived_of(asked: list[Column], gens: dict[str, ir.ColumnGenerator | None], ex: dict[str, list[Any]],
               out: Settled) -> list[relations.Derived]:
    """Set ``derived`` generators for the text columns whose every example value is made of another column's value
    in the same row (:func:`pipeline.meaning.relations.derived_columns`: "john.smith@example.com" of "John Smith"):
    in every code row the value is made of that row's own value. Not a column continued with others as rows, nor
    one whose source code leaves empty. Returns the relations applied."""
    names = [c.name for c in asked if storage(c) in ("TEXT", "ANY") and not c.enum and gens.get(c.name) is not None
             and c.name not in out.together and not relations.date_columns({c.name: ex.get(c.name, [])})]
    applied = []
    for d in relations.derived_columns({n: ex.get(n, []) for n in names}, names):
        g = gens.get(d.column)
        if g is None or any(gens.get(s) is None for s in d.sources):
            continue
        gens[d.column] = _code(g, f"made of {' and '.join(d.sources)} in the same row ({d.recipe!r} and what "
                                  "follows it), as every example", kind="derived", after=d.source,
                               also=list(d.also) or None, pattern=d.recipe, pool=list(d.tails), pool2=None, min=None,
                               max=None, start=None, end=None, values=None, weights=None, distribution=None)
        out.keep.discard(d.column)
        applied.append(d)
    return applied


def settle(scenario: ir.Scenario, table: ir.Table, conn: sqlite3.Connection, cols: list[Column],
           asked: list[Column], chosen: dict[str, ir.ColumnGenerator | None], ctx: Context, client: LLMClientProtocol,
           settings: BuildSettings, n_examples: int, locale: str = DEFAULT_LOCALE, seed: int = 0) -> Settled:
    """Make every relation the examples show hold, by code: date order, the clock, signs, lists; fill text
    lists by continuation; bound a child's dates by its parent's."""
    out = Settled(dict(chosen))
    gens = out.gens
    today = date.fromisoformat(settings.clock[:10])
    ex = ctx.examples
    asked_names = {c.name for c in asked}
    # dates: the order of two columns, then the clock
    orders = relations.nearest_before(relations.date_orders({c: ex.get(c, []) for c in asked_names}))
    for second, o in orders.items():
        g, first = gens.get(second), gens.get(o.first)
        if g is None or first is None or first.kind not in ("date", "datetime", "date_after"):
            continue
        if g.kind == "date_after" and g.after == o.first and _keeps_gaps(g, o):
            continue
        if _reaches(gens, o.first, second):  # the model drew the first from the second: the first gets its own dates
            days = sorted(d for d in (relations.as_date(v) for v in ex.get(o.first, [])) if d is not None)
            gens[o.first] = _code(first, "its own dates, as the examples", kind="date", after=None, min=None,
                                  max=None, start=(days[0] - timedelta(days=180)).isoformat(),
                                  end=days[-1].isoformat())
        a, b = relations.gap_range(o)
        gens[second] = _code(g, f"{a}-{b} days after {o.first}, as every example ({o.min_days}-{o.max_days} widened)"
                             if (a, b) != (o.min_days, o.max_days) else
                             f"{a}-{b} days after {o.first}, as every example",
                             kind="date_after", after=o.first, min=float(a), max=float(b), start=None, end=None)
    for name in asked_names:  # a range none of the examples falls in, a time the examples never write
        g = gens.get(name)
        if g is None or g.kind not in ("date", "datetime") or not g.start or not g.end:
            continue
        gens[name] = _examples_range(g, ex.get(name, []))
    for name in asked_names:
        g = gens.get(name)
        if g is None or g.kind not in ("date", "datetime") or not g.start or not g.end:
            continue
        side = relations.clock_side(ex.get(name, []), today)
        moved = relations.clock_range(date.fromisoformat(g.start[:10]), date.fromisoformat(g.end[:10]), side, today)
        if moved is None:
            continue
        start, end = moved
        gens[name] = _code(g, f"dated {'up to' if side == 'past' else 'from'} today, as every example",
                           start=start.isoformat(), end=end.isoformat())
    for name in asked_names:  # a date no two rows may share: as far apart as the examples, not one a day
        g = gens.get(name)
        if g is not None and name in ctx.singles:
            gens[name] = _dense(g, ex.get(name, []), ctx.rows, today)
    # numbers: the examples' sign
    for name in asked_names:
        g = gens.get(name)
        if g is None or g.kind not in ("integer", "amount") or g.min is None:
            continue
        nums = [v for v in ex.get(name, []) if isinstance(v, int | float) and not isinstance(v, bool)]
        sign = relations.sign(nums)
        low = (1.0 if g.kind == "integer" else 0.01) if sign == "positive" else 0.0
        if sign and g.min < (low if sign == "positive" else 0):
            gens[name] = _code(g, f"{sign.replace('_', '-')} as every example", min=float(low),
                               max=max(float(g.max or low), float(low)))
    # a value made of another column's value in the same row, as every example shows (an e-mail of the person's name)
    made = derived_of(asked, gens, ex, out)
    # phones: the locale's numbers in the examples' shape, not digits drawn one by one into it
    for c in asked:
        g = gens.get(c.name)
        if g is None or g.kind not in ("text_pool", "code", "phone") or storage(c) not in ("TEXT", "ANY"):
            continue
        mask = phone_mask(prof.texts_of(ex.get(c.name, [])), locale)
        if mask is not None:
            gens[c.name] = _code(g, f"the locale's phone numbers in the examples' shape {mask!r}", kind="phone",
                                 pattern=mask, pool=None, min=None, max=None)
    # text: lists continued from the examples
    shown: dict[str, ir.GeneratorKind] = {}
    lists: list[str] = []
    for c in asked:
        g = gens.get(c.name)
        if g is None or g.kind != "text_pool" or storage(c) not in ("TEXT", "ANY"):
            continue
        texts = prof.texts_of(ex.get(c.name, []))
        unique = c.name in ctx.singles
        pattern = digit_pattern(texts, ctx.rows if unique else None)
        if pattern is not None:  # phones, ISBNs, codes: the examples' shape, not a list the model continues
            gens[c.name] = _code(g, f"the examples' shape {pattern!r}", kind="code", pattern=pattern, pool=None)
            continue
        kind = shown_kind(c, texts, ctx, locale, seed) or kind_of_same_examples(texts, ctx)
        if kind is not None:  # people, places, e-mail addresses: thousands from the generator, not a short list
            shown[c.name] = kind
        elif not vocab.list_separator(texts) and not vocab.placeholder_examples(texts, context_words(table.name, c.name,
                                                                                                     ex)):
            lists.append(c.name)
    mates = mates_of(ex, [c.name for c in asked])
    people = [c.name for c in asked if storage(c) in ("TEXT", "ANY") and (shown.get(c.name) or getattr(
        gens.get(c.name), "kind", None)) in ("person_name", "company")]
    together = tuple_columns(ex, lists, people, ctx.vectors)
    base = together or next(([n] for n in lists if len(set_rows(ex.get(n, []))) >= 2), [])
    joined: list[str] = []
    if base:  # the numbers and CHECK values that vary with the tuple's (a year with its title) join it
        entity = any(n in ctx.singles or n in (table.natural_key or []) for n in base)
        joined = row_mates(asked, gens, ex, set_rows(ex.get(base[0], [])), entity, ctx.singles)
        if joined:  # those that vary kept first, then asked in the table's order
            kept = set([*base, *joined][:TUPLE_MATES_WIDTH])
            together = [*(n for n in base if n in kept), *(c.name for c in asked if c.name in kept and c.name not in base)]
    if together:
        by_name = {c.name: c for c in asked}
        calls = continue_together(scenario, table, together, ctx, client, settings, n_examples, out, mates, by_name)
        out.calls += calls
        if joined and not out.together and len(base) >= 2:  # no row with its numbers: the text tuple alone
            out.calls += continue_together(scenario, table, base, ctx, client, settings, n_examples, out, mates,
                                           by_name)
    for c in asked:
        g = gens.get(c.name)
        if g is None or g.kind != "text_pool" or storage(c) not in ("TEXT", "ANY") or c.name in out.together:
            continue
        texts = prof.texts_of(ex.get(c.name, []))
        unique = c.name in ctx.singles
        if c.name in shown:
            kind = shown[c.name]
            sep = joined_by(texts) if kind == "street_address" else None  # the whole address, as the examples
            gens[c.name] = _code(g, f"{kind}, as the examples show", kind=kind, pool=None, pattern=sep)
            continue
        sep = vocab.list_separator(texts)
        if sep:
            items = vocab.list_items(texts, sep)
            more, calls = continue_list(scenario, table, c.name, items, VOCAB_WANT, VOCAB_ROUNDS, client,
                                        settings, sep=sep)
            out.calls += calls
            pool = vocab.clean([*items, *more], variants=False)  # more: checked for variants as it came
            if vocab.later_lower(texts, sep):
                pool = list(dict.fromkeys(i[:1].lower() + i[1:] for i in pool))
            lo, hi = vocab.list_counts(texts, sep)
            gens[c.name] = _code(g, f"lists of {lo}-{hi} items joined by {sep!r}, as the examples",
                                 pool=pool, pattern=sep, min=float(lo), max=float(max(hi, lo)))
            continue
        placeholder = vocab.placeholder_examples(texts, context_words(table.name, c.name, ex))
        seeds = [] if placeholder else vocab.clean(texts, variants=False)
        want = ctx.rows if unique else VOCAB_WANT
        rounds = settings.list_rounds_unique if unique else VOCAB_ROUNDS
        shape = prof.profile(seeds) if len(seeds) >= 2 else None
        refused: dict[str, str] = {}
        more, calls = continue_list(scenario, table, c.name, seeds, want, rounds, client, settings, shape=shape,
                                    mates={k: v for k, v in mates.items() if k != c.name}, vectors=ctx.vectors,
                                    refused=refused)
        out.calls += calls
        taken = elsewhere(c.name, table.name, ctx.others, gens)
        more = [v for v in more if vocab.norm(v) not in taken]  # another column's value: "Moby Dick" as an author
        pool = [*seeds, *more]
        if not pool:
            gens[c.name] = None
            out.empty[c.name] = (f"its list had no value: {calls} requests to continue "
                                 + (f"its placeholder examples ({', '.join(repr(t) for t in texts[:4])})"
                                    if placeholder else "its examples" if texts else "a list without examples")
                                 + " gave none that is new, no placeholder and not another column's")
            continue
        note = "examples continued by the LLM" + ("; its example values were numbered placeholders" if placeholder
                                                  else "") + refused_note(refused)
        gens[c.name] = _code(g, note, pool=pool, pattern=None, min=None, max=None)
        if placeholder or not texts:
            out.rewrite.append(c.name)
        if unique:
            out.keep.add(c.name)
            left = len(pool) - (0 if placeholder else n_examples)
            out.cap = left if out.cap is None else min(out.cap, left)
    for d in made:  # a source left without values leaves nothing to make a value of
        lost = [s for s in d.sources if gens.get(s) is None]
        if lost and gens.get(d.column) is not None:
            gens[d.column] = None
            out.empty[d.column] = f"made of {lost[0]}, which has no generator"
    # people, companies, places, phones: the model's placeholder examples rewritten with the generator's values; a
    # code whose examples are made-up numbers ("123-456-7890": :func:`pipeline.meaning.vocab.dummy_numbers`) too
    for c in asked:
        g = gens.get(c.name)
        if g is not None and (g.kind in REWRITTEN or (all(v is None for v in ex.get(c.name, [])) and
                                                         g.kind not in ("date_after",))
                              or (g.kind == "code" and vocab.dummy_numbers(prof.texts_of(ex.get(c.name, []))))):
            if c.name not in out.rewrite:
                out.rewrite.append(c.name)
    for d in made:  # a rewritten source rewrites what is made of it; a stand-in domain ("@example.com") too
        if d.column not in out.rewrite and (set(d.sources) & set(out.rewrite) or any(relations.reserved_domain(t)
                                                                                     for t in d.tails)):
            out.rewrite.append(d.column)
    # time across tables, as every example shows: a child's dates against its parent's, which parents have children
    out.related = child_relations(conn, table.name, cols, ex, {n for n in asked_names if gens.get(n) is not None},
                                  today)
    return out


# ------------------------------------------------------------------ placeholder examples named again

NAME_TRIES = 2
ROWID = "__rowid__"
"""Requests that name a table's rows whose example values are placeholders (the second with a sampling
temperature, for the rows the first left unnamed)."""


def context_words(table: str, column: str, examples: Mapping[str, Sequence[Any]]) -> frozenset[str]:
    """The words a counted placeholder's stem is one of (:func:`pipeline.meaning.vocab.counters`): the column's
    name, its table's and the other columns' example values ("Bike1".."Bike5" in the table "bikes", "ModelA"..
    "ModelE" in the column "model")."""
    return vocab.words_of([table, column, *(v for k, vs in examples.items() if k != column for v in vs
                                            if isinstance(v, str))])


def placeholder_columns(cols: list[Column], examples: Mapping[str, Sequence[Any]], table: str = "") -> list[Column]:
    """The text columns whose example values are numbered placeholders (:func:`pipeline.meaning.vocab.
    placeholder_examples`: "Project A".."Project D", "Depot 1", "Depot 2"; with the table's name, counted ones whose
    stem is a word of the column's context, :func:`context_words`: "Bike1".."Bike5" of the table "bikes"), not a
    code the examples share the shape of (:func:`digit_pattern`: "Room 101", "Room 102"). No date, CHECK list,
    reference or generated id."""
    out = []
    for c in cols:
        if c.auto_id or c.ref is not None or c.enum or storage(c) not in ("TEXT", "ANY"):
            continue
        texts = prof.texts_of(list(examples.get(c.name, [])))
        if relations.date_columns({c.name: texts}):
            continue
        if (vocab.placeholder_examples(texts, context_words(table, c.name, examples) if table else ())
                and digit_pattern(texts, None) is None):
            out.append(c)
    return out


def copied_columns(conn: sqlite3.Connection, table: str, cols: list[Column], examples: Mapping[str, Sequence[Any]]
                   ) -> dict[str, tuple[str, frozenset[str]]]:
    """The text columns whose example values are all labels of rows of a table this one references (the texts the
    example-rows request showed beside the keys a reference may take: "1 = Mckenzie Oliver; ... 15 = John
    Griffin"), copied from other rows than the row's own parent: column -> (that parent, the norms of its labels).
    Such values are the parent's, not the column's (the outside blood bank of 2026-11-29: every example
    hospital_name of blood_request was a donor's name, and the column was filled with person names as its examples
    showed). A column whose every example is its own row's parent label is a copy of it, and stays; so does the
    label column of a table that references itself (a manager among the staff). Equality of values only: nothing is
    read from names or words."""
    refs = [c for c in cols if c.ref is not None]
    labels: dict[str, frozenset[str]] = {}
    label_of: dict[str, str | None] = {}
    for r in refs:
        parent = r.ref[0] if r.ref else ""
        if parent in labels:
            continue
        text = label_of[parent] = _label_column(conn, parent)
        rows = conn.execute(f'SELECT "{text}" FROM "{parent}"').fetchall() if text else []
        labels[parent] = frozenset(vocab.norm(v[0]) for v in rows if isinstance(v[0], str) and v[0].strip())
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for c in cols:
        if c.auto_id or c.ref is not None or c.enum or storage(c) not in ("TEXT", "ANY"):
            continue
        values = list(examples.get(c.name, []))
        texts = prof.texts_of(values)
        if len(texts) < 2 or len(texts) != len([v for v in values if v is not None]):
            continue
        if relations.date_columns({c.name: texts}):
            continue
        for r in refs:
            parent, key = r.ref if r.ref else ("", "")
            if parent == table and c.name == label_of[parent]:
                continue  # its own values: the labels a reference to this table shows
            if not all(vocab.norm(t) in labels[parent] for t in texts):
                continue
            own = [_label(conn, parent, key, k) for k in examples.get(r.name, [])]
            if all(v is None or (o is not None and vocab.norm(v) == vocab.norm(o))
                   for v, o in zip(values, own, strict=False)):
                continue  # the row's own parent, written again: a copy the examples agree on
            out[c.name] = (parent, labels[parent])
            break
    return out


def counted(value: str) -> bool:
    """Whether ``value`` is one word and a count ("Dish 9", "Show E"; a count of at most two digits or one capital
    letter, :func:`pipeline.meaning.vocab.stem`): a placeholder on its own, where numbered placeholders were being
    replaced ("Fahrenheit 451", "Vitamin B12" and "Catch-22" are not)."""
    toks = vocab.stem(value).split()
    if len(toks) != 2 or not any(t in ("#", "?") for t in toks):
        return False
    digits = re.findall(r"\d+", value)
    return not digits or len(digits[-1]) <= 2


def _label_column(conn: sqlite3.Connection, parent: str) -> str | None:
    """The column that labels ``parent``'s rows where a request shows them (its first TEXT column that is no key
    and no reference; ``pipeline.stages.rows.populate.parent_choices`` shows the same one)."""
    refs = {fk[3] for fk in conn.execute(f'PRAGMA foreign_key_list("{parent}")').fetchall()}
    return next((r[1] for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall()
                 if (r[2] or "").upper() == "TEXT" and not r[5] and r[1] not in refs), None)


def _label(conn: sqlite3.Connection, parent: str, key: str, value: Any) -> str | None:
    """The first text of the parent row ``value`` names (its first TEXT column that is no key and no reference):
    "Christopher Barker" for client 1."""
    text = _label_column(conn, parent)
    if text is None:
        return None
    row = conn.execute(f'SELECT "{text}" FROM "{parent}" WHERE "{key}" = ?', (value,)).fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _parent_shown(conn: sqlite3.Connection, parent: str, key: str, value: Any) -> str | None:
    """The parent row ``value`` names, as the naming request shows it: its values other than its keys, references
    and label ("cuisine: Mexican" for the food truck "Taco Libre"), else its label. Shown its label, the real
    model named every dish after its truck ("truck_id: 1 (Taco Libre), price: 9.5, dish_name: ?" -> "Taco Libre",
    two tries in two prompt wordings); shown the truck's other values, it wrote "Tacos", "Pho", "Kimchi"."""
    shown = [f"{c}: {v}" for c, v in _parent_values(conn, parent, key, value)]
    return ", ".join(shown) if shown else _label(conn, parent, key, value)


def _parent_values(conn: sqlite3.Connection, parent: str, key: str, value: Any) -> list[tuple[str, Any]]:
    """The parent row's values a naming request shows (:func:`_parent_shown`): up to three columns that are no
    key, no reference and not its label, each value at most 60 characters long."""
    refs = {fk[3] for fk in conn.execute(f'PRAGMA foreign_key_list("{parent}")').fetchall()}
    info = [r for r in conn.execute(f'PRAGMA table_info("{parent}")').fetchall() if not r[5] and r[1] not in refs]
    label = next((r[1] for r in info if (r[2] or "").upper() == "TEXT"), None)
    others = [r[1] for r in info if r[1] != label][:3]
    if not others:
        return []
    row = conn.execute(f'SELECT {", ".join(f"{chr(34)}{c}{chr(34)}" for c in others)} FROM "{parent}" '
                       f'WHERE "{key}" = ?', (value,)).fetchone()
    return [(c, v) for c, v in zip(others, row or (), strict=False) if v is not None and len(str(v)) <= 60]


def _shown_row(conn: sqlite3.Connection, cols: list[Column], row: Mapping[str, Any], hidden: set[str]) -> str:
    """One row as the naming request shows it: its values but ``hidden`` ones, a reference with what its parent
    holds (:func:`_parent_shown`: "truck_id: 1 (cuisine: Mexican)"); empty when nothing is shown. The request ends
    each line with the column it asks for and a ``?`` ("..., dish_name: ?")."""
    parts = []
    for c in cols:
        if c.auto_id or c.name in hidden or row.get(c.name) is None:
            continue
        value = row[c.name]
        about = _parent_shown(conn, c.ref[0], c.ref[1], value) if c.ref is not None else None
        parts.append(f"{c.name}: {json.dumps(value, ensure_ascii=False)}" + (f" ({about})" if about else ""))
    return ", ".join(parts)


def _names_model(n: int) -> type[BaseModel]:
    return create_model(f"Names_{n}", values=(list[str], Field(min_length=n, max_length=n)),
                        __base__=BaseModel)  # type: ignore[call-overload]


@dataclass
class Named:
    """What :func:`name_placeholders` did: rejections (a column whose placeholders the model did not replace in
    every row: its rows dropped or its values emptied) and LLM calls."""

    rejections: list[ir.Rejection] = field(default_factory=list)
    calls: int = 0


def name_placeholders(scenario: ir.Scenario, table: ir.Table, conn: sqlite3.Connection, cols: list[Column],
                      client: LLMClientProtocol, settings: BuildSettings) -> Named:
    """Replace the model's placeholder example values (:func:`placeholder_columns`), and example values that are
    another table's labels copied from the rows the example-rows request showed (:func:`copied_columns`: donors'
    names as hospital names; a value that is one of those labels again names no row), before they seed anything:
    for each such column, the rows that hold one are shown to the model without it, with their other values and the
    labels of the parents they name ("client_id: 1 (Christopher Barker), start_date: ..."), and the model names each
    row (what it does well: a value that fits a whole row, rather than a list from nothing). A value is kept when it
    is no placeholder (:func:`pipeline.meaning.vocab.numbered`, counting the old values and the whole reply; nor one
    word and a count alone, :func:`counted`: "Dish 9"), no word said twice, not glued from two values, no other
    row's value, no value another column holds in any of the rows (a colour offered as a brand) and none of its
    parents' labels; a second request, sampled, names the rows the first left. A row still unnamed loses the value (a nullable column) or is dropped (fewer rows rather than
    placeholders); each such column gets a rejection naming it. Language-neutral: nothing is read from names or
    words."""
    out = Named()
    if not _has_rowid(conn, table.name):
        return out
    found = _table_values(conn, table, cols)
    stand_ins = placeholder_columns(cols, found, table.name)
    copied = {n: v for n, v in copied_columns(conn, table.name, cols, found).items() if n not in {c.name for c in stand_ins}}
    for col in [*stand_ins, *(c for c in cols if c.name in copied)]:
        cur = conn.execute(f'SELECT rowid AS "{ROWID}", * FROM "{table.name}" ORDER BY rowid')
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur]
        olds = [str(r[col.name]) for r in rows if isinstance(r[col.name], str)]
        parent, labels = copied.get(col.name, ("", frozenset()))
        words = context_words(table.name, col.name, found)
        fake = {v for v in olds if vocab.norm(v) in labels} if labels else vocab.numbered(olds, words)
        todo = [r for r in rows if isinstance(r[col.name], str) and r[col.name] in fake]
        if not todo:
            continue
        taken = {vocab.norm(v) for v in olds if v not in fake}
        # any value another column holds in these rows: "green" offered as a bike's brand where the rows' colours
        # are "red", "blue", "green" is the colour column's, not a brand (n18 bike sharing, 2026-11-30)
        others = {vocab.norm(str(x)) for row in rows for k, x in row.items() if k not in (ROWID, col.name)
                  and x is not None}
        offered: list[str] = list(olds)
        named: dict[int, str] = {}
        hidden = {c.name for c in placeholder_columns(cols, {k: [r[k] for r in rows] for k in names if k != ROWID},
                                                      table.name)}
        hidden |= set(copied)
        # a parent's labels copied into a column rows may share (a clinic of several visits): one value may name
        # several rows
        shared = bool(labels) and not any(col.name in k for k in key_sets(conn, table, [c.name for c in cols]))
        for attempt in range(NAME_TRIES):
            left = [r for r in todo if r[ROWID] not in named]
            if not left:
                break
            lines = [f"{i + 1}. {shown}, {col.name}: ?" if shown else f"{i + 1}. {col.name}: ?"
                     for i, r in enumerate(left) for shown in [_shown_row(conn, cols, r, hidden | {col.name})]]
            prompt = render_section("seed_data", "name_rows", name=scenario.name, description=scenario.description,
                                    ddl=table.ddl, column=col.name, n=len(left), rows="\n".join(lines))
            asker = client if attempt == 0 else sampled(client, settings.retry_temperature,
                                                        getattr(getattr(client, "settings", None), "seed", 0) + 1)
            out.calls += 1
            try:
                reply, _ = asker.structured_reply(_names_model(len(left)), user(prompt), stage=STAGE,
                                                  max_tokens=len(left) * 40 + 40)
            except LLMUnavailable:
                raise
            except LLMError:
                continue
            values = [" ".join(str(v).split()).strip(" \t\"'") for v in getattr(reply, "values", [])]
            offered.extend(values)
            stand_in = vocab.numbered(list(dict.fromkeys(offered)), words)
            said = Counter(vocab.norm(v) for v in values)
            framing = _framing(scenario)
            parents = {vocab.norm(str(x)) for row in left for c in cols if labels and c.ref is not None
                       and row.get(c.name) is not None for _, x in _parent_values(conn, c.ref[0], c.ref[1], row[c.name])}
            for r, v in zip(left, values, strict=False):
                if (said[vocab.norm(v)] > 1 and not shared) or _copies_framing(v, framing):
                    continue  # one value for several rows, or the request's own scenario text: no row's name
                own = {vocab.norm(str(x)) for k, x in r.items() if k not in (ROWID, col.name) and x is not None}
                own |= {vocab.norm(label) for c in cols if c.ref is not None and r.get(c.name) is not None
                        for label in [_label(conn, c.ref[0], c.ref[1], r[c.name])] if label}
                own |= parents  # nor, for a parent's copied labels, a value the request showed of any row's parents
                if (not v or v in stand_in or counted(v) or vocab.said_twice(v)
                        or vocab.norm(v) in (own if shared else taken | own) or vocab.norm(v) in labels
                        or vocab.norm(v) in others
                        or vocab.glued(v, taken)):
                    continue
                try:
                    conn.execute("SAVEPOINT name_row")
                    conn.execute(f'UPDATE "{table.name}" SET "{col.name}" = ? WHERE rowid = ?', (v, r[ROWID]))
                    conn.execute("RELEASE name_row")
                except sqlite3.Error:
                    conn.execute("ROLLBACK TO name_row")
                    conn.execute("RELEASE name_row")
                    continue
                named[r[ROWID]] = v
                taken.add(vocab.norm(v))
        unnamed = [r for r in todo if r[ROWID] not in named]
        were = f"{parent}'s values (labels of its rows, shown to the model beside the keys)" if labels else "placeholders"
        shown = ", ".join(repr(v) for v in sorted(fake)[:4])
        evidence = {"kind": "copied_examples" if labels else "placeholder_examples", "placeholders": sorted(fake),
                    "named": sorted(named.values()), **({"parent": parent} if labels else {})}
        if not unnamed:
            if labels:  # said, though every row was named: the examples the model wrote were not this column's
                out.rejections.append(ir.Rejection(
                    stage=STAGE, item=f"{table.name}.{col.name}", evidence=evidence,
                    reason=f"the example values of {table.name}.{col.name} were {were} ({shown}), not this "
                           f"column's: the model named the {len(named)} rows again from their other values"))
            continue
        gone = 0
        for r in unnamed:
            sql = (f'UPDATE "{table.name}" SET "{col.name}" = NULL WHERE rowid = ?' if not col.notnull
                   else f'DELETE FROM "{table.name}" WHERE rowid = ?')
            try:
                conn.execute("SAVEPOINT unname_row")
                conn.execute(sql, (r[ROWID],))
                conn.execute("RELEASE unname_row")
                gone += 1
            except sqlite3.Error:
                conn.execute("ROLLBACK TO unname_row")
                conn.execute("RELEASE unname_row")
        what = "left empty" if not col.notnull else "dropped"
        out.rejections.append(ir.Rejection(
            stage=STAGE, item=f"{table.name}.{col.name}", evidence=evidence,
            reason=f"the example values of {table.name}.{col.name} were {were} ({shown}) and the model named "
                   f"{len(named)} of {len(todo)} rows in {NAME_TRIES} requests: {gone} example rows {what}"
                   + (f", {len(unnamed) - gone} kept (a constraint refused the change)" if gone < len(unnamed) else "")))
    return out


def _framing(scenario: ir.Scenario) -> tuple[str, str]:
    """The scenario's name and description as :func:`pipeline.meaning.vocab.norm` writes them: the text every naming
    request opens with, which no row's value is."""
    return vocab.norm(scenario.name), vocab.norm(scenario.description)


def _copies_framing(value: str, framing: tuple[str, str]) -> bool:
    """Whether ``value`` is the scenario's own text rather than a row's: its name, or its description or a sentence
    of it (a run of at least four words of the description). The real model, asked to name four projects shown
    "Project A".."Project D" (2026-11-29, project billing), answered the description and "Project Billing" three
    times. Language-neutral: words are runs between spaces."""
    v = vocab.norm(value)
    name, description = framing
    if not v:
        return False
    return v == name or v == description or (len(v.split()) >= 4 and v in description)


def _table_values(conn: sqlite3.Connection, table: ir.Table, cols: list[Column]) -> dict[str, list[Any]]:
    names = [c.name for c in cols if not c.auto_id]
    if not names:
        return {}
    rows = conn.execute(f'SELECT {", ".join(chr(34) + n + chr(34) for n in names)} FROM "{table.name}" '
                        f'ORDER BY {"rowid" if _has_rowid(conn, table.name) else "1"}').fetchall()
    return {n: [r[i] for r in rows] for i, n in enumerate(names)}


def rewrite_examples(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], names: list[str],
                     gens: list[ir.ColumnGenerator], locale: str, seed: int, examples: dict[str, list[Any]]) -> int:
    """The example rows' values of ``names`` drawn again from their generators (a person, a phone, an e-mail built
    from the new name; a list item for a numbered placeholder; a value where every example was NULL), before any
    child or later prompt sees them. A value another row holds is drawn again (UNIQUE). Returns rows changed."""
    has_rowid = conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                             (table.name,)).fetchone()[0]
    mine = [g for g in gens if g.column in names]
    if not has_rowid or not mine:
        return 0
    maker = ValueMaker(locale, seed + 11, mine, cols, examples)
    maker.nulls, maker.ends = {}, set()  # an example row rewritten keeps a value: its NULLs are the examples' own
    cur = conn.execute(f'SELECT rowid AS "{ROWID}", * FROM "{table.name}" ORDER BY rowid')
    fields = [d[0] for d in cur.description]
    rows = [dict(zip(fields, r, strict=True)) for r in cur]
    changed = 0
    for old in rows:
        rowid = old[ROWID]
        kept = {k: v for k, v in old.items() if k != ROWID and k not in names}  # what a derived value is made of
        for _ in range(8):
            row = maker.row(kept, {})
            sets = ", ".join(f'"{g.column}" = ?' for g in mine)
            try:
                conn.execute("SAVEPOINT rewrite")
                conn.execute(f'UPDATE "{table.name}" SET {sets} WHERE rowid = ?', [*(row[g.column] for g in mine),
                                                                                     rowid])
                conn.execute("RELEASE rewrite")
                changed += 1
                break
            except sqlite3.Error:
                conn.execute("ROLLBACK TO rewrite")
                conn.execute("RELEASE rewrite")
    return changed


def fill_lone_nulls(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], gens: list[ir.ColumnGenerator],
                    locale: str, seed: int, examples: dict[str, list[Any]], related: ChildRelations | None = None,
                    today: date | None = None) -> list[str]:
    """A value drawn from its generator for an example row's NULL in a column whose examples leave too few NULL to
    keep a share (:func:`pipeline.meaning.relations.null_share`: 1 of 4 invoices without an amount, the model's
    habit in its last row), so that no seeded row lacks what the others hold. A later date of the row that ends
    its life keeps its NULL (:attr:`ValueMaker.ends`: a loan still out). A value another row holds is drawn again
    (UNIQUE); one that the relations the examples show (``related``: a child's date within its parent's) cannot
    place is left NULL. Returns the columns filled."""
    by_col = {c.name: c for c in cols}
    maker = ValueMaker(locale, seed + 17, gens, cols, examples)
    lone = [g for g in gens if g.kind != "reference" and g.column in by_col and not by_col[g.column].notnull
            and not by_col[g.column].pk and g.column not in maker.ends and g.column not in maker.nulls
            and relations.some_null(examples.get(g.column, []))]
    if not lone or not _has_rowid(conn, table.name):
        return []
    if related is not None and today is not None:
        maker.relate(related, today)
    cur = conn.execute(f'SELECT rowid AS "{ROWID}", * FROM "{table.name}" ORDER BY rowid')
    fields = [d[0] for d in cur.description]
    rows = [dict(zip(fields, r, strict=True)) for r in cur]
    done: list[str] = []
    for g in lone:
        for old in (r for r in rows if r[g.column] is None):
            kept = {k: v for k, v in old.items() if k not in (ROWID, g.column)}
            for _ in range(8):
                try:
                    value = maker.row(kept, {}).get(g.column)
                except Unplaceable:
                    break
                if value is None:
                    continue
                try:
                    conn.execute("SAVEPOINT lone")
                    conn.execute(f'UPDATE "{table.name}" SET "{g.column}" = ? WHERE rowid = ?', (value, old[ROWID]))
                    conn.execute("RELEASE lone")
                    old[g.column] = value
                    done.append(g.column)
                    break
                except sqlite3.Error:
                    conn.execute("ROLLBACK TO lone")
                    conn.execute("RELEASE lone")
    return list(dict.fromkeys(done))


def fill_table(scenario: ir.Scenario, table: ir.Table, conn: sqlite3.Connection, client: LLMClientProtocol, settings: BuildSettings,
               locale: str | None = None, known: dict[str, list[str]] | None = None,
               shown: Mapping[str, int] | None = None, made: Sequence[tuple[ir.Table, int]] = (),
               most: int | None = None, drawn_as: Mapping[str, str] | None = None) -> Made:
    """Add code-made rows to ``table`` (its example rows already in ``conn``, its parents filled). ``known`` holds
    the example texts of the scenario's tables so far ("table.column" -> texts); this table's are added to it.
    ``shown``: per reference column, the most children a parent's example count of them shows
    (``pipeline.stages.rows.counts.shown_most``), which its rows per parent may reach. ``made``: the tables made
    before it with their example-row counts, whose rows its rows may follow (``maker.sibling_follow``). ``most``:
    the most rows a table without foreign keys may hold (another such table's list ended short:
    ``pipeline.stages.rows.populate.balance_most``); its lists are then continued for no more."""
    cols = table_columns(conn, table)
    named = name_placeholders(scenario, table, conn, cols, client, settings)  # before they seed anything
    names = [c.name for c in cols if not c.auto_id]
    quoted = ", ".join(f'"{n}"' for n in names)
    rows = conn.execute(f'SELECT {quoted} FROM "{table.name}"').fetchall() if names else []  # insertion order
    if len(rows) < settings.rows_min:  # its placeholder rows dropped: too few to set the tone (the caller fails)
        return Made(ir.RowPlan(locale=locale or DEFAULT_LOCALE, seed=derive_seed(scenario, table.name),
                               examples=len(rows)), named.rejections, named.calls)
    examples = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    seed = derive_seed(scenario, table.name)
    sets = key_sets(conn, table, names)
    shape = table_shape(conn, table, cols, sets, len(rows), settings, random.Random(seed), shown)
    balanced = None
    if most is not None and not shape.refs and len(rows) + len(shape.fixed) > most:
        balanced = len(rows) + len(shape.fixed)
        shape = Shape(fixed=shape.fixed[:max(0, most - len(rows))], refs=shape.refs)
    mine = {f"{table.name}.{c}": t for c, t in semantic.text_columns(
        {c.name: examples[c.name] for c in cols if not c.auto_id and c.ref is None}).items()}
    known = known if known is not None else {}
    others = {**known, **{k.split(".", 1)[1]: v for k, v in mine.items()}}  # this table's columns by bare name
    ctx = Context(rows=len(rows) + len(shape.fixed), singles=frozenset(s[0] for s in sets if len(s) == 1),
                  examples=examples, others=others, vectors=_vectors(), today=date.fromisoformat(settings.clock[:10]),
                  drawn_as=dict(drawn_as or {}))
    known.update(mine)
    refs = [ir.ColumnGenerator(column=c.name, kind="reference", by="code", parent=c.ref[0], key=c.ref[1],
                               min=shape.per_parent[0] if c.name == shape.primary and shape.per_parent else None,
                               max=shape.per_parent[1] if c.name == shape.primary and shape.per_parent else None)
            for c in cols if c.ref is not None]
    asked = [c for c in cols if not c.auto_id and c.ref is None]
    chosen: dict[str, ir.ColumnGenerator | None] = {}
    attempts = 0
    if asked:
        chosen, locale, attempts = choose(scenario, table, conn, cols, asked, ctx, shape, refs, client, settings,
                                          locale, seed)
    locale = locale or DEFAULT_LOCALE
    done = settle(scenario, table, conn, cols, asked, chosen, ctx, client, settings, len(rows), locale, seed)
    attempts += done.calls + named.calls
    empty = [c for c in asked if c.notnull and done.gens.get(c.name) is None]
    if empty:  # every code row would break NOT NULL: none is drawn, and the column is named
        shape = Shape(fixed=[], refs=shape.refs, primary=shape.primary, per_parent=shape.per_parent)
    by_col = {g.column: g for g in [*refs, *(g for g in done.gens.values() if g is not None)]}
    gens = [by_col[c.name] for c in cols if c.name in by_col]
    tenses, calls, tense_notes = tense.ask_tenses(client, scenario, table, cols, gens, examples) if shape.fixed \
        else ([], 0, [])
    attempts += calls
    gens = tense.crossed(gens, tenses, date.fromisoformat(settings.clock[:10]))  # the sides its states need
    if done.rewrite:
        rewrite_examples(conn, table, cols, done.rewrite, gens, locale, seed, examples)
    fill_lone_nulls(conn, table, cols, gens, locale, seed, examples, done.related,
                    date.fromisoformat(settings.clock[:10]))
    if done.cap is not None and done.cap < len(shape.fixed):  # a UNIQUE list shorter than the table: fewer rows
        shape = Shape(fixed=shape.fixed[:max(0, done.cap)], refs=shape.refs, primary=shape.primary,
                      per_parent=shape.per_parent)
    follow, follow_notes = sibling_follow(conn, table, cols, examples, made)
    shape, unfollowed = followed(shape, follow)
    maker = ValueMaker(locale, seed, gens, cols, examples)
    maker.relate(done.related, date.fromisoformat(settings.clock[:10]))
    maker.follows(follow)
    maker.apart = sibling_apart(conn, table, cols, examples, made)
    moved_apart = apart_examples(conn, table, cols, maker.apart, examples)
    maker.dated_by(tenses)
    opened = (single.one_open(scenario, table, cols, maker.states, maker.current, client)
              if single.wanted(settings.ask_single_open, client) else single.Asked((), (), 0))
    attempts += opened.calls
    maker.single.held(opened.single, [dict(zip(names, r, strict=True)) for r in conn.execute(
        f'SELECT {quoted} FROM "{table.name}"')] if names else [], maker.states)
    filled = fill(conn, table, cols, maker, shape, sets, frozenset(done.keep))
    rejections = [*named.rejections, *tense_notes, *tense.notes(table, tenses), *opened.rejections, *(ir.Rejection(
        stage=STAGE, item=f"{table.name}.{c.name}",
        reason=f"generator choice failed, fell back to one from the column's type and constraints: "
               f"{g.kind if g else 'left empty'}", evidence={"error": (g.note if g else "") or ""})
        for c in asked for g in [chosen.get(c.name)] if g is None or g.by == "fallback")]
    rejections.extend(ir.Rejection(
        stage=STAGE, item=f"{table.name}.{c.name}",
        reason=f"{table.name}.{c.name} is NOT NULL and has no generator "
               f"({done.empty.get(c.name) or 'no generator fits it'}): no code-made rows, the table keeps its "
               f"{len(rows)} example rows", evidence={"kind": "no_generator"}) for c in empty)
    if done.cap is not None and done.cap < ctx.rows - len(rows):
        rejections.append(ir.Rejection(
            stage=STAGE, item=table.name,
            reason=f"a UNIQUE column's list holds {done.cap + len(rows)} values: {len(shape.fixed)} code-made rows "
                   f"instead of {ctx.rows - len(rows)}", evidence={"kind": "short_list"}))
    if balanced is not None:
        rejections.append(ir.Rejection(
            stage=STAGE, item=table.name,
            reason=f"{table.name} planned {balanced} rows, held to {len(rows) + len(shape.fixed)}: another table's "
                   f"UNIQUE list ended short ({most} rows at most here)", evidence={"kind": "balanced", "most": most}))
    rejections.extend(sibling_notes(table, follow, unfollowed, follow_notes))
    rejections.extend(apart_notes(table, maker.apart, moved_apart))
    if filled.dropped:
        rejections.append(ir.Rejection(
            stage=STAGE, item=table.name,
            reason=f"{sum(filled.dropped.values())} code-made rows dropped after {len(shape.fixed)} planned"
                   + (" (stopped: the generators gave no new distinct rows)" if filled.stopped else ""),
            evidence={"errors": dict(filled.dropped.most_common(5))}))
    rejections.extend(finding_rejections(conn, table, cols, len(rows), [g.column for g in gens
                                                                        if g.kind == "text_pool"]))
    plan = ir.RowPlan(locale=locale, seed=seed, examples=len(rows), generators=gens)
    short = None
    if done.cap is not None and done.cap < ctx.rows - len(rows) and not shape.refs:
        short = conn.execute(f'SELECT COUNT(*) FROM "{table.name}"').fetchone()[0]
    return Made(plan, rejections, attempts, short)


def sibling_notes(table: ir.Table, follow: Follow | None, left_out: int, notes: list[str]) -> list[ir.Rejection]:
    """What :func:`pipeline.stages.rows.maker.sibling_follow` inferred, for ``report.json`` (evidence kind
    ``sibling``): the sibling whose rows this table's rows follow, and a sharing in the other direction not held."""
    out = [ir.Rejection(stage=STAGE, item=table.name, reason=note, evidence={"kind": "sibling", "held": False})
           for note in notes]
    if follow is not None:
        s = follow.sharing
        out.append(ir.Rejection(
            stage=STAGE, item=table.name,
            reason=f"{table.name} ({', '.join(follow.columns)}) follows {follow.source}: its code-made rows take the "
                   f"parents of a row of {follow.source}, as {s.shared} of its {s.mine} distinct example tuples are "
                   f"among the {s.theirs} of {follow.source}'s examples and of its rows shown in the prompt (chance would "
                   f"share {s.expected:.2g}); {left_out} "
                   f"planned rows left out: their parent has no row in {follow.source}"
                   + "".join(f"; {o.column} on or {'after' if o.after else 'before'} its {follow.source} row's "
                             f"{o.parent_column}, as every shared example" for o in follow.orders),
            evidence={"kind": "sibling", "held": True, "source": follow.source, "columns": list(follow.columns),
                      "source_columns": list(follow.source_columns), "shared": s.shared, "examples": s.mine,
                      "source_examples": s.theirs, "expected": round(s.expected, 4), "chance": float(f"{s.chance:.3g}"),
                      "left_out": left_out,
                      "dates": [[o.column, "after" if o.after else "before", o.parent_column] for o in follow.orders]}))
    return out


def apart_notes(table: ir.Table, apart: Sequence[Apart], moved: Mapping[str, int] | None = None
                ) -> list[ir.Rejection]:
    """What :func:`pipeline.stages.rows.maker.sibling_apart` inferred, for ``report.json`` (evidence kind
    ``sibling_apart``): the earlier siblings whose parent tuples this table's rows keep clear of, and how many example
    rows were moved off them (``moved``, :func:`pipeline.stages.rows.maker.apart_examples`)."""
    moved = moved or {}
    return [ir.Rejection(
        stage=STAGE, item=table.name,
        reason=f"{table.name} ({', '.join(a.columns)}): its code-made rows name none of the {len(a.taken)} tuples of "
               f"{a.source} ({', '.join(a.source_columns)}), as no example of the two tables shares one beyond the "
               f"model's habit and chance; {moved.get(a.source, 0)} example rows on one moved to the next "
               f"{a.columns[-1]}", evidence={"kind": "sibling_apart", "source": a.source, "columns": list(a.columns),
                                             "source_columns": list(a.source_columns), "taken": len(a.taken),
                                             "examples_moved": moved.get(a.source, 0)}) for a in apart]


def finding_rejections(conn: sqlite3.Connection, table: ir.Table, cols: list[Column], examples: int,
                       continued: list[str]) -> list[ir.Rejection]:
    """The semantic findings the build could not fix (:func:`pipeline.meaning.findings.table_findings`), as
    rejections: ``report.json`` lists them under ``build.rejections`` (evidence kind ``semantic_finding``)."""
    cur = conn.execute(f'SELECT * FROM "{table.name}" ORDER BY {"rowid" if _has_rowid(conn, table.name) else "1"}')
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur]
    skip = [c.name for c in cols if c.auto_id or c.ref is not None]
    found = semantic.table_findings(table.name, rows, examples, skip=skip, continued=continued)
    return [ir.Rejection(stage=STAGE, item=f"{f.table}.{f.column}", reason=f"semantic finding: {f.contradicts}",
                         evidence={"kind": "semantic_finding", **f.as_dict()}) for f in found]


def _has_rowid(conn: sqlite3.Connection, table: str) -> bool:
    return bool(conn.execute("SELECT COUNT(*) FROM pragma_table_list WHERE name = ? AND wr = 0",
                             (table,)).fetchone()[0])


_VECTORS: list[prof.Vectors] = []


def _vectors() -> prof.Vectors | None:
    """MiniLM vectors (``pipeline.embed``), one cache per process; None when the model cannot load."""
    if not _VECTORS:
        from pipeline.embed import EmbeddingError, get_embedder

        try:
            enc = get_embedder()
            enc.model  # noqa: B018 - load now, so a missing model shows here
        except EmbeddingError:
            return None
        _VECTORS.append(prof.Vectors(enc.encode))
    return _VECTORS[0]
