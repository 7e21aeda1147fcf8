"""The tester (the eval harness of verify/agent.py, k times) with a scripted fake LLM at the HTTP layer:
native tool calls in, tool messages out; the real client, real tools, real SQLite.

``call`` and ``finish`` script one model reply each (an assistant message with one tool call, or a final
text answer); other verify tests use them too."""

from __future__ import annotations

import json
from itertools import count

import httpx
import pytest

from pipeline.llm import LLMUnavailable, fake_client
from tests.fixtures.library import library_env, library_tasks
from verify import tester
from verify.agent import AgentSettings, turn_model
from verify.agent import run_attempt as agent_attempt
from verify.tester import run_attempt, run_attempts

_ids = count(1)


def _reply(message: dict) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                     "message": {"role": "assistant", **message}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def call(tool: str, thought: str = "", _raw: str | None = None, **arguments) -> httpx.Response:
    """A reply calling ``tool`` natively (``_raw``: the argument text exactly as sent)."""
    args = _raw if _raw is not None else json.dumps(arguments)
    return _reply({"content": thought, "tool_calls": [
        {"id": f"call_{next(_ids)}", "type": "function", "function": {"name": tool, "arguments": args}}]})


def finish(answer: str = "Done.") -> httpx.Response:
    """A reply without a tool call: the final answer."""
    return _reply({"content": answer})


def _text(requests) -> str:
    return "\n".join(str(m.get("content")) for msgs in requests for m in msgs)


def test_tester_solves_a_task_through_native_tool_calls() -> None:
    env = library_env()
    task = library_tasks(env)[0]  # Dan Wu borrows 'A Brief History of Time' for 7 days
    client = fake_client([
        call("find_member_by_name", name="Dan Wu"),
        call("search_books", query="Brief History"),
        call("borrow_book", member_id=4, book_id=2, days=7),
        finish("The loan is recorded."),
    ])
    a = run_attempt(client, env, task)
    assert a.passed and a.reward == 1.0 and a.stop == "answer" and a.final_answer == "The loan is recorded."
    assert a.turns == 4 and a.tool_calls == 3 and a.protocol == "native"
    assert [s.tool for s in a.steps] == ["find_member_by_name", "search_books", "borrow_book"]
    assert a.steps[0].response["result"][0]["name"] == "Dan Wu"
    assert a.steps[2].changes[0]["op"] == "insert" and a.steps[2].changes[0]["table"] == "loans"
    body = client.bodies[0]
    # the task's tools and its level's distractors (verify.difficulty.offered_tools), in the environment's order
    assert [t["function"]["name"] for t in body["tools"]] == a.offered and body["tool_choice"] == "auto"
    assert {c.tool for c in task.reference_solution} < set(a.offered) < {t.name for t in env.tools}
    # each result went back as a tool message answering its call, whole
    second = client.requests[1]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "find_member_by_name"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    assert json.loads(second[-1]["content"]) == a.steps[0].response
    seen = _text(client.requests)
    assert task.instruction in seen
    for assertion in task.verifier.assertions:  # never the verifier
        assert assertion.sql not in seen
    assert a.messages[-1] == {"role": "assistant", "content": "The loan is recorded."}


def test_a_wrong_attempt_fails_and_keeps_its_trajectory() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    a = run_attempt(fake_client([call("borrow_book", member_id=4, book_id=2), finish()]), env, task)  # forgot days
    assert not a.passed and a.reward == 0.0 and any("due_date" in f for f in a.failures)
    assert a.steps[0].response["ok"]


