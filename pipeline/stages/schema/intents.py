"""Stage 1, intents: the user goals (functional requirements) a scenario's application must support.

``generate_intents(scenario, client, settings) -> StageResult[tuple[Intent, ...]]``. One small call; the
reply is checked (distinct goals, at least one read and one write, enough of them) and the problem is
fed back when it is not.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.ir import Intent
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, render_section, user

if TYPE_CHECKING:
    from pipeline.settings import BuildSettings

STAGE = "intents"


class IntentItem(BaseModel):
    goal: str
    kind: Literal["read", "write"]


@cache
def reply_model(lo: int, hi: int) -> type[BaseModel]:
    """``{"intents": [{goal, kind}, ...]}`` with ``lo..hi`` items (minItems/maxItems in the grammar)."""
    return create_model(
        "IntentsReply", intents=(list[IntentItem], Field(min_length=lo, max_length=hi)), __base__=BaseModel
    )


def check_intents(items: list[Any], minimum: int) -> tuple[tuple[Intent, ...] | None, str | None]:
    """Normalise (strip, drop case-insensitive duplicates) and check a reply's intents."""
    seen: set[str] = set()
    out: list[Intent] = []
    for it in items:
        goal = " ".join(it.goal.split()).rstrip(".")
        key = goal.lower()
        if key in seen:
            continue
        seen.add(key)
        out.append(Intent(goal=goal, kind=it.kind))
    kinds = {i.kind for i in out}
    problems = []
    if len(out) < minimum:
        problems.append(f"only {len(out)} distinct goals, at least {minimum} are needed")
    for k in ("read", "write"):
        if k not in kinds:
            problems.append(f"no goal of kind {k!r}")
    if problems:
        return None, "; ".join(problems) + "."
    return tuple(out), None


def generate_intents(
    scenario: ir.Scenario, client: LLMClientProtocol, settings: BuildSettings
) -> StageResult[tuple[Intent, ...]]:
    goals = "".join(f"\n- {g}" for g in scenario.goals)
    prompt = render_section(
        "intents", "ask", name=scenario.name, description=scenario.description,
        goals=f"\nKnown goals:{goals}" if goals else "", min=settings.intents_min, max=settings.intents_max,
    )
    model = reply_model(settings.intents_min, settings.intents_max)
    out = ask_with_feedback(
        client, model, user(prompt),
        lambda r: check_intents(r.intents, settings.intents_min),  # type: ignore[attr-defined]
        stage=STAGE, max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature, max_tokens=settings.max_tokens_intents,
        feedback=lambda e: render_section("intents", "feedback", error=e),
    )
    if out.value is None:
        rej = ir.Rejection(stage=STAGE, item=scenario.name, reason=f"no usable intents: {out.error}",
                           evidence={"attempts": out.attempts})
        return StageResult(None, (rej,), out.attempts)
    return StageResult(out.value, (), out.attempts)
