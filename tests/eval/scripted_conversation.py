"""Scripted policies for conversations, served by :mod:`tests.eval.scripted_server` (real HTTP on loopback).

Agents (each bound to the task it is run on, as a person is to the request in front of them):

* :class:`Asker` asks the user for each fact of the task's conversational form, one question per turn, then
  replays the reference solution with the values the user gave, then says the reference answer when every call
  succeeded;
* :class:`Asker` with ``asks=False`` never asks: a stated argument the user did not give is sent as "unknown", and
  having sent one it cannot say an answer.

Users (functions of the conversation only, as a model is: they read their facts from the system prompt that
``verify.conversation.user_system`` renders):

* :func:`scripted_user` answers the question it is asked with the one fact that fits it best, says it does not
  know anything else, and ends the conversation (``###STOP###``) when the agent says something that is not a
  question;
* :func:`leaky_user` gives every fact in its first reply, asked or not, then behaves like the scripted user.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline.ir import Task
from tests.eval.scripted_server import say_answer, tool_results
from verify.conversation import STOP, Fact, Script, _words, parse_fact, says


def _texts(body: dict[str, Any], role: str) -> list[str]:
    return [m.get("content") or "" for m in body["messages"] if m["role"] == role]


class Asker:
    def __init__(self, task: Task, script: Script, asks: bool = True):
        self.task, self.script, self.asks = task, script, asks

    def question(self, f: Fact) -> str:
        return f"What is the {f.label}" + (f" of the {f.about}" if f.about else "") + "?"

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        heard = " ".join(_texts(body, "user"))
        asked = _texts(body, "assistant")
        if self.asks:
            for f in self.script.facts:
                if not says(heard, f.value) and self.question(f) not in asked:
                    return {"content": self.question(f)}
        results = tool_results(body)
        ref = self.task.reference_solution
        if len(results) < len(ref):
            n = len(results)
            sources = (self.task.metadata.get("sources") or [{}] * len(ref))[n]
            args = dict(ref[n].arguments)
            for name, how in sources.items():  # only what it was told or has read
                if how == "stated" and not says(heard, args.get(name)):
                    args[name] = "unknown"
                elif how.startswith("$"):  # the reference's id, if the result it names shows it (a decision
                    k, _, field = how[1:].partition(".")  # picks a row other than the first)
                    seen = results[int(k) - 1] if int(k) <= len(results) else {}
                    if not (seen.get("ok") and _shows(seen.get("result"), field, args[name])):
                        args[name] = "unknown"
            return {"content": "", "tool_calls": [{"name": ref[n].tool, "arguments": args}]}
        guessed = any(v == "unknown" for m in body["messages"] for c in m.get("tool_calls") or []
                      for v in json.loads(c["function"]["arguments"]).values())
        if all(r.get("ok") for r in results) and not guessed:  # it knows the answer only from what it was told
            return {"content": say_answer(self.task.verifier.answer)}
        return {"content": "I could not do that."}


def _shows(result: Any, field: str, value: Any) -> bool:
    rows = result if isinstance(result, list) else [result]
    return any(isinstance(r, dict) and r.get(field) == value for r in rows)


def _facts(system: str) -> list[Fact]:
    """The fact lines of the user's prompt: the list after "What you know", up to the blank line."""
    block = system.split("What you know", 1)[1].split("\n\n", 1)[0]
    return [f for f in (parse_fact(line) for line in block.splitlines() if line.startswith("- ")) if f]


def _best(facts: list[Fact], text: str) -> Fact | None:
    words = _words(text)
    said = " ".join(text.casefold().split())
    # a question that names a fact's label whole ("the title of the book") asks for that fact before one whose label
    # only shares words with it ("book title"): two facts of one kind in a compound request
    # an about made of others' ("the loan of the renewal") counts only its words that name something (not "the")
    abouts = {f.about for f in facts if f.about}
    things = set().union(*(_words(f.label) for f in facts),
                         *(_words(a) for a in abouts if not any(b != a and b in a for b in abouts)))
    scored = [(10 * (f" {f.label.casefold()} " in f" {said} ") + 2 * len(_words(f.label) & words)
               + len(_words(f.about) & words & things), i, f) for i, f in enumerate(facts)]
    scored = [s for s in scored if s[0] > 0]
    return max(scored, key=lambda s: (s[0], -s[1]))[2] if scored else None


def scripted_user(body: dict[str, Any]) -> dict[str, Any]:
    facts = _facts(body["messages"][0]["content"])
    last = _texts(body, "user")[-1]
    mine = " ".join(_texts(body, "assistant"))
    if "?" not in last:
        return {"content": f"Thank you, that is all. {STOP}"}
    left = [f for f in facts if not says(mine, f.value)]
    f = _best(left, last)
    return {"content": f"It is {f.value}." if f else "I am sorry, I do not know that."}


def leaky_user(body: dict[str, Any]) -> dict[str, Any]:
    if len(_texts(body, "user")) == 1:
        facts = _facts(body["messages"][0]["content"])
        return {"content": "Here is everything: " + "; ".join(f"{f.label} {f.value}" for f in facts) + "."}
    return scripted_user(body)
