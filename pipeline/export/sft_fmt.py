"""Export to JSONL for SFT: each task's reference solution as a chat transcript.

One line per task: ``{"task_id", "env_id", "split", "tier", "pass_rate", "difficulty", "messages",
"tools"}``. ``messages`` are chat messages — system, user (the instruction), then per reference
call an assistant message with one ``tool_calls`` entry and the ``tool`` message with the real
result (the solution is replayed on a fresh database), and a final assistant message (the reply
that states the expected answer for questions; for a task the policy refuses in part, what was done and each
refused write with its rule's own message, :func:`pipeline.export.common.final_reply`, and the record's
``refusals`` names the rules). Tool-call ``arguments`` are JSON objects, the
convention Hugging Face chat templates render (``apply_chat_template(messages, tools=tools)``);
``sft_arguments="string"`` writes the OpenAI wire form (a JSON string) instead, ``"both"`` adds the
string as ``arguments_json``. ``tools`` are OpenAI function schemas. A reference solution that
fails its verifier (the one reward, ``pipeline/runtime/reward.py``) on replay is an error.

``sft_conversation.jsonl`` holds the same tasks in their conversational form (one line per task, the same fields
plus ``conversation``, the task's script): system (the conversational prompt), user (the opening line), then per
fact of the script the assistant asking for it and the user giving it, then the reference calls and results and the
final message, written by code (:func:`conversation_transcript`); no user turn of it is a user error
(``pipeline.runtime.usercheck.check_turn``), nor is the user ending the conversation on the final message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.export.audit import AUDIT_FILE, readme_of
from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.export.common import (
    TEMPLATES,
    ExportError,
    ExportOptions,
    conversation_form,
    conversation_prompt,
    difficulty_info,
    final_reply,
    refusals,
    splits,
    system_prompt,
    write_json,
    write_text,
)
from pipeline.ir import Task
from pipeline.runtime import EnvInstance, reward, usercheck

README = """# envfoundry SFT transcripts

`sft.jsonl`: {n} tasks from {n_envs} environment(s) ({n_val} in the validation split), each task's
reference solution as a chat transcript (system, user, assistant tool calls, tool results, final
reply), replayed on the environment and checked by its verifier. One line per task:
`task_id`, `env_id`, `split` (train or val), `tier` (1 to 3), `pass_rate` (the share of envfoundry's
test attempts that passed, null when none ran), `difficulty`, `messages`, `tools` (OpenAI function
schemas). Tool-call `arguments` are written {arguments}.

A task whose request the application's policy refuses in part ({n_refusing} of them) skips the refused writes,
and its final reply says so: a `Done:` line with the writes made (as calls) and one `Not done:` line per
refused write, ending with its rule's own message (the policy's words, in the environment's language). Its
line also has `refusals`: per refused write the `rule` id, `tool`, `arguments` and `message`.

