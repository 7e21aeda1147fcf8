"""Conversations with the real embedded model as both the agent and the simulated user (issue 30).

On the committed example's shortest conversational tasks, one per environment (a pharmacy and a library: two
domains, tried in turn): the 1.5B agent gets only the opening line, the 1.5B user holds the facts. A conversation is
solved (state-based reward, and the answer said to the user), and every user turn was checked by code (its errors
are recorded apart from the agent's). The replies go to a fresh cache (the session's ``real_llm``): the model
really runs.
"""

from __future__ import annotations

import pytest

from tests.eval.test_eval import example_items
from verify.agent import AgentSettings, run_attempt
from verify.conversation import UserSettings, script_of

pytestmark = pytest.mark.real_llm


def shortest(items: list, n_per_env: int = 1) -> list:
    """Per environment, the tasks with the fewest calls and facts (a question first: the agent must say it)."""
    out = []
    for env_id in sorted({it.env.env_id for it in items}):
        mine = [it for it in items if it.env.env_id == env_id and script_of(it.env, it.task).facts]
        mine.sort(key=lambda it: (len(it.task.reference_solution) + len(script_of(it.env, it.task).facts),
                                  it.task.verifier.answer is None, it.task.task_id))
        out += mine[:n_per_env]
    return out


def test_embedded_agent_and_user_solve_a_conversation(real_llm) -> None:
    """The environments in turn (the pharmacy first: its shortest task was solved when measured, 2026-11-26, 250 s,
    the agent answering without asking; the library's agent looped on a listing without asking, 336 s) until one
    conversation is solved."""
    items = sorted(shortest(example_items()), key=lambda it: "pharmacy" not in it.env.env_id)
    assert len(items) == 2
    runs = []
    for it in items:
        a = run_attempt(real_llm, it.env, it.task, initial_db=it.initial_db, stage="eval",
                        settings=AgentSettings(max_turns=8), user=real_llm, user_settings=UserSettings())
        runs.append((it, a))
        print(it.task.task_id, a.passed, a.stop, a.user_turns, a.user_errors)
        assert a.conversation and a.protocol == "json_action"
        assert a.messages[1]["content"] == script_of(it.env, it.task).opening  # the agent never saw the request
        if a.passed:
            break
    solved = [(it, a) for it, a in runs if a.passed]
    assert solved, [(it.task.instruction, a.messages[1:]) for it, a in runs]
    for _, a in solved:  # the user took part and ended the conversation (the 1.5B agent may not have asked: README)
        assert a.user_turns >= 1 and a.stop == "user_stop", a.messages
        assert all(e["kind"] in ("leak", "invented", "tool_or_id", "early_stop", "empty", "no_stop")
                   for e in a.user_errors)


class _Openings:
    """The opening lines from the real model, everything else (the wording of requests) from a scripted fake that
    the tasks stage's template fallback replaces: one real-model call per task, no more."""

    def __init__(self, real, fake):
        self.real, self.fake = real, fake

    def structured_reply(self, model, messages, *, stage, max_tokens=1024):
        return (self.real if stage == "conversation" else self.fake).structured_reply(
            model, messages, stage=stage, max_tokens=max_tokens)


def test_real_model_writes_opening_lines_on_a_domain_outside_the_example(real_llm) -> None:
    """``[stages.tasks] conversations`` on the brewery (not the example's domains): each task's opening line is
    the model's or, when its replies state the request's values or speak as the desk, code's; either way the line
    states no fact of the task, and the facts hold every value the request states."""
    from pipeline.llm import fake_client
    from pipeline.settings import TaskSettings
    from pipeline.stages.tasks.bank import generate_tasks
    from tests.fixtures.brewery import brewery_env
    from verify.conversation import check_turn, says

    env = brewery_env()
    client = _Openings(real_llm, fake_client([{"user_request": "no"}] * 200))
    tasks = generate_tasks(env, client, settings=TaskSettings(n_tasks=3, max_attempts=1, conversations=True)).value
    assert tasks
    for t in tasks:
        conv = t.metadata["conversation"]
        script = script_of(env, t)
        print(conv["worded_by"], repr(conv["opening"]), [(f.label, f.value) for f in script.facts])
        assert conv["worded_by"] in ("llm", "code") and conv["opening"]
        assert not check_turn(script, env, [], [], conv["opening"], False, 0)
        assert all(says(t.instruction, f.value) for f in script.facts)
