"""Sampling settings per request without a second client.

``sampled(client, temperature, seed)`` is ``client`` with other sampling settings (everything else
shared: cache, usage ledger, connection, the embedded server), so k tester attempts, or a retry
after feedback, are different seeded samples instead of the same greedy reply again. The sampling
settings are part of the request, hence of the cache key: reruns reproduce them.
"""

from __future__ import annotations

from typing import Any

from pipeline.llm.client import LLMClient
from pipeline.llm.protocol import LLMClientProtocol


class _Sampled:
    def __init__(self, client: LLMClientProtocol, temperature: float, seed: int):
        self._client = client
        self.settings = client.settings.model_copy(update={"temperature": temperature, "seed": seed})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    complete = LLMClient.complete
    structured_reply = LLMClient.structured_reply
    structured = LLMClient.structured


def sampled(client: LLMClientProtocol, temperature: float, seed: int) -> LLMClientProtocol:
    if not hasattr(client, "settings") or client.settings.temperature == temperature:
        return client
    return _Sampled(client, temperature, seed)


class Escalating:
    """A client whose first request is greedy and whose later ones (retries after feedback) sample
    with ``temperature`` and seeds base+1, base+2, ...: a small model at temperature 0 tends to send
    the same wrong reply again whatever the feedback says."""

    def __init__(self, client: LLMClientProtocol, temperature: float = 0.7):
        self._client = client
        self._temperature = temperature
        self._n = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def structured_reply(self, *args: Any, **kwargs: Any) -> Any:
        self._n += 1
        if self._n == 1:
            return self._client.structured_reply(*args, **kwargs)
        seed = getattr(getattr(self._client, "settings", None), "seed", 0) + self._n - 1
        return sampled(self._client, self._temperature, seed).structured_reply(*args, **kwargs)
