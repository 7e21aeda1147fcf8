"""Export to JSONL for SFT: each task's reference solution as a chat transcript.

One line per task: ``{"task_id", "env_id", "messages", "tools"}``. ``messages`` are OpenAI chat
messages — system, user (the instruction), then per reference call an assistant message with one
``tool_calls`` entry and the ``tool`` message with the real result (the solution is replayed on a
fresh database), and a final assistant message (the expected answer for questions). ``tools`` are
OpenAI function schemas. A reference solution that fails its verifier on replay is an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.export import taskrt
from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import ExportError, system_prompt, write_text
from pipeline.ir import Task

FINAL_REPLY = "Done: the request has been carried out."


def transcript(ce: CatalogEnv, task: Task, bundle: taskrt.Bundle) -> dict[str, Any]:
    record = task.model_dump(mode="json")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(ce)},
        {"role": "user", "content": task.instruction},
    ]
    conn = bundle.fresh_db()
    try:
        for i, call in enumerate(task.reference_solution, 1):
            out = bundle.call(conn, call.tool, call.arguments)
            if not out["ok"]:
                raise ExportError(
                    f"task {task.task_id}: reference call {i} ({call.tool}) failed on replay: {out['error']}"
                )
            call_id = f"call_{i}"
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": call.tool,
                                "arguments": json.dumps(call.arguments, ensure_ascii=False, sort_keys=True),
                            },
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "name": call.tool,
                    "content": taskrt.render_result(out),
                }
            )
        final = task.verifier.answer if task.verifier.answer is not None else FINAL_REPLY
        result = bundle.evaluate(record, conn, answer=final)
        if not result["passed"]:
            raise ExportError(
                f"task {task.task_id}: the reference solution fails its verifier: {'; '.join(result['failures'])}"
            )
    finally:
        conn.close()
    messages.append({"role": "assistant", "content": final})
    return {"task_id": task.task_id, "env_id": task.env_id, "messages": messages, "tools": task.tools}


def export(catalog: Catalog, out: Path) -> list[Path]:
    lines = []
    for ce in catalog.envs.values():
        bundle = taskrt.Bundle(ce.path)
        for task in ce.tasks:
            lines.append(json.dumps(transcript(ce, task, bundle), ensure_ascii=False, sort_keys=True))
    path = out / "sft.jsonl"
    write_text(path, "".join(line + "\n" for line in lines))
    return [path]
