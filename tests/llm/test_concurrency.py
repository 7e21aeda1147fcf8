"""Requests in flight: a limit per endpoint, least-loaded routing over several endpoints, Retry-After cooling
one endpoint only, ``client.map`` in input order, and a cache key that does not name the endpoint."""

from __future__ import annotations

import threading
import time

import pytest

from pipeline.config import LLMSettings
from pipeline.llm import LLMClient
from pipeline.llm.endpoints import Router, parse_retry_after
from pipeline.llm.simulated import Fault, SimulatedEndpoint


def _echo(body: dict) -> str:
    return "re: " + body["messages"][-1]["content"]


def _client(urls: list[str], concurrency: int, cache_path=None) -> LLMClient:
    settings = LLMSettings(base_url=urls[0], endpoints=urls[1:], model="sim", concurrency=concurrency,
                           cache=cache_path is not None, cache_path=cache_path, timeout_s=10)
    client = LLMClient(settings, base_url=urls[0], model="sim")
    client.backoff_s = 0.01
    return client


def _ask(client: LLMClient, i: int) -> str:
    return client.chat([{"role": "user", "content": f"q{i}"}], stage="s")


def test_map_keeps_input_order_and_the_limit_per_endpoint():
    with SimulatedEndpoint(_echo, latency=0.2) as ep:
        client = _client([ep.url], concurrency=3)
        t0 = time.monotonic()
        out = client.map(lambda i: _ask(client, i), range(9))
        wall = time.monotonic() - t0
        stats = ep.stats()
    assert out == [f"re: q{i}" for i in range(9)]
    assert stats["peak_in_flight"] == 3  # never more than the limit, and the limit is used
    assert wall < 9 * 0.2 * 0.6  # 3 waves of 0.2 s, not 9


