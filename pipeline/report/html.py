"""What the report and the browser share: the template engine, the filters of its templates, script data.

Pages are Jinja2 templates (``templates/*.jinja``, package data) rendered with autoescape on: every value
that comes from a catalog (LLM-written scenario names, instructions, answers, SQL) is escaped unless code
marks it as markup, which only :func:`markup` (SVG drawn by our own code), :func:`page`'s arguments and
:func:`script_json` do. Data handed to scripts goes through :func:`script_json`, which escapes ``<``, ``>``,
``&`` and the JavaScript line separators so no text can close the ``<script>`` element or open an HTML
comment in it. Pages load nothing from a network: styles and scripts are inline.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"


def esc(value: Any) -> str:
    """Text for HTML markup written by code (element content and quoted attribute values)."""
    return html.escape("" if value is None else str(value), quote=True)


def markup(text: str | None) -> Markup | None:
    """Markup our own code drew (plots, the schema diagram), to insert as is; None stays None."""
    return None if text is None else Markup(text)


def script_json(obj: Any) -> Markup:
    """``obj`` as JSON safe to place inside ``<script>``: no ``</script>``, ``<!--`` or line separator can
    appear in it (``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
                  .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def plural(n: int, word: str) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.0f}%"


def number(value: Any) -> str:
    """Thousands separated; floats with one decimal."""
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def fixed(value: Any, digits: int = 0) -> str:
    """A number with ``digits`` decimals and thousands separated."""
    return f"{float(value or 0):,.{digits}f}"


def compact(value: Any, limit: int = 400) -> str:
    """A JSON value as short text (for arguments, results and expected values)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finalize(value: Any) -> Any:
    return "" if value is None else value  # a missing value prints as nothing, never as "None"


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, finalize=_finalize,
)
ENV.filters.update(compact=compact, fixed=fixed, number=number, pct=pct, plural=plural)


def render(name: str, **context: Any) -> str:
    """Template ``name`` rendered with ``context`` (deterministic: same context, same text)."""
    return ENV.get_template(name).render(**context)


def page(title: str, body: str, *, header: str = "", nav: str = "", script: str = "") -> str:
    """A whole HTML document around markup written elsewhere: inline stylesheet, no external resource."""
    return render("shell.html.jinja", title=title, header=Markup(header), nav=Markup(nav), body=Markup(body),
                  script=Markup(script))
