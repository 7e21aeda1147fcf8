"""Environment directories: the on-disk contract trainers and the checker rely on, and an in-process instance
of one.

The format (``FILES``, writing a directory, the typed reader) is owned by :mod:`pipeline.catalog.env_dir`
and named here for the modules that build, check and serve environments; :func:`open_instance` runs one.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.catalog.env_dir import FILES as FILES
from pipeline.catalog.env_dir import create_initial_db as create_initial_db
from pipeline.catalog.env_dir import load_env_dir as load_env_dir
from pipeline.catalog.env_dir import write_env_dir as write_env_dir
from pipeline.catalog.files import pretty_json as pretty_json
from pipeline.runtime.database import EnvDirError as EnvDirError
from pipeline.runtime.database import SeedError as SeedError
from pipeline.runtime.database import build_database as build_database
from pipeline.runtime.instance import EnvInstance


def open_instance(env_dir: str | Path) -> EnvInstance:
    """An in-process instance of the environment directory ``env_dir`` (its env.json and initial.db)."""
    env, _, _ = load_env_dir(env_dir)
    return EnvInstance(env, Path(env_dir) / "initial.db")
