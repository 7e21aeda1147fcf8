"""Conversations: a simulated user who holds the facts, and the code that catches its mistakes.

A task's conversational form (:class:`Script`) is derived by code from its plan: the opening line (what a person
says first, no details), the goal (the task's whole request), the facts the user may give when asked (the values
the request states, each with what it is), what the user never says (ids and other values read from tools) and a
persona. The tasks stage writes it to ``metadata.conversation`` (``[stages.tasks] conversations``; the LLM writes
only the opening line and the persona, linted by code); a task without it gets one derived from its reference
solution (the arguments its plan marks ``stated``), so every catalog can be run in conversation.

:class:`SimUser` plays the user on any OpenAI-compatible endpoint (``[stages.user]``) through the one LLM client and
its cache: the agent's messages come to it as ``user`` turns, its own replies are ``assistant`` turns. It ends the
conversation with :data:`STOP`. Every turn is checked by code (:func:`check_turn`), and a mistake is a *user*
error, counted apart from the agent's: a fact given before the agent asked for it (``leak``), a date or number it
was never given (``invented``), a tool name or an id (``tool_or_id``), an end while the agent waits for a fact
it asked for (``early_stop``), an empty turn (``empty``). The reward stays the task's verifier on the final state
(and, for a question, the agent's last message to the user).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.ir import Environment, Task
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.llm.sampling import sampled
from pipeline.prompts import render_section
from pipeline.runtime import sqlshape, usercheck
from pipeline.runtime.usercheck import STOP as STOP
from pipeline.runtime.usercheck import ErrorKind as ErrorKind
from pipeline.runtime.usercheck import UserError as UserError
from pipeline.runtime.usercheck import _words as _words
from pipeline.runtime.usercheck import asked_for as asked_for
from pipeline.runtime.usercheck import says as says
from pipeline.runtime.usercheck import split_stop as split_stop
from pipeline.runtime.values import stated
from pipeline.settings import UserSettings as UserSettings
from verify.clients import endpoint_client

PROMPT = "user"
STAGE = "user"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Fact(Frozen):
    """A value the user knows and gives when asked: what it is (``about`` the row, ``label`` the field)."""

    label: str
    value: Any
    about: str = ""

    def line(self) -> str:
        """``- label (about): value``, as the user's prompt lists it (:func:`parse_fact` reads it back)."""
        return usercheck.fact_line(self.label, self.value, self.about)


_FACT_LINE = re.compile(r"^- (?P<label>.*?)(?: \((?P<about>[^()]*)\))?: (?P<value>.*)$")


def parse_fact(line: str) -> Fact | None:
    """A line of :meth:`Fact.line` back as a fact (its value as text), or None."""
    m = _FACT_LINE.match(line.strip())
    return Fact(label=m["label"], about=m["about"] or "", value=m["value"]) if m else None


class Script(Frozen):
    """What the simulated user is given: everything here comes from the task's plan, by code."""

    opening: str
    """The first message, in general words (no values)."""
    goal: str
    """What the user wants, in full (the task's request)."""
    facts: list[Fact] = Field(default_factory=list)
    persona: str = ""
    question: bool = False
    """The user waits for an answer (a lookup, count or total)."""
    pushback: bool = False
    """The task asks for a write a rule forbids: the user insists once when refused."""
    hidden: list[Any] = Field(default_factory=list)
    """Values the agent reads from tools (ids): the user never knows or says them."""
    derived: bool = False
    """True when the task had no ``metadata.conversation`` and this was derived from its reference solution."""

    def to_metadata(self) -> dict[str, Any]:
        """What ``metadata.conversation`` holds: all but the goal (the task's request) and ``derived``."""
        return self.model_dump(mode="json", exclude={"derived", "goal"})


def humanize(name: str) -> str:
    return name.replace("_", " ").strip()


def _thing(table: str) -> str:
    words = humanize(table).split()
    if words and words[-1].endswith("s") and not words[-1].endswith("ss"):
        words[-1] = words[-1][:-3] + "y" if words[-1].endswith("ies") else words[-1][:-1]
    return " ".join(words)


def script_of(env: Environment, task: Task) -> Script:
    """The task's conversational form: ``metadata.conversation`` as the tasks stage wrote it, else one derived
    from the reference solution (``derived``)."""
    conv = task.metadata.get("conversation")
    if isinstance(conv, dict) and conv.get("opening"):
        return Script.model_validate({**{k: v for k, v in conv.items() if k in Script.model_fields},
                                      "goal": task.instruction})
    return derive_script(env, task)


def derive_script(env: Environment, task: Task) -> Script:
    """A conversational form from the reference solution alone: the facts are the arguments the plan marks
    ``stated`` (``metadata.sources``), labelled by their parameter; without sources, every argument the request
    states. The opening names what kind of thing the request is about, in code's English."""
    sources = task.metadata.get("sources") or []
    facts: list[Fact] = []
    hidden: list[Any] = []
    seen: set[str] = set()
    for i, call in enumerate(task.reference_solution):
        src = sources[i] if i < len(sources) and isinstance(sources[i], dict) else {}
        for name, value in call.arguments.items():
            if value is None or isinstance(value, bool):
                continue
            how = src.get(name)
            if how == "stated" or (how is None and not sources and stated(task.instruction, value)):
                key = repr(value)
                if key not in seen:
                    seen.add(key)
                    table = _param_table(env, call.tool, name)
                    about = _thing(table) if table else _tool_thing(call.tool, name)
                    facts.append(Fact(label=humanize(name), value=value, about=about))
            elif (isinstance(how, str) and how.startswith("$")) or (how is None and not sources):
                hidden.append(value)
    tables = task.metadata.tables_changed or list(task.verifier.mutable_tables)
    kind = task.kind if task.kind in ("lookup", "create", "update", "delete") else "update" if tables else "lookup"
    thing = _thing(tables[0]) if tables else _thing(_table_of(env, task))
    wants = render_section(PROMPT, f"opening_{kind}_en", thing=thing, items=humanize(thing) + "s",
                           a="an" if thing[:1].lower() in "aeiou" else "a")
    opening = render_section(PROMPT, "opening_en", wants=wants)
    return Script(opening=opening, goal=task.instruction, facts=facts, hidden=_hidden(hidden, facts),
                  persona=render_section(PROMPT, "persona_en", system=env.scenario.name), question=task.verifier.answer is not None,
                  pushback=any(r.get("verdict") == "forbids" for r in task.metadata.get("rules") or []), derived=True)


