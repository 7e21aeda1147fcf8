"""Run the real ``envfoundry`` CLI in this process and SIGKILL it at one chosen point (tests/run/test_kill_points.py).

    python tests/run/kill_driver.py POINT -- run --seeds ... --out ...

POINT is ``none`` (run to the end) or one of

* ``llm:<stage>:<n>:before`` / ``after``: the n-th LLM call of a stage, before it is asked, or right after its
  reply is in the cache and before the stage uses it;
* ``dedup:save:after``: the dedup index has just been saved, the kept scenarios are not in catalog.db yet;
* ``catalog:<method>:before``: a :class:`~pipeline.catalog.Catalog` write is about to happen;
* ``write:<file name>:<n>:before`` / ``after``: the n-th atomic write of a file of that name, with its temporary
  file complete but not yet renamed over the target, or right after the rename.

The kill is a real ``SIGKILL`` of this process: no ``finally`` blocks, no atexit handlers, no flushing.
Nothing here changes what the pipeline does until the point is reached.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def die(point: str) -> None:
    sys.stderr.write(f"kill_driver: SIGKILL at {point}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _Counter:
    def __init__(self, n: int):
        self.n, self.seen, self.lock = n, 0, threading.Lock()

    def hit(self) -> bool:
        with self.lock:
            self.seen += 1
            return self.seen == self.n


def _llm(point: str, stage: str, n: str, when: str) -> None:
    from pipeline.llm.client import LLMClient

    orig = LLMClient.complete
    counter = _Counter(int(n))

    def complete(self: Any, messages: Any, **kw: Any) -> Any:
        if kw.get("stage") != stage or not counter.hit():
            return orig(self, messages, **kw)
        if when == "before":
            die(point)
        reply = orig(self, messages, **kw)
        die(point)
        return reply

    LLMClient.complete = complete  # type: ignore[method-assign]


def _dedup(point: str) -> None:
    from pipeline.scenarios.dedup import DedupIndex

    orig = DedupIndex.save

    def save(self: Any, *a: Any, **kw: Any) -> Any:
        orig(self, *a, **kw)
        die(point)

    DedupIndex.save = save  # type: ignore[method-assign]


def _catalog(point: str, method: str) -> None:
    from pipeline.catalog import Catalog

    def killed(self: Any, *a: Any, **kw: Any) -> Any:
        die(point)

    if not hasattr(Catalog, method):
        raise SystemExit(f"kill_driver: Catalog has no method {method!r}")
    setattr(Catalog, method, killed)


class _KillingOs:
    """Stands in for ``os`` inside the modules that write files atomically: ``os.replace`` onto a file called
    ``name`` dies before (the temporary file is complete, the target untouched) or after the n-th rename."""

    def __init__(self, point: str, name: str, n: int, when: str):
        self._point, self._name, self._when, self._counter = point, name, when, _Counter(n)

    def __getattr__(self, attr: str) -> Any:
        return getattr(os, attr)

    def replace(self, src: Any, dst: Any) -> None:
        if Path(dst).name != self._name or not self._counter.hit():
            os.replace(src, dst)
            return
        if self._when == "before":
            die(self._point)
        os.replace(src, dst)
        die(self._point)


def _write(point: str, name: str, n: str, when: str) -> None:
    import pipeline.atomic

    fake = _KillingOs(point, name, int(n), when)
    pipeline.atomic.os = fake  # type: ignore[attr-defined]  # every file write of a run goes through it


def install(point: str) -> None:
    kind, *rest = point.split(":")
    if point == "none":
        return
    if kind == "llm" and len(rest) == 3:
        _llm(point, *rest)
    elif point == "dedup:save:after":
        _dedup(point)
    elif kind == "catalog" and len(rest) == 2 and rest[1] == "before":
        _catalog(point, rest[0])
    elif kind == "write" and len(rest) == 3:
        _write(point, *rest)
    else:
        raise SystemExit(f"kill_driver: unknown kill point {point!r}")


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: kill_driver.py POINT -- ENVFOUNDRY-ARGS...")
    sys.path.insert(0, str(ROOT))
    install(argv[0])
    from pipeline.cli import main as cli

    cli(argv[2:], prog_name="envfoundry")


if __name__ == "__main__":
    main(sys.argv[1:])
