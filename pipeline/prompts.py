"""Prompt files: one per agent role / stage under ``prompts/``, loaded by name.

Templates use ``$name`` placeholders (``string.Template``) so JSON examples need no escaping. The
rendered text goes into the LLM messages, so it is part of the LLM cache key: edit a prompt and
the affected calls are asked again.

Prompt files may hold several sections, each introduced by a line ``## <key>``; a stage renders
one section with ``$placeholders`` filled (a missing value is an error naming it).
"""

from __future__ import annotations

import hashlib
import os
import re
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


_SECTION = re.compile(r"^## ([A-Za-z_][A-Za-z0-9_]*)[ \t]*$", re.M)


def sections(name: str) -> dict[str, str]:
    """The ``## key`` sections of ``prompts/<name>.md`` (text before the first heading is ignored)."""
    text = load(name)
    heads = list(_SECTION.finditer(text))
    out: dict[str, str] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        out[m.group(1)] = text[m.end() : end].strip("\n")
    return out


def render_section(name: str, key: str, /, **values: object) -> str:
    """Fill the ``$placeholders`` of section ``key`` of ``prompts/<name>.md``."""
    secs = sections(name)
    if key not in secs:
        raise PromptError(f"prompt {name!r} has no section '## {key}' (has: {sorted(secs)})")
    try:
        return Template(secs[key]).substitute({k: str(v) for k, v in values.items()}).strip()
    except KeyError as e:
        raise PromptError(f"prompt {name!r} section {key!r} needs a value for ${e.args[0]}") from None


def fill_section(name: str, key: str, /, **values: object) -> str:
    """Like :func:`render_section`, without stripping the result: for pieces joined into a larger prompt,
    whose values (a cut SQL text, a reason) may end in whitespace that must reach the LLM unchanged."""
    secs = sections(name)
    if key not in secs:
        raise PromptError(f"prompt {name!r} has no section '## {key}' (has: {sorted(secs)})")
    try:
        return Template(secs[key]).substitute({k: str(v) for k, v in values.items()})
    except KeyError as e:
        raise PromptError(f"prompt {name!r} section {key!r} needs a value for ${e.args[0]}") from None
