"""What every export format shares: names, the system prompt, the runtime bundle, file writing.

Every format is written from the same ``Catalog`` (one task bank), so task ids, instructions
and verifiers are identical across formats. Files are written deterministically: same catalog,
same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from pipeline.export.catalog import Catalog, CatalogEnv
from pipeline.hashing import canonical_json
from pipeline.ir import Task
from pipeline.runtime import reward
from pipeline.runtime.schemas import described_tools
from verify.conversation import script_of, user_system
from verify.policy import with_policy

EXPORT_DIR = Path(__file__).parent
TEMPLATES = EXPORT_DIR / "templates"
REPO_SRC = EXPORT_DIR.parent.parent
RUNTIME_FILES = {
    # exported name: source, copied byte for byte (all stdlib only, importing each other relatively)
    "engine.py": REPO_SRC / "pipeline" / "runtime" / "engine.py",
    "reward.py": REPO_SRC / "pipeline" / "runtime" / "reward.py",
    "taskrt.py": TEMPLATES / "taskrt.py",
    # the simulated user of conversations: envfoundry's checks of a user's turn and the values they read
    "values.py": REPO_SRC / "pipeline" / "runtime" / "values.py",
    "usercheck.py": REPO_SRC / "pipeline" / "runtime" / "usercheck.py",
    "usersim.py": TEMPLATES / "usersim.py",
}


class ExportError(Exception):
    """The catalog cannot be exported in the requested format; the message says why."""


SYSTEM_PROMPT = (
    "You are an agent operating the application '{name}': {description}\n"
    "Use the provided tools to carry out the user's request. Tool results are JSON; a result "
    "starting with 'Error:' means the call changed nothing. Do only what the request asks. "
    "When you are done, reply with a short final message that states any answer the user asked for."
)


CONVERSATION_PROMPT = (
    "You are an agent operating the application '{name}': {description}\n"
    "You are talking with a user. Their first message may not say every detail you need: ask them for what is "
    "missing (names, dates, amounts), one short question at a time, and never guess a value or an id; find ids "
    "with the tools. Tool results are JSON; a result starting with 'Error:' means the call changed nothing. Do "
    "only what the user asks. Every message you write without a tool call goes to the user, who replies. When "
    "the request is done, tell the user in a short message that states any answer they asked for."
)


def system_prompt(ce: CatalogEnv) -> str:
    """What every format gives the trainer as the system prompt: the application, then its policy when it has
    rules (``policy.md``'s text, :func:`verify.policy.with_policy`; without rules the prompt is as it was)."""
    s = ce.env.scenario
    return with_policy(SYSTEM_PROMPT.format(name=s.name, description=s.description.strip()), ce.env)


def conversation_prompt(ce: CatalogEnv) -> str:
    """The agent's system prompt in a task's conversational form (it talks with the simulated user), with the
    policy as in :func:`system_prompt`."""
    s = ce.env.scenario
    return with_policy(CONVERSATION_PROMPT.format(name=s.name, description=s.description.strip()), ce.env)


def conversation_form(ce: CatalogEnv, task: Task) -> dict[str, Any]:
    """The task's conversational form as every export carries it (the record's ``conversation``): the script of
    :func:`verify.conversation.script_of` (``opening``, ``goal``, ``facts``, ``persona``, ``question``,
    ``pushback``, ``hidden``; ``derived`` when the task had no ``metadata.conversation``) and ``user_system``, the
    simulated user's system prompt rendered by :func:`verify.conversation.user_system`."""
    script = script_of(ce.env, task)
    return {**script.model_dump(mode="json"), "user_system": user_system(ce.env, script)}


def exported_record(ce: CatalogEnv, task: Task) -> dict[str, Any]:
    """A task record as the exports write it: the bank's record plus its ``conversation``."""
    return {**task.model_dump(mode="json"), "conversation": conversation_form(ce, task)}


def package_name(env_id: str, prefix: str) -> str:
    """A Python package name for an environment: ``<prefix>_<env_id>`` (identifier-safe)."""
    name = re.sub(r"[^a-z0-9_]", "_", f"{prefix}_{env_id}".lower())
    return re.sub(r"_+", "_", name).strip("_")


def dist_name(package: str) -> str:
    return package.replace("_", "-")


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


@dataclass(frozen=True)
class ExportOptions:
    val_fraction: float = 0.1
    """Share of each environment's tasks held out as the validation split (by task-id hash)."""
    sft_arguments: str = "object"
    """SFT tool-call ``arguments``: ``object`` (Hugging Face chat templates), ``string`` (OpenAI
    wire format, a JSON string) or ``both`` (objects, plus ``arguments_json`` strings)."""
    pools: Mapping[str, Any] | None = None
    """Sampled tasks by level per environment (``pipeline.export.pools.EnvPools`` by env id; None: no pools)."""
    audits: Mapping[str, Any] | None = None
    """The integrity audit per environment (``pipeline.export.audit.EnvAudit`` by env id; None: not audited)."""
    allow_failing: bool = False
    """Ship tasks that fail the audit (marked in ``audit.json``) instead of refusing the export."""


def reference_reply(verifier: dict[str, Any]) -> str | None:
    """A final reply that states a verifier's expected answer (None when it asks none): the reply
    the SFT transcripts end with and the reference checks score."""
    answer = verifier.get("answer")
    if answer is None:
        return None
    spec = reward.expected_answer(answer)
    value = spec.get("value")
    if spec["type"] == "boolean":
        return "Yes." if value else "No."
    if spec["type"] == "list":
        return ", ".join(str(v) for v in value or [])
    if spec["type"] == "number" and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


FINAL_REPLY = "Done: the request has been carried out."


def _call_text(tool: str, arguments: dict[str, Any] | None) -> str:
    """``tool(name=value, ...)``: a call as the agent made it (values as JSON), in no natural language."""
    if arguments is None:
        return tool
    return f"{tool}(" + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(arguments.items())) + ")"