def test_bad_calls_come_back_as_tool_errors_not_exceptions() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([
        call("fly_to_moon"),                                      # unknown tool
        call("borrow_book", _raw='{"member_id": 4, "book_id": '),  # not JSON
        call("borrow_book", _raw='[4, 2, 7]'),                     # not an object
        call("borrow_book", member_id="four", book_id=2, days=7),  # schema violation
        call("borrow_book", member_id=4, book_id=2, days=7),
        finish(),
    ])
    a = run_attempt(client, env, task, settings=tester.TesterSettings(max_turns=8))
    assert a.passed and a.tool_calls == 5
    errors = [s.response for s in a.steps[:4]]
    assert all(not e["ok"] for e in errors)
    assert "fly_to_moon" in errors[0]["error"] and "available" in errors[0]["error"]
    assert "not valid JSON" in errors[1]["error"] and "borrow_book" in errors[1]["error"]
    assert "must be a JSON object" in errors[2]["error"]
    assert errors[3]["parameter"] == "member_id"
    tool_msgs = [m for m in client.requests[-1] if m["role"] == "tool"]
    assert [json.loads(m["content"]) for m in tool_msgs[:4]] == errors  # the model saw each error


def test_turn_limit_loop_and_endpoint_failures() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([call("find_member_by_name", name="Dan")] * 2)
    a = run_attempt(client, env, task, settings=tester.TesterSettings(max_turns=2))
    assert a.stop == "max_turns" and not a.passed and len(a.steps) == 1 and a.turns == 2
    last = client.bodies[1]
    assert "last reply" in last["messages"][-1]["content"] and last["tool_choice"] == "none"
    a = run_attempt(fake_client([call("find_member_by_name", name="Dan")] * 3), env, task)
    assert a.stop == "loop" and len(a.steps) == 3
    with pytest.raises(LLMUnavailable):  # the tester raises: an endpoint failure is not the task's fault
        run_attempt(fake_client([]), env, task)
    a = agent_attempt(fake_client([]), env, task, stage="eval")  # eval records it on the attempt
    assert a.stop == "endpoint_error" and a.endpoint_fault and "400" in (a.error or "") and not a.passed


def test_later_attempts_sample_with_their_own_seed_and_k_defaults_to_4() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    assert tester.TesterSettings().attempts == 4
    client = fake_client([finish("no idea")])
    a = run_attempt(client, env, task, attempt=3, settings=tester.TesterSettings(temperature=0.9))
    assert a.attempt == 3 and not a.passed
    body = client.bodies[0]
    assert body["temperature"] == 0.9 and body["seed"] == client.settings.seed + 2
    assert client.usage.by_stage()["tester"]["calls"] == 1  # accounted on the shared ledger
    attempts = run_attempts(fake_client([finish()] * 4), env, task)
    assert [x.attempt for x in attempts] == [1, 2, 3, 4]


def test_the_tester_can_use_its_own_endpoint() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    generator = fake_client([])
    settings = tester.TesterSettings(base_url="http://127.0.0.1:9/v1", model="other", attempts=1)
    tc = tester.tester_client(generator, settings)
    assert tc is not generator and tc.model == "other" and tc.base_url == "http://127.0.0.1:9/v1"
    assert tc.usage is generator.usage and tester.tester_client(generator, settings) is tc
    assert tester.tester_client(generator, tester.TesterSettings()) is generator
    with pytest.raises(ValueError, match="model"):
        tester.tester_client(generator, tester.TesterSettings(base_url="http://127.0.0.1:9/v1"))
    assert "api_key" not in tester.TesterSettings(api_key="sk-secret").model_dump()
    del task


def test_cached_replies_replay_the_same_attempt(tmp_path) -> None:
    env = library_env()
    task = library_tasks(env)[0]
    script = [call("borrow_book", member_id=4, book_id=2, days=7), finish()]
    first = run_attempt(fake_client(list(script), cache_path=tmp_path / "c.sqlite"), env, task)
    again = fake_client([], cache_path=tmp_path / "c.sqlite")  # nothing scripted: every reply from the cache
    second = run_attempt(again, env, task)
    assert first.passed and second.passed and again.usage.total()["cached"] == 2
    assert [s.model_dump() for s in first.steps] == [s.model_dump() for s in second.steps]


