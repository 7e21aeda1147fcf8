"""The ground the settings models stand on: the configuration error, how a validation error is shown to a
user, the frozen section base and the merging of set values. Standard library and pydantic only;
``pipeline.settings`` re-exports every name."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class ConfigError(ValueError):
    """A configuration problem, already phrased for the user (names the file and key)."""


def default_home() -> Path:
    """Where envfoundry keeps assembled models and the default LLM cache (``ENVFOUNDRY_HOME``)."""
    env = os.environ.get("ENVFOUNDRY_HOME")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "envfoundry"


def format_validation_error(err: ValidationError, source: str = "", prefix: str = "",
                            origin: Callable[[str], str | None] | None = None) -> str:
    """One line for the user naming where, the dotted key and the value of each problem, e.g.
    ``c.toml: 'llm.temperature': Input should be less than or equal to 2 (got 5)`` or
    ``c.toml: unknown key 'llm.temprature'``; several problems are joined by ``; ``.

    ``source`` names the file (or ``file:line``, or an environment variable); ``prefix`` is the dotted
    path of the validated model inside the whole configuration (``stages.build``); ``origin(key)`` may
    name a more precise source for one key (the variable or flag that set it), else ``source`` is used.
    """
    groups: dict[str, list[str]] = {}
    for e in err.errors():
        path = [str(x) for x in e["loc"]]
        key = ".".join([prefix, *path] if prefix else path)
        if e["type"] == "extra_forbidden":
            text = f"unknown key '{key}'"
        elif not path or e["type"] == "missing" or isinstance(e.get("input"), dict):  # no single value to show
            text = f"'{key}': {e['msg']}" if key else e["msg"]
        else:
            value = repr(e.get("input"))
            text = f"'{key}': {e['msg']} (got {value if len(value) <= 80 else value[:77] + '...'})"
        where = (origin(key) if origin and key else None) or source
        groups.setdefault(where, []).append(text)
    return "; ".join((f"{where}: " if where else "") + "; ".join(texts) for where, texts in groups.items())


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


def set_values(model: BaseModel) -> dict[str, Any]:
    """The values set on ``model`` (by a file, a variable or a flag; not the defaults), nested models as dicts,
    secrets (``exclude=True`` fields) included: what is validated again with more values on top."""
    return {k: set_values(v) if isinstance(v, BaseModel) else v
            for k in sorted(model.model_fields_set) for v in [getattr(model, k)]}


def merge_values(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, table by table; a None in ``top`` means "not given" and changes nothing."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        elif isinstance(value, dict):
            out[key] = merge_values({}, value)
        elif value is not None:
            out[key] = value
    return out
