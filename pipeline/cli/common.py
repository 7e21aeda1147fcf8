"""Shared CLI pieces: the LLM/config options decorator, ``--json``, and the error boundary."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from pipeline.config import Config, ConfigError, load_config


def _is_user_error(exc: BaseException) -> bool:
    mod = type(exc).__module__ or ""
    return mod.startswith(("pipeline.", "verify.")) or isinstance(exc, FileNotFoundError | PermissionError)


class Group(click.Group):
    """A click group whose commands report envfoundry's own errors as one line (exit 2 for bad input, 1 for
    failures) instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except Exception as e:
            if not _is_user_error(e):
                raise
            click.echo(f"error: {e}", err=True)
            sys.exit(2 if isinstance(e, ValueError | FileNotFoundError) else 1)


class BadConfig(click.ClickException):
    """A bad key or value of the configuration (file, variable or flag): ``Error: <where>: <key> ...``, exit 2,
    the same for every command (and in a bare click group)."""

    exit_code = 2


def llm_options(f: Callable[..., Any] | None = None, *, stages: dict[str, str] | None = None) -> Any:
    """Adds --config and the LLM endpoint flags; the command receives ``config: Config``, loaded once by
    :func:`~pipeline.config.load_config` with every flag on top. ``stages`` maps the command's own options to
    the stage keys they set (``@llm_options(stages={"attempts": "tester.attempts"})``): those values go to
    ``load_config`` (a bad one is named there, like a bad key of the file) instead of to the command, which
    reads them back from ``config.stages``."""
    if f is None:
        return functools.partial(llm_options, stages=stages)
    flags = {name: dotted.split(".") for name, dotted in (stages or {}).items()}

    @click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                  help="TOML config file; environment variables (ENVFOUNDRY_LLM__SEED=1 ...) override it, "
                  "flags override both.")
    @click.option("--base-url", default=None, help="OpenAI-compatible endpoint; default: the embedded model "
                  "(env OPENAI_BASE_URL).")
    @click.option("--model", default=None, help="Model name at --base-url (env ENVFOUNDRY_MODEL).")
    @click.option("--embedded-model", type=click.Choice(["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"]),
                  default=None, help="Embedded model to serve when no endpoint is configured.")
    @click.option("--temperature", type=float, default=None, help="Sampling temperature (default 0).")
    @click.option("--seed", type=int, default=None, help="Sampling seed (default 0).")
    @click.option("--cache-path", type=click.Path(dir_okay=False), default=None, help="LLM cache file.")
    @click.option("--no-cache", is_flag=True, default=False, help="Do not read or write the LLM cache.")
    @functools.wraps(f)
    def wrapper(*args: Any, config_path: str | None, base_url: str | None, model: str | None,
                embedded_model: str | None, temperature: float | None, seed: int | None,
                cache_path: str | None, no_cache: bool, **kwargs: Any) -> Any:
        overrides: dict[str, Any] = {"llm": {"base_url": base_url, "model": model, "embedded_model": embedded_model,
                                             "temperature": temperature, "seed": seed, "cache_path": cache_path,
                                             "cache": False if no_cache else None}, "stages": {}}
        for name, (section, key) in flags.items():
            overrides["stages"].setdefault(section, {})[key] = kwargs.pop(name)
        try:
            kwargs["config"] = load_config(config_path, overrides)
        except ConfigError as e:
            raise BadConfig(str(e)) from None
        return f(*args, **kwargs)

    return wrapper


json_option = click.option("--json", "as_json", is_flag=True, default=False, help="Print JSON for machines.")


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=True, default=str))


def client_from_config(config: Config) -> Any:
    from pipeline.llm import client_from_settings

    return client_from_settings(config.llm)
