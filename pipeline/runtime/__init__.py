"""The environment runtime: one engine for tool semantics, in-process instances over it.

``engine`` is pure stdlib and is embedded verbatim in every generated ``server.py``;
``EnvInstance`` runs the same engine on an isolated in-memory copy for fast rollouts.
``checks`` holds the build-time checks (``check_tool``, ``check_tools``, ``check_ddl``);
``schemas`` the JSON schemas a served environment publishes.
"""

from pipeline.runtime import checks, engine
from pipeline.runtime.instance import EnvInstance

# The build-time checks stay reachable where callers have always found them. They live in checks.py
# (which may use sqlglot) so that the engine every server.py embeds holds only what a call needs.
engine.check_tool = checks.check_tool  # type: ignore[attr-defined]
engine.check_tools = checks.check_tools  # type: ignore[attr-defined]
engine.check_ddl = checks.check_ddl  # type: ignore[attr-defined]

__all__ = ["EnvInstance", "checks", "engine"]
