"""A rule-bound task may ask for the write a state guard refuses (issue 40). A planned change moves a row only
forward through its states (``pipeline/dbmodel/lifecycle.py``), so no task asked for a write on a row in the last state, and a
rule that forbids changing such a row ("A member cannot return a book that has already been returned", the
example's one rule) governed no refused write: the regenerated library of 2026-11-29 had no refusing task. The
write the rule forbids is now planned too (the state the row holds, asked for again, and the one before it); an
allowed write still moves forward only.

The states are made-up words ('zul', 'mar', 'kip', the fixture of ``test_task_states``): the order comes from the
rows, never from the words."""

from __future__ import annotations

from pipeline import ir
from pipeline.dbmodel import lifecycle as st
from pipeline.runtime import EnvInstance, reward
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner.rules import _governed_writes, compound_rules
from pipeline.stages.tasks.planner.shapes import refused_writes, writes
from pipeline.stages.tasks.planner.values import new_value
from tests.stages.test_task_states import STATE, STATES, tabs_env

GUARD = ir.Rule(id="set_tab_state_tabs_state_kip", kind="state", tools=["set_tab_state"],
                condition="SELECT 1 FROM tabs WHERE tabs.id = :tab_id AND state = 'kip'",
                message="A tab in the last state cannot be set again.")
ORDER = {s: i for i, s in enumerate(STATES)}


def guarded() -> ir.Environment:
    return tabs_env().model_copy(update={"rules": [GUARD]})


def _state(env: ir.Environment, tab_id: int) -> str:
    with fresh(env) as run:
        return run.inst.conn.execute("SELECT state FROM tabs WHERE id = ?", (tab_id,)).fetchone()[0]


def test_behind_gives_the_held_state_then_the_earlier_ones() -> None:
    env = guarded()
    with fresh(env) as run:
        p = make_planner(env, run)
        assert st.behind(p, "tabs", "state", "kip") == ["kip", "mar", "zul"]
        assert st.behind(p, "tabs", "state", "zul") == ["zul"]
        assert st.behind(p, "tabs", "state", "off-list") == []
        assert st.behind(p, "clients", "name", "Mira Vos") is None
        # forward only unless the planner asks for a refused write; then the k-th state behind, None past the last
        assert new_value(p, "tabs", "state", "kip", STATE, False) is None
        p.refusing = 0
        assert new_value(p, "tabs", "state", "kip", STATE, False) == "kip"
        p.refusing = 1
        assert new_value(p, "tabs", "state", "kip", STATE, False) == "mar"
        assert new_value(p, "tabs", "state", "zul", STATE, False) is None
        p.refusing = None


def test_the_write_a_state_guard_forbids_is_planned_and_an_allowed_one_moves_forward() -> None:
    env = guarded()
    with fresh(env) as run:
        p = make_planner(env, run)
        refused = [ch for s in range(3) for ch in refused_writes(p, s)]
        forward = {ch.signature() for s in range(3) for ch in writes(p, s)}
        found = list(_governed_writes(p, 0))
    assert refused and not {ch.signature() for ch in refused} & forward
    assert all(ch.calls[-1].tool == "set_tab_state" for ch in refused)  # updates only: no create, no delete
    forbidden = [(ch, f) for ch, f in found if f]
    allowed = [ch for ch, f in found if not f]
    assert forbidden and allowed
    asked = set()
    for ch, f in forbidden:
        call = ch.calls[-1]
        assert f == [GUARD]
        held = _state(env, call.arguments["tab_id"])
        assert held == "kip"
        asked.add(call.arguments["state"])
    assert asked == {"kip", "mar"}  # the held state asked for again, and the one before it
    for ch in allowed:  # every allowed change of a tab moves it forward
        call = ch.calls[-1]
        assert ORDER[call.arguments["state"]] > ORDER[_state(env, call.arguments["tab_id"])]


def test_a_compound_refuses_a_change_that_would_change_the_row() -> None:
    env = guarded()
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, {1: 0.3, 2: 0.4, 3: 0.3}, spread=True, rules=True)
        p = make_planner(env, run)
        direct = list(compound_rules(p, 0))
    compound = [ch for ch in chains if ch.shape == "compound_rule"]
    assert compound and direct, sorted({ch.shape for ch in chains if ch.rules})
    with EnvInstance(env, enforce_policy=True) as inst:
        for ch in compound:
            forbids = [r for r in ch.rules if r["verdict"] == "forbids"]
            allows = [r for r in ch.rules if r["verdict"] == "allows"]
            assert len(forbids) == 1 and len(allows) <= 1  # the allowed write may be of a tool no rule governs
            # the refused write: a 'kip' tab sent back (the same state again would change nothing, and the gold
            # state could not tell doing it from refusing it)
            assert _state(env, forbids[0]["arguments"]["tab_id"]) == "kip"
            assert forbids[0]["arguments"]["state"] != "kip"
            # the allowed one moves its tab forward; the reference replays with the rule enforced; the refused
            # write is refused with the rule's message
            for a in allows:
                assert ORDER[a["arguments"]["state"]] > ORDER[_state(env, a["arguments"]["tab_id"])]
            inst.reset()
            assert all(inst.call(c.tool, c.arguments)["ok"] for c in ch.calls)
            out = inst.call(forbids[0]["tool"], forbids[0]["arguments"])
            assert out["kind"] == "guard" and out["error"] == GUARD.message


def test_the_bank_refuses_and_neither_blind_nor_idle_earns() -> None:
    """Over the bank's rule-bound tasks, an agent that writes whatever it is asked and one that does nothing each
    earn less than 20% (before: no compound task, so the bank's rule-bound tasks were decide tasks alone, which the
    blind writer passes)."""
    from pipeline.llm import fake_client
    from pipeline.settings import TaskSettings
    from pipeline.stages.tasks.bank import generate_tasks
    from verify.evaluate import render_answer

    env = guarded()
    settings = TaskSettings(n_tasks=12, rule_tasks=True, max_attempts=1, template_fallback=True)
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
    bound = [t for t in tasks if t.metadata.get("rules")]
    shapes = [t.metadata["shape"] for t in bound]
    assert "compound_rule" in shapes, shapes

    def score(t: ir.Task, calls: list[ir.ToolCall], answer: str | None = None) -> float:
        with fresh(env) as run:
            play(run, calls)
            assert run.error is None, run.error
            return reward.score(t.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial,
                                answer=answer).reward

    blind, idle = [], []
    for t in bound:
        asked = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                 if r["verdict"] == "forbids"]
        # a refusal's reply says why (its answer: the state its rule checks); the others' answer nothing
        given = render_answer(t.verifier.answer) if t.verifier.answer is not None else None
        assert score(t, list(t.reference_solution), given) == 1.0
        blind.append(score(t, [*t.reference_solution, *asked]))
        idle.append(score(t, []))
    assert sum(blind) < 0.2 * len(bound) and sum(idle) < 0.2 * len(bound), (shapes, blind, idle)
