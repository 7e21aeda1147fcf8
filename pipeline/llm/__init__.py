"""All LLM traffic of envfoundry goes through :class:`LLMClient` (see ``client.py``)."""

from __future__ import annotations

from pipeline.config import LLMSettings
from pipeline.llm.cache import CacheError, ResponseCache
from pipeline.llm.client import LLMClient, LLMError, LLMUnavailable, Reply, Usage
from pipeline.llm.embedded import ModelError, ensure_model
from pipeline.llm.fake import fake_client

__all__ = [
    "CacheError", "LLMClient", "LLMError", "LLMUnavailable", "LLMSettings", "ModelError", "Reply", "ResponseCache", "Usage",
    "client_from_settings", "embedded_client", "ensure_model", "fake_client",
]


def embedded_client(settings: LLMSettings | None = None) -> LLMClient:
    """A client for the embedded model; its llama.cpp server starts on the first uncached request."""
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
        model_key=model_key(settings.embedded_model), embedded=True, on_first_request=start,
    )
    assert settings.embedded_model in MODELS
    return client


def client_from_settings(settings: LLMSettings) -> LLMClient:
    """The configured endpoint if there is one, else the embedded model."""
    if settings.base_url:
        return LLMClient(settings, base_url=settings.base_url, model=settings.model or "")
    return embedded_client(settings)