def test_text_tool_calls_of_a_template_server_are_read_back() -> None:
    """llama-cpp-python's server renders tools with the model's own template and leaves Qwen's
    <tool_call> blocks in the text: they are parsed into calls."""
    env = library_env()
    task = library_tasks(env)[0]
    text = '<tool_call>\n{"name": "borrow_book", "arguments": {"member_id": 4, "book_id": 2, "days": 7}}\n</tool_call>'
    client = fake_client([_reply({"content": text}), finish()])
    a = run_attempt(client, env, task)
    assert a.passed and a.steps[0].tool == "borrow_book"
    sent = client.requests[1][-2]
    assert sent["tool_calls"][0]["function"]["name"] == "borrow_book" and sent["content"] == ""


def test_context_budget_cuts_old_results_only_when_set() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    script = [call("list_members"), call("search_books", query=""), finish()]
    whole = agent_attempt(fake_client(list(script)), env, task)
    assert not any(s.truncated for s in whole.steps)
    assert [m for m in whole.messages if m["role"] == "tool"][0]["content"] == json.dumps(
        whole.steps[0].response, ensure_ascii=False)
    client = fake_client(list(script))
    cut = agent_attempt(client, env, task, settings=AgentSettings(context_budget=600))
    assert cut.steps[0].truncated and "cut to fit the context budget" in client.requests[-1][3]["content"]


def test_json_action_fallback_still_works() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([
        {"thought": "lend", "action": {"tool": "borrow_book", "arguments": {"member_id": 4, "book_id": 2, "days": 7}}},
        {"thought": "done", "action": {"final_answer": "Recorded."}},
    ])
    a = run_attempt(client, env, task, settings=tester.TesterSettings(protocol="json_action"))
    assert a.passed and a.protocol == "json_action" and a.final_answer == "Recorded."
    assert "tools" not in client.bodies[0] and "borrow_book(" in client.requests[0][0]["content"]
    schema = json.dumps(turn_model(env).model_json_schema())
    assert "borrow_book" in schema and "final_answer" in schema and "maxLength" in schema


# ---------------------------------------------------------------- what the tester is offered (issue 42)


def _paged_library():
    """The library with ``list_loans_for_member`` paged as the build pages listers (``pipeline.dbmodel.paging``)."""
    from pipeline.dbmodel.paging import page_tool
    from pipeline.runtime.replay import fresh

    env = library_env()
    with fresh(env) as run:
        paged = page_tool(env.tool("list_loans_for_member"), run.inst.conn)
    assert paged is not None
    return env.model_copy(update={"tools": [paged if t.name == paged.name else t for t in env.tools]})


def test_the_tester_is_offered_the_tasks_tools_and_its_levels_distractors() -> None:
    from verify.difficulty import offered_tools, task_level

    env = library_env()
    lend, two = library_tasks(env)
    order = [t.name for t in env.tools]
    assert task_level(env, lend) == 2 and task_level(env, two) == 4  # a short chain; two writes
    offered = offered_tools(env, lend)
    needed = {c.tool for c in lend.reference_solution}
    assert needed < set(offered) and len(offered) == len(needed) + 2  # level 2: two distractors
    assert offered == sorted(offered, key=order.index) and offered == offered_tools(env, lend)  # env order, stable
    assert offered_tools(env, two) == order  # level 4 wants 8 distractors: this env has 7 others
    client = fake_client([call("find_member_by_name", name="Dan Wu"), call("search_books", query="Brief History"),
                          call("borrow_book", member_id=4, book_id=2, days=7), finish("Recorded.")])
    a = run_attempt(client, env, lend)
    assert a.passed and a.offered == offered
    assert all([t["function"]["name"] for t in body["tools"]] == offered for body in client.bodies)
    # a task offering a subset already (a sampled task) keeps it; one that must refuse part of it sees every tool
    sampled = lend.model_copy(update={"tools": [t.openai_schema() for t in env.tools if t.name in needed]})
    assert offered_tools(env, sampled) == [n for n in order if n in needed]
    refuse = lend.model_copy(update={"metadata": {"rules": [{"tool": "delete_member", "verdict": "forbids"}]}})
    assert task_level(env, refuse) == 5 and offered_tools(env, refuse) == order
    bound = lend.model_copy(update={"metadata": {"rules": [{"tool": "borrow_book", "verdict": "allows"}]}})
    assert task_level(env, bound) == 3 and len(offered_tools(env, bound)) == 3 + 4


