"""The checker: code rules flag broken tools whatever the LLM says; LLM claims are checked."""

from __future__ import annotations

from pipeline.ir import Task, ToolCall
from pipeline.llm import fake_client
from tests.fixtures.library import library_env, library_tasks
from tests.verify.envs import broken_library_env, sql_error_library_env
from tests.verify.test_tester import call, finish
from verify.call_review import CheckerSettings, review_attempt, rule_review
from verify.derive import derive_verifier
from verify.tester import run_attempt


def _task(env, calls, instruction="Carla Diaz returned Matilda; please record it.") -> Task:
    d = derive_verifier(env, calls)
    assert d.verifier is not None, d.error
    return Task(task_id=Task.make_id(env.env_id, instruction, list(d.calls), d.verifier), env_id=env.env_id,
                instruction=instruction, tools=[t.openai_schema() for t in env.tools],
                reference_solution=list(d.calls), verifier=d.verifier, kind="update")


def all_pass(n: int, blame: str = "none", fault: str = "none", target: str = "", reason: str = "fine") -> dict:
    return {"calls": [{"verdict": "pass", "reason": "ok"}] * n, "blame": blame, "fault": fault, "target": target,
            "reason": reason}


def test_broken_tool_is_flagged_even_when_the_llm_sees_nothing_wrong() -> None:
    env = broken_library_env()  # return_book has lost its WHERE: it returns every loan
    task = _task(env, [ToolCall(tool="return_book", arguments={"book_id": 4})])
    attempt = run_attempt(fake_client([call("return_book", book_id=4), finish()]), env, task)
    assert attempt.passed  # the verifier was derived from the broken behaviour, so the replay "passes"
    client = fake_client([all_pass(1)])
    review = review_attempt(client, env, task, attempt)
    v = review.verdicts[0]
    assert v.verdict == "fail" and v.source == "rule" and "all 4 rows of loans" in v.reason and "WHERE" in v.reason
    assert review.blame == "environment"
    assert review.fault is not None and (review.fault.kind, review.fault.target, review.fault.source) == ("tool", "return_book", "rule")
    # the LLM saw the tool's SQL, the call, the rows it changed and the rule finding
    prompt = client.requests[0][-1]["content"]
    assert "UPDATE loans SET returned_at = :now" in prompt and "return_book({\"book_id\": 4})" in prompt
    assert "all 4 rows of loans" in prompt
    # the same rule flags the reference solution itself
    _, faults = rule_review(env, list(task.reference_solution))
    assert faults and faults[0].target == "return_book"


def test_the_working_tool_is_not_flagged() -> None:
    env = library_env()
    task = _task(env, [ToolCall(tool="return_book", arguments={"book_id": 4})])
    verdicts, faults = rule_review(env, list(task.reference_solution))
    assert [v.verdict for v in verdicts] == ["pass"] and not faults


def test_internal_sql_error_is_a_tool_fault() -> None:
    env = sql_error_library_env()
    task = library_tasks(library_env())[1]
    attempt = run_attempt(fake_client([call("update_member_email", member_id=1, email="a@b.org"), finish()]), env, task)
    review = review_attempt(None, env, task, attempt)  # rules only
    assert review.verdicts[0].verdict == "fail" and "internal SQL error" in review.verdicts[0].reason
    assert review.fault is not None and review.fault.target == "update_member_email"


def test_clean_errors_and_side_effect_free_reads_pass() -> None:
    env = library_env()
    verdicts, faults = rule_review(env, [
        ToolCall(tool="borrow_book", arguments={"member_id": 1, "book_id": 3}),  # guard: already on loan
        ToolCall(tool="borrow_book", arguments={"member_id": "one", "book_id": 3}),  # validation
        ToolCall(tool="teleport", arguments={}),
        ToolCall(tool="search_books", arguments={"query": "Emma"}),
        ToolCall(tool="update_member_email", arguments={"member_id": 1, "email": "bob@example.org"}),  # UNIQUE
    ])
    assert [v.verdict for v in verdicts] == ["pass", "pass", "pass", "pass", "warning"]
    assert not faults


def _failed_attempt(env):
    task = library_tasks(env)[0]
    return task, run_attempt(fake_client([finish("I cannot do that.")]), env, task)


def test_llm_environment_claims_are_checked() -> None:
    env = library_env()
    task, attempt = _failed_attempt(env)
    assert not attempt.passed
    r = review_attempt(fake_client([all_pass(0, "environment", "missing_tool", "lend", "no lending tool")]), env, task, attempt)
    assert r.blame == "agent" and r.fault is None and any("missing tool" in n for n in r.notes)
    r = review_attempt(fake_client([all_pass(0, "environment", "tool", "warp_drive", "broken")]), env, task, attempt)
    assert r.blame == "agent" and r.fault is None
    r = review_attempt(fake_client([all_pass(0, "environment", "task", "", "the request is ambiguous")]), env, task, attempt)
    assert r.blame == "environment" and r.fault is not None and (r.fault.kind, r.fault.source) == ("task", "llm")
    r = review_attempt(fake_client([all_pass(0, "environment", "task", "", "ambiguous")]), env, task, attempt,
                       settings=CheckerSettings(act_on_llm_faults=False))
    assert r.blame == "agent" and r.fault is None and r.notes
    r = review_attempt(fake_client([all_pass(0, "agent", "none", "", "never called borrow_book")]), env, task, attempt)
    assert r.blame == "agent" and r.reason == "never called borrow_book"


def test_llm_can_only_make_a_verdict_worse() -> None:
    env = library_env()
    task = library_tasks(env)[0]
    attempt = run_attempt(fake_client([call("search_books", query="Brief"), finish()]), env, task)
    reply = {"calls": [{"verdict": "warning", "reason": "result lacks availability"}], "blame": "agent",
             "fault": "none", "target": "", "reason": "stopped early"}
    r = review_attempt(fake_client([reply]), env, task, attempt)
    assert r.verdicts[0].verdict == "warning" and r.verdicts[0].source == "llm"
    client = fake_client([{"calls": [], "blame": "none", "fault": "none", "target": "", "reason": "x"},
                          {"calls": [{"verdict": "pass", "reason": "ok"}], "blame": "agent", "fault": "none",
                           "target": "", "reason": "x"}])
    r = review_attempt(client, env, task, attempt)  # the first reply has the wrong number of verdicts
    assert len(client.requests) == 2 and len(r.verdicts) == 1


def test_a_call_of_a_tool_the_tester_was_not_offered_is_reviewed_as_the_refusal_it_was() -> None:
    """Issue 42: the tester sees its task's tools and a few distractors; a call of another tool was refused with a
    tool error and ran nothing, and the checker's replay must not run it either (Dan Wu would be deleted)."""
    env = library_env()
    task = _task(env, [ToolCall(tool="return_book", arguments={"book_id": 4})])
    attempt = run_attempt(fake_client([call("delete_member", member_id=4), call("return_book", book_id=4), finish()]),
                          env, task)
    assert "delete_member" not in attempt.offered and "return_book" in attempt.offered
    assert not attempt.steps[0].response["ok"] and not attempt.steps[0].changes and attempt.passed
    review = review_attempt(None, env, task, attempt)
    assert [(v.tool, v.verdict) for v in review.verdicts] == [("delete_member", "pass"), ("return_book", "pass")]
    assert "unknown tool" in review.verdicts[0].reason and review.blame == "none"
