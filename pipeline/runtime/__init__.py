"""The environment runtime: one engine for tool semantics, in-process instances over it.

``engine`` is pure stdlib and is embedded verbatim in every generated ``server.py``;
``EnvInstance`` runs the same engine on an isolated in-memory copy for fast rollouts.
"""

from pipeline.runtime import engine
from pipeline.runtime.instance import EnvInstance

__all__ = ["EnvInstance", "engine"]