def refusals(ce: CatalogEnv, task: Task) -> list[dict[str, Any]]:
    """The writes a rule-bound task's policy forbids (``metadata.rules`` with the verdict ``forbids``), once each, in
    order: ``{"rule": id, "tool", "arguments", "message"}``, the message being the rule's own (``env.rules``), in the
    environment's language. Empty for any other task."""
    meta = task.metadata.as_dict()
    messages = {r.id: r.message for r in ce.env.rules}
    out: list[dict[str, Any]] = []
    for r in meta.get("rules") or []:
        if not isinstance(r, dict) or r.get("verdict") != "forbids":
            continue
        item = {"rule": r.get("id"), "tool": r.get("tool"), "arguments": dict(r.get("arguments") or {}),
                "message": messages.get(str(r.get("id")))}
        if item["message"] is None:
            raise ExportError(f"task {task.task_id}: metadata.rules names rule {r.get('id')!r}, which the environment "
                              f"{ce.env_id} does not have (env.json rules: {', '.join(sorted(messages)) or 'none'})")
        if item not in out:
            out.append(item)
    return out


def final_reply(ce: CatalogEnv, task: Task) -> str:
    """The reply a reference transcript ends with: for a task whose request the policy refuses in part, what was
    done (the reference's writes, as calls) and what was not, each refused write with its rule's own message; else
    the reply stating the expected answer (:func:`reference_reply`), or :data:`FINAL_REPLY`. A refusal's reply is its
    rule's message alone where that names the reason its answer asks for. A question's reply
    keeps its answer first and names the refused tools without their arguments (whose numbers would be read as
    answers)."""
    answer = reference_reply(task.verifier.model_dump(mode="json"))
    refused = refusals(ce, task)
    if not refused:
        return answer or FINAL_REPLY
    kinds = {t.name: t.kind for t in ce.env.tools}
    if answer is not None and not task.verifier.mutable_tables:  # a refusal: its rule's message says why
        said = "\n".join(f"Not done: {_call_text(r['tool'], None)}: {r['message']}" for r in refused)
        if reward.check_answer(task.verifier.answer, said)[0]:
            return said
    lines = [answer] if answer else []
    if answer is None:
        done = [_call_text(c.tool, c.arguments) for c in task.reference_solution if kinds.get(c.tool) == "write"]
        if done:
            lines.append("Done: " + "; ".join(done) + ".")
    for r in refused:
        lines.append(f"Not done: {_call_text(r['tool'], None if answer else r['arguments'])}: {r['message']}")
    return "\n".join(lines)


