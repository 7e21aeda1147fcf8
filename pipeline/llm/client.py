"""The one LLM client every call of envfoundry goes through (built on the ``openai`` SDK).

* structured replies: a pydantic model becomes the JSON schema sent to the server; the reply is validated and,
  on failure, asked again with the validation error fed back;
* transport retries with exponential backoff on timeouts, connection errors, 429 and 5xx (the SDK's own), and
  a concurrency limit;
* a persistent SQLite response cache (``pipeline.llm.cache``); errors are recorded apart, never served;
* token and time accounting per call, per stage and per run (``client.usage``).
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from pipeline.config import LLMSettings, default_home
from pipeline.llm.cache import ResponseCache, cache_key
from pipeline.prompts import fill_section

T = TypeVar("T", bound=BaseModel)


class LLMError(RuntimeError):
    """An LLM call failed for good; the message says what happened and what to do."""


class LLMUnavailable(LLMError):
    """The endpoint itself failed (unreachable, timed out, HTTP error, garbage) after the transport retries.

    Unlike a reply that never validated, this says nothing about the item being generated: stages let it
    propagate, and a run marks the item *failed* (retried by the next run), not *rejected*."""


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool


@dataclass
class Usage:
    """Thread-safe ledger of calls: totals per stage and for the run."""

    records: list[tuple[str, Reply]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str, reply: Reply) -> None:
        with self._lock:
            self.records.append((stage, reply))

    def by_stage(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            for stage, r in self.records:
                s = out.setdefault(
                    stage, {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
                )
                s["calls"] += 1
                s["cached"] += int(r.cached)
                s["prompt_tokens"] += r.prompt_tokens
                s["completion_tokens"] += r.completion_tokens
                s["seconds"] = round(s["seconds"] + r.seconds, 3)
        return dict(sorted(out.items()))

    def total(self) -> dict[str, float]:
        tot = {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        for s in self.by_stage().values():
            for k in tot:
                tot[k] += s[k]
        tot["seconds"] = round(tot["seconds"], 3)
        return tot


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``$ref``/``$defs`` of a pydantic schema into one self-contained tree (grammar converters and
    small servers handle that best); drops ``title`` noise."""
    defs = schema.get("$defs", {})

    def walk(node: Any, depth: int = 0, names: bool = False) -> Any:
        if depth > 40:
            raise ValueError("schema nests too deeply (recursive model?)")
        if isinstance(node, dict):
            if names:  # the keys of "properties" are field names (a field may be called "title")
                return {k: walk(v, depth + 1) for k, v in node.items()}
            if "$ref" in node:
                name = node["$ref"].split("/")[-1]
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged, depth + 1)
            return {k: walk(v, depth + 1, names=(k == "properties")) for k, v in node.items()
                    if k not in ("$defs", "title")}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(copy.deepcopy(schema))


def _format_validation(err: ValidationError) -> str:
    lines = []
    for e in err.errors()[:8]:
        loc = ".".join(str(x) for x in e["loc"]) or "(reply)"
        lines.append(f"- {loc}: {e['msg']}")
    return "\n".join(lines)


