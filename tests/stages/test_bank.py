"""The bank spread over the environment (``[stages.tasks] spread_bank``): every write tool in some task when a plan
for it proves, and no (shape, tool chain, asked column) repeated while another is left; on two unrelated domains."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline import ir
from pipeline.ir import ToolCall
from pipeline.llm import fake_client
from pipeline.stages.tasks.bank import TaskSettings, generate_tasks
from pipeline.stages.tasks.planner import Chain, Goal, next_chain
from tests.fixtures.brewery import brewery_env
from tests.fixtures.library import library_env

BAD = {"user_request": "Please handle the batch brewed on January 14th for me, thanks a lot."}


def echo(messages) -> dict:
    must = re.search(r"exactly as written: (.*)", messages[1]["content"]).group(1)
    return {"user_request": f"Please do this for me, about {must}."}


def _chain(shape: str, tools: list[str], asked: str) -> Chain:
    return Chain(shape, [ToolCall(tool=t, arguments={}) for t in tools], [], [], goals=[Goal(shape, "t", asked=asked)])


def test_next_chain_takes_an_unused_write_tool_then_the_least_repeated_triple() -> None:
    chains = [_chain("lookup", ["find"], "a"), _chain("lookup", ["find"], "a"), _chain("lookup", ["find"], "b"),
              _chain("update", ["find", "edit"], "x"), _chain("create", ["add"], "y")]
    writes = {"edit", "add"}
    assert next_chain(chains, set(), [], None) == 1  # without the switch: the plan's order
    assert next_chain(chains, set(), [], writes) == 4  # the first chain with a write tool no task uses
    assert next_chain(chains, {4}, [chains[3]], writes) == 5
    bank = [chains[3], chains[4], chains[0]]
    assert next_chain(chains, {1, 4, 5}, bank, writes) == 3  # ("lookup", find, "b") before ("lookup", find, "a")
    assert next_chain(chains, {1, 3, 4, 5}, bank + [chains[2]], writes) == 2  # then a repeat, when nothing else
    assert next_chain(chains, {1, 2, 3, 4, 5}, bank, writes) is None


def with_vocabulary(env: Any) -> Any:
    """``env`` with a rows-stage plan whose list holds titles no row has: a create's new title comes from the
    column's vocabulary (``planner.values.fresh_text``), never from a suffix; the library fixture has none (the
    brewery's holds beer names no row has, ``tests.fixtures.brewery.BEERS_SEEDED``)."""
    words = {"books": ("title", ["Middlemarch", "Beloved", "Dracula", "Walden"])}
    seed = [s.model_copy(update={"plan": ir.RowPlan(seed=3, examples=len(s.rows), generators=[
        ir.ColumnGenerator(column=words[s.table][0], kind="text_pool", pool=words[s.table][1])])})
        if s.table in words else s for s in env.seed]
    return env.model_copy(update={"seed": seed})


@pytest.mark.parametrize("make_env", [library_env, brewery_env])
def test_a_spread_bank_uses_every_write_tool_and_repeats_no_shape_and_chain(make_env) -> None:
    env = with_vocabulary(make_env())
    writes = {t.name for t in env.tools if t.kind == "write"}
    settings = TaskSettings(max_attempts=1, spread_bank=True)
    res = generate_tasks(env, fake_client([echo] * 60), n=8, settings=settings)
    assert len(res.value) == 8, res.rejections
    assert writes <= {c.tool for t in res.value for c in t.reference_solution}
    pairs = {(t.metadata["shape"], tuple(c.tool for c in t.reference_solution)) for t in res.value}
    assert len(pairs) == len(res.value)
    again = generate_tasks(env, fake_client([echo] * 60), n=8, settings=settings)
    assert [(t.instruction, t.reference_solution) for t in again.value] == \
        [(t.instruction, t.reference_solution) for t in res.value]


def test_with_both_switches_a_model_that_never_words_well_still_gets_a_spread_bank() -> None:
    env = brewery_env()
    writes = {t.name for t in env.tools if t.kind == "write"}
    res = generate_tasks(env, fake_client([BAD] * 200), n=8,
                         settings=TaskSettings(max_attempts=2, spread_bank=True, template_fallback=True))
    assert len(res.value) == 8, res.rejections
    assert writes <= {c.tool for t in res.value for c in t.reference_solution}
    assert {t.metadata["worded_by"] for t in res.value} == {"template"}


def test_next_chain_names_a_row_the_bank_has_not_named_when_the_rest_ranks_equal() -> None:
    """The example pharmacy (2026-11-30): every shape's first row was the same patient, named in 4 of 10 requests.
    Among chains of equal rank, one naming a row no banked chain names comes first; the spread of shapes and tool
    chains still comes before it."""
    def named(shape: str, tool: str, member: str) -> Chain:
        return Chain(shape, [ToolCall(tool=tool, arguments={})], [], [],
                     goals=[Goal("update", "loans", named=(("member", member),), asked="due")])
    banked = named("write", "edit", "Claudia Perry")
    again, other = named("write", "edit", "Claudia Perry"), named("write", "edit", "Joseph Lewis")
    writes = {"edit", "add"}
    assert next_chain([again, other], set(), [banked], writes) == 2
    assert next_chain([other, again], set(), [banked], writes) == 1
    fresh_shape = named("lookup", "find", "Claudia Perry")  # a new (shape, tool chain) first, though its row repeats
    assert next_chain([other, fresh_shape], set(), [banked], writes) == 2
