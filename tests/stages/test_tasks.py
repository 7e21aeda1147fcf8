"""The task generator with a scripted fake LLM: code plans compositional chains, the LLM words them, code
lints the wording, replays, derives and proves; feedback goes back in the same conversation."""

from __future__ import annotations

import re

from pipeline.ir import ToolCall
from pipeline.llm import fake_client
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.bank import (
    TaskSettings,
    _call_key,
    _effect_key,
    _template_chunks,
    build_and_prove,
    generate_tasks,
    lint_request,
)
from pipeline.stages.tasks.code_wording import request_from_plan
from pipeline.stages.tasks.planner import make_planner, plan_chains
from tests.fixtures.library import library_env
from verify.proofs import prove


def _must(messages) -> str:
    return re.search(r"exactly as written: (.*)", messages[1]["content"]).group(1)


def echo(messages) -> dict:
    """A user who states exactly the values the plan asks for."""
    return {"user_request": f"Please do this for me, about {_must(messages)}."}


def test_generated_tasks_are_deep_replayable_and_proved() -> None:
    env = library_env()
    client = fake_client([echo] * 40)
    res = generate_tasks(env, client, n=10, settings=TaskSettings(max_attempts=1))
    tasks = res.value
    assert len(tasks) == 10, res.rejections
    tiers = [t.metadata["tier"] for t in tasks]
    assert sum(t >= 2 for t in tiers) >= len(tasks) / 2  # the default mix: at least half tier 2+
    assert 3 in tiers
    multi = [t for t in tasks if len(t.reference_solution) >= 2]
    assert len(multi) >= len(tasks) / 2
    assert sum(t.metadata["data_dependent"] for t in tasks) >= len(tasks) / 3
    shapes = {t.metadata["shape"] for t in tasks}
    assert {"lookup", "aggregate", "create"} <= shapes
    for t in tasks:
        assert prove(env, t).ok
        assert t.metadata["steps"] == len(t.reference_solution)
        # every argument is stated in the request or read by an earlier call of the same solution
        with fresh(env) as run:
            play(run, list(t.reference_solution))
            assert run.error is None
            for i, (call, src) in enumerate(zip(t.reference_solution, t.metadata["sources"], strict=True)):
                for arg, how in src.items():
                    value = call.arguments[arg]
                    if how == "stated":
                        assert lint_request.__module__ and str(value).lower() in t.instruction.lower() or \
                            isinstance(value, int | float), (arg, value, t.instruction)
                    else:
                        n, field = re.match(r"^\$(\d+)\.(\w+)$", how).groups()
                        assert int(n) <= i
                        result = run.records[int(n) - 1].response["result"]
                        rows = result if isinstance(result, list) else [result]
                        assert any(r.get(field) == value for r in rows), (how, value)
    # questions carry a typed answer that the request does not give away
    for t in tasks:
        if t.verifier.answer is not None:
            assert t.verifier.answer["type"] in ("number", "text", "enum", "date")
            assert str(t.verifier.answer["value"]) not in t.instruction


def test_planning_is_deterministic_and_follows_the_tier_mix() -> None:
    env = library_env()
    with fresh(env) as run:
        a = plan_chains(env, run, 8, {1: 0.0, 2: 0.5, 3: 0.5})
    with fresh(env) as run:
        b = plan_chains(env, run, 8, {1: 0.0, 2: 0.5, 3: 0.5})
    assert [c.signature() for c in a] == [c.signature() for c in b]
    assert all(c.tier >= 2 for c in a[:4])


def test_ids_come_from_lookups_not_from_the_request() -> None:
    env = library_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        loan = p.rows("loans")[1]  # Alice Park's open loan of The Guns of August
        calls, sources, stated, field = p.reach("loans", loan, ("loans", "due_date"))
    assert [c.tool for c in calls] == ["find_member_by_name", "list_loans_for_member"]
    assert calls[1].arguments == {"member_id": 1} and sources[1] == {"member_id": "$1.id"}
    assert "Alice Park" in stated and field == "due_date"


def test_natural_keys_come_from_the_data_not_from_words() -> None:
    env = library_env()
    with fresh(env) as run:
        keys = make_planner(env, run).keys
    assert keys["members"].columns == ("name",)  # what the tools search by, not the unique email
    assert keys["books"].columns == ("title",)
    assert "member_id" in keys["loans"].columns  # a loan is named through its member


