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