def test_a_task_is_tested_with_its_tools_and_at_most_two_distractors_eight_at_level_5() -> None:
    from verify.difficulty import offered_tools, task_level

    env = library_env()
    env = env.model_copy(update={"tools": [*env.tools, *(t.model_copy(update={"name": f"{t.name}_{i}"})
                                                         for i in range(2) for t in env.tools)]})
    order = [t.name for t in env.tools]
    lend, two = library_tasks(env)
    refuse = lend.model_copy(update={"metadata": {"rules": [{"tool": "delete_member", "verdict": "forbids"}]}})
    bound = lend.model_copy(update={"metadata": {"rules": [{"tool": "borrow_book", "verdict": "allows"}]}})
    assert task_level(env, refuse) == 5 and offered_tools(env, refuse) == order  # the sampler's ladder: every tool
    assert task_level(env, two) == 4 and len(offered_tools(env, two)) == len({c.tool for c in two.reference_solution}) + 8
    assert task_level(env, bound) == 3 and len(offered_tools(env, bound)) == 3 + 4
    for task, rule_tools, most in ((refuse, {"delete_member"}, 8), (two, set(), 2), (bound, {"borrow_book"}, 2),
                                   (lend, set(), 2)):
        needed = {c.tool for c in task.reference_solution} | rule_tools
        names = tester.view_of(env, task).names
        assert names is not None and needed <= set(names)  # the tools it needs and the write its rule judges, always
        assert len(names) == len(needed) + most, task_level(env, task)  # level 5: 8; levels 3 and 4: 2, not 4 or 8
        assert names == sorted(names, key=order.index) and names == tester.view_of(env, task).names  # stable
    names = tester.view_of(env, refuse).names
    other = refuse.model_copy(update={"task_id": "t_other"})  # drawn by the task's id, as the sampler draws
    assert tester.view_of(env, other).names != names and set(names) & {"delete_member"} <= set(
        tester.view_of(env, other).names or [])
    # level 2 keeps the ladder's own draw; a task offering a subset keeps it; a level-1 task gets none; a level-5 task
    # of an environment with at most 8 other tools sees them all
    small = library_env()
    assert tester.view_of(small, refuse).names == [t.name for t in small.tools]
    assert tester.view_of(env, lend).names == offered_tools(env, lend)
    needed = {c.tool for c in refuse.reference_solution} | {"delete_member"}
    sampled = refuse.model_copy(update={"tools": [t.openai_schema() for t in env.tools if t.name in needed]})
    assert tester.view_of(env, sampled).names == [n for n in order if n in needed]
    one = lend.model_copy(update={"reference_solution": lend.reference_solution[-1:], "metadata": {}})
    assert task_level(env, one) == 1 and tester.view_of(env, one).names == [one.reference_solution[0].tool]
    # the attempt is offered exactly those tools (in its system prompt, and in its action grammar)
    client = fake_client([{"thought": "no", "action": {"final_answer": "I cannot delete members."}}])
    a = run_attempt(client, env, refuse, settings=tester.TesterSettings(protocol="json_action"))
    assert a.offered == names
    prompt = client.requests[0][0]["content"].split("Tools:")[1]
    assert [n for n in order if f"- {n}(" in prompt] == names


