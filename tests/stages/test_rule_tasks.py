"""Rule-bound tasks (``[stages.tasks] rule_tasks``) on the brewery and the permit office with their rules: every
planned chain is judged by the rules (none kept whose reference breaks one; governed writes carry the verdict);
compound allowed + forbidden chains; the bank's tasks record ``metadata.rules``; a compound task scores 1 for its
reference and 0 both for doing nothing and for doing everything it asks; over the bank's rule-bound tasks a blind
writer and an agent that does nothing each earn less than 20%."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, reward
from pipeline.runtime.replay import fresh, play
from pipeline.settings import BuildSettings, TaskSettings
from pipeline.stages.policy.house_rules import make_policy
from pipeline.stages.tasks.bank import generate_tasks
from pipeline.stages.tasks.planner import next_chain, plan_chains
from pipeline.stages.tasks.planner.chains import Chain
from pipeline.stages.tasks.planner.rules import forbidding, governing
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from verify.evaluate import render_answer

TIERS = {1: 0.3, 2: 0.4, 3: 0.3}


def ruled(make) -> ir.Environment:
    return make_policy(make(), fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value


def score(task: ir.Task, calls: list[ir.ToolCall], answer: str | None = None) -> float:
    with fresh(ruled_envs[task.env_id]) as run:
        play(run, calls)
        assert run.error is None, run.error
        return reward.score(task.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial,
                            answer=answer).reward


ruled_envs: dict[str, ir.Environment] = {}


@pytest.mark.parametrize("make", [brewery_env, permit_env], ids=["brewery", "permits"])
def test_planner_finds_allowed_and_forbidden_governed_writes(make) -> None:
    env = ruled(make)
    with fresh(env) as run:
        plain = plan_chains(env, run, 40, TIERS, spread=True)
        chains = plan_chains(env, run, 40, TIERS, spread=True, rules=True)
    assert not any(c.rules for c in plain)  # without the switch, no rule-bound chain
    shapes = {c.shape for c in chains if c.rules}
    assert "compound_rule" in shapes and len(shapes) >= 3, shapes  # decide: writes of the other shapes, judged
    # a chain whose write a rule forbids is kept neither with the switch nor without it (its reference would break
    # the policy: a task that is not rule-bound teaches the write; before 2026-11-29 the plain plan kept them)
    with EnvInstance(env, enforce_policy=True) as inst:
        broken = [c for c in plain + chains if c.shape != "aggregate" and not c.rules and not _replays(inst, c)]
    assert not broken, [c.facts for c in broken]
    messages = {r.id: r.message for r in env.rules}
    with EnvInstance(env, enforce_policy=True) as inst:
        for ch in chains:
            if not ch.rules:
                continue
            # the reference does only writes the rules allow: it replays with the rules enforced
            assert _replays(inst, ch), (ch.shape, ch.rules)
            forbids = [r for r in ch.rules if r["verdict"] == "forbids"]
            if ch.shape == "refuse_rule":  # a refusal: the write asked for is forbidden; the reference only reads
                assert forbids and all(env.tool(c.tool).kind == "read" for c in ch.calls) and ch.calls
                assert {r["tool"] for r in ch.rules} == {forbids[0]["tool"]}  # one write: other rules may allow it
            elif ch.shape != "compound_rule":
                assert not forbids
                continue
            else:  # the allowed write may be of a tool no rule governs (no verdict then)
                assert forbids and {r["verdict"] for r in ch.rules} <= {"allows", "forbids"}
                assert ch.tier == 3 and ch.facts[1].startswith("In the same message, also: ")
            # the write asked for is refused, after the reference, by the rule recorded against it
            out = inst.call(forbids[0]["tool"], forbids[0]["arguments"])
            assert out["kind"] == "guard" and out["error"] in {messages[r["id"]] for r in forbids}


def _replays(inst: EnvInstance, chain) -> bool:
    inst.reset()
    return all(inst.call(c.tool, c.arguments)["ok"] for c in chain.calls)


def test_the_verdict_follows_the_rows() -> None:
    env = ruled(brewery_env)
    from pipeline.stages.tasks.planner import make_planner

    with fresh(env) as run:
        p = make_planner(env, run)
        rule = next(r for r in env.rules if r.tools == ["fill_keg"])
        assert governing(p, "fill_keg") == [rule]
        fermenting = ir.ToolCall(tool="fill_keg", arguments={"batch_id": 3, "keg_code": "K-9", "size_liters": 20,
                                                            "location": "cellar"})
        packaged = fermenting.model_copy(update={"arguments": {**fermenting.arguments, "batch_id": 1}})
        assert forbidding(p, fermenting) == [rule] and forbidding(p, packaged) == []


@pytest.mark.parametrize("make", [brewery_env, permit_env], ids=["brewery", "permits"])
def test_bank_of_rule_bound_tasks_and_their_rewards(make) -> None:
    env = ruled(make)
    ruled_envs[env.env_id] = env
    settings = TaskSettings(n_tasks=14, rule_tasks=True, max_attempts=1, template_fallback=True)
    res = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings)
    tasks = res.value or []
    bound = [t for t in tasks if t.metadata.get("rules")]
    shapes = [t.metadata["shape"] for t in bound]
    assert "compound_rule" in shapes, [t.metadata["shape"] for t in tasks]
    assert len(bound) >= 3  # fewer than rule_share asks: decide tasks, which a blind writer passes, are held back
    # judgement decides them: an agent that writes whatever it is asked without reading, and one that does nothing,
    # each earn less than 20% of the rule-bound tasks (a decide task, which the blind writer passes, is rare)
    blind, idle = [], []
    for t in bound:
        asked = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                 if r["verdict"] == "forbids"]
        done = list(t.reference_solution[:-1]) if t.metadata["shape"] == "exception" else list(t.reference_solution)
        blind.append(score(t, done + asked[:1]))
        idle.append(score(t, []))
    assert sum(blind) < 0.2 * len(bound) and sum(idle) < 0.2 * len(bound), (shapes, blind, idle)
    assert {t.metadata["worded_by"] for t in bound} == {"template"}
    for t in bound:
        ids = {r.id for r in env.rules}
        assert {r["id"] for r in t.metadata["rules"]} <= ids
        given = render_answer(t.verifier.answer) if t.verifier.answer is not None else None
        assert score(t, list(t.reference_solution), given) == 1.0
        forbidden = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                     if r["verdict"] == "forbids"]
        if t.metadata["shape"] == "refuse_rule":  # a refusal: the gold keeps the start and says why (its answer)
            assert forbidden and score(t, []) == 0.0 and score(t, [], given) == 1.0
            assert score(t, forbidden[:1], given) == 0.0 and not t.verifier.mutable_tables
            continue
        if t.metadata["shape"] != "compound_rule":  # decide: the governed write is allowed, and is the gold
            assert forbidden == [] and score(t, []) == 0.0
            continue
        # compound: nothing done misses the allowed goal; everything done (the forbidden write too) breaks a gate
        assert forbidden and score(t, []) == 0.0
        assert score(t, [*t.reference_solution, *forbidden[:1]]) == 0.0
        assert t.reference_solution[-1].tool != forbidden[0].tool or \
            t.reference_solution[-1].arguments != forbidden[0].arguments
    # without the switch the same environment plans the same bank as before rules existed
    plain = generate_tasks(env, fake_client([{"user_request": "no"}] * 400),
                           settings=settings.model_copy(update={"rule_tasks": False})).value or []
    assert not any(t.metadata.get("rules") for t in plain)


def test_a_compound_pairs_two_new_rows_for_other_parents() -> None:
    """Two creates name no row (``Goal.named`` is empty for both): what tells their rows apart is the rows they
    point at (``refs``). The brewery's start_batch is allowed for one beer and forbidden for another (a cap on a
    beer's batches): a compound chain asks for both, and the forbidden one would work after the allowed one but
    for the rule (no two new rows that collide)."""
    from pipeline.stages.tasks.planner.chains import Goal
    from pipeline.stages.tasks.planner.rules import touches

    def new(refs: tuple, key: tuple = ()) -> object:
        return type("C", (), {"goals": [Goal("create", "batches", refs=refs, key=key)]})()

    beer = lambda name: (("beer_id", "beers", (("name", name),)),)  # noqa: E731
    assert touches(new(beer("Velvet Porter"))) != touches(new(beer("Harbour Haze")))  # type: ignore[arg-type]
    assert touches(new(beer("Velvet Porter"))) == touches(new(beer("Velvet Porter")))  # type: ignore[arg-type]
    env = ruled(brewery_env)
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, TIERS, spread=True, rules=True)
    pairs = [c for c in chains if c.shape == "compound_rule" and {(r["tool"], r["verdict"]) for r in c.rules} ==
             {("start_batch", "allows"), ("start_batch", "forbids")}]
    assert pairs, [(c.shape, [r["tool"] for r in c.rules]) for c in chains if c.rules]
    for ch in pairs:
        allowed = next(r for r in ch.rules if r["verdict"] == "allows")
        forbidden = next(r for r in ch.rules if r["verdict"] == "forbids")
        assert allowed["arguments"]["beer_id"] != forbidden["arguments"]["beer_id"]
        assert [g.kind for g in ch.goals] == ["create", "create"] and ch.goals[0].refs != ch.goals[1].refs
        with fresh(env) as run:  # the forbidden write works after the reference, but for the rule
            play(run, [*ch.calls, ir.ToolCall(tool="start_batch", arguments=forbidden["arguments"])], changes=False)
            assert run.error is None, run.error
        with EnvInstance(env, enforce_policy=True) as inst:
            assert all(inst.call(c.tool, c.arguments)["ok"] for c in ch.calls)
            assert inst.call("start_batch", forbidden["arguments"])["kind"] == "guard"


def test_a_compound_takes_an_allowed_partner_no_earlier_compound_took(monkeypatch) -> None:
    """Two forbidden writes and two allowed ones of the same tool: the second compound chain pairs its forbidden
    write with the allowed write the first did not use (the same partner twice makes the same change twice: the
    bank keeps one task of the two); with one allowed write only, both use it."""
    from pipeline.stages.tasks.planner import make_planner
    from pipeline.stages.tasks.planner import rules as R
    from pipeline.stages.tasks.planner.chains import Chain, Goal

    env = ruled(permit_env)
    rule = next(r for r in env.rules if r.tools == ["correct_fee"])

    def write(pid: int, fee: float) -> Chain:
        return Chain("update", [ir.ToolCall(tool="correct_fee", arguments={"permit_id": pid, "fee": fee})],
                     [f"Correct the fee of permit {pid} to {fee}."], [pid, fee], sources=[{}],
                     goals=[Goal("update", "permits", (("permit", pid),), values=(("fee", fee),), key=(pid,))])

    monkeypatch.setattr(R, "_still_forbidden", lambda p, a, b: True)
    found = [(write(1, 100.0), []), (write(2, 200.0), []), (write(3, 9000.0), [rule]), (write(4, 9500.0), [rule])]
    with fresh(env) as run:
        p = make_planner(env, run)
        p.memo[("governed_writes", 0)] = found
        p.memo[("plain_writes", 0)] = []  # no write of a tool no rule governs
        got = list(R.compound_rules(p, 0))
        p.memo = {("governed_writes", 0): [found[0], *found[2:]], ("plain_writes", 0): []}
        alone = list(R.compound_rules(p, 0))
    partners = [c.calls[0].arguments["permit_id"] for c in got]
    assert partners == [1, 2], partners
    refused = [next(g.named for g, r in zip(c.goals, c.rules, strict=True) if r["verdict"] == "forbids") for c in got]
    assert refused == [(("permit", 3),), (("permit", 4),)]
    # the second asks for the refused write first (one phrasing shape does not fill the bank)
    assert [c.rules[0]["verdict"] for c in got] == ["allows", "forbids"]
    assert [c.calls[0].arguments["permit_id"] for c in alone] == [1, 1]


def test_a_threshold_every_seeded_amount_sits_under_still_gets_forbidden_writes() -> None:
    """A rule on the request's own amount (an approval: a batch over 3,000 litres) whose threshold no seeded row
    reaches: the planner states the amount of a call the rule's check found forbidden, so compounds still pair an
    allowed write with a forbidden one; the row the write names stays one of the seeded rows'."""
    env = brewery_env()
    with fresh(env) as run:
        top = run.inst.conn.execute("SELECT MAX(volume_liters) FROM batches").fetchone()[0]
        beer = run.inst.conn.execute("SELECT MIN(id) FROM beers").fetchone()[0]
    limit, over = top + 1000, top + 2000  # under the tool's own maximum (10,000 litres)
    rule = ir.Rule(id="start_batch_volume_liters_over", kind="approval", tools=["start_batch"],
                   condition=f"SELECT 1 WHERE :volume_liters > {limit}",
                   message=f"A batch of more than {limit} litres needs the head brewer's approval.",
                   allowed=[ir.ToolCall(tool="start_batch", arguments={"beer_id": beer, "batch_code": "B-9001",
                                                                       "brewed_on": "2026-01-10", "volume_liters": top})],
                   forbidden=[ir.ToolCall(tool="start_batch", arguments={"beer_id": beer, "batch_code": "B-9002",
                                                                         "brewed_on": "2026-01-10",
                                                                         "volume_liters": over})])
    env = env.model_copy(update={"rules": [rule]})
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, TIERS, spread=True, rules=True)
    forbidden = [r for c in chains for r in c.rules if r["verdict"] == "forbids"]
    assert forbidden and all(r["arguments"]["volume_liters"] == over for r in forbidden)
    # only the amount is the forbidden call's: the batch code and the beer are the planner's own, from the rows
    assert {r["arguments"]["batch_code"] for r in forbidden} != {"B-9002"}
    compounds = [c for c in chains if c.shape == "compound_rule"]
    assert compounds and all(over in c.must_state for c in compounds if any(
        r["verdict"] == "forbids" for r in c.rules))
    with EnvInstance(env, enforce_policy=True) as inst:
        for ch in compounds:
            assert _replays(inst, ch)  # the reference does only what the rule allows


