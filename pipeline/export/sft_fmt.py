"""Export to JSONL for SFT: each task's reference solution as a chat transcript.

One line per task: ``{"task_id", "env_id", "split", "tier", "pass_rate", "difficulty", "messages",
"tools"}``. ``messages`` are chat messages — system, user (the instruction), then per reference
call an assistant message with one ``tool_calls`` entry and the ``tool`` message with the real
result (the solution is replayed on a fresh database), and a final assistant message (the reply
that states the expected answer for questions). Tool-call ``arguments`` are JSON objects, the
convention Hugging Face chat templates render (``apply_chat_template(messages, tools=tools)``);
``sft_arguments="string"`` writes the OpenAI wire form (a JSON string) instead, ``"both"`` adds the
string as ``arguments_json``. ``tools`` are OpenAI function schemas. A reference solution that
fails its verifier (the one reward, ``verify/reward.py``) on replay is an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportError,
    ExportOptions,
    difficulty_info,
    reference_reply,
    splits,
    system_prompt,
    write_text,
)
from pipeline.ir import Task
from pipeline.runtime import EnvInstance
from verify import reward

FINAL_REPLY = "Done: the request has been carried out."

README = """# envfoundry SFT transcripts

`sft.jsonl`: {n} tasks from {n_envs} environment(s) ({n_val} in the validation split), each task's
reference solution as a chat transcript (system, user, assistant tool calls, tool results, final
reply), replayed on the environment and checked by its verifier. One line per task:
`task_id`, `env_id`, `split` (train or val), `tier` (1 to 3), `pass_rate` (the share of envfoundry's
test attempts that passed, null when none ran), `difficulty`, `messages`, `tools` (OpenAI function
schemas). Tool-call `arguments` are written {arguments}.

Render it with a model's chat template (only `transformers` and `jinja2` needed), offline from a
local directory holding the model's tokenizer files:

```bash
pip install transformers jinja2
python render_sft.py sft.jsonl --tokenizer ./qwen2.5-tokenizer --out rendered.jsonl
```

Make the directory once, on a machine with network: `hf download Qwen/Qwen2.5-7B-Instruct
tokenizer.json tokenizer_config.json --local-dir qwen2.5-tokenizer` (the chat template is in
`tokenizer_config.json`), or `AutoTokenizer.from_pretrained(ID).save_pretrained(DIR)`. A directory is
read without any network access; `--tokenizer Qwen/Qwen2.5-7B-Instruct` (a Hub id) downloads the
files, or with `HF_HUB_OFFLINE=1` reads them from the Hub cache.

Or in Python, reading lines with `json` (an Arrow-backed loader such as `datasets` merges the
`arguments` objects of all lines into one struct and adds null keys):

```python
import json
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained("./qwen2.5-tokenizer")
rows = [json.loads(line) for line in open("sft.jsonl")]
text = tok.apply_chat_template(rows[0]["messages"], tools=rows[0]["tools"], tokenize=False)
```
"""

ARGUMENT_DOC = {
    "object": "as JSON objects, the convention Hugging Face chat templates render",
    "string": "as JSON strings (the OpenAI wire format); most chat templates expect objects",
    "both": "as JSON objects (`arguments`, for chat templates) and as JSON strings (`arguments_json`)",
}
ARGUMENT_FORMS = ("object", "string", "both")


def render_result(out: dict[str, Any]) -> str:
    """What the agent reads for a tool outcome (as every export shows it): JSON, or ``Error: ...``."""
    if out.get("ok"):
        return json.dumps(out.get("result"), ensure_ascii=False, sort_keys=False)
    return "Error: " + str(out.get("error"))


def tool_call(call_id: str, name: str, arguments: dict[str, Any], form: str) -> dict[str, Any]:
    as_json = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    function: dict[str, Any] = {"name": name, "arguments": as_json if form == "string" else arguments}
    if form == "both":
        function["arguments_json"] = as_json
    return {"id": call_id, "type": "function", "function": function}


def transcript(ce: CatalogEnv, task: Task, split: str, form: str) -> dict[str, Any]:
    verifier = task.verifier.model_dump(mode="json")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(ce)},
        {"role": "user", "content": task.instruction},
    ]
    with EnvInstance(ce.env, ce.path / "initial.db") as inst:
        initial = reward.snapshot(inst.conn)
        for i, call in enumerate(task.reference_solution, 1):
            out = inst.call(call.tool, call.arguments)
            if not out["ok"]:
                raise ExportError(
                    f"task {task.task_id}: reference call {i} ({call.tool}) failed on replay: {out['error']}"
                )
            call_id = f"call_{i}"
            messages.append(
                {"role": "assistant", "content": None, "tool_calls": [tool_call(call_id, call.tool, call.arguments, form)]}
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "name": call.tool, "content": render_result(out)})
        final = reference_reply(verifier) or FINAL_REPLY
        score = reward.score(verifier, inst.conn, initial=initial, answer=final)
    if not score.passed:
        raise ExportError(
            f"task {task.task_id}: the reference solution fails its verifier: {'; '.join(score.failures)}"
        )
    messages.append({"role": "assistant", "content": final})
    info = difficulty_info(task)
    return {
        "task_id": task.task_id,
        "env_id": task.env_id,
        "split": split,
        "tier": info["tier"],
        "pass_rate": info["pass_rate"],
        "difficulty": info,
        "messages": messages,
        "tools": task.tools,
    }


def export(catalog: Catalog, out: Path, options: ExportOptions) -> list[Path]:
    if options.sft_arguments not in ARGUMENT_FORMS:
        raise ExportError(f"sft_arguments {options.sft_arguments!r} is not one of {', '.join(ARGUMENT_FORMS)}")
    split = splits(catalog, options.val_fraction)
    lines = [
        json.dumps(transcript(ce, task, split[task.task_id], options.sft_arguments), ensure_ascii=False, sort_keys=True)
        for ce in catalog.envs.values()
        for task in ce.tasks
    ]
    path = out / "sft.jsonl"
    write_text(path, "".join(line + "\n" for line in lines))
    write_text(out / "render_sft.py", (TEMPLATES / "sft_render.py").read_text(encoding="utf-8"))
    write_text(
        out / "README.md",
        README.format(
            n=len(lines),
            n_envs=sum(1 for ce in catalog.envs.values() if ce.tasks),
            n_val=sum(1 for v in split.values() if v == "val"),
            arguments=ARGUMENT_DOC[options.sft_arguments],
        ),
    )
    return [path]
