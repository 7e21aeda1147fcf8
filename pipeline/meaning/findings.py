"""Semantic findings: what a table's generated values contradict in its own example rows.

:func:`table_findings` compares the rows code made (after the first ``examples`` rows, which the model wrote)
with those examples: values that do not look like a column's examples (:mod:`pipeline.meaning.profile`), values
closer to another column's examples (MiniLM, when vectors are given), words said twice, values glued from two
values of the column, dates in an order no example has, a column NULL in every row. :func:`env_findings` does it
for every table of an environment whose rows were made at scale; ``envfoundry check`` lists them
(``pipeline.envcheck``). The row stage does not call these checks yet (that change was held back, e329ccc).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.meaning import profile as prof
from pipeline.meaning import relations, vocab

SAMPLE = 24
SHARE = 0.05
"""Share of generated values above which a word said twice or a glued value is a finding."""


@dataclass(frozen=True)
class Finding:
    table: str
    column: str
    value: Any
    contradicts: str

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "column": self.column, "value": self.value, "contradicts": self.contradicts}

    def text(self) -> str:
        return f"{self.table}.{self.column} = {self.value!r}: {self.contradicts}"


def spread(values: Sequence[Any], n: int = SAMPLE) -> list[Any]:
    """Up to ``n`` values spread over ``values`` (every k-th), deterministic."""
    if len(values) <= n:
        return list(values)
    step = len(values) / n
    return [values[int(i * step)] for i in range(n)]


def text_columns(examples: Mapping[str, Sequence[Any]]) -> dict[str, list[str]]:
    """Columns whose examples are texts (not dates): column -> its example texts."""
    dates = set(relations.date_columns(examples))
    out = {}
    for name, values in examples.items():
        texts = prof.texts_of(values)
        if name not in dates and len(texts) >= 2 and len(texts) == len([v for v in values if v is not None]):
            out[name] = texts
    return out


def table_findings(table: str, rows: Sequence[Mapping[str, Any]], examples: int, *, skip: Sequence[str] = (),
                   continued: Sequence[str] = (), vectors: prof.Vectors | None = None,
                   others: Mapping[str, Sequence[str]] | None = None) -> list[Finding]:
    """What the rows after the first ``examples`` contradict in those examples; ``skip`` names columns not to
    judge (ids, references); ``continued`` columns whose values are the model's continuation of its examples
    (their shape may differ from four examples': a title of three words after four of one), judged for repeats
    and glue only; ``others`` other columns' example texts, for the MiniLM comparison."""
    if not rows:
        return []
    names = [c for c in rows[0] if c not in skip]
    ex_rows, made = rows[:examples], rows[examples:]
    ex = {c: [r.get(c) for r in ex_rows] for c in names}
    out: list[Finding] = []
    if not made:
        return out
    for c in names:
        if all(r.get(c) is None for r in rows):
            out.append(Finding(table, c, None, f"NULL in all {len(rows)} rows"))
    for c, texts in text_columns(ex).items():
        values = [str(r.get(c)) for r in made if isinstance(r.get(c), str)]
        if not values:
            continue
        p = prof.profile(texts)
        sample = spread(values)
        if p is not None and c not in continued:
            why = prof.contradiction(p, sample)
            if why:
                bad = next(v for v in sample if prof.misfit(p, v))
                out.append(Finding(table, c, bad, why))
        twice = [v for v in values if vocab.said_twice(v)]
        if len(twice) > SHARE * len(values):
            out.append(Finding(table, c, twice[0], f"{len(twice)} of {len(values)} values say a word twice"))
        distinct = list(dict.fromkeys(values))
        if vocab.list_separator(texts) is None and len(distinct) <= 2000:
            norms = {vocab.norm(v) for v in distinct}
            glue = [v for v in spread(distinct, 200) if vocab.glued(v, norms)]
            if len(glue) > SHARE * min(200, len(distinct)):
                out.append(Finding(table, c, glue[0], f"{len(glue)} of {min(200, len(distinct))} sampled values are "
                                                      "another value of the column plus more"))
        if vectors is not None and others:
            mine = {k: v for k, v in others.items() if k != f"{table}.{c}"}
            hit = prof.semantic_misfit(vectors, texts, mine, [str(v) for v in sample])
            if hit:
                out.append(Finding(table, c, sample[0], f"values are closer to {hit[0]}'s examples ({hit[2]}) than "
                                                        f"to this column's own ({hit[1]})"))
    for o in relations.date_orders(ex):
        bad_rows = relations.violations(made, o)
        if bad_rows:
            out.append(Finding(table, o.second, bad_rows[0].get(o.second),
                               f"{len(bad_rows)} of {len(made)} generated rows have {o.second} before {o.first} "
                               f"(every example has it {o.min_days}-{o.max_days} days after)"))
    return out


def env_findings(env: Any) -> list[Finding]:
    """The findings of every table of ``env`` (a ``pipeline.ir.Environment``) whose rows were made at scale
    (``SeedRows.plan``): its first ``plan.examples`` rows are the model's examples."""
    out: list[Finding] = []
    for s in env.seed:
        if s.plan is None or not s.rows:
            continue
        skip = [g.column for g in s.plan.generators if g.kind == "reference"]
        continued = [g.column for g in s.plan.generators if g.kind == "text_pool"]
        table = next((t for t in env.tables if t.name == s.table), None)
        ids = [c for c in s.rows[0] if table is not None and _is_auto_id(table.ddl, c)]
        out.extend(table_findings(s.table, s.rows, s.plan.examples, skip=[*skip, *ids], continued=continued))
    return out


def _is_auto_id(ddl: str, column: str) -> bool:
    import re

    return re.search(rf'"?{re.escape(column)}"?\s+INTEGER\s+PRIMARY\s+KEY', ddl, re.I) is not None
