"""Shared fixtures. ``real_llm``: one embedded model server for the whole session, with a fresh cache so
real-model tests really run the model."""

from __future__ import annotations

import faulthandler
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STACKS_BEFORE_S = 60
"""Seconds before a test's timeout at which every thread's stack is written down (:func:`pytest_runtest_protocol`)."""


def pytest_configure(config: pytest.Config) -> None:
    """Every embedded server the tests start (the ``real_llm`` fixture's, and those of the CLI commands real-model
    tests run) keeps the usual priority, its threads fitted to the free cores (``pipeline.llm.serve``): the other
    xdist worker keeps its core. At the product's default nice -10 the server would take both cores whenever it
    generates and starve the other worker's tests, whose timeouts are wall-clock."""
    os.environ.setdefault("ENVFOUNDRY_SERVER_NICE", "0")
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller (or the one process): workers inherit the place
        os.environ["ENVFOUNDRY_TEST_STACKS"] = tempfile.mkdtemp(prefix="envfoundry-test-stacks-")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test still running :data:`STACKS_BEFORE_S` before its timeout has every thread's stack written to a file
    the run's summary prints (:func:`pytest_terminal_summary`). pytest-timeout's own dump goes to an xdist worker's
    stderr, which the run's output never shows: stop 59's CI sat after 1,791 of 1,792 results with no word of where."""
    marker = item.get_closest_marker("timeout")
    timeout = float(marker.args[0]) if marker and marker.args else float(item.config.getini("timeout") or 0)
    where = os.environ.get("ENVFOUNDRY_TEST_STACKS")
    if not where or timeout <= 2 * STACKS_BEFORE_S:
        yield
        return
    path = Path(where) / f"{os.getpid()}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', item.nodeid)[-120:]}.txt"
    header = f"{item.nodeid}: still running {timeout - STACKS_BEFORE_S:g} s after it started\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(header)
        f.flush()
        faulthandler.dump_traceback_later(timeout - STACKS_BEFORE_S, file=f)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            written = path.stat().st_size > len(header.encode())
    if not written:
        path.unlink(missing_ok=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    where = os.environ.get("ENVFOUNDRY_TEST_STACKS")
    if where and not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(where, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    where = os.environ.get("ENVFOUNDRY_TEST_STACKS")
    if not where or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    for path in sorted(Path(where).glob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        terminalreporter.write_sep("=", f"stacks of a test near its timeout ({path.name})")
        terminalreporter.write_line(text[-12000:])


@pytest.fixture(scope="session")
def real_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from pipeline.config import LLMSettings
    from pipeline.llm import embedded_client

    cache = tmp_path_factory.mktemp("llm-cache") / "cache.sqlite"
    model = os.environ.get("ENVFOUNDRY_TEST_MODEL", "qwen2.5-coder-1.5b")
    settings = LLMSettings(cache_path=cache, embedded_model=model)  # type: ignore[arg-type]
    client = embedded_client(settings)
    yield client
    from pipeline.llm.embedded import shared_server

    shared_server(settings).stop()
    print("\nreal-model usage by stage:", client.usage.by_stage())


@pytest.fixture(scope="session")
def real_build(real_llm: object) -> object:
    """The real build test's builds with rows at scale (``tests.test_build_real.build_domains``), made once:
    tests/test_build_real.py checks the environment, tests/stages/test_rowgen_real.py its rows."""
    from tests.test_build_real import build_domains

    return build_domains(real_llm)


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory) -> object:
    """The one uninterrupted run of the committed example's inputs against its recorded replies
    (``tests.executor.example_run.uninterrupted_run``) that the executor, Ray and kill-point tests compare with:
    made once per session, in a directory the xdist workers share (the session's, above each worker's own)."""
    from tests.executor.example_run import uninterrupted_run

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return uninterrupted_run(root / "example-run")


def test_group(nodeid: str) -> str:
    """The unit pytest-xdist schedules a test in (the README's ``-n 2``; see :func:`pytest_xdist_make_scheduler`):
    ``real_llm`` for every real-model test (one worker runs them in turn with one model server: one real-model
    job at a time on the machine), ``ray`` for the tests that start a local Ray instance (each takes the
    machine's 2 CPUs), else the test's module (its module fixtures are made once). A real-model test lives in a
    file with ``real`` among the words of its name (checked at collection)."""
    path = nodeid.split("::", 1)[0]
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    if "real" in stem.split("_"):
        return "real_llm"
    if stem.startswith("test_ray_") or stem == "test_executors":
        return "ray"
    return path


@pytest.hookimpl(optionalhook=True)  # unknown to pytest without xdist (`-p no:xdist`, `-n 0` keeps it)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Groups of :func:`test_group`, scheduled whole, in the order collected (real-model tests first). Not
    ``--dist loadgroup``: pytest-xdist 3.8 marks groups by rewriting node ids, which pytest 9 no longer takes
    (pytest-dev/pytest-xdist#1386), so every test would be scheduled alone.

    ``LoadScopeScheduling.schedule`` sorts the groups by their number of tests unless ``--no-loadscope-reorder``
    (``config.option.loadscopereorder``, on by default): the ``real_llm`` group (~15 long tests) was handed out
    after ~20 modules of more, shorter tests, so the real-model chain, the run's critical path, started late.
    This scheduler is ours, so the option is ours to turn off: the work queue keeps the collection's order
    (tests/test_ci_schedule.py checks it with the real scheduler)."""
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

    config.option.loadscopereorder = False
    return Groups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-model tests first (together the longest part of a run, so their worker starts on them); a
    real-model test outside a ``real`` file is an error (it would run beside the other real-model tests)."""
    real = [item for item in items if item.get_closest_marker("real_llm")]
    stray = [item.nodeid for item in real if test_group(item.nodeid) != "real_llm"]
    if stray:
        raise pytest.UsageError(f"real_llm tests outside a file named *_real*.py (tests/conftest.py test_group): "
                                f"{', '.join(stray)}")
    chosen = set(map(id, real))
    items[:] = real + [item for item in items if id(item) not in chosen]
