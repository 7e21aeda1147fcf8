"""The agent harness shared by the tester and ``envfoundry eval``: one attempt at one task.

An attempt runs on a fresh in-process instance (``pipeline.runtime.EnvInstance`` of the environment
and its ``initial.db``). With the ``native`` protocol the task's tools go in the request (``tools``),
the model answers with ``tool_calls``, and every result goes back whole as a ``tool`` message (cut
only when a configured context budget forces it). Nothing the model sends ends the attempt with an
exception: an unknown tool, argument text that is not a JSON object, arguments the tool's schema
rejects and a tool that times out all come back to the model as tool errors (the engine's error
dicts, which name the tool and parameter), as inspect_ai's ``model/_call_tools.py`` does.

An environment with rules gives the model its policy after the system prompt (:func:`verify.policy.with_policy`;
one without keeps its prompt to the byte).

The final answer is the text of the last assistant message: the attempt ends when the model replies
without calling a tool (or at ``max_turns``, or after the same call three times in a row). The
verifier is never shown to the model; the final state and answer are scored once, afterwards
(:func:`score`, the one place the reward is computed).

The ``json_action`` protocol (one schema-constrained JSON step per reply, results as user
messages, the final answer a ``final_answer`` field) is kept for endpoints whose tool calling does
not work; ``auto`` picks ``native`` for every configured endpoint and :data:`EMBEDDED_PROTOCOL`
(``json_action``, measured) for the embedded llama.cpp server.

Endpoint faults (the endpoint unreachable, timing out or answering garbage after the client's
transport retries) are recorded on the attempt (``stop="endpoint_error"``), or raised when the
caller asks (the tester does: a run retries such an item later rather than judge it).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.ir import Environment, Task, Tool, ToolCall
from pipeline.llm import LLMError, LLMUnavailable
from pipeline.llm.chat import ChatOptions, chat_tools
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.llm.sampling import sampled
from pipeline.prompts import render_section
from pipeline.runtime import engine, reward
from pipeline.runtime.replay import Run, call_once, fresh
from pipeline.runtime.schemas import described_tools
from pipeline.settings import AgentSettings as AgentSettings
from verify.conversation import SimUser, UserError, UserSettings, script_of
from verify.models import args_model, camel, clean_args
from verify.policy import with_policy

Protocol = Literal["native", "json_action"]
Stop = Literal["answer", "user_stop", "max_turns", "loop", "llm_error", "endpoint_error"]

EMBEDDED_PROTOCOL: Protocol = "json_action"
"""What ``protocol="auto"`` uses for the embedded llama.cpp server, measured (README, ``envfoundry eval``):
llama-cpp-python 0.3.36's server renders ``tools`` with Qwen2.5-Coder-1.5B's own chat template but parses
no call back, and the model wrote its calls as bare JSON (three in a Markdown fence, one with doubled
braces), never in the ``<tool_call>`` blocks :func:`pipeline.llm.chat.parse_text_tool_calls` reads: 0 of
4 first replies on the example became a tool call. Its ``chatml-function-calling`` handler parses calls
but its template drops ``tool`` messages, so the model would never see a result. The schema-constrained
JSON action always parses."""

CHARS_PER_TOKEN = 3.0
"""A conservative estimate for the context budget (JSON and ids tokenise densely)."""

TESTER_PAGE = 10
"""The page the tester's calls of a paged lister get: its ``limit`` at most this, and this when the model gives
none (the environment's own default is 20 rows, up to 50). Every row the tester reads is in every later prompt of
its attempt; it pages with ``offset``, or narrows with a filter, as a trainer's policy would."""

SPEC_NOTE_MAX = 40
"""A parameter's description is shown in the JSON-action tool list when at most this long (the name, type, enum
and range are always shown; longer notes repeat across the listers: how paging works, date formats)."""

THOUGHT_MAX = 160
"""The longest ``thought`` of a JSON action (characters): generated at every turn and repeated in every later
prompt of the attempt."""

DATE_FORMS = {engine.DATE_FORMAT: engine.DATE_FORM, engine.DATETIME_FORMAT: engine.DATETIME_FORM}
"""How the JSON-action tool list writes a date (or date-time) parameter's form (``Param.format``)."""

_PAGED = re.compile(r"^\s*SELECT\s+COUNT\(\*\)\s+OVER\s*\(\)\s+AS\s+(\w+),.*\bLIMIT\s+COALESCE\(:(\w+),\s*\d+\)\s+"
                    r"OFFSET\s+COALESCE\(:(\w+),\s*0\)\s*$", re.I | re.S)


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Step(Frozen):
    index: int
    thought: str = ""
    tool: str
    arguments: dict[str, Any]
    response: dict[str, Any]
    changes: list[dict[str, Any]] = Field(default_factory=list)
    call_id: str = ""
    truncated: bool = False


class Attempt(Frozen):
    task_id: str
    attempt: int
    steps: list[Step]
    final_answer: str | None
    stop: Stop
    passed: bool
    reward: float = 0.0
    failures: list[str] = Field(default_factory=list)
    error: str | None = None
    turns: int = 0
    protocol: Protocol = "native"
    messages: list[dict[str, Any]] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    conversation: bool = False
    """Run in conversational form (``verify.conversation``): the user turns are in ``messages``."""
    user_turns: int = 0
    user_errors: list[dict[str, Any]] = Field(default_factory=list)
    """The simulated user's mistakes caught by code (``verify.conversation.check_turn``), apart from the agent's."""
    offered: list[str] = Field(default_factory=list)
    """The tools the attempt was offered when a view narrowed them (the tester's), in the environment's order;
    empty: every tool of the task."""

    @property
    def tool_calls(self) -> int:
        return len(self.steps)

    @property
    def endpoint_fault(self) -> bool:
        return self.stop == "endpoint_error"


# ---------------------------------------------------------------- scoring: the one place


class Scored(Frozen):
    reward: float
    passed: bool
    failures: list[str]


def score(task: Task, run: Run, initial: reward.Snapshot, answer: str | None) -> Scored:
    """The reward of a final state and answer: :func:`pipeline.runtime.reward.score`, the one implementation (the
    verifier is read here and nowhere else in an attempt)."""
    s = reward.score(task.verifier.model_dump(mode="json"), run.inst.conn, initial=initial, answer=answer)
    return Scored(reward=s.reward, passed=s.passed, failures=list(s.failures))


# ---------------------------------------------------------------- shared pieces


def resolve_protocol(client: LLMClientProtocol, settings: AgentSettings) -> Protocol:
    if settings.protocol != "auto":
        return settings.protocol
    return EMBEDDED_PROTOCOL if getattr(client, "embedded", False) else "native"


def context_budget(client: LLMClientProtocol, settings: AgentSettings) -> int | None:
    if settings.context_budget is not None:
        return settings.context_budget
    if getattr(client, "embedded", False):
        return int(client.settings.n_ctx) - settings.max_tokens - 64
    return None


def for_attempt(client: LLMClientProtocol, attempt: int, settings: AgentSettings) -> LLMClientProtocol:
    """Attempt 1 decodes with the client's settings (greedy by default); later ones sample with
    ``settings.temperature`` and seed + attempt - 1, so k attempts differ and reruns reproduce them."""
    if attempt == 1 or not hasattr(client, "settings"):
        return client
    return sampled(client, settings.temperature, client.settings.seed + attempt - 1)


def tool_specs(env: Environment, task: Task, view: View | None = None) -> list[dict[str, Any]]:
    """The OpenAI function schemas the model is given: the task's own (as exported), else the env's as described
    (``described_tools``: a date parameter says its form); with a ``view``, those of the tools it offers, their page
    parameter narrowed to its page."""
    if view is None:
        return list(task.tools) or [t.openai_schema() for t in described_tools(env)]
    return [t.openai_schema() for t in view.tools(env)]


def page_params(tool: Tool) -> tuple[str, str, str] | None:
    """(count field, limit parameter, offset parameter) of a paged lister (``pipeline.dbmodel.paging`` writes its
    SQL; read back from it here, below that layer), else None."""
    if tool.returns is None or tool.returns.mode != "all":
        return None
    m = _PAGED.match(tool.returns.sql)
    return (m.group(1), m.group(2), m.group(3)) if m else None


class View(Frozen):
    """What an attempt shows the model beyond the task: which tools (None: every tool of the task) and the page
    its paged listers return (None: the tool's own default). The tester's view is the task's tools plus its level's
    distractors (:func:`verify.difficulty.offered_tools`) and :data:`TESTER_PAGE`; ``envfoundry eval`` has none."""

    names: list[str] | None = None
    page: int | None = None

    def tools(self, env: Environment) -> list[Tool]:
        """The tools offered, as described to a model (``described_tools``: a date parameter says its form)."""
        out = []
        for t in described_tools(env):
            if self.names is not None and t.name not in self.names:
                continue
            paged = page_params(t)
            if self.page is not None and paged is not None:
                t = t.model_copy(update={"params": [p.model_copy(update={"maximum": float(self.page)})
                                                    if p.name == paged[1] else p for p in t.params]})
            out.append(t)
        return out

    def refusal(self, env: Environment, name: str) -> dict[str, Any] | None:
        """The tool error for a call of a tool the view does not offer (as a trainer's tool server refuses it)."""
        if self.names is None or name in self.names:
            return None
        offered = [t.name for t in env.tools if t.name in self.names]
        return engine.failure("not_found", f"unknown tool {name!r} (available: {', '.join(offered)})")

    def paged_args(self, env: Environment, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` of a call of ``name`` with the view's page as its limit when the model gave none."""
        if self.page is None or name not in {t.name for t in env.tools}:
            return args
        paged = page_params(env.tool(name))
        if paged is None or args.get(paged[1]) is not None:
            return args
        return {**args, paged[1]: self.page}


def compact_signature(tool: Tool) -> str:
    """``name(a: integer, b?: string one of x|y, d: string YYYY-MM-DD, limit?: integer 1..10): description``:
    :func:`verify.models.signature` with only the short parameter notes (:data:`SPEC_NOTE_MAX`) and none for the
    page parameters; a date (or date-time) parameter shows its form unless its short note does."""
    paged = page_params(tool)
    parts = []
    for p in tool.params:
        s = f"{p.name}{'' if p.required else '?'}: {p.type}"
        if p.enum:
            s += " one of " + "|".join(str(e) for e in p.enum)
        if p.minimum is not None or p.maximum is not None:
            lo = "" if p.minimum is None else f"{p.minimum:g}"
            hi = "" if p.maximum is None else f"{p.maximum:g}"
            s += f" {lo}..{hi}"
        note = p.description if len(p.description) <= SPEC_NOTE_MAX and not (paged and p.name in paged[1:]) else ""
        if p.format is not None and DATE_FORMS[p.format] not in note:
            s += " " + DATE_FORMS[p.format]
        if note:
            s += f" ({note})"
        parts.append(s)
    return f"{tool.name}({', '.join(parts)}): {tool.description}"


def compact_result(response: dict[str, Any], tool: Tool | None) -> str:
    """A tool result as the JSON-action protocol shows it: a list of two or more rows with the same columns as
    ``columns`` once and ``rows`` of values (a paged lister's match count, the same on every row, once), else the
    result's JSON whole. Same values, about a third of the characters of a list of row objects."""
    rows = response.get("result")
    if not (response.get("ok") and isinstance(rows, list) and len(rows) >= 2
            and all(isinstance(r, dict) for r in rows)):
        return json.dumps(response, ensure_ascii=False)
    cols = list(rows[0])
    if any(list(r) != cols for r in rows):
        return json.dumps(response, ensure_ascii=False)
    head = {k: v for k, v in response.items() if k != "result"}
    paged = page_params(tool) if tool is not None else None
    if paged is not None and paged[0] in cols and len({json.dumps(r[paged[0]]) for r in rows}) == 1:
        head[paged[0]] = rows[0][paged[0]]
        cols.remove(paged[0])
    head["columns"] = cols
    head["rows"] = [[r[c] for c in cols] for r in rows]
    return json.dumps(head, ensure_ascii=False)


def parse_arguments(name: str, text: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(arguments, None) or (None, a tool error naming the problem) for a call's argument text."""
    if text is None or not str(text).strip():
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return None, engine.failure("validation", f"arguments of tool '{name}' are not valid JSON ({e.msg} at "
                                                  f"position {e.pos}): {str(text)[:200]}")
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, engine.failure("validation", f"arguments of tool '{name}' must be a JSON object, got "
                                                  f"{type(value).__name__}: {str(text)[:200]}")
    return value, None


def run_call(run: Run, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One call on the attempt's instance; (response, rows changed). Never raises."""
    try:
        record = call_once(run, ToolCall(tool=name, arguments=arguments))
    except Exception as e:  # the engine never raises; this guards the recording around it
        return engine.failure("sql", f"tool '{name}' could not run: {type(e).__name__}: {e}"), []
    return record.response, [c.to_json() for c in record.changes]


def _est_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    size = len(json.dumps(messages, ensure_ascii=False)) + len(json.dumps(tools, ensure_ascii=False))
    return int(size / CHARS_PER_TOKEN)


def fit_budget(messages: list[dict[str, Any]], tools: list[dict[str, Any]], budget: int | None,
               results: list[int] | None = None) -> set[int]:
    """Cut tool results (``results``: their message indexes; default the ``tool`` messages), oldest first,
    until the conversation fits ``budget`` tokens; the indexes of the messages cut. The newest result is
    cut last, and a cut says how much was left out."""
    if budget is None:
        return set()
    cut: set[int] = set()
    over = _est_tokens(messages, tools) - budget
    if over <= 0:
        return cut
    order = results if results is not None else [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    for i in order:
        text = messages[i]["content"]
        keep = max(200, len(text) - int(over * CHARS_PER_TOKEN) - 80)
        if keep >= len(text):
            continue
        messages[i] = {**messages[i], "content": text[:keep] + f" ... [{len(text) - keep} characters cut to fit the "
                                                                   "context budget]"}
        cut.add(i)
        over = _est_tokens(messages, tools) - budget
        if over <= 0:
            break
    return cut


def _looping(steps: list[Step]) -> bool:
    return len(steps) >= 3 and all(s.tool == steps[-1].tool and s.arguments == steps[-1].arguments for s in steps[-3:])


# ---------------------------------------------------------------- the attempt


def run_attempt(
    client: LLMClientProtocol,
    env: Environment,
    task: Task,
    *,
    attempt: int = 1,
    initial_db: str | Path | None = None,
    settings: AgentSettings | None = None,
    stage: str = "tester",
    raise_endpoint_errors: bool = False,
    user: Any | None = None,
    user_settings: UserSettings | None = None,
    view: View | None = None,
) -> Attempt:
    """One attempt at ``task`` on a fresh instance, scored afterwards. With ``user`` (a client for the simulated
    user, :func:`verify.conversation.user_client`) the task runs in its conversational form: the agent gets the
    opening line, and each message it writes without a tool call goes to the user, whose reply comes back as a
    ``user`` message; the attempt ends when the user ends the conversation (``stop="user_stop"``), and the final
    answer is the agent's last message to the user. ``view``: which tools the model is offered and the page its
    paged listers return (:class:`View`; the tester's); the default offers the task's tools as exported."""
    settings = settings or AgentSettings()
    llm = for_attempt(client, attempt, settings)
    protocol = resolve_protocol(client, settings)
    loop = _native if protocol == "native" else _json_action
    sim = None
    if user is not None:
        sim = SimUser(user, env, script_of(env, task), user_settings or UserSettings(), attempt=attempt)
    t0 = time.perf_counter()
    with fresh(env, initial_db) as run:
        initial = run.initial
        state = loop(llm, env, task, run, settings, stage, context_budget(client, settings), raise_endpoint_errors,
                     sim, view)
        scored = score(task, run, initial, state["final"])
    if sim is not None and scored.passed and state["stop"] == "max_turns":
        sim.errors.append(UserError(sim.turns, "no_stop", "never ended the conversation, though its task was done"))
    return Attempt(
        task_id=task.task_id, attempt=attempt, steps=state["steps"], final_answer=state["final"], stop=state["stop"],
        passed=scored.passed, reward=scored.reward, failures=scored.failures, error=state["error"],
        turns=state["turns"], protocol=protocol, messages=state["messages"], prompt_tokens=state["pt"],
        completion_tokens=state["ct"], seconds=round(time.perf_counter() - t0, 3), conversation=sim is not None,
        user_turns=sim.turns if sim else 0, user_errors=[e.to_json() for e in sim.errors] if sim else [],
        offered=[t.name for t in view.tools(env)] if view is not None and view.names is not None else [],
    )


def _state(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": messages, "steps": [], "final": None, "stop": "max_turns", "error": None, "turns": 0,
            "pt": 0, "ct": 0}


def _opening(task: Task, sim: SimUser | None) -> str:
    return sim.script.opening if sim is not None else task.instruction


def _to_user(st: dict[str, Any], sim: SimUser, text: str, raise_endpoint: bool) -> str | None:
    """The agent's message ``text`` goes to the user; the user's reply, or None when the conversation ends (the
    user ended it, or its endpoint failed: recorded on ``st``)."""
    st["final"] = text
    try:
        turn = sim.respond(text)
    except LLMUnavailable as e:
        if raise_endpoint:
            raise
        st["stop"], st["error"] = "endpoint_error", f"simulated user: {str(e)[:480]}"
        return None
    except LLMError as e:
        st["stop"], st["error"] = "llm_error", f"simulated user: {str(e)[:480]}"
        return None
    st["pt"] += turn.prompt_tokens
    st["ct"] += turn.completion_tokens
    if turn.stop:
        st["stop"] = "user_stop"
        return None
    if len(sim.user) >= 3 and reward.normalize_text(sim.user[-1]) == reward.normalize_text(sim.user[-2]):
        sim.errors.append(UserError(sim.turns, "no_stop", "said its last turn again instead of ending"))
        st["stop"] = "loop"
        return None
    return turn.text


def _native(llm: Any, env: Environment, task: Task, run: Run, settings: AgentSettings, stage: str,
            budget: int | None, raise_endpoint: bool, sim: SimUser | None = None,
            view: View | None = None) -> dict[str, Any]:
    tools = tool_specs(env, task, view)
    prompt = ("user", "native_system") if sim is not None else ("tester", "native_system")
    system = render_section(*prompt, max_turns=settings.max_turns)
    st = _state([{"role": "system", "content": with_policy(system, env)},
                 {"role": "user", "content": _opening(task, sim)}])
    messages: list[dict[str, Any]] = st["messages"]
    steps: list[Step] = st["steps"]
    cut_msgs: set[int] = set()
    for turn in range(1, settings.max_turns + 1):
        last = turn == settings.max_turns
        if last and turn > 1:
            messages.append({"role": "user", "content": render_section("tester", "native_last_turn")})
        cut_msgs |= fit_budget(messages, tools, budget)
        try:
            reply = chat_tools(llm, messages, tools, stage=stage, options=ChatOptions(
                max_tokens=settings.max_tokens, tool_choice="none" if last and turn > 1 else "auto"))
        except LLMUnavailable as e:
            if raise_endpoint:
                raise
            st["stop"], st["error"] = "endpoint_error", str(e)[:500]
            break
        except LLMError as e:
            st["stop"], st["error"] = "llm_error", str(e)[:500]
            break
        st["turns"] += 1
        st["pt"] += reply.reply.prompt_tokens
        st["ct"] += reply.reply.completion_tokens
        messages.append(reply.message())
        if not reply.tool_calls:
            if sim is None or last:
                st["final"], st["stop"] = reply.content, "answer"
                break
            said = _to_user(st, sim, reply.content or "", raise_endpoint)
            if said is None:
                break
            messages.append({"role": "user", "content": said})
            continue
        if last:
            st["final"] = reply.content or None  # calls asked for after the last turn are not run
            break
        for call in reply.tool_calls:
            args, error = parse_arguments(call.name, call.arguments)
            changes: list[dict[str, Any]] = []
            error = error or (view.refusal(env, call.name) if view is not None else None)
            if error is not None:
                response = error
            else:
                assert args is not None
                args = view.paged_args(env, call.name, args) if view is not None else args
                response, changes = run_call(run, call.name, args)
            steps.append(Step(index=len(steps) + 1, thought=reply.content, tool=call.name, arguments=args or {},
                              response=response, changes=changes, call_id=call.id))
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": json.dumps(response, ensure_ascii=False)})
        if _looping(steps):
            st["stop"] = "loop"
            break
    if cut_msgs:
        ids = {messages[i].get("tool_call_id") for i in cut_msgs}
        st["steps"] = [s.model_copy(update={"truncated": s.call_id in ids}) for s in steps]
    return st


# ---------------------------------------------------------------- the JSON-action fallback


_TURN_MODELS: dict[str, type[BaseModel]] = {}
_TURN_MODELS_LOCK = threading.Lock()


def turn_model(env: Environment, conversation: bool = False, view: View | None = None) -> type[BaseModel]:
    """The schema of one JSON action: a call of one of the tools (typed arguments) or a final answer; with a
    ``view``, of the tools it offers (a page parameter at most its page).

    One class per tool set (the last 64 remembered): every turn of every attempt asks with it, and the
    client builds a class's JSON schema once. Keyed by the tools' content, not the object: the scenario
    graph hands each task's node its own copy of the environment."""
    tools = (view or View()).tools(env)
    key = json.dumps([t.model_dump(mode="json") for t in tools], sort_keys=True) + ("talk" if conversation else "")
    with _TURN_MODELS_LOCK:
        hit = _TURN_MODELS.get(key)
    if hit is not None:
        return hit
    model = _turn_model(tools, conversation)
    with _TURN_MODELS_LOCK:
        if len(_TURN_MODELS) >= 64:
            _TURN_MODELS.pop(next(iter(_TURN_MODELS)))
        return _TURN_MODELS.setdefault(key, model)


def _turn_model(tools: list[Tool], conversation: bool = False) -> type[BaseModel]:
    actions: list[Any] = []
    for tool in tools:
        name_type: Any = Literal[tool.name]  # type: ignore[valid-type]
        actions.append(create_model(
            f"Call{camel(tool.name)}", __config__=ConfigDict(extra="forbid"),
            tool=(name_type, ...), arguments=(args_model(tool, prefix="In"), ...),
        ))
    if conversation:  # in a conversation the other action is a message to the user (a question, or the outcome)
        finish = create_model("Say", __config__=ConfigDict(extra="forbid"),
                              message_to_user=(str, Field(..., max_length=400)))
    else:
        finish = create_model("Finish", __config__=ConfigDict(extra="forbid"),
                              final_answer=(str, Field(..., max_length=400)))
    action_type: Any = Union[tuple(actions + [finish])]  # type: ignore[valid-type]  # noqa: UP007
    return create_model("TesterTurn", __config__=ConfigDict(extra="forbid"),  # type: ignore[call-overload, no-any-return]
                        thought=(str, Field(..., max_length=THOUGHT_MAX)), action=(action_type, ...))


def json_system(env: Environment, view: View | None, max_turns: int, conversation: bool = False) -> str:
    """The JSON-action system prompt, ordered for llama.cpp's prefix cache: the instructions (the same for every
    task), the environment's policy (the same for its tasks), then the tools offered (the same for every attempt and
    turn of a task); the request and the turns follow it."""
    system = render_section("user" if conversation else "tester", "system", max_turns=max_turns)
    tools = "\n".join(f"- {compact_signature(t)}" for t in (view or View()).tools(env))
    return with_policy(system, env) + "\n\n" + render_section("tester", "tools", tools=tools)


def _json_action(llm: Any, env: Environment, task: Task, run: Run, settings: AgentSettings, stage: str,
                 budget: int | None, raise_endpoint: bool, sim: SimUser | None = None,
                 view: View | None = None) -> dict[str, Any]:
    model = turn_model(env, conversation=sim is not None, view=view)
    st = _state([{"role": "system", "content": json_system(env, view, settings.max_turns, sim is not None)},
                 {"role": "user", "content": _opening(task, sim)}])
    messages: list[dict[str, Any]] = st["messages"]
    steps: list[Step] = st["steps"]
    results: list[int] = []
    for turn in range(1, settings.max_turns + 1):
        if turn == settings.max_turns and turn > 1:
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n"
                            + render_section("tester", "last_turn")}
        fit_budget(messages, [], budget, results)
        try:
            reply, raw = llm.structured_reply(model, messages, stage=stage, max_tokens=settings.max_tokens)
        except LLMUnavailable as e:
            if raise_endpoint:
                raise
            st["stop"], st["error"] = "endpoint_error", str(e)[:500]
            break
        except LLMError as e:
            st["stop"], st["error"] = "llm_error", str(e)[:500]
            break
        st["turns"] += 1
        st["pt"] += raw.prompt_tokens
        st["ct"] += raw.completion_tokens
        messages.append({"role": "assistant", "content": raw.content})
        action = reply.action  # type: ignore[attr-defined]
        if hasattr(action, "message_to_user"):  # only the conversation's turn model has it
            assert sim is not None
            if turn == settings.max_turns:
                st["final"], st["stop"] = action.message_to_user, "answer"
                break
            said = _to_user(st, sim, action.message_to_user, raise_endpoint)
            if said is None:
                break
            messages.append({"role": "user", "content": render_section("user", "user_said", text=said)})
            continue
        if hasattr(action, "final_answer"):
            st["final"], st["stop"] = action.final_answer, "answer"
            break
        args = clean_args(action.arguments)
        args = view.paged_args(env, action.tool, args) if view is not None else args
        response, changes = run_call(run, action.tool, args)
        steps.append(Step(index=len(steps) + 1, thought=reply.thought, tool=action.tool,  # type: ignore[attr-defined]
                          arguments=args, response=response, changes=changes))
        if _looping(steps):
            st["stop"] = "loop"
            break
        results.append(len(messages))
        messages.append({"role": "user", "content": render_section(
            "tester", "result", tool=action.tool, result=compact_result(response, env.tool(action.tool)))})
    return st
