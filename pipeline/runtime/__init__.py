"""The environment runtime: one engine for tool semantics, in-process instances over it.

``engine`` is pure stdlib and is embedded verbatim in every generated ``server.py``;
``EnvInstance`` runs the same engine on an isolated in-memory copy for fast rollouts.
``static_checks`` holds the build-time checks of tool programs and DDL (``check_tool``, ``check_tools``,
``check_ddl``);
``schemas`` the JSON schemas a served environment publishes; ``policy`` the rules as guards (``--enforce-policy``).
"""

from pipeline.runtime import engine, policy, static_checks
from pipeline.runtime.instance import EnvInstance

__all__ = ["EnvInstance", "engine", "policy", "static_checks"]
