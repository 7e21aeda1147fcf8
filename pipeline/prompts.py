"""Prompt files: one per agent role / stage under ``prompts/``, loaded by name.

Templates use ``$name`` placeholders (``string.Template``) so JSON examples need no escaping. The
rendered text goes into the LLM messages, so it is part of the LLM cache key: edit a prompt and
the affected calls are asked again.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from string import Template

PROMPTS_DIR = Path(os.environ.get("ENVFOUNDRY_PROMPTS_DIR", Path(__file__).resolve().parents[1] / "prompts"))


class PromptError(ValueError):
    pass


@cache
def load(name: str) -> str:
    """Text of ``prompts/<name>.md``."""
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"prompt file {path} not found (prompts are loaded by name from {PROMPTS_DIR})")
    return path.read_text(encoding="utf-8")


def render(name: str, **values: object) -> str:
    """Fill ``$placeholders`` in ``prompts/<name>.md``; a missing value is an error naming it."""
    try:
        return Template(load(name)).substitute({k: str(v) for k, v in values.items()})
    except KeyError as e:
        raise PromptError(f"prompt {name!r} needs a value for ${e.args[0]}") from None


def prompt_hashes() -> dict[str, str]:
    """sha256 (12 hex) of every prompt file, for run provenance."""
    return {
        p.stem: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in sorted(PROMPTS_DIR.glob("*.md"))
    }
