"""Stage 1, intents: the user goals (functional requirements) a scenario's application must support.

``generate_intents(scenario, client, settings) -> StageResult[tuple[Intent, ...]]``. One small call; the
reply is checked (distinct goals, at least one read and one write, enough of them) and the problem is
fed back when it is not. The scenario's own goals are kept: those no intent says again (MiniLM similarity,
``pipeline.meaning.goals.missing_goals``) are named back once (the model once kept 1 of the library's 5, and the
schema and tools, planned from the intents, then had no holds, returns, renewals or paid fines).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, create_model

from pipeline import ir
from pipeline.ir import Intent
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.meaning import goals
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
    scenario: ir.Scenario, client: LLMClientProtocol, settings: BuildSettings,
    encode: goals.Encode = goals.default_encode,
) -> StageResult[tuple[Intent, ...]]:
    """The intents, with the scenario's goals kept: a list that says none of its intents again (MiniLM similarity,
    ``pipeline.meaning.goals.missing_goals``) gets them named back once (with ``goal_coverage``); the list that
    comes back is taken even if it still leaves one out."""
    known = "".join(f"\n- {g}" for g in scenario.goals)
    prompt = render_section(
        "intents", "ask", name=scenario.name, description=scenario.description,
        goals=f"\nKnown goals:{known}" if known else "", min=settings.intents_min, max=settings.intents_max,
    )
    model = reply_model(settings.intents_min, settings.intents_max)
    asked: list[str] = []

    def check(reply: Any) -> tuple[tuple[Intent, ...] | None, str | None]:
        value, error = check_intents(reply.intents, settings.intents_min)
        if value is None or asked or not settings.goal_coverage or not scenario.goals:
            return value, error
        missing = goals.missing_goals(scenario.goals, [i.goal for i in value], encode)
        if not missing:
            return value, None
        asked.extend(missing)  # named once: a list that still leaves a goal out is then taken as it is
        return value, render_section("intents", "missing_goals", goals="".join(f"\n- {g}" for g in missing))

    out = ask_with_feedback(
        client, model, user(prompt), check,
        stage=STAGE, max_attempts=settings.max_attempts, retry_temperature=settings.retry_temperature, max_tokens=settings.max_tokens_intents,
        feedback=lambda e: render_section("intents", "feedback", error=e),
    )
    if out.value is None:
        rej = ir.Rejection(stage=STAGE, item=scenario.name, reason=f"no usable intents: {out.error}",
                           evidence={"attempts": out.attempts})
        return StageResult(None, (rej,), out.attempts)
    return StageResult(out.value, (), out.attempts)
