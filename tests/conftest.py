"""Shared fixtures. ``real_llm``: one embedded model server for the whole session, with a fresh cache so
real-model tests really run the model."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Groups of :func:`test_group`, scheduled whole, in the order collected (real-model tests first). Not
    ``--dist loadgroup``: pytest-xdist 3.8 marks groups by rewriting node ids, which pytest 9 no longer takes
    (pytest-dev/pytest-xdist#1386), so every test would be scheduled alone."""
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

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