def _ruled_chain(shape: str, tool: str, rule: str, row: int, params: tuple[str, ...] = ("loan_id", "new_status"),
                 verdict: str = "forbids") -> Chain:
    args = {p: row for p in params}
    return Chain(shape, [ir.ToolCall(tool="find_loan", arguments={"row": row})], [f"row {row}"], [],
                 rules=[{"id": rule, "verdict": verdict, "tool": tool, "arguments": args}])


def test_a_bank_asks_for_a_rules_forbidden_write_at_most_twice() -> None:
    """Issue 40's audit of the example library: its one rule ("once a loan is returned, its status may not change")
    was the refused half of five requests of ten ("Please mark the loan of ... as pending", four compounds and a
    refusal). A bank takes at most two (``planner.PER_RULE``) compounds or exceptions that ask for a write one rule
    forbids (half the rule quota when that is more); another rule's, and chains no rule forbids, are still taken (a
    refusal only beside four compounds: ``decide_fits``)."""
    held = [_ruled_chain("compound_rule", "update_loan_status", "returned_final", r) for r in (1, 2)]
    chains = [_ruled_chain("compound_rule", "update_loan_status", "returned_final", 3),
              _ruled_chain("refuse_rule", "update_loan_status", "returned_final", 4),
              _ruled_chain("compound_rule", "add_renewal", "renewal_limit", 5),
              Chain("create", [ir.ToolCall(tool="create_loans", arguments={})], ["a loan"], [])]
    writes = {"update_loan_status", "add_renewal", "create_loans"}
    assert next_chain(chains, set(), held, writes, rule_quota=4) == 3  # the other rule's compound first
    assert next_chain(chains, {3}, held, writes, rule_quota=4) == 4  # then what no rule forbids; never 1 or 2
    assert next_chain(chains, {3, 4}, held, writes, rule_quota=4) is None
    assert next_chain(chains, {3}, held[:1], writes, rule_quota=4) == 1  # one held: a second is taken
    assert next_chain(chains, {3}, held, writes, rule_quota=6) == 1  # a bank of 14 (quota 6): three a rule


def test_a_banks_forbidden_writes_of_a_kind_it_holds_least_come_first() -> None:
    """Among rule-bound chains, a forbidden write of another tool (or other parameters: a create rather than a status
    set) comes before the same kind of write on another row."""
    held = [_ruled_chain("compound_rule", "update_loan_status", "rule_a", 1)]
    chains = [_ruled_chain("compound_rule", "update_loan_status", "rule_a", 2),
              _ruled_chain("compound_rule", "create_loans", "rule_a", 3, params=("book_id", "member_id"))]
    writes = {"update_loan_status", "create_loans"}
    assert next_chain(chains, set(), held, writes, rule_quota=4) == 2
