"""Numbers and dates against the model's own examples, on real replies (benchmarks/results/number_ranges.md).

Reads LLM caches read-only (``responses``: request/content JSON), finds the seed_data stage's example rows and
generator choices, and prints a Markdown table: per number or date column the examples, the model's choice, its
width over the examples' spread, today's check, and what ``generators.fit_examples`` makes of it. No model is run.

    python -m benchmarks.bench_number_ranges /work/out/u1/llm_cache.sqlite /work/out/g1/llm_cache.sqlite
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from typing import Any

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.meaning import relations
from pipeline.stages.rows import generators as rowgen

_ROWS = re.compile(r"Write \d+ rows for table (\w+)\. Each row is a JSON array of values in this column order: \[([^\]]*)\]")
_ROWS_OF = re.compile(r'You write realistic sample data for the SQLite database of "([^"]+)"')
_CHOICE = re.compile(r'A program will fill table (\w+) of the SQLite database of "([^"]+)"')


def choices(path: str) -> list[dict[str, Any]]:
    """Every generator choice of the cache at ``path``, with its table's example rows (the latest asked before it)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    examples: dict[tuple[str, str], dict[str, list[Any]]] = {}
    out: list[dict[str, Any]] = []
    for request, content in conn.execute("SELECT request, content FROM responses ORDER BY created"):
        messages = json.loads(request)["messages"]
        first = messages[0]["content"]
        m = _ROWS_OF.match(first)
        if m and len(messages) == 1:
            t = _ROWS.search(first)
            try:
                rows = json.loads(content)["rows"]
            except (ValueError, KeyError, TypeError):
                continue
            if t:
                cols = [c.strip() for c in t.group(2).split(",")]
                examples[(m.group(1), t.group(1))] = {c: [r[i] if i < len(r) else None for r in rows]
                                                      for i, c in enumerate(cols)}
            continue
        m = _CHOICE.match(first)
        if not m:
            continue
        line = re.search(r"\nColumns: (.*)", first)
        types = {n.group(1): n.group(2) for part in (line.group(1) if line else "").split("; ")
                 for n in [re.match(r"(\w+) \(([A-Z]+)", part)] if n}
        try:
            reply = json.loads(content)["columns"]
        except (ValueError, KeyError, TypeError):
            continue
        ex = examples.get((m.group(2), m.group(1)), {})
        for col, choice in reply.items():
            out.append({"domain": m.group(2), "table": m.group(1), "column": col, "type": types.get(col),
                        "examples": ex.get(col) or [], "table_examples": ex, "choice": choice})
    return out


def _show(g: ir.ColumnGenerator) -> str:
    if g.kind in ("integer", "amount"):
        return f"{g.kind} {g.min:g}..{g.max:g}" if g.min is not None and g.max is not None else f"{g.kind} (no range)"
    if g.kind in ("date", "datetime"):
        return f"{g.kind} {g.start}..{g.end}"
    if g.kind == "date_after":
        return f"date_after {g.after} +{g.min:g}..{g.max:g} days" if g.min is not None and g.max is not None \
            else "date_after"
    return g.kind


def _column(name: str, type_: str | None) -> Column:
    return Column(name, type_ or "TEXT", False, 0, False, None, None)


def row(o: dict[str, Any]) -> list[str] | None:
    """The table row for one choice, or None for a column that is neither a number nor a date."""
    kind = o["choice"].get("kind")
    if kind not in ("integer", "amount", "date", "datetime", "date_after"):
        return None
    col = _column(o["column"], o["type"])
    sib: dict[str, list[Any]] = dict(o["table_examples"])
    ctx = rowgen.Context(rows=100, singles=frozenset(), examples=sib)
    try:
        choice = rowgen.Choice(**{k: v for k, v in o["choice"].items() if k in rowgen.Choice.model_fields})
    except ValueError:
        choice = rowgen.Choice(kind=kind)
    g = rowgen.generator_of(col.name, choice, col)
    others: dict[str, ir.ColumnGenerator] = {}
    for name, values in sib.items():  # the table's other date columns, with dates of their own
        made = rowgen.fallback(_column(name, "TEXT"), ctx, "") if name != col.name and any(
            relations.as_date(v) for v in values) else None
        if made is not None:
            others[name] = made
    before = rowgen.check_column(col, g, ctx, {**others, col.name: g})
    after = rowgen.fit_examples(col, g, ctx, others)
    after_err = rowgen.check_column(col, after, ctx, {**others, col.name: after})
    nums = relations.numbers(o["examples"])
    ratio = ""
    if nums and g.min is not None and g.max is not None and kind in ("integer", "amount"):
        scale = (max(nums) - min(nums)) or max(abs(nums[0]), 1.0)
        ratio = f"{(g.max - g.min) / scale:.1f}"
    return [o["domain"], f"{o['table']}.{o['column']} ({o['type']})", ", ".join(str(v) for v in o["examples"]),
            json.dumps(o["choice"]), ratio, before or "passes",
            _show(after) + (f" [{after.by}]" if after is not g else " (kept)"), after_err or "passes"]


def main(paths: list[str]) -> None:
    print("| domain | column | examples | model's choice | width / examples' spread | today's checks | with this rule "
          "| checks after |")
    print("|---|---|---|---|---|---|---|---|")
    seen: set[tuple[str, str, str, str]] = set()
    for path in paths:
        for o in choices(path):
            key = (o["domain"], o["table"], o["column"], json.dumps(o["choice"], sort_keys=True))
            cells = None if key in seen else row(o)
            seen.add(key)
            if cells:
                print("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