`sft_conversation.jsonl`: the same tasks as whole conversations with a user, one line per task (the same
fields, plus `conversation`: the task's script, see below). The user opens with a vague request (the
`opening` line); the assistant asks for each detail it needs, one question at a time, and the user gives
it; then come the tool calls and results and the final message. Written by code from each task's reference
solution and its script, and checked: no user turn gives a fact before it was asked for, invents a value or
names a tool or an id (envfoundry's checks of a simulated user, `usercheck.py` in the other exports). Render
it with the second command below, or train on it as on `sft.jsonl`. A task's `conversation` holds `opening`,
`goal` (the whole request), `facts` (`label`, `value`, `about`: what the user gives when asked), `hidden`
(values read from tools, which the user never says), `persona`, `question` (the user waits for an answer),
`pushback` (the user insists once when refused), `derived` and `user_system` (the simulated user's system
prompt); to play the user live against a policy, use the verifiers, OpenEnv or veRL export.

Render it with a model's chat template (only `transformers` and `jinja2` needed), offline from a
local directory holding the model's tokenizer files:

```bash
pip install transformers jinja2
python render_sft.py sft.jsonl --tokenizer ./qwen2.5-tokenizer --out rendered.jsonl
python render_sft.py sft_conversation.jsonl --tokenizer ./qwen2.5-tokenizer --out rendered_conversation.jsonl
```

`./qwen2.5-tokenizer` is a directory you make once, while you have network (the only step that needs
it), then copy to the training machine with the export:

```bash
pip install "huggingface_hub[cli]"
hf download Qwen/Qwen2.5-7B-Instruct tokenizer.json tokenizer_config.json --local-dir qwen2.5-tokenizer
```

(the chat template is in `tokenizer_config.json`; `AutoTokenizer.from_pretrained(ID).save_pretrained(DIR)`
makes the same directory). From then on everything runs offline: a directory is read without any network
access. `--tokenizer Qwen/Qwen2.5-7B-Instruct` (a Hub id) would download the files instead; with
`HF_HUB_OFFLINE=1` it reads them from the Hub cache of an earlier download, and without one it stops and says
what to pass.

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


def replayed(ce: CatalogEnv, task: Task, form: str) -> tuple[list[dict[str, Any]], str]:
    """The reference solution as chat messages (per call an assistant message with one ``tool_calls`` entry and
    the ``tool`` message with the real result, replayed on a fresh database) and the final reply; an
    ``ExportError`` when a call fails or the solution fails its verifier."""
    verifier = task.verifier.model_dump(mode="json")
    messages: list[dict[str, Any]] = []
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
        final = final_reply(ce, task)
        score = reward.score(verifier, inst.conn, initial=initial, answer=final)
    if not score.passed:
        raise ExportError(
            f"task {task.task_id}: the reference solution fails its verifier: {'; '.join(score.failures)}"
        )
    return messages, final


def record(task: Task, split: str, messages: list[dict[str, Any]], ce: CatalogEnv | None = None) -> dict[str, Any]:
    info = difficulty_info(task)
    refused = refusals(ce, task) if ce is not None else []
    return {
        **({"refusals": refused} if refused else {}),
        "task_id": task.task_id,
        "env_id": task.env_id,
        "split": split,
        "tier": info["tier"],
        "pass_rate": info["pass_rate"],
        "difficulty": info,
        "messages": messages,
        "tools": task.tools,
    }


def transcript(ce: CatalogEnv, task: Task, split: str, form: str) -> dict[str, Any]:
    calls, final = replayed(ce, task, form)
    messages = [{"role": "system", "content": system_prompt(ce)}, {"role": "user", "content": task.instruction},
                *calls, {"role": "assistant", "content": final}]
    return record(task, split, messages, ce)


def ask(fact: dict[str, Any]) -> str:
    """The assistant's question for a fact: ``What is the <label> of the <about>?``."""
    label, about = fact["label"], fact.get("about") or ""
    return f"What is the {label}" + (f" of the {about}" if about and about not in label else "") + "?"


def conversation_transcript(ce: CatalogEnv, task: Task, split: str, form: str) -> dict[str, Any]:
    """The task as a whole conversation: the opening line, a question and its answer per fact, the reference calls
    and results, the final message. An ``ExportError`` when a user turn of it would be a user error."""
    conv = conversation_form(ce, task)
    calls, final = replayed(ce, task, form)
    messages: list[dict[str, Any]] = [{"role": "system", "content": conversation_prompt(ce)},
                                      {"role": "user", "content": conv["opening"]}]
    facts = [usercheck.Fact.from_json(f) for f in conv["facts"]]
    tools = [t.name for t in ce.env.tools]
    agent: list[str] = []
    user = [conv["opening"]]
    for fact in conv["facts"]:
        question, answer = ask(fact), f"It is {fact['value']}."
        agent.append(question)
        errors = usercheck.check_turn(facts, conv["hidden"], tools, agent, user, answer, False, len(user))
        if errors:
            raise ExportError(f"task {task.task_id}: the scripted user's answer {answer!r} to {question!r} is a "
                              f"user error: {errors[0].detail}")
        user.append(answer)
        messages += [{"role": "assistant", "content": question}, {"role": "user", "content": answer}]
    agent.append(final)
    errors = usercheck.check_turn(facts, conv["hidden"], tools, agent, user, "", True, len(user))
    if errors:  # the user must be able to end the conversation on the final reply (a refusal included)
        raise ExportError(f"task {task.task_id}: ending the conversation after the final reply {final!r} is a user "
                          f"error: {errors[0].detail}")
    messages += [*calls, {"role": "assistant", "content": final}]
    return {**record(task, split, messages, ce), "conversation": conv}


def export(catalog: Catalog, out: Path, options: ExportOptions) -> list[Path]:
    if options.sft_arguments not in ARGUMENT_FORMS:
        raise ExportError(f"sft_arguments {options.sft_arguments!r} is not one of {', '.join(ARGUMENT_FORMS)}")
    split = splits(catalog, options.val_fraction)
    records = [transcript(ce, task, split[task.task_id], options.sft_arguments)
               for ce in catalog.envs.values() for task in ce.tasks]
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in records]
    path = out / "sft.jsonl"
    write_text(path, "".join(line + "\n" for line in lines))
    conversations = [
        json.dumps(conversation_transcript(ce, task, split[task.task_id], options.sft_arguments), ensure_ascii=False,
                   sort_keys=True)
        for ce in catalog.envs.values()
        for task in ce.tasks
    ]
    write_text(out / "sft_conversation.jsonl", "".join(line + "\n" for line in conversations))
    write_text(out / "render_sft.py", (TEMPLATES / "sft_render.py").read_text(encoding="utf-8"))
    write_text(
        out / "README.md",
        README.format(
            n=len(lines),
            n_envs=sum(1 for ce in catalog.envs.values() if ce.tasks),
            n_val=sum(1 for v in split.values() if v == "val"),
            arguments=ARGUMENT_DOC[options.sft_arguments],
            n_refusing=sum(1 for r in records if r.get("refusals")),
        ) + readme_of(options, [ce.env_id for ce in catalog.envs.values() if ce.tasks]),
    )
    if options.audits:  # one file for the catalog: {env_id: audit}
        write_json(out / AUDIT_FILE, {e: a.to_json(options.allow_failing) for e, a in options.audits.items()})
    return [path]
