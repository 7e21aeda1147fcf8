"""Write tools that do the same thing (issue 40): two tools that insert into, update or delete from the same tables
with the same parameters ("add_medicine" and "add_medication") are one tool to an agent, and a task bank that uses
one of them teaches nothing the other does not. The tools stage keeps the first one written and drops each later
one with a note (:func:`duplicate_of`). Read from the tools' SQL and parameter names, not their names or words, so
in any language."""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.stages.tools.write_gaps import tool_targets

Signature = tuple[frozenset[tuple[str, str]], frozenset[str], frozenset[str]]


def _literals(tool: ir.Tool) -> frozenset[str] | None:
    """The literal values a tool's write statements hold ('on_loan' in lending, 'available' in returning): two tools
    that set a row to different values are opposite changes, not one tool."""
    out: set[str] = set()
    for step in tool.steps:
        if step.kind != "write":
            continue
        try:
            out |= {n.sql() for n in sqlglot.parse_one(step.sql, read="sqlite").find_all(exp.Literal)}
        except sqlglot.errors.SqlglotError:
            return None
    return frozenset(out)


def signature(tool: ir.Tool) -> Signature | None:
    """What a write tool does: (its ``(statement, table)`` targets, its parameter names, the literal values it
    writes); None for a read tool or a write whose statements do not parse. Without the literals, returning a book
    (``SET status = 'available'``) was dropped as a duplicate of lending it (``SET status = 'on_loan'``)."""
    if tool.kind != "write":
        return None
    targets = tool_targets(tool)
    literals = _literals(tool)
    if not targets or literals is None:
        return None
    return frozenset(targets), frozenset(p.name for p in tool.params), literals


def duplicate_of(tool: ir.Tool, kept: Sequence[ir.Tool]) -> ir.Tool | None:
    """The tool of ``kept`` that ``tool`` duplicates (same targets, same parameters), or None."""
    sig = signature(tool)
    if sig is None:
        return None
    return next((k for k in kept if k.name != tool.name and signature(k) == sig), None)


def rejection(tool: ir.Tool, kept: ir.Tool, stage: str) -> ir.Rejection:
    """The note for ``tool`` dropped as a duplicate of ``kept``."""
    targets, params, _ = signature(kept) or (frozenset(), frozenset(), frozenset())
    what = ", ".join(f"{verb} {table}" for verb, table in sorted(targets))
    return ir.Rejection(stage=stage, item=tool.name,
                        reason=f"duplicate of tool {kept.name!r} ({what}, parameters {sorted(params)}): dropped",
                        evidence={"kept": kept.name, "targets": sorted(f"{v} {t}" for v, t in targets),
                                  "params": sorted(params)})


def drop(tools: Sequence[ir.Tool], stage: str) -> tuple[list[ir.Tool], list[ir.Rejection], dict[str, str]]:
    """``tools`` without the duplicates of earlier ones (the parameters code renames can make two tools one), the
    notes, and the map tool dropped -> tool kept."""
    kept: list[ir.Tool] = []
    notes: list[ir.Rejection] = []
    same: dict[str, str] = {}
    for tool in tools:
        if (first := duplicate_of(tool, kept)) is not None:
            notes.append(rejection(tool, first, stage))
            same[tool.name] = first.name
        else:
            kept.append(tool)
    return kept, notes, same
