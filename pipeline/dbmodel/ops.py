"""What a tool does to the database, from its first write statement."""

from __future__ import annotations

import re

from pipeline.ir import Environment
from pipeline.runtime import engine


def tool_op(env: Environment, name: str) -> str:
    """``read``, ``create``, ``update`` or ``delete``: what a tool's first write does."""
    tool = env.tool(name)
    if tool.kind == "read":
        return "read"
    for step in tool.steps:
        if step.kind == "write":
            verb = engine.leading_keyword(step.sql)
            if verb == "WITH":
                m = re.search(r"\b(INSERT|REPLACE|UPDATE|DELETE)\b", step.sql, re.I)
                verb = m.group(1).upper() if m else verb
            return {"INSERT": "create", "REPLACE": "create", "UPDATE": "update", "DELETE": "delete"}.get(verb, "update")
    return "update"
