"""A wrong conflict guard told to the real embedded model (``pipeline.stages.tools.guards``): the library's
``lend_book`` written with an OR where AND was meant (the slip seen on the parking garage of the seventeenth
outside build), the feedback sent to the model once.

What must hold whatever the small model writes: a tool comes back, and it has no conflict guard that refuses every
loan it should let through (the model's fix, or the guard dropped with a note). Whether the model fixes the guard
itself is the capability under test: printed, not asserted."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline import ir
from pipeline.stages.tools import guards
from pipeline.stages.tools.toolset import Workspace, write_tool
from tests.stages.library_replies import SCENARIO, small_settings
from tests.stages.test_tools import LEND, TABLES, seed  # noqa: F401 (fixture)
from tests.stages.test_tools_guards import OR_GUARD, lend


class FirstScripted:
    """The scripted slip as the first reply, then the real model."""

    prefetches = False

    def __init__(self, real: Any, first: dict) -> None:
        self.real, self.first, self.asked = real, first, 0
        self.settings = getattr(real, "settings", None)

    def structured_reply(self, model: Any, messages: list, *, stage: str, max_tokens: int) -> Any:
        self.asked += 1
        if self.asked == 1:
            return model.model_validate(self.first), SimpleNamespace(content=json.dumps(self.first))
        return self.real.structured_reply(model, messages, stage=stage, max_tokens=max_tokens)


@pytest.mark.real_llm
def test_real_model_is_told_its_or_guard_once_and_no_tool_refuses_every_loan(real_llm, seed) -> None:  # noqa: F811
    settings = small_settings(max_attempts=2, retry_temperature=0)
    client: Any = FirstScripted(real_llm, lend(OR_GUARD))
    notes: list[ir.Rejection] = []
    start = time.monotonic()
    with Workspace(SCENARIO, TABLES, seed, settings.clock) as ws:
        out = write_tool(LEND, ws, client, settings, notes=notes)
        assert out.value is not None, out.error
        tool, amended = out.value
        assert guards.wrong_guards((amended or ws).instance_conn, tool) == []
        if amended is not None:
            amended.close()
    assert client.asked >= 2  # the guard was told
    fixed = not any(n.reason.startswith("guard dropped") for n in notes)
    print(f"\n{time.monotonic() - start:.0f}s, {client.asked} replies; the model fixed the guard itself: {fixed}; "
          f"guards {[s.sql for s in tool.steps if s.kind == 'guard']}; notes {[n.reason[:80] for n in notes]}")
