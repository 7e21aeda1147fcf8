"""Fixtures for the report and browser tests: the committed example catalog and a richer copy of it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.report import catalog_factory


@pytest.fixture(scope="session")
def example() -> Path:
    return catalog_factory.EXAMPLE


@pytest.fixture(scope="session")
def rich_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session; tests must not change it (copy it first)."""
    from pipeline.embed import get_embedder

    return catalog_factory.build(tmp_path_factory.mktemp("catalogs") / "demo", get_embedder())


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (to prove a reader wrote nothing there). A SQLite ``-shm`` file
    (the shared-memory index of a WAL log a writer left) only counts as present: readers may touch it."""
    return {str(p.relative_to(root)): "present" if p.name.endswith("-shm") else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
