"""Endpoints and their limiters: how many requests are in flight where, and which endpoint gets the next one.

One :class:`Endpoint` per (base URL, concurrency limit) per process, shared by every client of that process
(a run makes one client per scenario; the limit is the endpoint's, not the client's). A :class:`Router`
over several endpoints serving the same model hands each request to the least-loaded endpoint that is not
cooling down after a 429 / Retry-After, and waits when all are full or cooling down.

Routing decides only *where* a request goes, never what is asked: the cache key has no endpoint in it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Endpoint:
    """One base URL with its limit, the requests in flight there, and when it may be asked again."""

    url: str
    limit: int
    in_flight: int = 0
    cool_until: float = 0.0
    """``time.monotonic()`` before which no request is sent here (set from Retry-After)."""
    sent: int = 0
    """Requests started here (for accounting)."""
    throttled: int = 0
    """429 answers received here."""


@dataclass
class _Registry:
    lock: threading.Lock = field(default_factory=threading.Lock)
    cond: threading.Condition = field(init=False)
    endpoints: dict[tuple[str, int], Endpoint] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)


_REG = _Registry()

_SHARED: dict[str, Any] = {}
"""URL -> a semaphore shared with the other processes of a run (see :func:`share_limits`)."""


def share_limits(gates: dict[str, Any]) -> None:
    """In a worker process of a run (``pipeline.executor.process``): every request to one of these URLs also
    takes a slot of the semaphore the driver made for it, so the processes together keep to the endpoint's
    limit instead of each keeping to it alone."""
    _SHARED.clear()
    _SHARED.update({url.rstrip("/"): gate for url, gate in gates.items()})


def endpoint(url: str, limit: int) -> Endpoint:
    """The process-wide :class:`Endpoint` for ``url`` with ``limit`` requests in flight."""
    with _REG.lock:
        key = (url.rstrip("/"), limit)
        ep = _REG.endpoints.get(key)
        if ep is None:
            ep = _REG.endpoints[key] = Endpoint(key[0], limit)
        return ep


class Router:
    """Least-loaded routing over endpoints serving the same model, with their limits and cool-downs."""

    def __init__(self, urls: Sequence[str], limit: int):
        if not urls:
            raise ValueError("no endpoint to route to")
        seen: list[str] = []
        for u in urls:  # the same URL twice would count against one limit twice
            if u.rstrip("/") not in seen:
                seen.append(u.rstrip("/"))
        self.endpoints = [endpoint(u, limit) for u in seen]

    @property
    def capacity(self) -> int:
        """Requests this router can have in flight at once (the sum of the endpoints' limits)."""
        return sum(e.limit for e in self.endpoints)

    def _pick(self, now: float) -> tuple[Endpoint | None, float]:
        """The least-loaded free endpoint (ties: the one listed first), or None and how long to wait."""
        best: Endpoint | None = None
        wait = 3600.0
        for e in self.endpoints:
            if e.cool_until > now:
                wait = min(wait, e.cool_until - now)
                continue
            if e.in_flight >= e.limit:
                continue
            if best is None or e.in_flight / e.limit < best.in_flight / best.limit:
                best = e
        return best, wait

    def acquire(self) -> Endpoint:
        """Block until an endpoint has a free slot and is not cooling down; take the slot."""
        with _REG.cond:
            while True:
                ep, wait = self._pick(time.monotonic())
                if ep is not None:
                    ep.in_flight += 1
                    ep.sent += 1
                    return ep
                _REG.cond.wait(timeout=wait)

    def release(self, ep: Endpoint) -> None:
        with _REG.cond:
            ep.in_flight -= 1
            _REG.cond.notify_all()

    @contextmanager
    def slot(self) -> Iterator[Endpoint]:
        ep = self.acquire()
        try:
            gate = _SHARED.get(ep.url)
            if gate is None:
                yield ep
                return
            gate.acquire()
            try:
                yield ep
            finally:
                gate.release()
        finally:
            self.release(ep)

    def cool_down(self, ep: Endpoint, seconds: float) -> None:
        """``ep`` answered 429 (or 503 with Retry-After): send it nothing for ``seconds``; others go on."""
        with _REG.cond:
            ep.throttled += 1
            ep.cool_until = max(ep.cool_until, time.monotonic() + max(0.0, seconds))
            _REG.cond.notify_all()


def parse_retry_after(headers: object) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date); None if absent."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
