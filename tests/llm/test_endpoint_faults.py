"""The LLM client against a real HTTP server on loopback that misbehaves: every fault is retried with
backoff and then answered, or recorded as the endpoint's failure; nothing is cached from a failed request."""

from __future__ import annotations

import threading

import pytest

from pipeline.config import LLMSettings
from pipeline.llm import LLMClient, LLMUnavailable, ResponseCache
from pipeline.llm.simulated import Fault, SimulatedEndpoint

MSGS = [{"role": "user", "content": "say ok"}]


def _client(url: str, tmp_path=None, **kw) -> LLMClient:
    settings = LLMSettings(base_url=url, model="sim", timeout_s=kw.pop("timeout_s", 5), max_retries=kw.pop("retries", 3),
                           cache=tmp_path is not None,
                           cache_path=(tmp_path / "cache.sqlite") if tmp_path is not None else None, **kw)
    client = LLMClient(settings, base_url=url, model="sim")
    client.backoff_s = 0.01  # the backoff's shape is tested below; keep the waits short here
    return client


class Script:
    """Answers each request with the next scripted item (a Fault or content); then "ok" for ever."""

    def __init__(self, *items: str | Fault):
        self.items = list(items)
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str | Fault:
        with self.lock:
            return self.items.pop(0) if self.items else "ok"


FAULTS = {
    "timeout": Fault("timeout", hang_s=10),
    "429 with Retry-After": Fault("status", status=429, retry_after=0.2),
    "500": Fault("status", status=500),
    "502": Fault("status", status=502),
    "503 with Retry-After": Fault("status", status=503, retry_after=0.1),
    "truncated body": Fault("truncated"),
    "non-JSON body": Fault("non_json"),
    "dropped connection": Fault("drop"),
}


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_is_retried_and_the_reply_arrives(name, tmp_path):
    with SimulatedEndpoint(Script(FAULTS[name], FAULTS[name])) as ep:
        client = _client(ep.url, tmp_path, timeout_s=0.5)
        reply = client.complete(MSGS, stage="s")
        stats = ep.stats()
    assert reply.content == "ok" and not reply.cached
    assert stats["requests"] == 3 and stats["outcomes"]["ok"] == 1
    cache = ResponseCache(tmp_path / "cache.sqlite")
    assert len(cache) == 1 and cache.errors(_key(client)) == []


def _key(client: LLMClient) -> str:
    from pipeline.llm.cache import cache_key

    s = client.settings
    return cache_key({"model": "sim", "messages": MSGS, "temperature": s.temperature, "top_p": s.top_p,
                      "seed": s.seed, "max_tokens": 512})


@pytest.mark.parametrize("name,expect", [
    ("timeout", "timed out after 0.3s"), ("500", "HTTP 500"), ("truncated body", "truncated reply"),
    ("non-JSON body", "malformed|no text"), ("dropped connection", "dropped the connection"),
])
def test_a_persistent_fault_fails_with_its_cause_after_the_retries(name, expect, tmp_path):
    with SimulatedEndpoint(lambda body: FAULTS[name]) as ep:
        client = _client(ep.url, tmp_path, timeout_s=0.3, retries=2)
        with pytest.raises(LLMUnavailable, match=expect) as e:
            client.complete(MSGS, stage="s")
        assert ep.stats()["requests"] == 3
        assert ep.url in str(e.value)
    assert "after 3 tries" in str(e.value) and "\n" not in str(e.value)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    assert len(cache) == 0  # nothing half-written: the failure is recorded apart, never served
    assert len(cache.errors(_key(client))) == 1


def test_a_client_error_is_not_retried(tmp_path):
    with SimulatedEndpoint(lambda body: Fault("status", status=400)) as ep:
        client = _client(ep.url, tmp_path)
        with pytest.raises(LLMUnavailable, match="HTTP 400"):
            client.complete(MSGS, stage="s")
        assert ep.stats()["requests"] == 1


def test_backoff_grows_and_is_capped():
    client = _client("http://127.0.0.1:9/v1")
    client.backoff_s = 0.5
    waits = [client._backoff(n) for n in range(8)]
    assert 0.375 <= waits[0] <= 0.5 and 0.75 <= waits[1] <= 1.0 and 1.5 <= waits[2] <= 2.0
    assert max(waits) <= client.BACKOFF_MAX_S
