"""The report's plots: matplotlib figures rendered to inline SVG, byte-for-byte deterministic.

Figures are built on :class:`matplotlib.figure.Figure` (no pyplot state, Agg-compatible, safe in a
server thread) and saved with a fixed ``svg.hashsalt``, no date and text kept as text (``svg.fonttype:
none``, so the browser draws it and it can be searched). Element ids are prefixed per figure so several
SVGs can share one HTML document. Each function returns an SVG string, or None when there is nothing
to draw (the page then says so in words).
"""

from __future__ import annotations

import io
import re
from collections import Counter
from typing import Any

import numpy as np

SALT = "envfoundry-report"
PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#EECA3B", "#9D755D",
           "#FF9DA6", "#BAB0AC"]
STATUS_STYLE = {  # scenario status -> (marker, label)
    "kept": ("o", "kept"),
    "duplicate": ("X", "duplicate"),
    "cap": ("s", "over the per-seed cap"),
    "unsuitable": ("^", "unsuitable"),
}
RC: Any = {
    "svg.hashsalt": SALT,
    "svg.fonttype": "none",
    "font.family": ["DejaVu Sans", "sans-serif"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "legend.frameon": False,
    "legend.fontsize": 8,
}
_ID = re.compile(r'\bid="([^"]+)"')
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def to_svg(fig: Any, name: str) -> str:
    """``fig`` as an SVG element (no XML prolog), ids prefixed with ``name``; deterministic bytes."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "envfoundry", "Title": name})
    svg = buf.getvalue()
    svg = _METADATA.sub("", svg[svg.index("<svg"):])  # RDF namespaces only; the page needs no metadata
    svg = _ID.sub(lambda m: f'id="{name}-{m.group(1)}"', svg)
    svg = svg.replace("url(#", f"url(#{name}-").replace('href="#', f'href="#{name}-')
    return svg.replace("<svg ", f'<svg role="img" aria-label="{name}" class="plot" ', 1)


def _with_rc(fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import matplotlib

        with matplotlib.rc_context(RC):
            return fn(*args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _short(text: str, n: int = 28) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------- projection


def pca_2d(vectors: Any) -> np.ndarray:
    """Rows of ``vectors`` projected on their first two principal components (signs fixed so the largest
    loading of each axis is positive: the same input always gives the same picture)."""
    x = np.asarray(vectors, dtype=np.float64)
    out = np.zeros((x.shape[0], 2))
    if x.shape[0] < 2:
        return out
    xc = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    for k in range(min(2, vt.shape[0])):
        if s[k] <= 1e-9 * max(s[0], 1e-12):
            continue
        axis = vt[k] * (1.0 if vt[k][np.argmax(np.abs(vt[k]))] >= 0 else -1.0)
        out[:, k] = xc @ axis
    return np.round(out, 6)


@_with_rc
def scenario_map(points: list[dict[str, Any]]) -> str | None:
    """Scatter of scenarios (``x``, ``y``, ``seed``, ``status``, ``name``, optional ``match``: index of the
    point it duplicates): colour is the seed, marker the status; duplicates are joined to their match."""
    if not points:
        return None
    seeds = sorted({str(p.get("seed") or "(no seed)") for p in points})
    colour = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(seeds)}
    fig = _figure(7.5, 5.0)
    ax = fig.subplots()
    for p in points:
        m = p.get("match")
        if isinstance(m, int) and 0 <= m < len(points):
            q = points[m]
            ax.plot([p["x"], q["x"]], [p["y"], q["y"]], color="#999999", lw=0.8, ls="--", zorder=1)
    for status, (marker, _label) in STATUS_STYLE.items():
        group = [p for p in points if p["status"] == status]
        for seed in seeds:
            sel = [p for p in group if str(p.get("seed") or "(no seed)") == seed]
            if not sel:
                continue
            kept = status == "kept"
            ax.scatter([p["x"] for p in sel], [p["y"] for p in sel], marker=marker, s=60 if kept else 70,
                       c=colour[seed] if kept else "white", edgecolors=colour[seed], linewidths=1.6, zorder=3)
    if len(points) <= 40:
        for p in points:
            ax.annotate(_short(p["name"], 30), (p["x"], p["y"]), xytext=(5, 4), textcoords="offset points",
                        fontsize=7, color="#333333")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", ls="", color=colour[s], label=_short(s, 30)) for s in seeds[:12]]
    present = [st for st in STATUS_STYLE if any(p["status"] == st for p in points)]
    handles += [Line2D([], [], marker=STATUS_STYLE[st][0], ls="", markerfacecolor="white" if st != "kept" else "#666",
                       markeredgecolor="#666", label=STATUS_STYLE[st][1]) for st in present]
    ax.margins(x=0.18, y=0.08)  # room for the labels of the outermost points
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), title="seed / status", title_fontsize=8,
              alignment="left")
    ax.set_xlabel("principal component 1")
    ax.set_ylabel("principal component 2")
    ax.set_title("Seeds → scenarios (PCA of the dedup embeddings)")
    return to_svg(fig, "scenario-map")


# ---------------------------------------------------------------- bars


@_with_rc
def rejections_chart(rejections: list[dict[str, Any]], top: int = 8) -> str | None:
    """Rejections per stage, stacked by reason class (the ``top`` most frequent; the rest as 'other')."""
    if not rejections:
        return None
    by_class = Counter(r["reason_class"] for r in rejections)
    classes = [c for c, _ in sorted(by_class.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    stages = sorted({r["stage"] for r in rejections})
    counts = Counter((r["stage"], r["reason_class"] if r["reason_class"] in classes else "other") for r in rejections)
    if any(k[1] == "other" for k in counts):
        classes.append("other")
    fig = _figure(7.5, 0.6 + 0.45 * len(stages) + 0.18 * len(classes))
    ax = fig.subplots()
    left = np.zeros(len(stages))
    for i, cls in enumerate(classes):
        vals = np.array([counts[(s, cls)] for s in stages], dtype=float)
        ax.barh(stages, vals, left=left, color=PALETTE[i % len(PALETTE)], label=_short(cls, 70))
        left += vals
    for y, total in enumerate(left):
        ax.text(total, y, f" {int(total)}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("rejected items")
    ax.set_title("Rejections by stage and reason")
    fig.legend(loc="outside lower left", ncol=1, title="reason", title_fontsize=8, alignment="left")
    ax.xaxis.get_major_locator().set_params(integer=True)
    return to_svg(fig, "rejections")


@_with_rc
def environments_chart(envs: list[dict[str, Any]]) -> str | None:
    """Tools and tasks per environment (grouped horizontal bars)."""
    rows = [e for e in envs if e.get("tools") or e.get("tasks")]
    if not rows:
        return None
    names = [_short(str(e.get("name") or e.get("env_id")), 34) for e in rows]
    y = np.arange(len(rows))
    fig = _figure(7.5, 0.9 + 0.42 * len(rows))
    ax = fig.subplots()
    for off, key, colour in ((-0.2, "tools", PALETTE[0]), (0.2, "tasks", PALETTE[1])):
        vals = [int(e.get(key) or 0) for e in rows]
        ax.barh(y + off, vals, height=0.4, color=colour, label=key)
        for yi, v in zip(y, vals, strict=True):
            ax.text(v, yi + off, f" {v}", va="center", fontsize=7)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title("Tools and tasks per environment")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return to_svg(fig, "environments")


@_with_rc
def tiers_kinds_chart(tasks: list[dict[str, Any]]) -> str | None:
    """Tasks per kind, stacked by tier (tasks without a tier as 'no tier')."""
    if not tasks:
        return None
    kinds = sorted({str(t["kind"]) for t in tasks})
    tiers = sorted({t["tier"] for t in tasks if t["tier"] is not None})
    stacks: list[tuple[str, Any]] = [(f"tier {k}", k) for k in tiers]
    if any(t["tier"] is None for t in tasks):
        stacks.append(("no tier", None))
    counts = Counter((str(t["kind"]), t["tier"]) for t in tasks)
    fig = _figure(6.0, 3.2)
    ax = fig.subplots()
    bottom = np.zeros(len(kinds))
    for i, (label, tier) in enumerate(stacks):
        vals = np.array([counts[(k, tier)] for k in kinds], dtype=float)
        ax.bar(kinds, vals, bottom=bottom, color=PALETTE[i % len(PALETTE)] if tier is not None else "#BAB0AC",
               label=label)
        bottom += vals
    for x, total in enumerate(bottom):
        ax.text(x, total, f"{int(total)}", ha="center", va="bottom", fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("tasks")
    ax.set_title("Task kinds and tiers")
    ax.legend(loc="upper right")
    return to_svg(fig, "tiers-kinds")


PASS_BINS = ("0", "(0, .25]", "(.25, .5]", "(.5, .75]", "(.75, 1]", "untested")


def pass_bin(rate: float | None) -> str:
    if rate is None:
        return "untested"
    if rate <= 0:
        return "0"
    return PASS_BINS[min(4, int(np.ceil(rate * 4)))]


@_with_rc
def pass_rate_chart(tasks: list[dict[str, Any]]) -> str | None:
    """Histogram of the testers' pass rate per task (exactly 0 and untested in their own bars)."""
    if not tasks:
        return None
    counts = Counter(pass_bin(t["pass_rate"]) for t in tasks)
    hard = Counter(pass_bin(t["pass_rate"]) for t in tasks if t.get("hard_pool"))
    fig = _figure(6.0, 3.2)
    ax = fig.subplots()
    vals = [counts[b] for b in PASS_BINS]
    colours = ["#E45756", PALETTE[0], PALETTE[0], PALETTE[0], PALETTE[0], "#BAB0AC"]
    ax.bar(PASS_BINS, vals, color=colours)
    if hard:
        ax.bar(PASS_BINS, [hard[b] for b in PASS_BINS], color="none", edgecolor="black", hatch="//",
               label="in the hard pool")
        ax.legend(loc="upper center")
    for x, v in enumerate(vals):
        ax.text(x, v, f"{v}", ha="center", va="bottom", fontsize=8)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("pass rate of the tester model")
    ax.set_ylabel("tasks")
    ax.set_title("Pass-rate histogram")
    return to_svg(fig, "pass-rate")


@_with_rc
def usage_chart(usage: dict[str, dict[str, float]]) -> str | None:
    """Tokens (prompt + completion, stacked) and seconds per LLM stage, side by side."""
    stages = [s for s, u in usage.items() if u.get("prompt_tokens") or u.get("completion_tokens") or u.get("seconds")]
    if not stages:
        return None
    fig = _figure(7.5, 0.9 + 0.32 * len(stages))
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    prompt = np.array([usage[s].get("prompt_tokens", 0) for s in stages], dtype=float)
    completion = np.array([usage[s].get("completion_tokens", 0) for s in stages], dtype=float)
    ax1.barh(stages, prompt, color=PALETTE[0], label="prompt")
    ax1.barh(stages, completion, left=prompt, color=PALETTE[1], label="completion")
    ax1.set_title("Tokens per stage")
    fig.legend(loc="outside lower center", ncol=2)
    ax1.invert_yaxis()
    secs = [usage[s].get("seconds", 0) for s in stages]
    ax2.barh(stages, secs, color=PALETTE[2])
    for y, v in enumerate(secs):
        ax2.text(v, y, f" {v:.0f} s", va="center", fontsize=7)
    ax2.set_title("Seconds per stage")
    return to_svg(fig, "usage")
