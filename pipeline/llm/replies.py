"""What an LLM call gives back and how a reply is checked: the ``Reply`` record, the thread-safe ``Usage``
ledger, the JSON schema sent for a reply model (references inlined, built once per class) and a validation
error as the text fed back to the model. Used by ``pipeline.llm.client`` (which re-exports them)."""

from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool
    prompt_read: int | None = None
    """Prompt tokens the endpoint read when it made the reply, the rest served from its prefix cache
    (:func:`prompt_read`); None when the endpoint did not say."""


def prompt_read(resp: Any, prompt_tokens: int) -> int | None:
    """How many of a reply's ``prompt_tokens`` its endpoint read rather than served from its prefix cache: llama.cpp's
    ``timings.prompt_n`` (the embedded server reports it too: ``pipeline.llm.serve.count_prompt_reads``), else
    ``prompt_tokens`` less OpenAI's ``usage.prompt_tokens_details.cached_tokens``; None when it says neither."""
    timings = (getattr(resp, "model_extra", None) or {}).get("timings")
    if isinstance(timings, dict) and isinstance(timings.get("prompt_n"), int):
        return int(timings["prompt_n"])
    cached = getattr(getattr(getattr(resp, "usage", None), "prompt_tokens_details", None), "cached_tokens", None)
    return max(0, prompt_tokens - cached) if isinstance(cached, int) else None


def usage_record(prompt_tokens: int, completion_tokens: int, seconds: float, read: int | None) -> dict[str, Any]:
    """A reply's usage as the cache stores it (``prompt_read`` only when the endpoint said it: older records stay)."""
    out: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "seconds": round(seconds, 3)}
    if read is not None:
        out["prompt_read"] = read
    return out


@dataclass
class Usage:
    """Thread-safe ledger of calls: totals per stage and for the run. Once any reply says how much of its prompt was
    read (:attr:`Reply.prompt_read`), every stage also has ``prompt_read``: the prompt tokens read, a reply that did
    not say counted as read whole."""

    records: list[tuple[str, Reply]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, stage: str, reply: Reply) -> None:
        with self._lock:
            self.records.append((stage, reply))

    def by_stage(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        with self._lock:
            said = any(r.prompt_read is not None for _, r in self.records)
            for stage, r in self.records:
                s = out.setdefault(
                    stage, {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
                )
                s["calls"] += 1
                s["cached"] += int(r.cached)
                s["prompt_tokens"] += r.prompt_tokens
                s["completion_tokens"] += r.completion_tokens
                s["seconds"] = round(s["seconds"] + r.seconds, 3)
                if said:
                    s["prompt_read"] = s.get("prompt_read", 0) + (r.prompt_tokens if r.prompt_read is None
                                                                  else r.prompt_read)
        return dict(sorted(out.items()))

    def total(self) -> dict[str, float]:
        tot = {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        for s in self.by_stage().values():
            for k, v in s.items():
                tot[k] = tot.get(k, 0) + v
        tot["seconds"] = round(tot["seconds"], 3)
        return tot


_SCHEMAS: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()
_SCHEMAS_LOCK = threading.Lock()


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """``inline_refs(model.model_json_schema())``, once per model class (pydantic builds it anew on every
    call: milliseconds, and the tester asks with the same class every turn). Callers must not mutate it."""
    with _SCHEMAS_LOCK:
        hit = _SCHEMAS.get(model)
    if hit is None:
        hit = inline_refs(model.model_json_schema())
        with _SCHEMAS_LOCK:
            _SCHEMAS[model] = hit
    return hit


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``$ref``/``$defs`` of a pydantic schema into one self-contained tree (grammar converters and
    small servers handle that best); drops ``title`` noise."""
    defs = schema.get("$defs", {})

    def walk(node: Any, depth: int = 0, names: bool = False) -> Any:
        if depth > 40:
            raise ValueError("schema nests too deeply (recursive model?)")
        if isinstance(node, dict):
            if names:  # the keys of "properties" are field names (a field may be called "title")
                return {k: walk(v, depth + 1) for k, v in node.items()}
            if "$ref" in node:
                name = node["$ref"].split("/")[-1]
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged, depth + 1)
            return {k: walk(v, depth + 1, names=(k == "properties")) for k, v in node.items()
                    if k not in ("$defs", "title")}
        if isinstance(node, list):
            return [walk(v, depth + 1) for v in node]
        return node

    return walk(copy.deepcopy(schema))


def format_validation(err: ValidationError) -> str:
    lines = []
    for e in err.errors()[:8]:
        loc = ".".join(str(x) for x in e["loc"]) or "(reply)"
        lines.append(f"- {loc}: {e['msg']}")
    return "\n".join(lines)
