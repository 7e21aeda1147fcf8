"""The task-generation agent with a scripted fake LLM: planning, the reply schema, and the feedback
loop (replay errors, wording lint, proof failures) ending in tasks or rejections."""

from __future__ import annotations

import json

from pipeline.ir import SeedRows, ToolCall
from pipeline.llm import fake_client
from pipeline.stages.tasks import (
    TaskSettings,
    _call_key,
    _effect_key,
    build_and_prove,
    generate_tasks,
    plan_tasks,
    proposal_model,
    reply_calls,
    tool_op,
)
from tests.fixtures.library import library_env
from tests.verify.envs import shop_env
from verify.proofs import prove
from verify.replay import fresh


def test_plans_mix_kinds_over_the_tools() -> None:
    env = library_env()
    assert {t.name: tool_op(env, t.name) for t in env.tools if t.kind == "write"} == {
        "add_book": "create", "borrow_book": "create", "delete_member": "delete", "return_book": "update",
        "update_member_email": "update"}
    plans = plan_tasks(env, 10)
    assert len(plans) == 10 and [p.index for p in plans] == list(range(1, 11))
    assert {p.kind for p in plans} == {"lookup", "create", "update", "delete", "multi_step"}
    multi = [p for p in plans if p.kind == "multi_step"]
    assert all(len(p.tools) == 2 and p.tools[0] != p.tools[1] for p in multi)
    assert plan_tasks(env, 10) == plans  # deterministic
    shop = plan_tasks(shop_env(), 4)  # no update or delete tools: those kinds are skipped
    assert {p.kind for p in shop} <= {"lookup", "create", "multi_step"}


def test_reply_schema_limits_ids_to_real_rows_and_answer_fields_to_result_columns() -> None:
    env = library_env()
    plans = plan_tasks(env, 8)
    with fresh(env) as run:
        borrow = next(p for p in plans if p.tools == ("borrow_book",))
        model, refs, notes = proposal_model(env, borrow, run.inst.conn, run.infos)
        schema = json.dumps(model.model_json_schema())
        # rows are chosen by the names the request will use; code maps them back to ids
        assert '"Dan Wu"' in schema and '"A Brief History of Time"' in schema
        assert refs[("borrow_book", "member_id")]["Dan Wu"] == 4 and refs[("borrow_book", "book_id")]["Emma"] == 1
        assert any("member_id: give the name of the members row" in n for n in notes)
        reply = model.model_validate({"borrow_book": {"member_id": "Dan Wu", "book_id": "Emma", "days": None},
                                      "user_request": "Dan Wu borrows Emma."})
        assert reply_calls(reply, borrow, refs) == [ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 1})]
        lookup = next(p for p in plans if p.tools == ("find_member_by_name",))
        schema = proposal_model(env, lookup, run.inst.conn, run.infos)[0].model_json_schema()
        # not the internal id, nor the name it searches by; and it searches by a real name
        assert schema["properties"]["answer_field"]["enum"] == ["email", "tier"]
        assert schema["$defs"]["ArgsFindMemberByName"]["properties"]["name"]["enum"] == [
            "Alice Park", "Bob Stone", "Carla Diaz", "Dan Wu"]


def _requests_text(client, i: int) -> str:
    return client.requests[i][-1]["content"]


