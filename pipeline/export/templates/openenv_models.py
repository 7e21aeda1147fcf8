"""The data models of this OpenEnv environment: what ``/schema`` declares and ``reset``/``step``
return.

* Action: OpenEnv's MCP ``CallToolAction`` (``{"type": "call_tool", "tool_name", "arguments"}``);
  ``ListToolsAction`` (``{"type": "list_tools"}``) lists the tools.
* ``TaskObservation``: what ``reset`` returns (the task, its tools, its split/tier/pass rate).
* ``ToolObservation``: what ``step`` returns for a tool call (and for ``submit``, with the reward; in
  conversation mode for the message tool, with the user's reply).
* ``EnvFoundryState``: what ``state`` returns.
"""

from typing import Any

from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
)
from openenv.core.env_server.types import Observation, State
from pydantic import Field

EnvFoundryAction = CallToolAction

# id(tool) -> (tool, its dump): the server's tools, dumped once (``share_tools``); the tool is kept so its id stays its.
_DUMPED: dict[int, tuple[Tool, dict[str, Any]]] = {}


def share_tools(tools: list[Tool]) -> None:
    """Dump ``tools`` (the server's fixed tool specs) once: a ``TaskObservation`` listing only tools shared
    here reuses these dumps in ``model_dump`` (the same dicts for every session; callers read them, never
    change them)."""
    for tool in tools:
        if id(tool) not in _DUMPED:
            _DUMPED[id(tool)] = (tool, tool.model_dump())


class TaskObservation(Observation):
    """What ``reset`` returns: the task to carry out and the tools to do it with."""

    task_id: str = Field(default="", description="The task of this episode")
    env_id: str = Field(default="", description="The environment the task belongs to")
    instruction: str = Field(default="", description="The user's request")
    system_prompt: str = Field(default="", description="Suggested system prompt")
    tools: list[Tool] = Field(default_factory=list, description="Tools callable with CallToolAction")
    submit_tool: str = Field(default="submit", description="The tool that ends the episode and scores it")
    split: str | None = Field(default=None, description="train or val")
    tier: int | None = Field(default=None, description="Difficulty tier (1 to 3: how many calls and decisions)")
    pass_rate: float | None = Field(default=None, description="Share of envfoundry's test rollouts that passed")
    conversation: bool = Field(default=False, description="Conversation mode: instruction is the user's opening line")
    message_tool: str | None = Field(default=None, description="Conversation mode: the tool that talks to the user")
    level: int | None = Field(default=None, description="A sampled task: its difficulty level (1 to 5)")
    adaptive: bool = Field(default=False, description="Played at the server's adaptive level")

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        """pydantic's dump; the same dict, but when every listed tool was shared (``share_tools``) and the
        dump is a plain one (``exclude`` at most, as OpenEnv's server serializes an observation), ``tools``
        holds the shared dumps instead of a new copy of every tool's schema. OpenEnv keeps each session's last
        response until the session's next message, so a thousand sessions opened at once held a thousand
        copies (~160 dicts and lists each); freed at their first step, they left ~26 KiB of free blocks per
        open session between the sessions' live objects (issue 32)."""
        exclude = kwargs.get("exclude")
        shared = [_DUMPED.get(id(t)) for t in self.tools]
        if (set(kwargs) - {"exclude"} or not isinstance(exclude, set | frozenset | None) or "tools" in (exclude or ())
                or any(s is None or s[0] is not t for s, t in zip(shared, self.tools, strict=True))):
            return super().model_dump(**kwargs)
        rest = super().model_dump(exclude={*(exclude or ()), "tools"})
        out = {}
        for name in type(self).model_fields:
            if name == "tools":
                out[name] = [s[1] for s in shared if s is not None]
            elif name in rest:
                out[name] = rest.pop(name)
        out.update(rest)
        return out


class ToolObservation(CallToolObservation):
    """What ``step`` returns for a tool call: ``result`` is the text the agent reads (JSON, or
    ``Error: ...``). For the submit tool, ``done`` is true and ``reward`` is the verifier's."""

    ok: bool = Field(default=True, description="Whether the tool call succeeded (changed state only if so)")
    passed: bool | None = Field(default=None, description="After submit: whether the verifier passed")
    failures: list[str] = Field(default_factory=list, description="After submit: why the verifier failed")


class EnvFoundryState(State):
    """The episode's state: the task, how many tool calls were made, and once submitted the reward."""

    task_id: str | None = Field(default=None, description="The task of this episode")
    env_id: str | None = Field(default=None, description="The environment of this episode")
    tool_calls: int = Field(default=0, ge=0, description="Tool calls made (submit excluded)")
    done: bool = Field(default=False, description="Whether submit was called")
    reward: float | None = Field(default=None, description="The verifier's reward once submitted")
    passed: bool | None = Field(default=None, description="Whether the verifier passed once submitted")
    conversation: bool = Field(default=False, description="Whether the episode is played in conversation")
    user_turns: int = Field(default=0, ge=0, description="Conversation mode: the simulated user's replies")
    user_errors: list[dict] = Field(default_factory=list, description="The simulated user's mistakes caught by code")
    level: int | None = Field(default=None, description="A sampled task: its difficulty level (1 to 5)")
    adaptive: dict | None = Field(default=None, description="The server's adaptive level: level, levels, windows "
                                  "and their means, thresholds (up, down), moves; null until an adaptive episode")


__all__ = [
    "CallToolAction",
    "EnvFoundryAction",
    "EnvFoundryState",
    "ListToolsAction",
    "ListToolsObservation",
    "TaskObservation",
    "ToolObservation",
]