def test_json_action_prompts_share_their_prefix_and_pages_come_short_and_compact() -> None:
    from verify.agent import TESTER_PAGE, View, json_system

    env = _paged_library()
    lend, two = library_tasks(env)
    listing = {"tool": "list_loans_for_member", "arguments": {"member_id": 3, "status": None, "limit": None,
                                                              "offset": None}}
    settings = AgentSettings(protocol="json_action")
    client = fake_client([{"thought": "look", "action": listing}, {"thought": "done", "action": {"final_answer": "x"}},
                          {"thought": "look", "action": listing}])
    view = View(names=[t.name for t in env.tools], page=5)
    a = agent_attempt(client, env, lend, settings=settings, view=view)
    # the harness gave the call the view's page; the model saw the rows once each, as columns and rows
    assert a.steps[0].arguments == {"member_id": 3, "limit": 5}
    assert len(a.steps[0].response["result"]) == 2
    shown = client.requests[1][-1]["content"]
    assert shown.startswith("Result of list_loans_for_member: ")
    body = json.loads(shown.split(": ", 1)[1])
    assert body["total_matched"] == 2 and body["columns"][:2] == ["id", "book_id"] and len(body["rows"]) == 2
    assert "total_matched" not in body["columns"] and shown.count("total_matched") == 1
    assert [dict(zip(body["columns"], r, strict=True)) for r in body["rows"]] == [
        {k: v for k, v in row.items() if k != "total_matched"} for row in a.steps[0].response["result"]]
    # a page of one row: the count says there is more
    one = agent_attempt(fake_client([{"thought": "look", "action": listing}, {"thought": "d", "action": {
        "final_answer": "x"}}]), env, lend, settings=settings, view=View(page=1))
    assert len(one.steps[0].response["result"]) == 1 and one.steps[0].response["result"][0]["total_matched"] == 2
    schema = json.dumps(turn_model(env, view=View(page=TESTER_PAGE)).model_json_schema())
    assert f'"maximum": {TESTER_PAGE}' in schema
    # the system prompt: instructions, then the tools offered; the first turn of every task starts the same way,
    # and every turn of an attempt repeats the prompt before it
    first = client.requests[0]
    assert first[0]["content"] == json_system(env, view, settings.max_turns)
    assert client.requests[1][:2] == first[:2] and first[1] == {"role": "user", "content": lend.instruction}
    other = json_system(env, View(names=["get_book"]), settings.max_turns)
    head = other.split("Tools:")[0]
    assert first[0]["content"].startswith(head) and "get_book(" in other and "borrow_book(" not in other
    # compact specs: no note of the page parameters, short notes kept
    assert "How many matching rows" not in first[0]["content"] and "(Which loans)" in first[0]["content"]
    del two


def test_the_tester_pages_its_listers_at_its_page_and_refuses_tools_it_was_not_offered() -> None:
    from verify.agent import TESTER_PAGE

    env = _paged_library()
    lend = library_tasks(env)[0]
    mine = ["find_member_by_name", "list_loans_for_member", "search_books", "borrow_book"]
    task = lend.model_copy(update={"tools": [t.openai_schema() for t in env.tools if t.name in mine]})
    client = fake_client([call("list_loans_for_member", member_id=3), call("delete_member", member_id=3),
                          finish("no")])
    a = run_attempt(client, env, task)
    assert a.offered == [t.name for t in env.tools if t.name in mine]
    assert a.steps[0].arguments == {"member_id": 3, "limit": TESTER_PAGE}  # native: the same page
    offered = {t["function"]["name"]: t for t in client.bodies[0]["tools"]}
    assert offered["list_loans_for_member"]["function"]["parameters"]["properties"]["limit"]["maximum"] == \
        TESTER_PAGE
    refused = a.steps[1].response
    assert not refused["ok"] and "delete_member" in refused["error"] and "borrow_book" in refused["error"]
    assert not a.steps[1].changes  # never run