def test_the_limit_is_per_endpoint_for_every_client_of_the_process():
    with SimulatedEndpoint(_echo, latency=0.2) as ep:
        clients = [_client([ep.url], concurrency=2) for _ in range(4)]  # a run makes one client per scenario
        threads = [threading.Thread(target=lambda c=c: c.map(lambda i, c=c: _ask(c, i), range(4))) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        stats = ep.stats()
    assert stats["requests"] == 16 and stats["peak_in_flight"] == 2


def test_least_loaded_routing_uses_every_endpoint():
    with SimulatedEndpoint(_echo, latency=0.2) as a, SimulatedEndpoint(_echo, latency=0.2) as b:
        client = _client([a.url, b.url], concurrency=2)
        assert client.parallelism == 4
        out = client.map(lambda i: _ask(client, i), range(8))
        sa, sb = a.stats(), b.stats()
    assert out == [f"re: q{i}" for i in range(8)]
    assert sa["requests"] == sb["requests"] == 4
    assert sa["peak_in_flight"] == sb["peak_in_flight"] == 2


def test_retry_after_cools_only_the_endpoint_that_asked():
    hits: list[tuple[str, float]] = []
    lock = threading.Lock()
    first = {"done": False}

    def throttling(body: dict) -> str | Fault:
        with lock:
            hits.append(("a", time.monotonic()))
            if not first["done"]:
                first["done"] = True
                return Fault("status", status=429, retry_after=1)
        return _echo(body)

    def plain(body: dict) -> str:
        with lock:
            hits.append(("b", time.monotonic()))
        return _echo(body)

    with SimulatedEndpoint(throttling, latency=0.05) as a, SimulatedEndpoint(plain, latency=0.05) as b:
        client = _client([a.url, b.url], concurrency=1)
        out = client.map(lambda i: _ask(client, i), range(12))
    assert out == [f"re: q{i}" for i in range(12)]
    t429 = next(t for who, t in hits if who == "a")
    a_after = [t for who, t in hits if who == "a"][1:]
    b_during = [t for who, t in hits if who == "b" and t429 < t < t429 + 0.9]
    assert all(t >= t429 + 0.95 for t in a_after), "endpoint a was asked again before its Retry-After"
    assert len(b_during) >= 3, "endpoint b should have carried the load while a cooled down"


def test_cache_key_does_not_name_the_endpoint_and_concurrent_equals_serial(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with SimulatedEndpoint(_echo) as a:
        serial = _client([a.url], concurrency=1, cache_path=cache)
        ref = [_ask(serial, i) for i in range(6)]
        assert a.stats()["requests"] == 6
    with SimulatedEndpoint(lambda body: Fault("status", status=500)) as other:  # a different URL, all broken
        routed = _client([other.url], concurrency=4, cache_path=cache)
        assert routed.map(lambda i: _ask(routed, i), range(6)) == ref  # every reply from the cache
        assert other.stats()["requests"] == 0
    assert routed.usage.total()["cached"] == 6


def test_map_raises_the_first_error_in_input_order_after_all_finished():
    done: list[int] = []
    finished = [threading.Event() for _ in range(6)]
    finished[5].set()

    def fn(i: int) -> int:  # later items finish first: item i waits for item i + 1
        try:
            assert finished[i + 1].wait(10)
            done.append(i)
            if i in (1, 3):
                raise ValueError(f"item {i}")
            return i
        finally:
            finished[i].set()

    client = _client(["http://127.0.0.1:9/v1"], concurrency=5)
    with pytest.raises(ValueError, match="item 1"):
        client.map(fn, range(5))
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert client.map(lambda x: x * 2, []) == [] and client.map(lambda x: x * 2, [4]) == [8]


def test_router_waits_for_a_free_slot():
    r = Router(["http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1/"], limit=1)  # one endpoint, listed twice
    assert len(r.endpoints) == 1 and r.capacity == 1
    ep = r.acquire()
    got: list[float] = []
    t = threading.Thread(target=lambda: (r.acquire(), got.append(time.monotonic())))
    t.start()
    t.join(0.2)
    assert got == []  # still waiting
    released = time.monotonic()
    r.release(ep)
    t.join(5)
    assert got and got[0] >= released
    r.release(r.endpoints[0])


def test_parse_retry_after():
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({}) is None
    from email.utils import formatdate

    assert 8 <= parse_retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10


def test_prefetch_sends_ahead_once_and_the_caller_gets_the_serial_result(tmp_path):
    """Requests a stage is about to make go ahead concurrently; the stage then asks one by one as before and
    gets each reply from the cache, or joins it while still in flight: every request reaches the endpoint once,
    the usage ledger counts each asked request once (as a real call), a request never asked is not counted."""
    with SimulatedEndpoint(_echo, latency=0.3) as ep:
        client = _client([ep.url], concurrency=4, cache_path=tmp_path / "cache.sqlite")
        assert client.prefetches
        t0 = time.monotonic()
        client.prefetch([lambda i=i: _ask(client, i) for i in range(5)])  # q4 is never asked below
        out = [_ask(client, i) for i in range(4)]
        wall = time.monotonic() - t0
        time.sleep(0.5)  # let the unasked one land
        stats = ep.stats()
    assert out == [f"re: q{i}" for i in range(4)]
    assert stats["requests"] == 5  # each once: the serial asks were cache hits or joined the one in flight
    assert wall < 4 * 0.3 * 0.8  # overlapped, not four round trips one after another
    total = client.usage.total()
    assert total["calls"] == 4 and total.get("cached", 0) == 0, total


def test_prefetch_does_nothing_for_a_client_that_cannot_overlap(tmp_path):
    with SimulatedEndpoint(_echo, latency=0.0) as ep:
        serial = _client([ep.url], concurrency=1, cache_path=tmp_path / "c1.sqlite")
        uncached = _client([ep.url], concurrency=4)
        assert not serial.prefetches and not uncached.prefetches
        serial.prefetch([lambda: _ask(serial, 1)])
        uncached.prefetch([lambda: _ask(uncached, 1)])
        time.sleep(0.2)
        assert ep.stats()["requests"] == 0
