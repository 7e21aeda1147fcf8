"""``envfoundry report``: one self-contained HTML file describing a catalog.

Same catalog, same bytes: the page holds no clock reading, plots are deterministic SVG, and every list is
sorted. The file is written outside the catalog (a report never changes what it describes) and never
over an existing file unless asked.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pipeline.report import plots
from pipeline.report.data import load_catalog
from pipeline.report.html import markup, render, script_json


class ReportError(ValueError):
    """A report that cannot be written as asked (inside the catalog, over an existing file)."""


def summary_tiles(data: dict[str, Any]) -> list[tuple[Any, str]]:
    """The summary's figures, ``(value, label)`` (the report's and the browser's index page)."""
    envs = data["environments"]
    status = Counter(e.get("status") for e in envs)
    scn = Counter(s["status"] for s in data["scenarios"])
    tokens = sum(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in data["usage"].values())
    seconds = sum(float((r.get("timings") or {}).get("total") or 0) for r in data["runs"])
    return [
        (len(data["seeds"]), "seeds"),
        (scn.get("kept", 0), "scenarios kept"),
        (sum(n for k, n in scn.items() if k != "kept"), "scenarios rejected"),
        (status.get("verified", 0), "environments verified"),
        (status.get("rejected", 0) + status.get("failed", 0), "environments rejected / failed"),
        (len(data["tasks"]), "tasks"),
        (len(data["rejections"]), "rejections recorded"),
        (int(tokens), "LLM tokens"),
        (f"{seconds / 60:.1f} min", "run time"),
    ]


def env_card(e: dict[str, Any], link: str | None = None) -> dict[str, Any]:
    """One environment as the ``env_card`` macro shows it (the report's cards, the browser's index page)."""
    d = e.get("detail") or {}
    tasks = d.get("tasks") or []
    kinds = Counter(t["kind"] for t in tasks)
    rates = [t["pass_rate"] for t in tasks if t["pass_rate"] is not None]
    return {
        "name": e.get("name") or e.get("env_id"), "link": link, "status": e.get("status") or "unknown",
        "env_id": e.get("env_id"), "reason": e.get("reason"), "description": (d.get("scenario") or {}).get("description"),
        "tables": d.get("tables") or [], "tools": d.get("tools") or [], "n_tasks": len(tasks),
        "kinds": ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())),
        "mean_pass_rate": sum(rates) / len(rates) if rates else None,
        "prompt_tokens": int(e.get("prompt_tokens") or 0), "completion_tokens": int(e.get("completion_tokens") or 0),
        "seconds": float(e.get("seconds") or 0),
    }


def _scenarios(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for s in sorted(data["scenarios"], key=lambda s: (str(s.get("seed") or ""), s["status"] != "kept", s["name"])):
        why = s["reason"]
        if s.get("duplicate_of") and not why:
            why = f"duplicate of {s['duplicate_of'].get('name')}"
        rows.append({"seed": s.get("seed") or "–", "name": s["name"], "status": s["status"], "why": why})
    return rows


def _rejection_groups(rejections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rejections by stage and reason class, largest first within a stage, with the first as an example."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rejections:
        groups[(r["stage"], r["reason_class"])].append(r)
    return [{"stage": stage, "reason_class": cls, "count": len(items), "example_item": items[0]["item"],
             "example_reason": items[0]["reason"]}
            for (stage, cls), items in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1]))]


def _tasks_json(data: dict[str, Any]) -> dict[str, Any]:
    names = {e.get("env_id"): e.get("name") for e in data["environments"]}
    return {"tasks": [{"task_id": t["task_id"], "env": names.get(t["env_id"]) or t["env_id"], "kind": t["kind"],
                       "tier": t["tier"], "steps": t["steps"], "attempts": t["attempts"], "passes": t["passes"],
                       "pass_rate": t["pass_rate"], "instruction": t["instruction"], "answer": t["answer_text"]}
                      for t in data["tasks"]]}


def render_report(data: dict[str, Any], catalog_dir: str | Path, *, embed: bool = True) -> str:
    """The report page for ``data`` (from :func:`pipeline.report.data.load_catalog`)."""
    from pipeline.report.scenario_map import map_points

    points, note = map_points(data, Path(catalog_dir), embed=embed)
    envs, tasks, usage, runs = data["environments"], data["tasks"], data["usage"], data["runs"]
    return render(
        "report.html.jinja", title=f"envfoundry report: {data['catalog']['name']}", catalog=data["catalog"],
        runs=runs, last=runs[-1] if runs else None, tiles=summary_tiles(data), problems=data["problems"],
        map_svg=markup(plots.scenario_map(points)), map_note=note, scenarios=_scenarios(data),
        rejections_svg=markup(plots.rejections_chart(data["rejections"])),
        rejection_groups=_rejection_groups(data["rejections"]),
        environments_svg=markup(plots.environments_chart(envs)), tiers_svg=markup(plots.tiers_kinds_chart(tasks)),
        pass_rate_svg=markup(plots.pass_rate_chart(tasks)), usage_svg=markup(plots.usage_chart(usage)),
        usage=[{"stage": s, "calls": int(u.get("calls", 0)), "cached": int(u.get("cached", 0)),
                "prompt_tokens": int(u.get("prompt_tokens", 0)), "completion_tokens": int(u.get("completion_tokens", 0)),
                "seconds": u.get("seconds", 0)} for s, u in usage.items()],
        cards=[env_card(e) for e in envs], report_data=script_json(_tasks_json(data)),
    )


def check_target(catalog_dir: str | Path, out: str | Path, *, force: bool = False) -> Path:
    """``out`` resolved, or a :class:`ReportError` when it lies inside the catalog or exists (without force)."""
    root = Path(catalog_dir).resolve()
    target = Path(out).resolve()
    if target == root or root in target.parents:
        raise ReportError(f"{out}: the report must be written outside the catalog it describes ({catalog_dir})")
    if target.is_dir():
        raise ReportError(f"{out} is a directory; give a file name such as report.html")
    if target.exists() and not force:
        raise ReportError(f"{out} already exists; pass --force to replace it")
    return target


def write_report(catalog_dir: str | Path, out: str | Path, *, force: bool = False, embed: bool = True) -> Path:
    """Load ``catalog_dir`` and write its report to ``out`` (atomically); returns the path written."""
    target = check_target(catalog_dir, out, force=force)
    data = load_catalog(catalog_dir, trajectories=False)
    text = render_report(data, catalog_dir, embed=embed)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target
