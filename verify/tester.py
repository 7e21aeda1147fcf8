"""The tester: an agent that sees only the request and the tools, and tries to complete the task.

Each turn the model replies with one JSON action (``{thought, action: {tool, arguments} |
{final_answer}}``, a schema built from the tool specs), which runs through the real tool interface
of a fresh instance (``EnvInstance.call``: the engine the generated server embeds). The verifier is
never shown to it. ``k`` attempts give a pass rate, the difficulty estimate for that model; the
first attempt decodes greedily, later ones sample (``temperature``, seed = attempt) so they differ.
Trajectories are kept whole: every call with its arguments, response and state diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.ir import Environment, Task, ToolCall
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.sampling import sampled
from pipeline.settings import TesterSettings as TesterSettings
from pipeline.stages.feedback import render_section
from verify.evaluate import evaluate
from verify.models import args_model, camel, catalog, clean_args
from verify.replay import call_once, fresh

STAGE = "tester"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Step(Frozen):
    index: int
    thought: str = ""
    tool: str
    arguments: dict[str, Any]
    response: dict[str, Any]
    changes: list[dict[str, Any]] = Field(default_factory=list)


class Attempt(Frozen):
    task_id: str
    attempt: int
    steps: list[Step]
    final_answer: str | None
    stop: Literal["answer", "max_turns", "loop", "llm_error"]
    passed: bool
    failures: list[str] = Field(default_factory=list)
    error: str | None = None


def turn_model(env: Environment) -> type[BaseModel]:
    actions: list[Any] = []
    for tool in env.tools:
        name_type: Any = Literal[tool.name]  # type: ignore[valid-type]
        actions.append(create_model(
            f"Call{camel(tool.name)}", __config__=ConfigDict(extra="forbid"),
            tool=(name_type, ...), arguments=(args_model(tool, prefix="In"), ...),
        ))
    finish = create_model("Finish", __config__=ConfigDict(extra="forbid"),
                          final_answer=(str, Field(..., max_length=400)))
    action_type: Any = Union[tuple(actions + [finish])]  # type: ignore[valid-type]  # noqa: UP007
    return create_model("TesterTurn", __config__=ConfigDict(extra="forbid"),  # type: ignore[call-overload, no-any-return]
                        thought=(str, Field(..., max_length=300)), action=(action_type, ...))


def _for_attempt(client: Any, attempt: int, settings: TesterSettings) -> Any:
    if attempt == 1 or not hasattr(client, "settings"):
        return client
    return sampled(client, settings.temperature, client.settings.seed + attempt - 1)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + f"... [{len(text) - limit + 20} more chars]"


def run_attempt(
    client: Any,
    env: Environment,
    task: Task,
    *,
    attempt: int = 1,
    initial_db: str | Path | None = None,
    settings: TesterSettings | None = None,
) -> Attempt:
    """One attempt at ``task`` on a fresh instance, judged by the verifier afterwards."""
    settings = settings or TesterSettings()
    llm = _for_attempt(client, attempt, settings)
    model = turn_model(env)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": render_section("tester", "system", tools=catalog(env), max_turns=settings.max_turns)},
        {"role": "user", "content": task.instruction},
    ]
    steps: list[Step] = []
    final: str | None = None
    stop: str = "max_turns"
    error: str | None = None
    with fresh(env, initial_db) as run:
        for turn in range(1, settings.max_turns + 1):
            if turn == settings.max_turns and turn > 1:
                messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n" + render_section("tester", "last_turn")}
            try:
                reply, raw = llm.structured_reply(model, messages, stage=STAGE, max_tokens=settings.max_tokens)
            except LLMUnavailable:
                raise  # an endpoint failure says nothing about the task: the run retries it later
            except LLMError as e:
                stop, error = "llm_error", str(e)[:500]
                break
            action = reply.action  # type: ignore[attr-defined]
            if hasattr(action, "final_answer"):
                final, stop = action.final_answer, "answer"
                break
            call = ToolCall(tool=action.tool, arguments=clean_args(action.arguments))
            record = call_once(run, call)
            steps.append(Step(index=len(steps) + 1, thought=reply.thought, tool=call.tool,  # type: ignore[attr-defined]
                              arguments=call.arguments, response=record.response,
                              changes=[c.to_json() for c in record.changes]))
            if len(steps) >= 3 and all(s.tool == call.tool and s.arguments == call.arguments for s in steps[-3:]):
                stop = "loop"
                break
            result = _cut(json.dumps(record.response, ensure_ascii=False), settings.result_chars)
            messages += [
                {"role": "assistant", "content": raw.content},
                {"role": "user", "content": render_section("tester", "result", tool=call.tool, result=result)},
            ]
        ev = evaluate(task.verifier, run.inst.conn, initial=run.initial, answer=final, infos=run.infos)
    return Attempt(task_id=task.task_id, attempt=attempt, steps=steps, final_answer=final, stop=stop,  # type: ignore[arg-type]
                   passed=ev.passed, failures=list(ev.failures), error=error)


def run_attempts(
    client: Any, env: Environment, task: Task, *, initial_db: str | Path | None = None,
    settings: TesterSettings | None = None,
) -> list[Attempt]:
    settings = settings or TesterSettings()
    return [run_attempt(client, env, task, attempt=i, initial_db=initial_db, settings=settings)
            for i in range(1, settings.attempts + 1)]
