"""A catalog directory on disk: what ``envfoundry run`` writes and every export, report and eval reads.

It holds ``envs/<env_id>/`` environment directories, the task bank (``task_bank.jsonl`` and
``task_bank.parquet``, the verified tasks across environments) and ``catalog.db`` (SQLite via sqlite-utils).
This package is the one owner of that format; every other module reads and writes it through these names:

* :mod:`~pipeline.catalog.files`: file names, :class:`CatalogError`, the one parser of task JSONL (typed,
  or lenient for the report);
* :mod:`~pipeline.catalog.env_dir`: an environment directory written, read typed (:func:`load_env_dir`)
  or read as plain JSON for the report (:func:`read_env_dir_raw`);
* :mod:`~pipeline.catalog.reader`: a catalog's environments with its task bank, checked (``by_dir`` for eval);
* :mod:`~pipeline.catalog.store`: ``catalog.db`` (the run's writer, the one read-only opener) and
  :class:`Catalog`, which also reads the files; :func:`load_catalog` reads a directory without a database;
* :mod:`~pipeline.catalog.emit`: verification results, a run's environment directory (from the graph's record,
  :func:`write_environment`) and the task bank written.
"""

from pipeline.catalog.emit import ScenarioRecord, write_env_results, write_environment, write_task_bank
from pipeline.catalog.env_dir import (
    FILES,
    TRAJECTORIES,
    RawEnvDir,
    create_initial_db,
    load_env_dir,
    read_env_dir_raw,
    write_env_dir,
)
from pipeline.catalog.files import (
    BANK,
    CATALOG_DB,
    ENVS,
    TABLES,
    TASKS,
    CatalogError,
    jsonl_text,
    pretty_json,
    read_json,
    read_jsonl,
    read_tasks,
)
from pipeline.catalog.reader import CatalogEnv, read_envs, read_task_bank
from pipeline.catalog.store import Catalog, load_catalog

__all__ = [
    "BANK", "CATALOG_DB", "ENVS", "FILES", "TABLES", "TASKS", "TRAJECTORIES", "Catalog", "CatalogEnv",
    "CatalogError", "RawEnvDir", "ScenarioRecord", "create_initial_db", "jsonl_text", "load_catalog",
    "load_env_dir", "pretty_json", "read_env_dir_raw", "read_envs", "read_json", "read_jsonl", "read_task_bank",
    "read_tasks", "write_env_dir", "write_env_results", "write_environment", "write_task_bank",
]