class LLMClient:
    """``structured(Model, messages, stage=...)`` and ``chat(messages, stage=...)`` against one endpoint."""

    def __init__(
        self,
        settings: LLMSettings,
        *,
        base_url: str,
        model: str,
        model_key: str | None = None,
        http_client: Any = None,
        embedded: bool = False,
        on_first_request: Callable[[], None] | None = None,
    ):
        self.settings = settings
        self.base_url = base_url
        self.model = model
        self.model_key = model_key or model
        self.embedded = embedded
        self.usage = Usage()
        self._on_first_request = on_first_request
        self._started = on_first_request is None
        self._start_lock = threading.Lock()
        self._sem = threading.BoundedSemaphore(settings.concurrency)
        self._cache = ResponseCache(settings.resolved_cache_path()) if settings.cache else None
        self._openai = openai.OpenAI(
            base_url=base_url,
            api_key=settings.api_key or "not-needed",
            max_retries=settings.max_retries,
            timeout=settings.timeout_s,
            http_client=http_client,
        )

    # ------------------------------------------------------------------ public API

    @property
    def cache(self) -> ResponseCache | None:
        return self._cache

    def describe(self) -> str:
        if self.embedded and not self._started:
            if not self.usage.total()["calls"]:
                return f"{self.model} (embedded; its server starts when a reply is not in the cache)"
            return f"{self.model} (embedded; server not started: every reply came from the cache)"
        kind = "embedded llama.cpp server" if self.embedded else "configured endpoint"
        return f"{self.model} at {self.base_url} ({kind})"

    def structured(
        self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str, max_tokens: int = 1024
    ) -> T:
        """Ask for a reply matching ``response_model``; validation errors are fed back up to
        ``settings.validation_retries`` times; raises :class:`LLMError` when it gives up."""
        return self.structured_reply(response_model, messages, stage=stage, max_tokens=max_tokens)[0]

    def structured_reply(
        self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str, max_tokens: int = 1024
    ) -> tuple[T, Reply]:
        schema = inline_refs(response_model.model_json_schema())
        msgs = list(messages)
        last_error = ""
        for _ in range(self.settings.validation_retries + 1):
            reply = self.complete(msgs, stage=stage, max_tokens=max_tokens, schema=schema,
                                  schema_name=response_model.__name__)
            try:
                return response_model.model_validate_json(reply.content), reply
            except ValidationError as e:
                last_error = _format_validation(e)
                msgs = msgs + [
                    {"role": "assistant", "content": reply.content},
                    {"role": "user", "content": fill_section("structured", "invalid", problems=last_error)},
                ]
        raise LLMError(
            f"stage {stage!r}: {self.model} gave no valid {response_model.__name__} after "
            f"{self.settings.validation_retries + 1} tries; last problems:\n{last_error}"
        )

    def chat(self, messages: list[dict[str, Any]], *, stage: str, max_tokens: int = 512) -> str:
        return self.complete(messages, stage=stage, max_tokens=max_tokens).content

    # ------------------------------------------------------------------ transport

    def _response_format(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        mode = self.settings.structured_mode
        if mode == "auto":
            mode = "json_object" if self.embedded else "json_schema"
        if mode == "json_object":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_schema", "json_schema": {"name": name[:64], "schema": schema}}

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        stage: str,
        max_tokens: int = 512,
        schema: dict[str, Any] | None = None,
        schema_name: str = "reply",
    ) -> Reply:
        s = self.settings
        params: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "seed": s.seed,
                                  "max_tokens": max_tokens}
        if schema is not None:
            params["response_format"] = self._response_format(schema, schema_name)
        key_payload = {"model": self.model_key, "messages": messages, **params}
        key = cache_key(key_payload)
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                content, usage = hit
                reply = Reply(content, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)),
                              0.0, True)
                self.usage.add(stage, reply)
                return reply
        self._ensure_started()
        with self._sem, self._machine_lock():
            t0 = time.perf_counter()
            try:
                resp = self._openai.chat.completions.create(model=self.model, messages=messages, **params)
            except openai.APITimeoutError:
                msg = (f"LLM endpoint {self.base_url} timed out after {s.timeout_s:g}s "
                       f"(and {s.max_retries} retries); raise llm.timeout_s or use a faster model")
                self._fail(key, msg)
            except openai.APIConnectionError as e:
                hint = ("the embedded server stopped; rerun to restart it" if self.embedded else
                        "is the server running? unset OPENAI_BASE_URL to use the embedded model")
                self._fail(key, f"cannot reach LLM endpoint {self.base_url}: {e.__cause__ or e}; {hint}")
            except openai.APIStatusError as e:
                self._fail(key, f"LLM endpoint {self.base_url} answered HTTP {e.status_code}: "
                                f"{str(e.message)[:300]}")
            except openai.APIError as e:
                self._fail(key, f"LLM endpoint {self.base_url} returned a malformed reply: {str(e)[:300]}")
        seconds = time.perf_counter() - t0
        content = self._content(resp, key)
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        if self._cache is not None:
            self._cache.put(key, key_payload, content,
                            {"prompt_tokens": pt, "completion_tokens": ct, "seconds": round(seconds, 3)})
        reply = Reply(content, pt, ct, seconds, False)
        self.usage.add(stage, reply)
        return reply

    @contextlib.contextmanager
    def _machine_lock(self) -> Iterator[None]:
        """The embedded model generates for one request at a time on this machine, whichever process asks:
        several llama.cpp servers decoding at once on a few CPU cores thrash (measured: >10x slower each)."""
        if not self.embedded:
            yield
            return
        path = default_home() / "embedded-generation.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
        time.sleep(0.05)  # flock is not fair: give a waiting process the lock before this one asks again

    def _content(self, resp: Any, key: str) -> str:
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            self._fail(key, f"LLM endpoint {self.base_url} returned a malformed reply: {str(resp)[:200]!r}")
        if not isinstance(content, str):
            self._fail(key, f"LLM endpoint {self.base_url} returned no text content ({content!r})")
        return content

    def _fail(self, key: str, message: str) -> Any:
        if self._cache is not None:
            self._cache.record_error(key, message)
        raise LLMUnavailable(message)

    def _ensure_started(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if not self._started and self._on_first_request is not None:
                self._on_first_request()
            self._started = True


def completion_json(content: str, prompt_tokens: int = 10, completion_tokens: int | None = None) -> dict[str, Any]:
    """An OpenAI chat.completion body (used by the fake transport)."""
    ct = completion_tokens if completion_tokens is not None else max(1, len(content) // 4)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": ct, "total_tokens": prompt_tokens + ct},
    }


def encode_reply(item: Any) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, BaseModel):
        return item.model_dump_json()
    return json.dumps(item)
