"""The LangGraph subgraph: proofs, tester, checker, and the bounded fix loop as edges."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from pipeline.graph.task import VerifyDeps, build_verify_graph, verify_task
from pipeline.ir import Assertion, ToolCall, Verifier
from pipeline.llm import fake_client
from pipeline.stages.tasks.bank import rederive_task, revise_task
from tests.fixtures.library import library_env, library_tasks
from tests.verify.envs import broken_library_env
from tests.verify.test_call_review import _task, all_pass
from tests.verify.test_tester import call, finish
from verify import tester

ONE = tester.TesterSettings(attempts=1)


def _deps(client, **kw) -> VerifyDeps:
    return VerifyDeps(
        client=client, tester=ONE,
        fix_task=lambda e, t, problem: revise_task(e, t, problem, client),
        rederive=lambda e, t: rederive_task(e, t),
        **kw,
    )


SOLVE_DAN = [call("find_member_by_name", name="Dan"), call("search_books", query="Brief History"),
             call("borrow_book", member_id=4, book_id=2, days=7), finish("Recorded.")]


def test_a_verifier_that_holds_initially_is_caught_and_derived_again() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    weak = task.model_copy(update={"verifier": Verifier(
        assertions=[Assertion(sql="SELECT COUNT(*) FROM members", expect=4)], mutable_tables=["loans"])})
    # no fix rounds: rejected with the proof's reason, and no LLM call at all
    client = fake_client([])
    out = verify_task(env, weak, _deps(client, fix_rounds=0))
    assert out.status == "rejected" and "initial_state" in out.reason and "already holds" in out.reason
    assert client.requests == [] and out.attempts == []
    # with a fix round: back to the task agent, which derives the verifier from the reference
    client = fake_client([*SOLVE_DAN, all_pass(3)])
    out = verify_task(env, weak, _deps(client))
    assert out.status == "accepted", out.reason
    assert out.history[0]["proofs_ok"] is False and out.history[0]["fix"] == "task"
    assert "derived again" in out.history[0]["fix_result"]
    assert out.proofs is not None and out.proofs.ok
    assert any("due_date" in a.sql for a in out.task.verifier.assertions)
    assert out.task.difficulty.attempts == 1 and out.task.difficulty.passes == 1


def test_task_fault_goes_back_to_the_task_agent_and_is_retested() -> None:
    env = library_env()
    task = _task(env, [ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 2, "days": 7})],
                 instruction="Dan Wu wants A Brief History of Time for 7 days.")
    new = "Please lend 'A Brief History of Time' to our member Dan Wu for 7 days."
    client = fake_client([
        finish("What should I do?"),  # tester, round 0
        all_pass(0, "environment", "task", "", "the request does not say to record a loan"),  # checker
        {"user_request": new},  # task agent rewording
        *SOLVE_DAN, all_pass(3),  # tester + checker, round 1
    ])
    out = verify_task(env, task, _deps(client))
    assert out.status == "accepted" and out.task.instruction == new
    assert [h["round"] for h in out.history] == [0, 1]
    assert out.history[0]["fix"] == "task" and out.history[0]["passes"] == 0
    assert out.history[0]["fault"]["kind"] == "task" and out.history[1]["passes"] == 1
    assert out.task.provenance["revised"] == 1
    revise_prompt = client.requests[2][-1]["content"]
    assert "does not say to record a loan" in revise_prompt and "borrow_book(" in revise_prompt


def test_broken_tool_is_repaired_by_the_tool_fixer() -> None:
    broken = broken_library_env()
    task = _task(broken, [ToolCall(tool="return_book", arguments={"book_id": 4})])
    repairs = []

    def fix_tool(env, fault):
        repairs.append(fault)
        return library_env()

    client = fake_client([call("return_book", book_id=4), finish(), all_pass(1)])
    out = verify_task(broken, task, _deps(client, fix_tool=fix_tool))
    assert repairs and repairs[0].target == "return_book" and repairs[0].source == "rule"
    assert out.status == "accepted" and out.env_changed and out.env.env_id == library_env().env_id
    assert out.history[0]["fix"] == "tool" and out.task.env_id == out.env.env_id
    changed = [a for a in out.task.verifier.assertions if "returned_at" in a.sql and "WHERE" in a.sql]
    assert changed and '"id" = 3' in changed[0].sql  # only Carla's loan of Matilda now


def test_broken_tool_without_a_fixer_rejects_the_task() -> None:
    broken = broken_library_env()
    task = _task(broken, [ToolCall(tool="return_book", arguments={"book_id": 4})])
    client = fake_client([call("return_book", book_id=4), finish(), all_pass(1)])
    out = verify_task(broken, task, _deps(client))
    assert out.status == "rejected" and "return_book" in out.reason and "WHERE" in out.reason
    assert out.reviews[0].fault is not None and out.reviews[0].fault.source == "rule"


def test_fix_rounds_are_bounded() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    blame = all_pass(0, "environment", "task", "", "unclear")
    rewordings = ["Dan Wu would like to borrow A Brief History of Time for 7 days.",
                  "Lend A Brief History of Time to Dan Wu for 7 days, please."]
    client = fake_client([finish("?"), blame, {"user_request": rewordings[0]}, finish("?"), blame,
                          {"user_request": rewordings[1]}, finish("?"), blame])
    out = verify_task(env, task, _deps(client, fix_rounds=2))
    assert [h["round"] for h in out.history] == [0, 1, 2]
    assert out.status == "accepted" and out.task.difficulty.passes == 0  # flagged by the LLM only: kept, tagged
    assert "checker flag left" in out.reason and out.task.metadata["hard_pool"] is True
    assert client.remaining == []


def test_subgraph_runs_with_a_checkpointer() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    deps = _deps(fake_client([*SOLVE_DAN, all_pass(3)]))
    graph = build_verify_graph(deps, checkpointer=InMemorySaver())
    out = verify_task(env, task, deps, graph=graph, config={"configurable": {"thread_id": task.task_id}})
    assert out.status == "accepted"
    state = graph.get_state({"configurable": {"thread_id": task.task_id}})
    assert state.values["proofs"].ok and len(state.values["attempts"]) == 1


def test_data_fault_goes_to_the_data_fixer_and_never_falls_back_to_rewording() -> None:
    env = library_env()
    task = _task(env, [ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 2, "days": 7})],
                 instruction="Dan Wu wants A Brief History of Time for 7 days.")
    blamed = []

    def cannot(e, fault):
        blamed.append(fault)
        return None

    client = fake_client([
        finish("What should I do?"),
        all_pass(0, "environment", "data", "members", "the data has no member called Dan Wu"),
    ])
    out = verify_task(env, task, _deps(client, fix_data=cannot))
    assert blamed and blamed[0].kind == "data" and blamed[0].target == "members"
    assert out.history[0]["fix"] == "data" and "could not repair members" in out.history[0]["fix_result"]
    assert out.status == "accepted" and out.task.instruction == task.instruction and not out.env_changed
    assert out.task.metadata["hard_pool"] is True and out.task.difficulty.passes == 0
    assert len(client.requests) == 2 and client.remaining == []  # no rewording was asked for
    # without a data fixer the fault is only reported: the task goes to the hard pool as it is
    client = fake_client([finish("?"), all_pass(0, "environment", "data", "members", "no Dan Wu")])
    out = verify_task(env, task, _deps(client))
    assert out.task.metadata["hard_pool"] is True and [h["fix"] for h in out.history] == [None]

    def rewrite(e, fault):  # a data fixer that returns new seed data: the task is derived again on it
        return e.model_copy(update={"seed": [s if s.table != "books" else s.model_copy(update={
            "rows": [{**r, "year": r["year"] + 1} for r in s.rows]}) for s in e.seed]})

    client = fake_client([
        finish("What should I do?"),
        all_pass(0, "environment", "data", "books", "the years are those of the first editions"),
        *SOLVE_DAN, all_pass(3),
    ])
    out = verify_task(env, task, _deps(client, fix_data=rewrite))
    assert out.history[0]["fix"] == "data" and out.env_changed and out.env.env_id != env.env_id
    assert out.task.env_id == out.env.env_id and out.task.metadata["hard_pool"] is False


def test_a_solvable_task_nobody_solved_goes_to_the_hard_pool_unreworded() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([finish("I could not."), finish("No idea."),
                          all_pass(0, "agent", "none", "", "never borrowed the book"), all_pass(0, "agent")])
    deps = _deps(client)
    out = verify_task(env, task, VerifyDeps(**{**deps.__dict__, "tester": tester.TesterSettings(attempts=2)}))
    assert out.status == "accepted" and out.task.instruction == task.instruction
    assert out.task.difficulty.model_dump() == {"attempts": 2, "passes": 0} and out.task.metadata["hard_pool"] is True
    assert [h["fix"] for h in out.history] == [None] and len(client.requests) == 4


def test_conversational_attempts_give_a_conversation_difficulty_apart_from_the_checker() -> None:
    """``tester.conversations``: after the tester's attempts, the task's conversational form against the simulated
    user (here the same scripted client): the agent asks, the user answers, the agent solves, the user ends; the
    pass rate goes to ``metadata.conversation_difficulty``, the checker reviews only the tester's attempts."""
    env = library_env()
    task = library_tasks(env)[0]
    client = fake_client([
        *SOLVE_DAN,                                              # the tester's attempt
        finish("Who is the member, which book, and for how many days?"),  # the conversation: the agent asks
        finish("Dan Wu, the book Brief History, for 7 days."),   # the user answers what it was asked
        *SOLVE_DAN[:3], finish("Recorded."),                     # the agent solves
        finish("Thank you! ###STOP###"),                         # the user ends
        all_pass(3),                                             # the checker, on the tester's attempt only
    ])
    settings = tester.TesterSettings(attempts=1, conversations=1)
    out = verify_task(env, task, VerifyDeps(**{**_deps(client).__dict__, "tester": settings}))
    assert out.status == "accepted", out.reason
    assert out.task.difficulty.attempts == 1 and len(out.reviews) == 1
    assert [a.passed for a in out.talks] == [True] and out.talks[0].stop == "user_stop"
    assert out.talks[0].user_turns == 2 and out.talks[0].user_errors == []
    assert out.task.metadata["conversation_difficulty"] == {"attempts": 1, "passes": 1, "pass_rate": 1.0,
                                                            "user_error_attempts": 0, "user_turns": 2}
    # the agent never saw the request: its first message was the opening line
    talk = out.talks[0].messages
    assert talk[1]["content"].startswith("Hello") and "Dan Wu" not in talk[1]["content"]
