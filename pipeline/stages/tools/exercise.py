"""Exercising a tool at build time: what a working tool does, on argument sets drawn from the seeded rows
(``pipeline.dbmodel.arguments.Sampler``).

``exercise(env, tool, arg_sets, grounded)`` runs the tool on each set (fresh state each time) and says why it
does not work: a definition error; no successful call but a database refusal; a write whose ``returns`` finds
nothing, or whose successes change nothing (said apart when every such call sets a column to the value its rows
already hold and the parameter can take no other: ``Sampler.held``); a read that finds nothing, or a write that a guard refuses every time, for arguments taken from existing
rows;
a write that stores something other than its arguments (``INSERT ... VALUES (:quantity)`` followed by
``UPDATE ... SET quantity = quantity + 1``): the row written must carry the argument in each column a parameter
is written into as a whole.

``unreached(env, tool, reaches, calls)``: a write whose parameter sets a listed value (an enum, a ``CHECK`` list)
as a whole must be able to set each of them on a row that holds another value, where the seeded rows have such a
row (``Sampler.reach``): a guard that refuses one listed value of the column the tool writes (a fixed value where
the parameter was meant) leaves that value out of reach while the other calls work. At most two extra calls a value,
none when a call already tried set it.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from pipeline import ir
from pipeline.dbmodel.analysis import ParamUse
from pipeline.dbmodel.arguments import Held, Reach
from pipeline.runtime import EnvInstance
from pipeline.runtime.replay import Watch
from pipeline.runtime.state import Change

# ------------------------------------------------------------------ execution check


def _definition_error(res: dict[str, Any]) -> bool:
    return res.get("kind") == "sql" and not str(res.get("error", "")).startswith("rejected by the database")


def _same(stored: Any, given: Any) -> bool:
    if isinstance(given, bool):
        given = int(given)
    if isinstance(stored, (int, float)) and isinstance(given, (int, float)):
        return float(stored) == float(given)
    return bool(stored == given)


def _upserts(tool: ir.Tool) -> bool:
    for s in tool.steps:
        if s.kind != "write":
            continue
        try:
            tree = sqlglot.parse_one(s.sql, read="sqlite")
        except Exception:
            return True
        if isinstance(tree, exp.Insert) and (tree.args.get("conflict") or tree.args.get("alternative")):
            return True
    return False


def written_columns(tool: ir.Tool, uses: dict[str, list[ParamUse]]) -> dict[str, tuple[str, str]]:
    """Parameter -> the (table, column) a write statement stores it in as a whole (``SET c = :p``,
    ``INSERT (c) VALUES (:p)``)."""
    if tool.kind != "write" or _upserts(tool):
        return {}
    out = {}
    for p, us in uses.items():
        for u in us:
            if u.role == "value" and u.direct and u.column is not None:
                out[p] = u.column
                break
    return out


def stored_mismatch(tool: ir.Tool, args: dict[str, Any], changes: list[Change],
                    written: dict[str, tuple[str, str]], columns: dict[str, list[str]]) -> str | None:
    """Why the rows a successful call wrote do not carry its arguments, or None."""
    for p, (table, col) in written.items():
        given = args.get(p)
        added = [tuple(c.after.values()) for c in changes if c.table == table and c.after is not None]
        if given is None or not added or col not in columns.get(table, []):
            continue
        idx = columns[table].index(col)
        if not any(_same(row[idx], given) for row in added):
            return (f"called with {args} it stored {table}.{col} = {added[0][idx]!r}, but its argument {p} was "
                    f"{given!r}: a tool stores the values it is given (compute a different value in the same "
                    "statement that writes it, from an argument named for what it is, e.g. an amount to add)")
    return None


def _held_note(args: dict[str, Any], h: Held) -> str:
    domain = f" (it takes {', '.join(repr(v) for v in h.domain)})" if h.domain else " within its bounds"
    return (f"called with {args} it succeeded but changed nothing in the database: the rows it names already hold "
            f"{h.table}.{h.column} = {h.value!r} and {h.param} can take no other value{domain}, so no call shows "
            f"that it changes them; {h.param} must be able to set another value")


def exercise(env: ir.Environment, tool: ir.Tool, arg_sets: list[dict[str, Any]],
             grounded: bool = False, written: dict[str, tuple[str, str]] | None = None,
             held: list[list[Held]] | None = None) -> tuple[list[tuple], str | None]:
    """Run ``tool`` on each argument set (fresh state each time); returns (calls, error or None).

    ``calls`` is ``[(arguments, result, changed)]``; the error says why the tool does not work (see the module
    docstring). ``written``: parameter -> the column it is stored in (from :func:`written_columns`); ``held``: for
    each argument set, its parameters that cannot change the rows they set (``Sampler.held``)."""
    calls: list[tuple] = []
    mismatch: str | None = None
    with EnvInstance(env) as inst:
        watch = Watch(inst)
        columns = {t: list(info.columns) for t, info in watch.infos.items()}
        for args in arg_sets:
            inst.reset()
            res = inst.call(tool.name, args)
            changes = watch.changes() if res.get("ok") else []
            calls.append((args, res, bool(changes)))
            if changes and written and mismatch is None:
                mismatch = stored_mismatch(tool, args, changes, written, columns)
    for args, res, _ in calls:
        if _definition_error(res):
            return calls, f"called with {args} it failed: {res['error']}"
        if tool.kind == "write" and res.get("kind") == "not_found":
            return calls, (f"called with {args} its writes ran but its returns query found no row "
                           f"({res['error']}); select the changed row by the arguments or :last_id")
    oks = [c for c in calls if c[1].get("ok")]
    if not oks:
        for args, res, _ in calls:
            if res.get("kind") == "sql":
                return calls, f"called with {args} it failed: {res['error']}"
        kinds = {c[1].get("kind") for c in calls}
        if grounded and kinds == {"not_found"}:
            return calls, (f"called with {calls[0][0]} (values of existing rows) it found nothing: "
                           f"{calls[0][1]['error']}")
        if grounded and tool.kind == "write" and kinds == {"guard"}:
            return calls, (f"called {len(calls)} times with values of existing rows (e.g. {calls[0][0]}), a guard "
                           f"refused every call: {calls[0][1]['error']}; a guard must refuse only what the domain "
                           "forbids and let ordinary calls on existing rows through")
    if tool.kind == "write" and oks and not any(c[2] for c in oks):
        stuck = [(args, hs[0]) for (args, res, _), hs in zip(calls, held or [[] for _ in calls], strict=True)
                 if res.get("ok") and hs]
        if len(stuck) == len(oks):  # every call that ran could only write what its rows already hold
            return calls, _held_note(*stuck[0])
        return calls, (f"called with {oks[0][0]} it succeeded but changed nothing in the database; "
                       "its writes must match the rows named by the arguments")
    return calls, mismatch


def unreached(env: ir.Environment, tool: ir.Tool, reaches: list[Reach], tried: list[tuple]) -> str | None:
    """Why a listed value of ``reaches`` cannot be set by ``tool`` (see the module docstring), or None. ``tried``:
    the calls already made (``exercise``'s); a value one of them set, changing the database, is not tried again."""
    todo = [r for r in reaches
            if not any(res.get("ok") and changed and _same(args.get(r.use.param), r.value) for args, res, changed in tried)]
    if not todo:
        return None
    flat = [args for r in todo for args in r.sets]
    calls, _ = exercise(env, tool, flat)
    i = 0
    for r in todo:
        mine, i = calls[i:i + len(r.sets)], i + len(r.sets)
        if any(res.get("ok") and changed for _, res, changed in mine):
            continue
        failed = [(args, res) for args, res, _ in mine if not res.get("ok")]
        if len(failed) == len(mine):
            why = f"every such call failed with {failed[0][1].get('error')!r} (called with {failed[0][0]})"
        else:
            ok = next(args for args, res, _ in mine if res.get("ok"))
            why = f"called with {ok} it succeeded but changed nothing"
        u = r.use
        return (f"no working call of {tool.name} sets {u.table}.{u.column} to {r.value!r} on a row that holds "
                f"another value: {why}; every value {u.param} can take must be settable on a row that holds another "
                f"one, so a guard or condition must not refuse the value the tool sets (compare the column with "
                f":{u.param}, not with a fixed value)")
    return None
