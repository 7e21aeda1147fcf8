"""A scripted fake LLM at the HTTP layer: the real client code (validation, retries, cache) runs unchanged.

``fake_client(replies)``: each HTTP request consumes one item — a str (the assistant content), a dict or
pydantic object (JSON-encoded), a callable ``(messages) -> item``, an ``httpx.Response`` (e.g. a 429 or 500) or
an exception instance (raised by the transport, e.g. ``httpx.ConnectTimeout``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from pipeline.config import LLMSettings
from pipeline.llm.client import LLMClient, completion_json, encode_reply


class FakeLLMClient(LLMClient):
    requests: list[list[dict[str, Any]]]
    bodies: list[dict[str, Any]]
    remaining: list[Any]

    @property
    def prefetches(self) -> bool:
        """Never: the scripted replies are handed out in request order, which sending ahead would change."""
        return False


def fake_client(
    replies: Iterable[Any],
    *,
    cache_path: str | Path | None = None,
    validation_retries: int = 2,
    max_retries: int = 2,
    concurrency: int = 2,
) -> FakeLLMClient:
    items = list(replies)
    lock = threading.Lock()
    requests: list[list[dict[str, Any]]] = []
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        with lock:
            requests.append(body["messages"])
            bodies.append(body)
            if not items:
                return httpx.Response(400, json={"error": {"message": "fake LLM: no scripted reply left"}})
            item = items.pop(0)
        if callable(item) and not isinstance(item, BaseModel | httpx.Response):
            item = item(body["messages"])
        if isinstance(item, httpx.Response):
            return item
        if isinstance(item, BaseException):
            raise item
        return httpx.Response(200, json=completion_json(encode_reply(item)))

    settings = LLMSettings(
        base_url="http://fake-llm.invalid/v1", model="fake-model", cache=cache_path is not None,
        cache_path=Path(cache_path) if cache_path else None, validation_retries=validation_retries,
        max_retries=max_retries, concurrency=concurrency, timeout_s=30,
    )
    client = FakeLLMClient(
        settings, base_url=settings.base_url or "", model="fake-model",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    client.requests = requests
    client.bodies = bodies
    client.remaining = items
    return client