def test_generation_feeds_back_replay_errors_and_wording_problems() -> None:
    env = library_env()
    client = fake_client([
        # 1. lookup (planned by code: Dan Wu's tier)
        {"user_request": "What membership tier is Dan Wu on?"},
        # 2. update: not on loan -> named by id -> fine
        {"return_book": {"book_id": "A Brief History of Time"}, "user_request": "A Brief History of Time came back today."},
        {"return_book": {"book_id": "The Guns of August"}, "user_request": "Please record the return of book id 3."},
        {"return_book": {"book_id": "The Guns of August"}, "user_request": "Alice Park brought back The Guns of August; please record it."},
        # 3. create: the author is missing, then given
        {"add_book": {"title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965, "replacement_cost": 10.5},
         "user_request": "Add the fiction book Dune (1965) with a replacement cost of 10.50."},
        {"add_book": {"title": "Dune", "author": "Frank Herbert", "genre": "fiction", "year": 1965, "replacement_cost": 10.5},
         "user_request": "Add the fiction book Dune by Frank Herbert (1965) with a replacement cost of 10.50."},
    ])
    res = generate_tasks(env, client, n=3)
    assert res.ok and not res.rejections, res.rejections
    lookup, update, create = res.value
    assert lookup.kind == "lookup" and lookup.verifier.answer == "basic"
    assert update.kind == "update" and update.reference_solution[0].arguments == {"book_id": 3}
    assert create.kind == "create" and create.verifier.mutable_tables == ["books"]
    # the evidence went back to the model, in the same conversation
    assert "book 2 is not on loan" in _requests_text(client, 2)
    assert "an id users do not know" in _requests_text(client, 3)
    assert "author 'Frank Herbert'" in _requests_text(client, 5)
    assert len(client.requests[3]) == len(client.requests[1]) + 4  # two replies and two feedbacks appended
    # a retry after feedback samples (seeded) instead of repeating the greedy reply
    assert [b["temperature"] for b in client.bodies[1:4]] == [0.0, 0.7, 0.7]
    assert [b["seed"] for b in client.bodies[1:4]] == [0, 1, 2]
    for t in res.value:
        assert t.env_id == env.env_id and t.task_id.startswith("t_")
        assert t.metadata["steps"] == 1 and t.metadata["tools_used"] == [t.reference_solution[0].tool]
        assert t.provenance["stage"] == "tasks" and t.provenance["llm_replies"] >= 1
        assert len(t.tools) == len(env.tools)
        assert prove(env, t).ok
    assert update.provenance["llm_replies"] == 3
    # the prompt showed real rows and the chosen tool only
    second = _requests_text(client, 1)
    assert '"title": "The Guns of August"' in second and "return_book(" in second and "borrow_book(" not in second
    assert "book_id: give the title of the books row" in _requests_text(client, 1)


def _shop_with_three_orders():
    env = shop_env()
    orders = [*env.seed[0].rows, {"id": 3, "customer": "Cy", "code": "C3", "status": "open",
                                   "created_at": "2026-01-04T12:00:00"}]
    return env.model_copy(update={"seed": [SeedRows(table="orders", rows=orders), env.seed[1]]})


def test_lookups_are_planned_by_code_and_phrased_by_the_model() -> None:
    env = library_env()
    client = fake_client([{"user_request": "Which membership tier does Dan Wu have?"}])
    res = generate_tasks(env, client, n=1)
    (task,) = res.value
    assert task.kind == "lookup" and task.verifier.answer == "basic"
    assert task.reference_solution == [ToolCall(tool="find_member_by_name", arguments={"name": "Dan Wu"})]
    prompt = _requests_text(client, 0)
    assert "the tier of the member 'Dan Wu'" in prompt and "dan@example.org" not in prompt  # no result rows shown


def test_a_task_failing_a_proof_goes_back_then_is_rejected_with_the_reason() -> None:
    env = _shop_with_three_orders()  # the first lookup asks for Ada's order status: 'complete'
    client = fake_client([{"user_request": "What is the status of Ada's order?"}] * 3)
    res = generate_tasks(env, client, n=1, settings=TaskSettings(max_attempts=3))
    assert res.value == [] and len(res.rejections) == 1
    rej = res.rejections[0]
    # "I could not complete the task." states the answer 'complete': the no-op proof fails
    assert rej.stage == "tasks" and "no_op" in rej.reason and "lookup" in rej.item
    # the same reply twice ends the loop early (asking again at temperature 0 would repeat it)
    assert rej.evidence["replies"] == 2 and "Ada" in rej.evidence["last_reply"]
    assert "no_op" in _requests_text(client, 1) and len(client.requests) == 2


def test_wording_lint() -> None:
    env = library_env()
    calls = [ToolCall(tool="find_member_by_name", arguments={"name": "Dan"})]
    _, err = build_and_prove(env, calls, "Find library members whose name contains the given text (case-insensitive).",
                             answer_field="email", initial_db=None, provenance={})
    assert err and "repeats the description" in err
    _, err = build_and_prove(env, calls, "What is the email address of Alice Park?", answer_field="email",
                             initial_db=None, provenance={})
    assert err and "'Dan'" in err  # a question must say what it is about
    _, err = build_and_prove(env, [ToolCall(tool="return_book", arguments={"book_id": 3})],
                             "Return the book 'The Guns of August' to member 2.", answer_field=None,
                             initial_db=None, provenance={})
    assert err and "'member 2'" in err and "Bob Stone" in err


def test_duplicates_and_giveaways_are_refused() -> None:
    env = library_env()
    calls = [ToolCall(tool="find_member_by_name", arguments={"name": "Dan"})]
    task, err = build_and_prove(env, calls, "Which email address does Dan Wu use?", answer_field="email",
                                initial_db=None, provenance={})
    assert task is not None and err is None
    seen = {_call_key(task.reference_solution), _effect_key(task.verifier, task.reference_solution)}
    _, err = build_and_prove(env, calls, "What is Dan Wu's email?", answer_field="email", initial_db=None,
                             provenance={}, seen=seen)
    assert err and "already does exactly this" in err
    # other calls with the same effect (a search first, then the same answer) are duplicates too
    other = [ToolCall(tool="search_books", arguments={"query": "Emma"}), *calls]
    _, err = build_and_prove(env, other, "What is Dan Wu's email?", answer_field="email", initial_db=None,
                             provenance={}, seen=seen)
    assert err and "already does exactly this" in err
    _, err = build_and_prove(env, calls, "Is dan@example.org the email of Dan Wu?", answer_field="email",
                             initial_db=None, provenance={})
    assert err and "gives its answer away" in err


def test_a_model_that_never_replies_validly_is_a_rejection() -> None:
    env = library_env()
    res = generate_tasks(env, fake_client(["not json"] * 3), n=1, settings=TaskSettings(max_attempts=2))
    assert res.value == [] and "LLM gave no usable reply" in res.rejections[0].reason


def test_long_lists_become_count_questions() -> None:
    from pipeline.ir import Returns, Tool
    from verify.derive import COUNT
    from verify.rows import plan_lookup

    env = library_env()
    listing = Tool(name="list_catalogue", description="List every book in the catalogue.", kind="read",
                   returns=Returns(sql="SELECT id, title FROM books ORDER BY id", mode="all"))
    env = env.model_copy(update={"tools": [*env.tools, listing]})
    with fresh(env) as run:
        lookup = plan_lookup(env, "list_catalogue", 1, run)
    assert lookup is not None and lookup.counts and lookup.answer == "6"
    client = fake_client([{"user_request": "How many books are in the catalogue?"}])
    env = env.model_copy(update={"tools": [t for t in env.tools if t.kind == "write"] + [listing]})
    res = generate_tasks(env, client, n=1)
    (task,) = res.value
    assert task.verifier.answer == "6" and task.metadata["answer_field"] == COUNT
    assert "how many there are of: List every book in the catalogue" in client.requests[0][-1]["content"]
    report = prove(env, task)
    assert report.ok, report.reason()
    assert next(r for r in report.results if r.name == "wrong_answer").ok  # "7" fails