def test_wording_feedback_names_the_missing_value_then_the_id() -> None:
    env = library_env()
    replies = []

    def first(messages):
        replies.append(_must(messages))
        return {"user_request": "Please help me with something in the library."}

    def second(messages):
        return {"user_request": f"Please do this with member 1, about {_must(messages)}."}

    client = fake_client([first, second, echo] + [echo] * 10)
    # the LLM's wording path: the template fallback words a chain itself and its feedback quotes no value
    settings = TaskSettings(max_attempts=3, tiers={2: 1.0}, template_fallback=False)
    res = generate_tasks(env, client, n=1, settings=settings)
    assert len(res.value) == 1
    feedback = [m["content"] for m in client.requests[2] if m["role"] == "user"]
    assert "must state" in feedback[1] and "an internal id" in feedback[2]


def test_lint_is_about_values_in_any_language() -> None:
    env = library_env()
    with fresh(env) as run:
        chain = next(c for c in plan_chains(env, run, 12, {2: 1.0}) if c.shape == "lookup")
    must = chain.must_state
    spanish = "¿Cuál es la fecha de vencimiento del préstamo de " + ", ".join(str(v) for v in must) + "?"
    assert lint_request(env, chain, spanish) is None
    assert "must state" in lint_request(env, chain, "¿Cuál es la fecha?")
    answer = chain.answer["value"]
    assert "gives its answer away" in lint_request(env, chain, spanish + f" ¿Es {answer}?")


def test_duplicates_are_refused() -> None:
    env = library_env()
    calls = [ToolCall(tool="find_member_by_name", arguments={"name": "Dan Wu"})]
    answer = {"type": "text", "value": "dan@example.org", "stated": ["Dan Wu"]}
    task, err = build_and_prove(env, calls, "Which email address does Dan Wu use?", answer_field=None,
                                initial_db=None, provenance={}, answer=answer)
    assert task is not None and err is None, err
    seen = {_call_key(task.reference_solution), _effect_key(task.verifier, task.reference_solution)}
    _, err = build_and_prove(env, calls, "What is Dan Wu's email?", answer_field=None, initial_db=None,
                             provenance={}, answer=answer, seen=seen)
    assert err and "already does exactly this" in err


def test_a_model_that_never_replies_validly_is_a_rejection() -> None:
    env = library_env()
    # without the template fallback (with it, code words the chain: test_wording)
    settings = TaskSettings(max_attempts=1, template_fallback=False)
    res = generate_tasks(env, fake_client(["not json"] * 20), n=1, settings=settings)
    assert res.value == [] and "LLM gave no usable reply" in res.rejections[0].reason


def test_chains_that_do_not_replay_are_dropped_before_asking_the_model() -> None:
    env = library_env()  # Alice Park cannot be deleted (books on loan); Carla Diaz cannot borrow a third book
    client = fake_client([echo] * 40)
    res = generate_tasks(env, client, n=12, settings=TaskSettings(max_attempts=1))
    assert not [r for r in res.rejections if "do not replay" in r.reason]
    assert len(client.requests) == len(res.value) + len(res.rejections)  # one request per worded chain
    assert not any(c.tool == "delete_member" and c.arguments == {"member_id": 1}
                   for t in res.value for c in t.reference_solution)


def test_lint_refuses_tool_names_schema_identifiers_and_copied_plan_wording() -> None:
    """A small model tends to copy the facts it is given ("Create a new loans row: ..."); the request must be
    the user's own words, naming no tool and no snake_case schema identifier."""
    env = library_env()
    with fresh(env) as run:
        chains = plan_chains(env, run, 12, {1: 0.3, 2: 0.4, 3: 0.3})
    chain = next(c for c in chains if c.shape == "create")
    values = ", ".join(str(v) for v in chain.must_state)  # as a person writes them: no quotes
    assert lint_request(env, chain, f"Please sort this out for me: {values}.") is None
    assert "the plan's wording" in lint_request(env, chain, chain.facts[0])
    # the connecting words of a fact, without its values and the tools' own descriptions, runs of 4+ words
    assert _template_chunks(["Among the loans the member 'Ann' has.", "take the one with the highest due date, "
                             "and for it: Renew a loan: days 7."], ["Renew a loan."]) == [
        "among the loans the member", "take the one with the highest due date"]
    said = request_from_plan(chain)  # code's own request is no copy of the plan
    assert said is not None and lint_request(env, chain, said) is None
    assert "speaks of loans rows" in lint_request(env, chain, f"Please add a loans row: {values}.")
    tool = chain.calls[-1].tool
    assert "_" in tool and f"names the tool {tool}" in lint_request(env, chain, f"Use {tool} with {values}.")
    renamed = env.model_copy(update={"tables": [t.model_copy(update={"name": "book_loans"}) if t.name == "loans"
                                                else t for t in env.tables]})
    assert "names the table book_loans" in lint_request(renamed, chain, f"Add to book_loans: {values}.")


