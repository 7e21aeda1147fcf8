"""Conversations with the real embedded model as both the agent and the simulated user (issue 30).

On the committed example's shortest conversational tasks, one per environment (a library and a pharmacy: two
domains): the 1.5B agent gets only the opening line, the 1.5B user holds the facts. At least one conversation is
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
    items = shortest(example_items())
    assert len(items) == 2
    runs = []
    for it in items:
        a = run_attempt(real_llm, it.env, it.task, initial_db=it.initial_db, stage="eval",
                        settings=AgentSettings(max_turns=8), user=real_llm, user_settings=UserSettings())
        runs.append((it, a))
        print(it.task.task_id, a.passed, a.stop, a.user_turns, a.user_errors)
    for it, a in runs:
        assert a.conversation and a.protocol == "json_action"
        assert a.messages[1]["content"] == script_of(it.env, it.task).opening  # the agent never saw the request
        assert a.user_turns >= 1, a.messages
    assert any(a.passed for _, a in runs), [(it.task.instruction, a.messages[1:]) for it, a in runs]
