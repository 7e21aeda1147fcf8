"""HTML pieces shared by the report and the browser: escaping, the page shell, the stylesheet.

Every text that comes from a catalog (LLM-written scenario names, instructions, answers, SQL) goes through
:func:`esc` in markup, and data handed to scripts goes through :func:`script_json`, which escapes ``<``,
``>``, ``&`` and the JavaScript line separators so no text can close the ``<script>`` element or open an
HTML comment in it. Pages load nothing from a network: styles and scripts are inline.
"""

from __future__ import annotations

import html
import json
from typing import Any

CSS = """
:root { --fg:#1d2433; --muted:#5b6577; --line:#d9dee7; --bg:#f6f7f9; --card:#fff; --accent:#2f5fa7;
        --ok:#2e7d32; --bad:#c62828; --warn:#b26a00; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color:var(--fg);
       background:var(--bg); }
header.top { background:#1d2433; color:#fff; padding:14px 24px; }
header.top h1 { margin:0; font-size:20px; }
header.top p { margin:4px 0 0; color:#c9d1e0; font-size:12px; }
header.top a { color:#c9d1e0; }
nav.sections { padding:8px 24px; background:#fff; border-bottom:1px solid var(--line); position:sticky; top:0; z-index:2; }
nav.sections a { margin-right:14px; color:var(--accent); text-decoration:none; font-size:13px; }
main { padding:16px 24px 48px; max-width:1280px; }
section { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:14px 18px; margin:0 0 16px; }
section h2 { margin:0 0 10px; font-size:16px; }
h3 { font-size:14px; margin:12px 0 6px; }
.tiles { display:flex; flex-wrap:wrap; gap:10px; }
.tile { border:1px solid var(--line); border-radius:6px; padding:8px 12px; min-width:120px; background:#fbfcfd; }
.tile b { display:block; font-size:20px; }
.tile span { color:var(--muted); font-size:12px; }
.grid2 { display:grid; grid-template-columns:repeat(auto-fit, minmax(420px, 1fr)); gap:16px; }
svg.plot { max-width:100%; height:auto; display:block; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#f0f2f6; font-weight:600; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, pre { font:12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background:#f4f6f9; border:1px solid var(--line); border-radius:4px; padding:6px 8px; overflow:auto;
      white-space:pre-wrap; word-break:break-word; margin:4px 0; }
.muted { color:var(--muted); }
.note { color:var(--muted); font-size:12px; }
.badge { display:inline-block; padding:1px 7px; border-radius:10px; font-size:11px; font-weight:600;
         background:#e8ecf3; color:#334; }
.badge.verified, .badge.pass, .badge.kept, .badge.goal { background:#e3f2e5; color:var(--ok); }
.badge.rejected, .badge.fail, .badge.failed, .badge.duplicate, .badge.unsuitable { background:#fbe4e4; color:var(--bad); }
.badge.building, .badge.gate, .badge.warn { background:#fff1dc; color:var(--warn); }
.cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(360px, 1fr)); gap:12px; }
.cards.wide { grid-template-columns:repeat(auto-fill, minmax(560px, 1fr)); }
.card { overflow-x:auto; border:1px solid var(--line); border-radius:6px; padding:10px 14px; background:#fbfcfd; }
.card h3 { margin:0 0 4px; }
.card ul { margin:4px 0; padding-left:18px; }
.problems { border-color:#f0c36d; background:#fffaf0; }
input[type=search], select { font:inherit; padding:4px 8px; border:1px solid var(--line); border-radius:4px; }
form.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:center; margin-bottom:10px; }
details > summary { cursor:pointer; color:var(--accent); }
.step { border-left:3px solid var(--accent); padding:4px 10px; margin:8px 0; background:#fafbfd; }
.step.failed { border-left-color:var(--bad); }
.change-insert { color:var(--ok); } .change-delete { color:var(--bad); } .change-update { color:var(--warn); }
a { color:var(--accent); }
"""


def esc(value: Any) -> str:
    """Text for HTML markup (element content and quoted attribute values)."""
    return html.escape("" if value is None else str(value), quote=True)


def script_json(obj: Any) -> str:
    """``obj`` as JSON safe to place inside ``<script>``: no ``</script>``, ``<!--`` or line separator can
    appear in it (``<``, ``>``, ``&``, U+2028 and U+2029 are written as ``\\uXXXX`` escapes)."""
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def page(title: str, body: str, *, header: str = "", nav: str = "", script: str = "") -> str:
    """A whole HTML document: inline stylesheet, no external resource."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self'\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<header class=\"top\">{header or f'<h1>{esc(title)}</h1>'}</header>\n{nav}\n<main>\n{body}\n</main>\n"
        f"{script}\n</body>\n</html>\n"
    )


def badge(text: Any, cls: str | None = None) -> str:
    return f'<span class="badge {esc(cls if cls is not None else text)}">{esc(text)}</span>'


def table(headers: list[str], rows: list[list[str]], *, num: set[int] | frozenset[int] = frozenset(),
          cls: str = "") -> str:
    """A table of already-escaped cells; columns in ``num`` are right-aligned."""
    head = "".join(f'<th class="num">{h}</th>' if i in num else f"<th>{h}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def plural(n: int, word: str) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def pct(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.0f}%"


def number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return esc(value)


def compact(value: Any, limit: int = 400) -> str:
    """A JSON value as short text (for arguments, results and expected values)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
