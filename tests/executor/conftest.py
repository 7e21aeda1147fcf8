"""A local Ray instance (2 CPUs) per test module that asks for it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    import ray  # installed by scripts/setup.sh (pyproject): a missing install fails here, it is not skipped

    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    yield ray
    ray.shutdown()