def splits(catalog: Catalog, val_fraction: float) -> dict[str, str]:
    """``{task_id: "train" | "val"}``: per environment, the ``val_fraction`` share of its tasks
    whose id hashes lowest (at least one when the environment has two tasks or more and the
    fraction is positive). Deterministic: the same bank gives the same split."""
    if not 0.0 <= val_fraction < 1.0:
        raise ExportError(f"val_fraction {val_fraction} is not in [0, 1)")
    out: dict[str, str] = {}
    for ce in catalog.envs.values():
        ids = sorted((t.task_id for t in ce.tasks), key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        n_val = math.floor(len(ids) * val_fraction)
        if val_fraction > 0 and len(ids) >= 2:
            n_val = max(1, n_val)
        for i, task_id in enumerate(ids):
            out[task_id] = "val" if i < n_val else "train"
    return out


def tier_of(task: Task, meta: dict[str, Any]) -> int:
    """The task's tier: ``metadata.tier`` (an integer, 1 to 3), else for a task that records none (an
    older bank, a hand-written task) the tasks stage's own rule on its reference solution: 1 for one
    call, 2 for two or three, 3 for more."""
    tier = meta.get("tier")
    if isinstance(tier, int) and not isinstance(tier, bool):
        return tier
    if isinstance(tier, float) and tier.is_integer():
        return int(tier)
    steps = len(task.reference_solution)
    return 1 if steps <= 1 else 2 if steps <= 3 else 3


def difficulty_info(task: Task) -> dict[str, Any]:
    """A task's difficulty as the exports carry it: ``tier`` (an integer, see :func:`tier_of`),
    ``pass_rate`` (None when the tester did not run), ``attempts``/``passes``, and ``pass_rate_ci``,
    ``hard_pool`` and ``difficulty_tag`` when recorded. Read defensively: ``metadata`` fields are
    optional and added by later pipeline stages."""
    meta = task.metadata.as_dict()
    diff = getattr(task, "difficulty", None)
    attempts = getattr(diff, "attempts", 0) if diff is not None else 0
    passes = getattr(diff, "passes", 0) if diff is not None else 0
    attempts = attempts if isinstance(attempts, int) else 0
    passes = passes if isinstance(passes, int) else 0
    rate = meta.get("pass_rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        rate = round(passes / attempts, 4) if attempts > 0 else None
    out: dict[str, Any] = {
        "tier": tier_of(task, meta),
        "pass_rate": float(rate) if rate is not None else None,
        "attempts": attempts,
        "passes": passes,
    }
    ci = meta.get("pass_rate_ci")
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        out["pass_rate_ci"] = [float(ci[0]), float(ci[1])]
    if isinstance(meta.get("hard_pool"), bool):
        out["hard_pool"] = meta["hard_pool"]
    if isinstance(meta.get("difficulty_tag"), str) and meta["difficulty_tag"]:
        out["difficulty_tag"] = meta["difficulty_tag"]
    return out


def task_info(task: Task, split: str, ce: CatalogEnv | None = None) -> dict[str, Any]:
    """What every export carries per task besides the record: split, kind, difficulty, and the
    reply that states the expected answer (the reference checks use it). With the task's environment ``ce``, a task
    whose request the policy refuses in part also carries ``refusals`` (each refused write's ``rule`` id, ``tool``,
    ``arguments`` and the rule's ``message``) and ``final_reply`` (:func:`final_reply`: what was done, what was
    refused and why), so the rule ids travel with the task in every format."""
    verifier = task.verifier.model_dump(mode="json")
    out = {"split": split, "kind": task.kind, **difficulty_info(task), "reference_reply": reference_reply(verifier)}
    refused = refusals(ce, task) if ce is not None else []
    if refused:
        out["refusals"] = refused
        out["final_reply"] = final_reply(ce, task) if ce is not None else None
    return out


def write_bundle(ce: CatalogEnv, out: Path, split: dict[str, str]) -> Path:
    """The runtime data of one environment: ``env.json``, ``initial.db``, ``tasks.jsonl`` (the task records, each
    with its ``conversation``, :func:`exported_record`) and ``task_info.json`` (split, tier, pass rate per task).
    ``env.json`` holds the tools as described (``described_tools``): a date parameter has the server's ``format``
    and description, so the vendored engine refuses another form as the server does and every format's tool
    listing says it."""
    out.mkdir(parents=True, exist_ok=True)
    env = ce.env.model_copy(update={"tools": described_tools(ce.env)})
    write_text(
        out / "env.json", json.dumps(env.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    )
    shutil.copyfile(ce.path / "initial.db", out / "initial.db")
    os.chmod(out / "initial.db", 0o644)
    write_text(out / "tasks.jsonl", "".join(canonical_json(exported_record(ce, t)) + "\n" for t in ce.tasks))
    write_json(out / "task_info.json", {t.task_id: task_info(t, split[t.task_id], ce) for t in ce.tasks})
    return out


def write_runtime(pkg_dir: Path) -> None:
    """Vendor the stdlib runtime into an exported package: the tool engine, the one reward
    implementation (``pipeline/runtime/reward.py``), the task runtime and the simulated user (``templates/usersim.py``
    with envfoundry's checks of a user's turn, ``pipeline/runtime/usercheck.py`` and ``pipeline/runtime/values.py``), each copied
    byte for byte."""
    for name, src in RUNTIME_FILES.items():
        if not src.is_file():
            raise ExportError(f"runtime file {src} is missing (needed as {pkg_dir / name})")
        path = pkg_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, path)
        os.chmod(path, 0o644)


def template(name: str, **values: str) -> str:
    """A template file with ``__KEY__`` placeholders filled (unknown placeholders are an error)."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    left = sorted(set(re.findall(r"__[A-Z][A-Z_]+__", text)))
    if left:
        raise ExportError(f"template {name}: placeholders left unfilled: {', '.join(left)}")
    return text


BUILD_SYSTEM = {"requires": ["setuptools>=61"], "build-backend": "setuptools.build_meta"}


def pyproject(project: dict[str, Any], setuptools: dict[str, Any], envfoundry: dict[str, Any] | None = None) -> str:
    """An exported package's ``pyproject.toml``, written by a TOML writer: LLM-written names (quotes,
    backslashes, newlines) come out as valid TOML that reads back the same. ``envfoundry``: a
    ``[tool.envfoundry]`` table (where the package came from)."""
    tool: dict[str, Any] = {"setuptools": setuptools}
    if envfoundry:
        tool["envfoundry"] = envfoundry
    return tomli_w.dumps({"build-system": BUILD_SYSTEM, "project": project, "tool": tool})


def one_line(text: str) -> str:
    """``text`` with its whitespace runs as single spaces (a package summary holds no newline)."""
    return " ".join(text.split())


def tasks_with_tools(ce: CatalogEnv) -> list[Task]:
    if not ce.tasks:
        raise ExportError(f"environment {ce.env_id} has no tasks in the task bank")
    return ce.tasks
