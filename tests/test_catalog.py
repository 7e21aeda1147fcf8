"""One ``Catalog`` for a catalog directory: the run's database and the environments + task bank every
export reads, through the same object; ``load_catalog`` reads a directory without a database."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.catalog import Catalog, CatalogError, load_catalog, pretty_json, read_tasks
from pipeline.envdir import write_env_dir
from pipeline.hashing import canonical_json
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


def test_read_tasks_names_file_line_and_key_or_hands_bad_lines_over(tmp_path: Path) -> None:
    good = canonical_json(library_tasks()[0])
    path = tmp_path / "tasks.jsonl"
    path.write_text(good + "\n\n" + '{"task_id": "t_bad", "instruction": 3}\n' + "{not json\n" + good + "\n")
    with pytest.raises(CatalogError, match=r"tasks.jsonl:3: invalid task record: .*'instruction'"):
        read_tasks(path)
    bad: list[tuple[int, str | None]] = []
    tasks = read_tasks(path, on_error=lambda line, task_id, _exc: bad.append((line, task_id)))
    assert len(tasks) == 2 and bad == [(3, "t_bad"), (4, None)]


def _edited(root: Path) -> tuple[Path, str]:
    """A catalog whose environment's env.json was changed by hand after its tasks were written."""
    env = library_env()
    d = write_env_dir(env, root / "envs" / env.env_id, library_tasks(env))
    edited = env.model_copy(update={"clock": "2031-01-01T00:00:00"})
    (d / "env.json").write_text(pretty_json(edited))
    (root / "envs" / "notes").mkdir()  # no env.json
    return d, edited.env_id


def test_by_dir_reads_directories_as_eval_takes_them(tmp_path: Path) -> None:
    d, new_id = _edited(tmp_path / "cat")
    with pytest.raises(CatalogError, match="notes: not an environment directory"):
        load_catalog(tmp_path / "cat")
    shutil.rmtree(tmp_path / "cat" / "envs" / "notes")
    with pytest.raises(CatalogError, match=r"tasks.jsonl: task t_\w+ names env '\w+', not in"):
        load_catalog(tmp_path / "cat")
    _edited(tmp_path / "cat2")
    for root in (tmp_path / "cat2", d):  # a catalog (the directory without env.json skipped) or one directory
        cat = load_catalog(root, by_dir=True)
        (ce,) = cat.envs.values()
        assert ce.env_id == new_id and ce.path.name == d.name
        # the tasks belong to the directory they were read from, under its name, in file order
        written = [t.task_id for t in library_tasks()]
        assert [t.task_id for t in ce.tasks] == written and {t.env_id for t in ce.tasks} == {d.name}
    with pytest.raises(CatalogError, match="neither an environment directory"):
        load_catalog(tmp_path / "cat2" / "envs", by_dir=True)


def test_a_lenient_reader_opens_a_database_with_tables_missing(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "catalog.db") as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        con.execute("INSERT INTO meta VALUES ('config_fingerprint', 'abc')")
    with pytest.raises(CatalogError, match="no table 'runs'"):
        Catalog.open_readonly(tmp_path)
    cat = Catalog.open_readonly(tmp_path, lenient=True)
    assert cat.missing_tables() == ["runs", "seeds", "scenarios", "rejections", "environments", "tasks"]
    assert cat.rows("meta", "key") == [{"key": "config_fingerprint", "value": "abc"}] and cat.rows("runs", "run_id") == []
    with pytest.raises(ValueError, match="not a catalog table"):
        cat.rows("sqlite_master", "name")
    cat.close()
