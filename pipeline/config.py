"""Loading the configuration: four layers, assembled by pydantic-settings.

Precedence, lowest to highest:

1. the defaults of the models in ``pipeline/settings.py`` (each field documented there);
2. the TOML file given with ``--config`` (``[llm]``, ``[stages.NAME]``);
3. the environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``ENVFOUNDRY_MODEL`` (``llm.base_url``,
   ``llm.api_key``, ``llm.model``, the names OpenAI-compatible tools share), and ``ENVFOUNDRY_`` + the
   dotted key in capitals with ``__`` for each dot, for any key: ``ENVFOUNDRY_LLM__CONCURRENCY=4``,
   ``ENVFOUNDRY_STAGES__BUILD__MAX_ATTEMPTS=2``. The long form beats the short one
   (``ENVFOUNDRY_LLM__MODEL`` beats ``ENVFOUNDRY_MODEL``); empty variables are ignored;
4. command-line flags (``overrides`` of :func:`load_config`; None means "not given").

The stage tables are typed (``pipeline.settings.Stages``), so the whole configuration is checked here, once:
a bad key or value is reported by :func:`pipeline.settings.format_validation_error`, naming the layer that
set it (the file, the variable or the command line), the dotted key and the value. Commands pass their
stage flags to :func:`load_config` too (``{"stages": {"tester": {"attempts": 3}}}``) and read their
settings from the result; nothing else merges or validates stage tables.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from pipeline.settings import Config as Config
from pipeline.settings import ConfigError as ConfigError
from pipeline.settings import LLMSettings as LLMSettings
from pipeline.settings import Section as Section
from pipeline.settings import Stages as Stages
from pipeline.settings import default_home as default_home
from pipeline.settings import format_validation_error

ENV_PREFIX = "ENVFOUNDRY_"
ENV_DELIMITER = "__"
SHORT_ENV = {"base_url": "OPENAI_BASE_URL", "api_key": "OPENAI_API_KEY", "model": "ENVFOUNDRY_MODEL"}
"""``[llm]`` keys that also have the short variable names OpenAI-compatible tools use."""


def env_name(key: str) -> str:
    """The environment variable of a dotted key: ``llm.concurrency`` -> ``ENVFOUNDRY_LLM__CONCURRENCY``."""
    return ENV_PREFIX + ENV_DELIMITER.join(key.split(".")).upper()


class _ShortEnv(PydanticBaseSettingsSource):
    """``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``ENVFOUNDRY_MODEL`` as ``[llm]`` keys."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # the whole source is built in __call__

    def __call__(self) -> dict[str, Any]:
        llm = {key: os.environ[var] for key, var in SHORT_ENV.items() if os.environ.get(var)}
        return {"llm": llm} if llm else {}


class _Layered(Config, BaseSettings):
    """:class:`Config` with its values drawn from the layers; the TOML file is set per load."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER,
                                      env_ignore_empty=True, toml_file=None)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Highest first: flags (the init arguments), ``ENVFOUNDRY_*``, the short names, the TOML file."""
        return init_settings, env_settings, _ShortEnv(settings_cls), TomlConfigSettingsSource(settings_cls)


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    """The flags given: Nones dropped, and the tables left empty by that (so no key is said to be a flag's)."""
    out = {k: _drop_none(v) if isinstance(v, dict) else v for k, v in values.items() if v is not None}
    return {k: v for k, v in out.items() if v != {}}


def _has(data: Any, parts: list[str]) -> bool:
    for part in parts:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _read_toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _origin(key: str, path: Path | None, flags: dict[str, Any]) -> str | None:
    """Which layer set ``key``: the command line, an environment variable, or the TOML file."""
    parts = key.split(".")
    if _has(flags, parts):
        return "command line"
    environ = sorted(name.upper() for name, value in os.environ.items() if value)
    for n in range(len(parts), 0, -1):  # the key's own variable, or a JSON value of a table above it
        name = env_name(".".join(parts[:n]))
        if name in environ:
            return name
        below = [v for v in environ if v.startswith(name + ENV_DELIMITER)] if n == len(parts) else []
        if below and not (path is not None and _has(_read_toml(path), parts)):  # a table set key by key
            return below[0]
    if parts[0] == "llm" and len(parts) == 2 and os.environ.get(SHORT_ENV.get(parts[1], "")):
        return SHORT_ENV[parts[1]]
    return str(path) if path is not None else None


def validate_config(data: dict[str, Any], source: str = "config") -> Config:
    """A whole configuration given as one dict (no layering); errors name ``source``."""
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source)) from None


def with_flags(config: Config, flags: dict[str, Any]) -> Config:
    """``config`` with command-line ``flags`` on top (``{"stages": {"run": {"concurrency": 4}}}``, Nones
    ignored), for a caller that already holds a loaded configuration; errors are named as by :func:`load_config`."""
    given = _drop_none(flags)
    try:
        return config.with_values(given)
    except ValidationError as e:
        def origin(key: str) -> str | None:
            return "command line" if _has(given, key.split(".")) else None

        raise ConfigError(format_validation_error(e, "config", origin=origin)) from None


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Defaults < TOML ``path`` < environment < ``overrides`` (``{"llm": {"model": ...}}``, Nones ignored)."""
    toml_file = Path(path) if path is not None else None
    if toml_file is not None and not toml_file.is_file():
        raise ConfigError(f"config file {toml_file} not found")
    flags = _drop_none(overrides or {})

    class Layered(_Layered):
        model_config = SettingsConfigDict(toml_file=toml_file)

    def origin(key: str) -> str | None:
        return _origin(key, toml_file, flags)

    try:
        layered = Layered(**flags)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{toml_file}: not valid TOML: {e}") from None
    except SettingsError as e:  # a table-valued variable (ENVFOUNDRY_LLM) that is not JSON
        m = re.search(r'field "(\w+)"', str(e))
        where = env_name(m.group(1)) if m else "environment"
        raise ConfigError(f"{where}: not a JSON table ({e.__cause__ or e})") from None
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, "config", origin=origin)) from None
    cfg = Config(llm=layered.llm, stages=layered.stages)
    if cfg.llm.base_url and not cfg.llm.model:
        where = origin("llm.base_url") or "config"
        raise ConfigError(
            f"{where}: 'llm.model' is required when an endpoint is configured (base_url={cfg.llm.base_url}); "
            "set ENVFOUNDRY_MODEL, --model or llm.model"
        )
    return cfg
