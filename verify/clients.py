"""A client for an agent's own endpoint (``[stages.tester]``, ``[stages.user]``): the caller's other LLM settings
(cache, retries, seed) and the same usage ledger, made once per (client, endpoint, model) and reused."""

from __future__ import annotations

import threading

from pipeline.llm.protocol import LLMClientProtocol

_clients: dict[tuple[int, str, str], LLMClientProtocol] = {}
_lock = threading.Lock()


def endpoint_client(client: LLMClientProtocol, base_url: str | None, model: str | None, api_key: str | None, section: str) -> LLMClientProtocol:
    """``client`` itself without ``base_url``, else the client of that endpoint (``section`` names the settings
    table in the error when ``model`` is missing)."""
    if not base_url:
        return client
    if not model:
        raise ValueError(f"[{section}] base_url={base_url} needs 'model' too")
    from pipeline.llm import LLMClient

    key = (id(client), base_url, model)
    with _lock:
        if key not in _clients:
            llm = client.settings.model_copy(update={"base_url": base_url, "model": model,
                                                     "api_key": api_key or client.settings.api_key})
            made = LLMClient(llm, base_url=base_url, model=model)
            made.usage = client.usage  # one ledger per run
            _clients[key] = made
        return _clients[key]