def test_the_planner_hands_over_rows_from_the_whole_table_not_the_examples_first() -> None:
    """The rows the LLM wrote as examples come first in each table; the planner's order is shuffled over the whole
    table (fixed per table), so an example row is as likely to be named in a request as any other."""
    env = library_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        for table in ("members", "books"):
            every = p.rows(table, -1)
            ids = [r[p.infos[table].key[0]] for r in every]
            first = [r[0] for r in run.inst.conn.execute(f"SELECT rowid FROM {table} ORDER BY rowid")]
            assert sorted(ids) == sorted(first) and ids != first
            assert p.rows(table, 3) == every[:3] and make_planner(env, run).rows(table, -1) == every


def test_decide_tasks_come_in_pairs_under_a_fifth_of_the_rule_bound_ones() -> None:
    """Single-write decide tasks come in pairs, one whose write the rules allow (the blind writer passes it) and one
    whose write they forbid (a refusal: doing nothing passes it), and only while a pair keeps each kind under a fifth
    of the bank's rule-bound tasks: k pairs need more than 3k compound or exception tasks (4 compounds and a pair:
    each baseline earns 1 of 6). Without 4 compounds in the bank, no decide task at all (issue 40)."""
    from pipeline.stages.tasks.planner import (
        Chain,
        decide,
        decide_fits,
        next_chain,
        refusing,
        single,
        unpaired,
    )

    def chain(shape: str, verdict: str | None, n: int = 0) -> Chain:
        rules = [{"id": "r", "verdict": verdict, "tool": "t", "arguments": {}}] if verdict else []
        return Chain(shape, [ToolCall(tool="t", arguments={"n": shape, "k": n})], [], [], rules=rules)

    compound, plain = chain("compound_rule", "forbids"), chain("lookup", None)
    allowed, allowed2 = chain("create", "allows"), chain("create", "allows", 1)
    refused, refused2 = chain("refuse_rule", "forbids"), chain("refuse_rule", "forbids", 1)
    assert decide(allowed) and refusing(refused) and not decide(refused) and not refusing(allowed)
    assert single(allowed) and single(refused) and not single(compound) and not single(plain)
    for one in (allowed, refused):  # a pair fits beside 4 compounds, not beside 3
        assert not decide_fits([], one) and not decide_fits([compound] * 3, one) and decide_fits([compound] * 4, one)
    # the second of a pair always fits; a second pair needs 7 compounds (2 of 11 each)
    assert decide_fits([compound] * 4 + [allowed], refused) and not decide_fits([compound] * 4 + [allowed], allowed2)
    assert decide_fits([compound] * 4 + [refused], allowed)
    assert not decide_fits([compound] * 6 + [allowed, refused], allowed2)
    assert decide_fits([compound] * 7 + [allowed, refused], allowed2)
    assert decide_fits([compound] * 7 + [allowed, refused], refused2)  # either kind may start a pair
    # next_chain: a decide chain that does not fit is never next; with the write tools known, one that starts a
    # pair (the allowed one first) comes before other chains, one that completes a pair before everything
    assert next_chain([allowed, plain], set(), [compound] * 2) == 2
    assert next_chain([allowed, refused], set(), [compound] * 3) is None
    assert next_chain([plain, refused, allowed], set(), [compound] * 4, writes={"t"}) == 3
    assert next_chain([plain, compound, refused], set(), [compound] * 4 + [allowed], writes={"t"}, rule_quota=9) == 3
    # a pair left half made: its first goes (the last of the more numerous kind first)
    assert unpaired([compound, allowed, plain, refused]) == []
    assert unpaired([compound, allowed, plain, allowed2, refused]) == [3]
    assert unpaired([refused, compound]) == [0]
