"""Scripted agents for the exports' conversations, served on loopback in the test process while a trainer's venv
plays the conversation (tests/export/trainer/*): one agent server for every task of a catalog, the request's
``model`` naming the task (its id), else the conversation's opening line (which must then be the task's alone),
as each conversation is bound to its task.

The agent is :class:`tests.eval.scripted_conversation.Asker` (it asks for each fact, replays the reference
solution with what it was told, then says the answer). Trainers show tool results as text (the JSON result, or
``Error: ...``); they are handed to it as envfoundry's harness writes them (``{"ok", "result"}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.export import load_catalog
from tests.eval.scripted_conversation import Asker
from verify.conversation import script_of


def _as_harness(content: Any) -> str:
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content or [])
    try:
        parsed = json.loads(text)
    except ValueError:
        return json.dumps({"ok": False, "error": text})
    if isinstance(parsed, dict) and "ok" in parsed and ("result" in parsed or "error" in parsed):
        return text
    return json.dumps({"ok": True, "result": parsed})


class ByTask:
    def __init__(self, catalog_dir: Path, asks: bool = True):
        cat = load_catalog(catalog_dir)
        self.askers = {t.task_id: Asker(t, script_of(ce.env, t), asks) for ce in cat.envs.values() for t in ce.tasks}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [{**m, "content": _as_harness(m.get("content"))} if m["role"] == "tool" else m
                    for m in body["messages"]]
        asker = self.askers.get(body["model"])
        if asker is None:  # a fixed model name (vf-eval -m): the task whose opening line opened the conversation
            opening = next(m["content"] for m in messages if m["role"] == "user")
            (asker,) = [a for a in self.askers.values() if a.script.opening == opening]
        return asker({**body, "messages": messages})
