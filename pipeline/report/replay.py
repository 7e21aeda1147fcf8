"""Replaying a task's reference solution on a fresh in-process instance, for the browser: what each call
returned, which rows it changed, and whether each assertion holds on the final state."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def replay_reference(env_json: dict[str, Any], initial_db: Path | None, task: dict[str, Any]) -> dict[str, Any]:
    """``{"steps": [...], "error": str | None, "assertions": [...]}`` for a normalised task (see
    :func:`pipeline.report.data.normalize_task`). Never raises: a problem becomes ``error``."""
    from pydantic import ValidationError

    from pipeline.ir import Environment, ToolCall
    from pipeline.runtime.replay import fresh, play
    from pipeline.runtime.state import query_value

    try:
        env = Environment.model_validate(env_json)
        calls = [ToolCall(tool=str(c.get("tool")), arguments=dict(c.get("arguments") or {}))
                 for c in task["reference_solution"]]
    except (ValidationError, TypeError, ValueError) as e:
        return {"steps": [], "assertions": [], "error": f"cannot replay: {str(e).splitlines()[0]}"}
    db = initial_db if initial_db is not None and initial_db.is_file() else None
    try:
        with fresh(env, db) as run:
            play(run, calls, stop_on_error=False)
            steps = [{"index": i, "tool": r.call.tool, "arguments": r.call.arguments, "response": r.response,
                      "ok": r.ok, "changes": [c.to_json() for c in r.changes]}
                     for i, r in enumerate(run.records, 1)]
            assertions = []
            for a in task["assertions"]:
                try:
                    actual: Any = query_value(run.inst.conn, a["sql"])
                    holds, err = actual == a["expect"], None
                except sqlite3.Error as e:
                    actual, holds, err = None, False, str(e)
                assertions.append({**a, "actual": actual, "holds": holds, "error": err})
            return {"steps": steps, "assertions": assertions, "error": run.error}
    except Exception as e:  # noqa: BLE001 - a broken environment is shown, not a crashed page
        return {"steps": [], "assertions": [], "error": f"cannot replay: {type(e).__name__}: {e}"}
