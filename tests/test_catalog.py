"""One ``Catalog`` for a catalog directory: the run's database and the environments + task bank every
export reads, through the same object; ``load_catalog`` reads a directory without a database."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.catalog import Catalog, CatalogError, load_catalog
from pipeline.envdir import write_env_dir
from tests.fixtures.library import library_env, library_tasks


def _catalog(root: Path) -> Path:
    env = library_env()
    write_env_dir(env, root / "envs" / env.env_id, library_tasks(env))
    return root


def test_one_object_holds_the_database_and_the_files(tmp_path: Path) -> None:
    root = _catalog(tmp_path / "cat")
    cat = Catalog(root)  # what a run writes
    cat.set_environment("s1", name="library", status="verified", env_id=library_env().env_id)
    assert [e["status"] for e in cat.environments()] == ["verified"]
    (env_id,) = cat.envs
    assert cat.bank_source == "envs/*/tasks.jsonl"
    assert [t.task_id for t in cat.tasks] == sorted(t.task_id for t in library_tasks())
    assert cat.envs[env_id].env == library_env() and cat.envs[env_id].env_id == env_id
    cat.close()


def test_load_catalog_reads_a_directory_without_a_database(tmp_path: Path) -> None:
    root = _catalog(tmp_path / "cat")
    cat = load_catalog(root)
    assert len(cat.tasks) == 2 and not (root / "catalog.db").exists()
    with pytest.raises(CatalogError, match="opened without its catalog.db"):
        cat.environments()
    with pytest.raises(CatalogError, match="is not a catalog"):
        Catalog(root, create=False)


def test_a_bad_task_bank_is_named_by_file_and_line(tmp_path: Path) -> None:
    root = _catalog(tmp_path / "cat")
    good = (next((root / "envs").iterdir()) / "tasks.jsonl").read_text().splitlines()
    (root / "task_bank.jsonl").write_text(good[0] + "\n{\"task_id\": 1}\n")
    with pytest.raises(CatalogError, match=r"task_bank.jsonl:2: invalid task record"):
        load_catalog(root)
    (root / "task_bank.jsonl").write_text(good[0] + "\n" + good[0] + "\n")
    with pytest.raises(CatalogError, match="duplicate task_id"):
        load_catalog(root)
    with pytest.raises(CatalogError, match="no envs/ directory"):
        load_catalog(tmp_path)
