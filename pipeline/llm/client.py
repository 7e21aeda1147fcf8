"""The one LLM client every call of envfoundry goes through (built on the ``openai`` SDK).

* structured replies: a pydantic model becomes the JSON schema sent to the server; the reply is validated and,
  on failure, asked again with the validation error fed back;
* transport retries with exponential backoff on timeouts, dropped connections, truncated or non-JSON bodies
  and 5xx; a 429 (or a 503 with Retry-After) cools that endpoint down for the time it asks;
* up to ``[llm] concurrency`` requests in flight per endpoint, several endpoints (``[llm] endpoints``) shared
  by least-loaded routing (``pipeline.llm.endpoints``), and :meth:`LLMClient.map` for stages that have
  several independent requests to make;
* a persistent SQLite response cache (``pipeline.llm.cache``); errors are recorded apart, never served;
* token and time accounting per call, per stage and per run (``client.usage``; the records are in
  ``pipeline.llm.replies``).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from pipeline.config import LLMSettings
from pipeline.llm.cache import ResponseCache, cache_key
from pipeline.llm.endpoints import Endpoint, Router, parse_retry_after
from pipeline.llm.machine_lock import generation_turn
from pipeline.llm.replies import (
    Reply,
    Usage,
    format_validation,
    inline_refs,
    prompt_read,
    schema_of,
    usage_record,
)
from pipeline.prompts import fill_section

T = TypeVar("T", bound=BaseModel)
X = TypeVar("X")
R = TypeVar("R")

__all__ = ["LLMClient", "LLMError", "LLMUnavailable", "Reply", "Usage", "completion_json", "encode_reply",
           "inline_refs"]


class LLMError(RuntimeError):
    """An LLM call failed for good; the message says what happened and what to do."""


class LLMUnavailable(LLMError):
    """The endpoint itself failed (unreachable, timed out, HTTP error, garbage) after the transport retries.

    Unlike a reply that never validated, this says nothing about the item being generated: stages let it
    propagate, and a run marks the item *failed* (retried by the next run), not *rejected*."""


class _Retry(Exception):
    """One failed attempt worth another: the message, and how long to wait before it (None: backoff)."""

    def __init__(self, message: str, delay: float | None = None):
        super().__init__(message)
        self.delay = delay


class LLMClient:
    """``structured(Model, messages, stage=...)``, ``chat(messages, stage=...)`` and ``map(fn, items)``
    against one endpoint or several serving the same model."""

    #: first backoff after a failed attempt, doubled each time up to ``BACKOFF_MAX_S`` (tests shorten it)
    backoff_s: float = 0.5
    BACKOFF_MAX_S = 8.0

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
        cache: Any = None,
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
        if cache is not None:  # e.g. a Ray worker's view of the driver's cache (pipeline.executor)
            self._cache = cache
        else:
            self._cache = ResponseCache(settings.resolved_cache_path()) if settings.cache else None
        self._openai = openai.OpenAI(
            base_url=base_url,
            api_key=settings.api_key or "not-needed",
            max_retries=0,  # retries are ours: per endpoint, with Retry-After cooling only that endpoint
            timeout=settings.timeout_s,
            http_client=http_client,
        )
        self._sdks: dict[str, Any] = {}
        self._route: Router | None = None
        self._route_lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._prefetcher: ThreadPoolExecutor | None = None
        self._prefetched: set[str] = set()  # keys sent by prefetch and not asked for yet
        self._local = threading.local()

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
        schema = schema_of(response_model)
        msgs = list(messages)
        last_error = ""
        for _ in range(self.settings.validation_retries + 1):
            reply = self.complete(msgs, stage=stage, max_tokens=max_tokens, schema=schema,
                                  schema_name=response_model.__name__)
            try:
                return response_model.model_validate_json(reply.content), reply
            except ValidationError as e:
                last_error = format_validation(e)
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

    @property
    def parallelism(self) -> int:
        """Requests this client can have in flight at once: ``concurrency`` per endpoint."""
        return self.settings.concurrency * (1 + len(self._extra_urls()))

    def map(self, fn: Callable[[X], R], items: Iterable[X], *, max_workers: int | None = None) -> list[R]:
        """``[fn(x) for x in items]`` with several calls at once; results (and the first error, in input
        order) exactly as the serial loop gives them, so a run from the same cache writes the same bytes.

        For independent requests only: each ``fn(x)`` must not depend on another's reply or on shared
        order-dependent state (give each item its own ``Escalating``/``sampled`` wrapper, never share one).
        The per-endpoint limit bounds what is in flight; the thread pool only avoids idle threads.
        """
        xs = list(items)
        if len(xs) <= 1:
            return [fn(x) for x in xs]
        workers = max(1, min(len(xs), max_workers or self.parallelism))
        if workers == 1:
            return [fn(x) for x in xs]
        with ThreadPoolExecutor(workers, thread_name_prefix="llm-map") as pool:
            futures = [pool.submit(fn, x) for x in xs]
            wait(futures)
        for f in futures:  # the first failure in input order, as the serial loop would raise it
            exc = f.exception()
            if exc is not None:
                raise exc
        return [f.result() for f in futures]

    @property
    def prefetches(self) -> bool:
        """Whether :meth:`prefetch` sends anything: a cached client of a remote endpoint that takes several
        requests at once (the embedded model decodes one request at a time, so there is nothing to overlap)."""
        return (self._cache is not None and not self.embedded and self.parallelism > 1
                and getattr(self.settings, "prefetch", True))

    def prefetch(self, calls: Iterable[Callable[[], Any]]) -> None:
        """Start ``calls`` (requests the caller is about to make, one by one) in the background, so that their
        replies are in the cache, or on their way, when the caller asks. Nothing the caller does changes: it
        still asks in its own order and gets each reply from the cache (an identical request still in flight is
        joined, not sent twice), so the output is the serial run's. A prefetched request the caller never
        makes is a harmless cache entry; a failed one is forgotten (the caller's own request retries it)."""
        if not self.prefetches:
            return
        with self._inflight_lock:
            if self._prefetcher is None:
                self._prefetcher = ThreadPoolExecutor(self.parallelism, thread_name_prefix="llm-prefetch")
            pool = self._prefetcher
        for call in calls:
            pool.submit(self._speculate, call)

    def _speculate(self, call: Callable[[], Any]) -> None:
        self._local.prefetching = True
        try:
            call()
        except Exception:  # a speculative request: the caller's own request reports what goes wrong
            pass
        finally:
            self._local.prefetching = False

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
        while True:
            if self._cache is not None:
                hit = self._cache.get(key)
                if hit is not None:
                    content, usage = hit
                    if getattr(self._local, "prefetching", False):
                        return Reply(content, 0, 0, 0.0, True)
                    with self._inflight_lock:  # a reply prefetched for this ask counts as this ask's call
                        fetched = key in self._prefetched
                        self._prefetched.discard(key)
                    reply = Reply(content, int(usage.get("prompt_tokens", 0)),
                                  int(usage.get("completion_tokens", 0)),
                                  float(usage.get("seconds", 0.0)) if fetched else 0.0, not fetched,
                                  usage.get("prompt_read"))
                    self.usage.add(stage, reply)
                    return reply
            with self._inflight_lock:  # one request per key at a time: a second asker waits for the first
                running = self._inflight.get(key)
                if running is None:
                    done = self._inflight[key] = threading.Event()
            if running is None:
                break
            running.wait()  # then read the cache again (a failed first asker leaves it empty: ask ourselves)
        try:
            resp, content, seconds = self._send(key, messages, params)
            usage = getattr(resp, "usage", None)
            pt = int(getattr(usage, "prompt_tokens", 0) or 0)
            ct = int(getattr(usage, "completion_tokens", 0) or 0)
            read = prompt_read(resp, pt)
            if self._cache is not None:
                self._cache.put(key, key_payload, content, usage_record(pt, ct, seconds, read))
        finally:
            with self._inflight_lock:
                del self._inflight[key]
            done.set()
        reply = Reply(content, pt, ct, seconds, False, read)
        if getattr(self._local, "prefetching", False):
            with self._inflight_lock:
                self._prefetched.add(key)
            return reply
        self.usage.add(stage, reply)
        return reply

    def _extra_urls(self) -> list[str]:
        return list(getattr(self.settings, "endpoints", None) or [])

    def _router(self) -> Router:
        with self._route_lock:
            if self._route is None:  # built on first use: the embedded server's URL is known only then
                self._route = Router([self.base_url, *self._extra_urls()], self.settings.concurrency)
            return self._route

    def _sdk(self, url: str) -> Any:
        if url.rstrip("/") == self.base_url.rstrip("/"):
            return self._openai
        if url not in self._sdks:
            self._sdks[url] = self._openai.with_options(base_url=url)
        return self._sdks[url]

    def _backoff(self, attempt: int) -> float:
        return min(self.BACKOFF_MAX_S, self.backoff_s * 2 ** attempt) * random.uniform(0.75, 1.0)

    def _send(self, key: str, messages: list[dict[str, Any]], params: dict[str, Any],
              extract: Callable[[Any, str], Any] | None = None) -> tuple[Any, Any, float]:
        """One request, retried up to ``max_retries`` times on transient failures; (response, content, s).
        ``extract(response, url)`` reads the content (raising ``_Retry`` on a malformed reply); default: the
        message text."""
        s = self.settings
        tries = s.max_retries + 1
        message = ""
        for attempt in range(tries):
            try:
                with self._machine_lock():
                    self._ensure_started()  # the embedded server starts once this process may generate
                    router = self._router()
                    with router.slot() as ep:
                        t0 = time.perf_counter()
                        resp = self._attempt(ep, router, key, messages, params)
                        content = (extract or self._content)(resp, ep.url)
                        return resp, content, time.perf_counter() - t0
            except _Retry as r:
                message = str(r)
                if attempt < tries - 1:
                    time.sleep(self._backoff(attempt) if r.delay is None else r.delay)
        self._fail(key, message + (f" (after {tries} tries)" if tries > 1 else ""))
        raise AssertionError("unreachable")

    def _attempt(self, ep: Endpoint, router: Router, key: str, messages: list[dict[str, Any]],
                 params: dict[str, Any]) -> Any:
        s = self.settings
        try:
            return self._sdk(ep.url).chat.completions.create(model=self.model, messages=messages, **params)
        except openai.APITimeoutError:
            raise _Retry(f"LLM endpoint {ep.url} timed out after {s.timeout_s:g}s; raise llm.timeout_s or "
                         "use a faster model") from None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            if _is_protocol_error(cause):
                raise _Retry(f"LLM endpoint {ep.url} dropped the connection or sent a truncated reply "
                             f"({type(cause).__name__}: {cause})") from None
            hint = ("the embedded server stopped; rerun to restart it" if self.embedded else
                    "is the server running? unset OPENAI_BASE_URL to use the embedded model")
            raise _Retry(f"cannot reach LLM endpoint {ep.url}: {cause}; {hint}") from None
        except openai.APIStatusError as e:
            code = e.status_code
            wait_s = parse_retry_after(e.response.headers)
            msg = f"LLM endpoint {ep.url} answered HTTP {code}: {str(e.message)[:300]}"
            if code == 429 or (code == 503 and wait_s is not None):
                # this endpoint asked for time: others (if any) go on; this request waits for a free one
                router.cool_down(ep, wait_s if wait_s is not None else self._backoff(0))
                raise _Retry(msg, delay=0.0) from None
            if code >= 500 or code in (408, 409):
                raise _Retry(msg) from None
            self._fail(key, msg)  # 4xx: the request itself is wrong; asking again gives the same
        except (openai.APIError, ValueError) as e:  # a body that is not the JSON of a chat completion
            raise _Retry(f"LLM endpoint {ep.url} returned a malformed reply: {str(e)[:300]}") from None

    @contextlib.contextmanager
    def _machine_lock(self) -> Iterator[None]:
        """The embedded model generates for one request at a time on this machine, whichever process asks:
        several llama.cpp servers decoding at once on a few CPU cores thrash (measured: >10x slower each). A
        process that must wait says so, naming the holder (``pipeline.llm.machine_lock``); its own server
        starts only once it has the turn (:meth:`_send`)."""
        if not self.embedded:
            yield
            return
        with generation_turn():
            yield

    @staticmethod
    def _content(resp: Any, url: str) -> str:
        try:
            content = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            raise _Retry(f"LLM endpoint {url} returned a malformed reply: {str(resp)[:200]!r}") from None
        if not isinstance(content, str):
            raise _Retry(f"LLM endpoint {url} returned no text content ({content!r})")
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


def _is_protocol_error(exc: BaseException) -> bool:
    """A connection dropped mid-reply or a body cut short (by name: the SDK may bring its own httpx)."""
    return any(c.__name__ in ("RemoteProtocolError", "ReadError", "DecodingError", "LocalProtocolError")
               for c in type(exc).__mro__)


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
