"""envfoundry's simulated user in an exported artefact: the user of a task's conversational form, on any
OpenAI-compatible endpoint.

Copied verbatim into every export beside ``usercheck.py`` (envfoundry's checks of a user's turn, the one
implementation), ``values.py`` and ``reward.py``; stdlib only (``urllib``), so it runs in a trainer's Python without
envfoundry. Each exported task record carries its ``conversation``: the ``opening`` line (the agent's first user
message), the ``facts`` the user gives only when asked, ``hidden`` values it never says, and ``user_system``, the
user's system prompt as envfoundry renders it (goal, facts, persona, when to push back, when to stop).

The user's side of the chat: its system prompt, its own opening as an ``assistant`` turn, then each agent message
as a ``user`` turn and each of its replies as an ``assistant`` turn. A reply holding ``###STOP###`` ends the
conversation. Every turn is checked by code (``usercheck.check_turn``) and its mistakes are *user* errors, kept
apart from the agent's (``leak``, ``invented``, ``tool_or_id``, ``early_stop``, ``empty``).

The endpoint comes from the configuration: ``UserEndpoint.from_env()`` reads ``ENVFOUNDRY_USER_BASE_URL`` (e.g.
``http://127.0.0.1:8001/v1``), ``ENVFOUNDRY_USER_MODEL``, ``ENVFOUNDRY_USER_API_KEY`` (optional),
``ENVFOUNDRY_USER_TEMPERATURE`` (default 0), ``ENVFOUNDRY_USER_MAX_TOKENS`` (default 160) and
``ENVFOUNDRY_USER_TIMEOUT`` (seconds, default 60); keyword arguments override them.
"""

import json
import os
import urllib.error
import urllib.request

from . import usercheck  # type: ignore[attr-defined]  # a sibling in the exported package

STOP = usercheck.STOP
ENV_PREFIX = "ENVFOUNDRY_USER_"
MAX_REPLIES = 10
"""Default cap on the user's replies in one conversation (``ENVFOUNDRY_USER_MAX_TURNS``)."""


class UserEndpointError(Exception):
    """The user's endpoint is not configured, cannot be reached, or answered with no reply."""


class UserEndpoint:
    """An OpenAI-compatible chat endpoint for the simulated user (``POST {base_url}/chat/completions``)."""

    def __init__(self, base_url, model, api_key=None, temperature=0.0, max_tokens=160, timeout=60.0):
        if not base_url or not model:
            raise UserEndpointError(
                "the simulated user needs an endpoint: set ENVFOUNDRY_USER_BASE_URL and ENVFOUNDRY_USER_MODEL "
                "(or pass user_base_url / user_model), e.g. http://127.0.0.1:8001/v1 and the model it serves")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.api_key = api_key
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.timeout = float(timeout)

    @classmethod
    def from_env(cls, environ=None, **overrides):
        """The endpoint named by ``ENVFOUNDRY_USER_*`` variables, with ``overrides`` (None values ignored)."""
        env = os.environ if environ is None else environ
        values = {
            "base_url": env.get(ENV_PREFIX + "BASE_URL"),
            "model": env.get(ENV_PREFIX + "MODEL"),
            "api_key": env.get(ENV_PREFIX + "API_KEY"),
            "temperature": env.get(ENV_PREFIX + "TEMPERATURE") or 0.0,
            "max_tokens": env.get(ENV_PREFIX + "MAX_TOKENS") or 160,
            "timeout": env.get(ENV_PREFIX + "TIMEOUT") or 60.0,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def describe(self):
        return {"base_url": self.base_url, "model": self.model, "temperature": self.temperature}

    def chat(self, messages):
        """The reply text to ``messages``, and the usage the endpoint reported."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        request = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode("utf-8"),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise UserEndpointError(f"user endpoint {self.base_url}: HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise UserEndpointError(f"user endpoint {self.base_url}: {exc}") from exc
        try:
            content = payload["choices"][0]["message"].get("content")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise UserEndpointError(f"user endpoint {self.base_url}: no reply in {str(payload)[:300]}") from exc
        return content or "", payload.get("usage") or {}


class Turn:
    """One reply of the user: its text (stop token removed), whether it ended the conversation, its errors."""

    def __init__(self, text, stop, errors, capped=False):
        self.text, self.stop, self.errors, self.capped = text, stop, errors, capped

    @property
    def ends(self):
        """Whether the conversation is over after this reply (the user stopped, or its replies ran out)."""
        return self.stop or self.capped

    def to_json(self):
        return {"text": self.text, "stop": self.stop, "errors": [e.to_json() for e in self.errors],
                "capped": self.capped}


class SimulatedUser:
    """The user of one conversation about one task (``conversation``: the exported record's ``conversation``;
    ``tools``: the environment's tool names, which the user must never say). ``endpoint`` is a
    :class:`UserEndpoint` or any callable ``messages -> reply text``. After ``max_replies`` replies the conversation
    ends as if the user had stopped (``capped``)."""

    def __init__(self, conversation, tools, endpoint=None, max_replies=None):
        self.conversation = conversation
        self.facts = [usercheck.Fact.from_json(f) for f in conversation.get("facts") or []]
        self.hidden = list(conversation.get("hidden") or [])
        self.tools = list(tools)
        self.endpoint = endpoint if endpoint is not None else UserEndpoint.from_env()
        cap = max_replies if max_replies is not None else os.environ.get(ENV_PREFIX + "MAX_TURNS") or MAX_REPLIES
        self.max_replies = int(cap)
        self.opening = conversation["opening"]
        self.agent = []
        self.user = [self.opening]
        self.messages = [{"role": "system", "content": conversation["user_system"]},
                         {"role": "assistant", "content": self.opening}]
        self.errors = usercheck.check_turn(self.facts, self.hidden, self.tools, [], [], self.opening, False, 0)
        self.stopped = False
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    @property
    def replies(self):
        return len(self.user) - 1

    def respond(self, agent_text):
        """The user's reply to the agent's message, checked (``UserEndpointError`` when the endpoint fails; the
        message then counts as not sent)."""
        if self.stopped:
            raise UserEndpointError("the conversation has ended (the user stopped)")
        agent_text = agent_text or ""
        self.agent.append(agent_text)
        self.messages.append({"role": "user", "content": agent_text or "(the assistant said nothing)"})
        try:
            if callable(self.endpoint) and not isinstance(self.endpoint, UserEndpoint):
                reply, usage = self.endpoint(list(self.messages)), {}
            else:
                reply, usage = self.endpoint.chat(self.messages)
        except BaseException:
            self.agent.pop()  # not heard: the agent's message may be sent again
            self.messages.pop()
            raise
        for key in self.usage:
            self.usage[key] += int(usage.get(key) or 0)
        text, stop = usercheck.split_stop(reply)
        errors = usercheck.check_turn(self.facts, self.hidden, self.tools, self.agent, self.user, text, stop,
                                      len(self.user))
        self.messages.append({"role": "assistant", "content": (reply or "").strip()})
        self.user.append(text)
        self.errors.extend(errors)
        capped = not stop and self.replies >= self.max_replies
        self.stopped = stop or capped
        return Turn(text, stop, errors, capped)

    def record(self):
        """What a trainer logs about the user's side: replies, whether it stopped, its errors (by kind too)."""
        kinds = {}
        for e in self.errors:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        return {"user_turns": self.replies, "user_stopped": self.stopped, "user_errors": [e.to_json() for e in self.errors],
                "user_error_kinds": kinds, "user_usage": dict(self.usage)}
