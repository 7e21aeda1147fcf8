"""Chat requests with native OpenAI tool calls, through the one client's endpoint, cache and ledger.

``chat_tools(client, messages, tools, stage=...)`` sends ``tools`` in the request and returns the
reply's ``tool_calls`` (name + the raw argument text, parsed by the caller so a malformed argument
string becomes a tool error the model sees, never an exception here) and its text.

Servers that render tools into the prompt but do not parse the model's calls back (llama-cpp-python's
server with a model's own Jinja chat template, as the embedded Qwen2.5 model is served) leave the
model's native ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks in the text; those
are read back into tool calls here (``ToolReply.parsed_from_text``), the Hermes/Qwen convention.

Everything else comes from :class:`pipeline.llm.client.LLMClient`: its endpoint router (concurrency,
several endpoints, cool-downs), retries with backoff on transient faults, the embedded server's start
and machine lock, the response cache (the key covers the model, messages, tools and sampling
parameters) and the usage ledger.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from pipeline.llm.cache import cache_key
from pipeline.llm.client import LLMError, Reply, _Retry
from pipeline.llm.replies import prompt_read, usage_record

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass(frozen=True)
class ToolCallRequest:
    """One call the model asked for; ``arguments`` is the JSON text exactly as it was sent."""

    id: str
    name: str
    arguments: str

    def to_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ToolReply:
    content: str
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    reply: Reply
    parsed_from_text: bool = False
    raw_content: str = ""

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation (OpenAI format)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


@dataclass(frozen=True)
class ChatOptions:
    max_tokens: int = 512
    tool_choice: str = "auto"
    parse_text_calls: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def parse_text_tool_calls(content: str) -> tuple[str, list[ToolCallRequest]]:
    """``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` blocks in ``content`` as tool calls.

    Returns the text outside the blocks and the calls. A block that is not a JSON object with a
    ``name`` is left in the text (the model gets no call for it); ``arguments`` may be an object or
    a JSON string, and is passed on as JSON text whatever it holds (the caller validates it; an
    unknown name is still a call, answered with a tool error)."""
    calls: list[ToolCallRequest] = []
    kept: list[str] = []
    pos = 0
    tag = hashlib.sha256(content.encode("utf-8")).hexdigest()[:8]  # ids differ from turn to turn
    for i, m in enumerate(_TOOL_CALL.finditer(content)):
        try:
            obj = json.loads(m.group(1))
        except ValueError:
            obj = _first_json_object(m.group(1))
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        kept.append(content[pos:m.start()])
        pos = m.end()
        calls.append(ToolCallRequest(id=f"call_{tag}_{i + 1}", name=obj["name"], arguments=text))
    kept.append(content[pos:])
    return "".join(kept).strip(), calls


def _first_json_object(text: str) -> Any:
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return None
    return obj


def _calls_of(message: Any) -> list[ToolCallRequest]:
    out = []
    for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None)
        if not isinstance(name, str):
            continue
        args = getattr(fn, "arguments", None)
        if not isinstance(args, str):
            args = json.dumps(args) if args is not None else "{}"
        out.append(ToolCallRequest(id=str(getattr(tc, "id", None) or f"call_{i + 1}"), name=name, arguments=args))
    return out


def _decode(stored: str) -> tuple[str, list[ToolCallRequest], str | None]:
    data = json.loads(stored)
    calls = [ToolCallRequest(**c) for c in data.get("tool_calls", [])]
    return data.get("content") or "", calls, data.get("finish_reason")


def chat_tools(
    client: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    stage: str,
    options: ChatOptions | None = None,
) -> ToolReply:
    """One chat request with ``tools``; raises ``LLMUnavailable`` when the endpoint fails after its retries.

    ``client`` is an :class:`LLMClient` (or ``pipeline.llm.sampling.sampled`` of one: its sampling
    settings are used)."""
    opts = options or ChatOptions()
    s = client.settings
    params: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "seed": s.seed,
                              "max_tokens": opts.max_tokens, **opts.extra}
    if tools:
        params["tools"] = tools
        params["tool_choice"] = opts.tool_choice
    key_payload = {"model": client.model_key, "messages": messages, "kind": "tool_chat", **params}
    key = cache_key(key_payload)
    cache = client.cache
    if cache is not None and (hit := cache.get(key)) is not None:
        stored, usage = hit
        content, calls, finish = _decode(stored)
        reply = Reply(stored, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)), 0.0, True,
                      usage.get("prompt_read"))
        client.usage.add(stage, reply)
        return _finish(content, calls, finish, reply, opts)
    resp, _, seconds = client._send(key, messages, params, extract=_first_choice)  # the client's retries
    try:
        choice = resp.choices[0]
        message = choice.message
    except (AttributeError, IndexError, TypeError):
        client._fail(key, f"LLM endpoint {client.base_url} returned a malformed reply: {str(resp)[:200]!r}")
    content = message.content if isinstance(message.content, str) else ""
    calls = _calls_of(message)
    finish = getattr(choice, "finish_reason", None)
    usage = getattr(resp, "usage", None)
    pt = int(getattr(usage, "prompt_tokens", 0) or 0)
    ct = int(getattr(usage, "completion_tokens", 0) or 0)
    stored = json.dumps({"content": content, "tool_calls": [c.__dict__ for c in calls], "finish_reason": finish},
                        ensure_ascii=False, sort_keys=True)
    read = prompt_read(resp, pt)
    if cache is not None:
        cache.put(key, key_payload, stored, usage_record(pt, ct, seconds, read))
    reply = Reply(stored, pt, ct, seconds, False, read)
    client.usage.add(stage, reply)
    return _finish(content, calls, finish, reply, opts)


def _first_choice(resp: Any, url: str) -> Any:
    try:
        return resp.choices[0].message
    except (AttributeError, IndexError, TypeError):
        raise _Retry(f"LLM endpoint {url} returned a malformed reply: {str(resp)[:200]!r}") from None


def _finish(content: str, calls: list[ToolCallRequest], finish: str | None, reply: Reply,
            opts: ChatOptions) -> ToolReply:
    if calls or not opts.parse_text_calls or "<tool_call>" not in content:
        return ToolReply(content, tuple(calls), finish, reply, raw_content=content)
    text, parsed = parse_text_tool_calls(content)
    if not parsed:
        return ToolReply(content, (), finish, reply, raw_content=content)
    return ToolReply(text, tuple(parsed), finish, reply, parsed_from_text=True, raw_content=content)


__all__ = ["ChatOptions", "LLMError", "ToolCallRequest", "ToolReply", "chat_tools", "parse_text_tool_calls"]
