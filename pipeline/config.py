"""Configuration: pydantic models with a docstring per field, loaded from TOML, overridden by env and flags.

Precedence (lowest to highest): defaults < TOML file < environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``ENVFOUNDRY_MODEL``) < command-line flags. A bad key or value is reported by its dotted name.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pipeline.settings import Config as Config
from pipeline.settings import ConfigError as ConfigError
from pipeline.settings import LLMSettings as LLMSettings
from pipeline.settings import Section as Section
from pipeline.settings import default_home as default_home


def _format_errors(err: ValidationError, source: str) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"])
        if e["type"] == "extra_forbidden":
            parts.append(f"unknown key '{key}'")
        else:
            parts.append(f"'{key}': {e['msg']} (got {e.get('input')!r})")
    return f"{source}: " + "; ".join(parts)


def validate_config(data: dict[str, Any], source: str = "config") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_errors(e, source)) from None


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults < TOML ``path`` < environment < ``overrides`` (``{"llm": {"model": ...}}``, Nones ignored)."""
    data: dict[str, Any] = {}
    source = "config"
    if path is not None:
        p = Path(path)
        source = str(p)
        if not p.is_file():
            raise ConfigError(f"config file {p} not found")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"{p}: not valid TOML: {e}") from None
    llm = dict(data.get("llm", {}))
    env_map = {"base_url": "OPENAI_BASE_URL", "api_key": "OPENAI_API_KEY", "model": "ENVFOUNDRY_MODEL"}
    for key, var in env_map.items():
        if os.environ.get(var) and key not in llm:
            llm[key] = os.environ[var]
    for section, values in (overrides or {}).items():
        target = llm if section == "llm" else data.setdefault(section, {})
        for k, v in values.items():
            if v is not None:
                target[k] = v
    if llm:
        data["llm"] = llm
    cfg = validate_config(data, source)
    if cfg.llm.base_url and not cfg.llm.model:
        raise ConfigError(
            f"{source}: 'llm.model' is required when an endpoint is configured (base_url={cfg.llm.base_url}); "
            "set ENVFOUNDRY_MODEL, --model or llm.model"
        )
    return cfg
