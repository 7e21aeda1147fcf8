"""Configuration: pydantic models with a docstring per field, loaded from TOML, overridden by env and flags.

Precedence (lowest to highest): defaults < TOML file < environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``ENVFOUNDRY_MODEL``) < command-line flags. A bad key or value is reported by its dotted name.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ConfigError(ValueError):
    """A configuration problem, already phrased for the user (names the file and key)."""


def default_home() -> Path:
    """Where envfoundry keeps assembled models and the default LLM cache (``ENVFOUNDRY_HOME``)."""
    env = os.environ.get("ENVFOUNDRY_HOME")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "envfoundry"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LLMSettings(Section):
    base_url: str | None = None
    """OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp). None: start the embedded model."""
    endpoints: list[str] = Field(default_factory=list)
    """More base URLs serving the same model as ``base_url``: each request goes to the least-loaded one, each
    with its own ``concurrency`` limit and Retry-After cool-down. Not part of the cache key."""
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    """API key for ``base_url``; never written to logs, caches or run records."""
    model: str | None = None
    """Model name at ``base_url``; required when ``base_url`` is set."""
    embedded_model: Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"] = "qwen2.5-coder-1.5b"
    """Which embedded model to serve when no endpoint is configured."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 makes replies reproducible."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    seed: int = 0
    """Sampling seed sent with every request (part of the cache key)."""
    structured_mode: Literal["auto", "json_schema", "json_object"] = "auto"
    """How the response schema is sent: ``json_schema`` (OpenAI style), ``json_object`` with a ``schema``
    (llama.cpp), or ``auto`` (json_object for the embedded server, json_schema otherwise)."""
    validation_retries: int = Field(default=2, ge=0, le=10)
    """Extra requests when a reply fails schema validation (the error is fed back each time)."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """Transport retries with exponential backoff on timeouts, connection errors, 429 and 5xx."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Per-request timeout in seconds (small CPU models are slow on long replies)."""
    concurrency: int = Field(default=2, ge=1, le=256)
    """Maximum requests in flight per endpoint from this process (all its clients together)."""
    cache: bool = True
    """Use the persistent SQLite response cache."""
    cache_path: Path | None = None
    """Cache file; default ``$ENVFOUNDRY_HOME/llm_cache.sqlite`` (a run uses its catalog's own cache)."""
    n_ctx: int = Field(default=8192, ge=512)
    """Context window of the embedded server."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads for the embedded server; default: all cores."""
    startup_timeout_s: float = Field(default=180.0, gt=0)
    """How long to wait for the embedded server to load its model."""

    def resolved_cache_path(self) -> Path:
        return self.cache_path or default_home() / "llm_cache.sqlite"


class Config(Section):
    """The whole configuration. Stage sections are added by the stages that own them."""

    llm: LLMSettings = LLMSettings()
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-stage settings tables (``[stages.schema]`` ...), validated by each stage's own settings model."""


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