def _param_table(env: Environment, tool_name: str, param: str) -> str | None:
    """The table whose column the tool binds ``param`` to (its statements read by ``sqlshape``), or None."""
    try:
        tool = env.tool(tool_name)
    except KeyError:
        return None
    columns = {}
    for t in env.tables:
        parsed = sqlshape.parse_table(t.ddl)
        if parsed is not None:
            columns[parsed[0]] = parsed[1]
    for sql in [s.sql for s in tool.steps] + ([tool.returns.sql] if tool.returns else []):
        found, _ = sqlshape.param_columns(sql, columns)
        if found.get(param):
            return sorted(found[param])[0][0]
    return None


_PREPOSITIONS = {"by", "for", "of", "with", "in", "from", "to", "on", "at"}


def _tool_thing(tool: str, param: str) -> str:
    """What a tool's parameter is about when its statements do not say: the words of the tool's name after its
    verb, up to a preposition (``search_books``: book; ``find_member_by_name``: member; ``borrow_book``: book)."""
    words = tool.split("_")[1:]
    for i, w in enumerate(words):
        if w in _PREPOSITIONS:
            words = words[:i]
            break
    words = [w for w in words if w not in param.split("_")]
    return _thing("_".join(words[:2])) if words else ""


def _table_of(env: Environment, task: Task) -> str:
    for call in task.reference_solution:
        for name in call.arguments:
            table = _param_table(env, call.tool, name)
            if table:
                return table
    return "request"


def _hidden(values: list[Any], facts: list[Fact]) -> list[Any]:
    known = {repr(f.value) for f in facts}
    out: list[Any] = []
    for v in values:
        if repr(v) not in known and v not in out:
            out.append(v)
    return out


# ---------------------------------------------------------------- checking a user's turn


def check_turn(script: Script, env: Environment, agent: list[str], user: list[str], text: str, stop: bool,
               turn: int) -> list[UserError]:
    """The user errors of one user turn (:func:`pipeline.runtime.usercheck.check_turn`, the one implementation, which every
    export vendors): ``agent`` holds the agent's messages so far (the last one is the message this turn answers),
    ``user`` the user's earlier turns (the opening first)."""
    return usercheck.check_turn(script.facts, script.hidden, [t.name for t in env.tools], agent, user, text, stop,
                                turn)


# ---------------------------------------------------------------- the simulated user


def user_system(env: Environment, script: Script) -> str:
    facts = "\n".join(f.line() for f in script.facts) or render_section(PROMPT, "user_facts_none")
    pushback = render_section(PROMPT, "user_pushback") + "\n" if script.pushback else ""
    answer = render_section(PROMPT, "user_answer") if script.question else ""
    return render_section(PROMPT, "user_system", system=env.scenario.name, persona=script.persona, goal=script.goal,
                          facts=facts, pushback=pushback, answer=answer)


@dataclass
class UserTurn:
    text: str
    stop: bool
    errors: list[UserError]
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class SimUser:
    """One simulated user for one conversation (``attempt`` > 1 samples with the settings' temperature and seed +
    attempt - 1, so k conversations differ and reruns reproduce them)."""

    client: LLMClientProtocol
    env: Environment
    script: Script
    settings: UserSettings = field(default_factory=UserSettings)
    attempt: int = 1
    agent: list[str] = field(default_factory=list)
    user: list[str] = field(default_factory=list)
    errors: list[UserError] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.user = [self.script.opening]
        self.messages = [{"role": "system", "content": user_system(self.env, self.script)},
                         {"role": "assistant", "content": self.script.opening}]
        self.errors = check_turn(self.script, self.env, [], [], self.script.opening, False, 0)

    @property
    def turns(self) -> int:
        return len(self.user) - 1

    def _llm(self) -> Any:
        seed = getattr(getattr(self.client, "settings", None), "seed", 0) + self.settings.seed + self.attempt - 1
        return sampled(self.client, self.settings.temperature, seed)

    def respond(self, agent_text: str) -> UserTurn:
        """The user's reply to the agent's message, checked."""
        self.agent.append(agent_text or "")
        self.messages.append({"role": "user", "content": agent_text or "(the assistant said nothing)"})
        reply = self._llm().complete(self.messages, stage=STAGE, max_tokens=self.settings.max_tokens)
        text, stop = split_stop(reply.content)
        errors = check_turn(self.script, self.env, self.agent, self.user, text, stop, len(self.user))
        self.messages.append({"role": "assistant", "content": (reply.content or "").strip()})
        self.user.append(text)
        self.errors.extend(errors)
        return UserTurn(text, stop, errors, reply.prompt_tokens, reply.completion_tokens)


def user_client(client: LLMClientProtocol, settings: UserSettings) -> LLMClientProtocol:
    """The client the simulated user talks to: ``client`` itself, or one for ``[stages.user]``'s endpoint with the
    other LLM settings of ``client`` (cache, retries, seed) and the same usage ledger."""
    return endpoint_client(client, settings.base_url, settings.model, settings.api_key, "stages.user")
