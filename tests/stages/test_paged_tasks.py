"""Tasks over paged listers (``[stages.build] paged_listers``) on a brewery with more rows than a page holds: a count
is the lister's count of its matches (``total_matched``), never the length of a page; a sum or a choice among the
rows reads every page; the count field is no column a task asks about or sums; filters make their own counts."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import pytest

from pipeline.dbmodel.paging import PAGE_DEFAULT, PAGE_MAX, page_of
from pipeline.ir import Environment, SeedRows
from pipeline.llm import fake_client
from pipeline.runtime import reward
from pipeline.runtime.replay import fresh
from pipeline.settings import BuildSettings
from pipeline.stages.tasks.bank import TaskSettings, generate_tasks
from pipeline.stages.tasks.planner import Chain, make_planner, plan_chains
from pipeline.stages.tasks.planner.shapes import SHAPES
from pipeline.stages.tools.toolset import Workspace
from pipeline.stages.tools.write_gaps import cover
from tests.fixtures.brewery import brewery_at_scale

BAD = {"user_request": "Please handle the batch brewed on January 14th for me, thanks a lot."}
TIERS = {1: 0.3, 2: 0.4, 3: 0.3}


def paged(env: Environment, drop: tuple[str, ...] = ()) -> Environment:
    """``env`` without the tools ``drop`` names, through the tools stage's covering pass with paging and covering
    writes on (its listers paged, code listers with filters added)."""
    tools = [t for t in env.tools if t.name not in drop]
    with Workspace(env.scenario, env.tables, env.seed, env.clock, tools) as ws:
        cover(ws, BuildSettings(paged_listers=True, covering_writes=True, gap_tools_max=6))
        return ws.environment()


def listed(env: Environment, tool: str) -> str:
    """The table a lister lists (the first table of its query)."""
    sql = env.tool(tool).returns.sql
    return re.search(r'\bFROM\s+"?(\w+)', sql).group(1)


def matching(env: Environment, conn: sqlite3.Connection, tool: str, args: dict[str, Any], what: str = "*") -> list:
    """``what`` of every row of the listed table whose columns equal the call's filter arguments (the fixture's
    parameters are named for their columns), read by SQL, not through the tool."""
    page = page_of(env.tool(tool))
    conds = {k: v for k, v in args.items() if page is None or k not in (page.limit, page.offset)}
    where = " AND ".join(f'"{k}" = ?' for k in conds) or "1"
    return [r[0] for r in conn.execute(f'SELECT {what} FROM "{listed(env, tool)}" WHERE {where} ORDER BY id',
                                       tuple(conds.values()))]


def truth(conn: sqlite3.Connection, env: Environment, chain: Chain) -> Any:
    """What a question of ``chain`` really asks for, computed from the database."""
    goal, last = chain.goals[0], chain.calls[-1]
    if goal.kind == "count":
        return len(matching(env, conn, last.tool, dict(last.arguments)))
    assert goal.kind == "total"
    return sum(matching(env, conn, last.tool, dict(last.arguments), f'"{goal.asked}"'))


@pytest.fixture(params=[(), ("list_kegs_for_batch",)], ids=["llm-lister-paged", "code-lister-with-filter"])
def env(request) -> Environment:
    return paged(brewery_at_scale(), request.param)


def test_a_fixture_with_more_rows_than_a_page() -> None:
    seed = {s.table: s for s in brewery_at_scale().seed}
    assert len(seed["kegs"].rows) >= 120
    assert sum(r["batch_id"] == 1 for r in seed["kegs"].rows) > PAGE_MAX
    assert isinstance(seed["kegs"], SeedRows)


def test_planned_counts_sums_and_choices_are_those_of_every_matching_row(env: Environment) -> None:
    with fresh(env) as run:
        chains = plan_chains(env, run, 200, TIERS, spread=True)
        conn = run.inst.conn
        questions = [c for c in chains if c.goals and c.goals[0].kind in ("count", "total")]
        for chain in questions:
            assert chain.answer["value"] == truth(conn, env, chain), (chain.facts, chain.calls)
        counts = [c for c in questions if c.goals[0].kind == "count"]
        assert any(c.answer["value"] > PAGE_DEFAULT for c in counts)  # more than the page an agent is shown
        assert any(c.goals[0].where for c in counts)  # a count that needs the lister's filter
        for c in chains:
            for call in c.calls:
                assert call.arguments.get("limit", 1) <= PAGE_MAX
        # a choice among a lister's rows is the highest / lowest of all of them
        for chain in (c for c in chains if c.shape == "decide_write"):
            goal, lister = chain.goals[0], next(x for x in reversed(chain.calls) if env.tool(x.tool).kind == "read")
            values = matching(env, conn, lister.tool, dict(lister.arguments), f'"{goal.asked}"')
            ids = matching(env, conn, lister.tool, dict(lister.arguments), "id")
            want = ids[values.index((max if goal.which in ("highest", "latest") else min)(values))]
            assert want in chain.calls[-1].arguments.values(), (chain.facts, chain.calls)
    if "list_kegs_by_batch_id" in {t.name for t in env.tools}:  # "how many kegs of this batch hold 30 liters"
        assert any(c.goals[0].where and c.goals[0].named for c in counts)
    # the count field is not a column: never asked, summed, chosen by or filtered on, in any chain a shape makes
    # (the planner hands rows over shuffled through the whole table, so a bank of a few dozen chains may sum over
    # no batch with more kegs than a page: the shapes' chains over many seeds do)
    with fresh(env) as run:
        planner = make_planner(env, run)
        made = [c for gen in SHAPES.values() for seed in range(40) for c in gen(planner, seed)]
        # a sum over more rows than the largest page reads them page by page, no page larger than allowed
        sums = [c for c in made if c.goals and c.goals[0].kind == "total" and len(c.calls) > 2]
        assert sums and all(c.calls[-1].arguments.get("offset") == PAGE_MAX for c in sums)
        for chain in sums:
            assert chain.answer["value"] == truth(run.inst.conn, env, chain), (chain.facts, chain.calls)
    assert any(c.goals[0].kind == "total" for c in made)
    for c in made:
        assert not any("total_matched" in f or "total matched" in f for f in c.facts), c.facts
        assert not any("total_matched" in g.column for g in c.goals)


def test_a_bank_over_paged_listers_answers_what_the_tools_say(env: Environment) -> None:
    settings = TaskSettings(max_attempts=1, spread_bank=True, template_fallback=True)
    res = generate_tasks(env, fake_client([BAD] * 300), n=24, settings=settings)
    assert len(res.value) == 24, res.rejections
    with fresh(env) as run:
        conn = run.inst.conn
        counts = [t for t in res.value if t.instruction.startswith("How many ")]
        assert counts
        for t in counts:
            last = t.reference_solution[-1]
            true = len(matching(env, conn, last.tool, dict(last.arguments)))
            assert t.verifier.answer["value"] == true, t.instruction
            assert reward.check_answer(t.verifier.answer, f"There are {true}.")[0]
            if true > PAGE_DEFAULT:  # counting the rows of the first page is wrong
                assert not reward.check_answer(t.verifier.answer, f"There are {PAGE_DEFAULT}.")[0]
    assert any(t.verifier.answer["value"] > PAGE_DEFAULT for t in counts)
    for t in res.value:
        assert "total matched" not in t.instruction.lower() and "total_matched" not in t.instruction
