"""Tasks verified ahead of their turn (``pipeline.graph.ahead``): a result is taken only for the same inputs,
computed again otherwise, and an error is raised where the serial step would raise it."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from pipeline.graph.ahead import Ahead


@dataclass
class Env:
    env_id: str


@dataclass
class Task:
    text: str

    def model_dump(self, mode: str = "json") -> dict[str, str]:
        return {"text": self.text}


class RemoteClient:
    prefetches = True
    parallelism = 4


class Counter:
    def __init__(self, fail: set[str] = frozenset()):  # type: ignore[assignment]
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.fail = fail

    def fn(self, env: Env):
        def verify(task: Task) -> tuple[str, str]:
            with self.lock:
                self.calls.append((env.env_id, task.text))
            if task.text in self.fail:
                raise ValueError(f"cannot verify {task.text}")
            return (env.env_id, task.text)
        return verify


def test_a_task_verified_ahead_is_taken_once_not_computed_again():
    a, c = Ahead(RemoteClient()), Counter()
    env = Env("e1")
    later = [Task("t2"), Task("t3")]
    a.start(env, None, later, c.fn(env))
    assert a.take(env, None, Task("t2"), c.fn(env)) == ("e1", "t2")
    assert a.take(env, None, Task("t3"), c.fn(env)) == ("e1", "t3")
    a.close()
    assert sorted(c.calls) == [("e1", "t2"), ("e1", "t3")]  # each once, in the background


def test_other_inputs_are_computed_at_their_turn():
    a, c = Ahead(RemoteClient()), Counter()
    old, new = Env("e1"), Env("e2")  # an earlier task's fix repaired the environment
    a.start(old, None, [Task("t2")], c.fn(old))
    assert a.take(new, None, Task("t2"), c.fn(new)) == ("e2", "t2")
    assert a.take(old, "other.db", Task("t2"), c.fn(old)) == ("e1", "t2")  # another initial database
    a.close()
    assert ("e2", "t2") in c.calls and c.calls.count(("e1", "t2")) in (1, 2)


def test_an_error_ahead_is_raised_when_the_task_is_reached():
    a, c = Ahead(RemoteClient()), Counter(fail={"t3"})
    env = Env("e1")
    a.start(env, None, [Task("t2"), Task("t3")], c.fn(env))
    assert a.take(env, None, Task("t2"), c.fn(env)) == ("e1", "t2")
    with pytest.raises(ValueError, match="cannot verify t3"):
        a.take(env, None, Task("t3"), c.fn(env))
    a.close()


def test_a_client_that_does_not_send_ahead_verifies_each_task_at_its_turn():
    class Local:
        prefetches = False

    a, c = Ahead(Local()), Counter()
    env = Env("e1")
    a.start(env, None, [Task("t2")], c.fn(env))
    assert c.calls == []
    assert a.take(env, None, Task("t2"), c.fn(env)) == ("e1", "t2")
    assert c.calls == [("e1", "t2")]
