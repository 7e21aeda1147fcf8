"""All LLM traffic of envfoundry goes through :class:`LLMClient` (see ``client.py``)."""

from __future__ import annotations

from typing import Any

from pipeline.config import LLMSettings
from pipeline.llm.cache import CacheError, ResponseCache
from pipeline.llm.client import LLMClient, LLMError, LLMUnavailable, Reply, Usage
from pipeline.llm.embedded import ModelError, ensure_model
from pipeline.llm.fake import fake_client

__all__ = [
    "CacheError", "LLMClient", "LLMError", "LLMUnavailable", "LLMSettings", "ModelError", "Reply", "ResponseCache", "Usage",
    "client_from_settings", "embedded_client", "ensure_model", "fake_client",
]


def embedded_client(settings: LLMSettings | None = None, *, cache: Any = None) -> LLMClient:
    """A client for the embedded model; its llama.cpp server starts on the first uncached request.
    ``cache``: a cache object to use instead of opening ``settings``' cache file."""
    from pipeline.llm.embedded import MODELS, model_key, shared_server

    settings = settings or LLMSettings()
    if settings.base_url:
        raise ValueError("embedded_client() called with an endpoint configured")
    server = shared_server(settings)
    client: LLMClient

    def start() -> None:
        url = server.start()
        client._openai = client._openai.with_options(base_url=url)
        client.base_url = url

    client = LLMClient(
        settings, base_url="http://127.0.0.1:0/v1 (not started)", model=settings.embedded_model,
        model_key=model_key(settings.embedded_model), embedded=True, on_first_request=start, cache=cache,
    )
    assert settings.embedded_model in MODELS
    return client


def client_from_settings(settings: LLMSettings, *, cache: Any = None) -> LLMClient:
    """The configured endpoint(s) if there are any, else the embedded model. ``cache``: a cache object to
    use instead of opening ``settings``' cache file (a Ray worker's view of the driver's cache)."""
    if settings.base_url:
        return LLMClient(settings, base_url=settings.base_url, model=settings.model or "", cache=cache)
    if settings.endpoints:
        raise ValueError("llm.endpoints lists more endpoints but llm.base_url (the first one) is not set")
    return embedded_client(settings, cache=cache)
