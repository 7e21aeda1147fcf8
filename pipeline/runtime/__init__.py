"""The environment runtime: one engine for tool semantics, in-process instances over it.

``engine`` is pure stdlib and is embedded verbatim in every generated ``server.py``;
``EnvInstance`` runs the same engine on an isolated in-memory copy for fast rollouts.
``checks`` holds the build-time checks (``check_tool``, ``check_tools``, ``check_ddl``);
``schemas`` the JSON schemas a served environment publishes.
"""

from pipeline.runtime import checks, engine
from pipeline.runtime.instance import EnvInstance

__all__ = ["EnvInstance", "checks", "engine"]
