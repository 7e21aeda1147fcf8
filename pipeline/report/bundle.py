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
from pipeline.report.html import badge, compact, esc, number, page, pct, plural, script_json, table


class ReportError(ValueError):
    """A report that cannot be written as asked (inside the catalog, over an existing file)."""


def _sum(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r.get(key) or 0) for r in rows)


def summary_section(data: dict[str, Any]) -> str:
    envs = data["environments"]
    status = Counter(e.get("status") for e in envs)
    scn = Counter(s["status"] for s in data["scenarios"])
    usage = data["usage"]
    tokens = sum(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0) for u in usage.values())
    seconds = sum(float((r.get("timings") or {}).get("total") or 0) for r in data["runs"])
    tiles = [
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
    body = "".join(f'<div class="tile"><b>{number(v)}</b><span>{esc(label)}</span></div>' for v, label in tiles)
    return f'<section id="summary"><h2>Summary</h2><div class="tiles">{body}</div></section>'


def _header(data: dict[str, Any]) -> str:
    cat = data["catalog"]
    runs = data["runs"]
    parts = [f"fingerprint {esc(cat['fingerprint'] or '–')}", f"{len(runs)} run(s)"]
    if runs:
        last = runs[-1]
        parts.append(f"last run {esc(last.get('run_id'))} ({esc(last.get('status'))}, finished {esc(last.get('finished'))})")
        parts.append(f"model {esc(last.get('model'))}")
        rev = str(last.get("git_revision") or "")
        if rev:
            parts.append(f"git {esc(rev[:12])}")
    return f"<h1>Catalog report: {esc(cat['name'])}</h1><p>{' · '.join(parts)}</p>"


def _figure(svg: str | None, empty: str) -> str:
    return svg if svg is not None else f'<p class="muted">{esc(empty)}</p>'


def _map_section(data: dict[str, Any], catalog_dir: Path, embed: bool) -> str:
    from pipeline.report.scenario_map import map_points

    points, note = map_points(data, catalog_dir, embed=embed)
    rows = []
    for s in sorted(data["scenarios"], key=lambda s: (str(s.get("seed") or ""), s["status"] != "kept", s["name"])):
        why = s["reason"]
        if s.get("duplicate_of"):
            why = f"{why}" if why else f"duplicate of {s['duplicate_of'].get('name')}"
        rows.append([esc(s.get("seed") or "–"), esc(s["name"]), badge(s["status"]), esc(compact(why, 240))])
    listing = table(["seed", "scenario", "status", "why"], rows) if rows else '<p class="muted">no scenarios</p>'
    return (f'<section id="map"><h2>Seeds → scenarios</h2>{_figure(plots.scenario_map(points), note)}'
            f'<p class="note">{esc(note)}</p><details><summary>every scenario ({len(rows)})</summary>{listing}</details>'
            "</section>")


def _rejections_section(data: dict[str, Any]) -> str:
    rej = data["rejections"]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rej:
        groups[(r["stage"], r["reason_class"])].append(r)
    rows = []
    for (stage, cls), items in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]), kv[0][1])):
        ex = items[0]
        example = f"<details><summary>{esc(compact(ex['item'], 80))}</summary><pre>{esc(ex['reason'])}</pre></details>"
        rows.append([esc(stage), esc(cls), str(len(items)), example])
    listing = table(["stage", "reason", "count", "example"], rows, num={2}) if rows else ""
    return (f'<section id="rejections"><h2>Rejections</h2>'
            f"{_figure(plots.rejections_chart(rej), 'nothing was rejected')}{listing}</section>")


def _usage_section(data: dict[str, Any]) -> str:
    usage = data["usage"]
    rows = [[esc(s), number(int(u.get("calls", 0))), number(int(u.get("cached", 0))),
             number(int(u.get("prompt_tokens", 0))), number(int(u.get("completion_tokens", 0))),
             f"{u.get('seconds', 0):,.1f}"] for s, u in usage.items()]
    listing = table(["stage", "calls", "cached", "prompt tokens", "completion tokens", "seconds"], rows,
                    num={1, 2, 3, 4, 5}) if rows else ""
    return (f'<section id="usage"><h2>Tokens and seconds per stage</h2>'
            f"{_figure(plots.usage_chart(usage), 'no LLM usage recorded in the runs table')}{listing}</section>")


def env_card(e: dict[str, Any], link: str | None = None) -> str:
    """One environment as a card (used by the report and by the browser's index page)."""
    d = e.get("detail") or {}
    name = esc(e.get("name") or e.get("env_id"))
    title = f'<a href="{esc(link)}">{name}</a>' if link else name
    out = [f"<h3>{title} {badge(e.get('status') or 'unknown')}</h3>"]
    if e.get("env_id"):
        out.append(f'<div class="muted"><code>{esc(e["env_id"])}</code></div>')
    if e.get("reason"):
        out.append(f"<p><b>reason:</b> {esc(compact(e['reason'], 300))}</p>")
    scenario = d.get("scenario") or {}
    if scenario.get("description"):
        out.append(f"<p>{esc(scenario['description'])}</p>")
    if d.get("tables"):
        items = "".join(f"<li><code>{esc(t['name'])}</code> <span class=muted>{plural(t.get('rows', 0), 'row')}, "
                        f"{plural(len(t['columns']), 'column')}</span></li>" for t in d["tables"])
        out.append(f"<b>tables</b><ul>{items}</ul>")
    if d.get("tools"):
        items = "".join(f"<li><code>{esc(t.get('name'))}</code> <span class=muted>({esc(t.get('kind'))})</span> "
                        f"{esc(compact(t.get('description', ''), 120))}</li>" for t in d["tools"])
        out.append(f"<b>tools</b><ul>{items}</ul>")
    tasks = d.get("tasks") or []
    if tasks:
        kinds = Counter(t["kind"] for t in tasks)
        rates = [t["pass_rate"] for t in tasks if t["pass_rate"] is not None]
        mean = sum(rates) / len(rates) if rates else None
        out.append(f"<p><b>{len(tasks)} tasks</b>: {esc(', '.join(f'{n} {k}' for k, n in sorted(kinds.items())))}"
                   f" · mean pass rate {pct(mean)}</p>")
    out.append(f'<p class="note">{number(int(e.get("prompt_tokens") or 0))} prompt + '
               f'{number(int(e.get("completion_tokens") or 0))} completion tokens · '
               f'{float(e.get("seconds") or 0):,.0f} s</p>')
    return f'<div class="card">{"".join(out)}</div>'


TASK_TABLE_JS = """
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var body = document.getElementById('task-rows');
  var box = document.getElementById('task-search');
  var count = document.getElementById('task-count');
  function pct(r) { return r === null ? '\\u2013' : Math.round(r * 100) + '%'; }
  function cell(tr, text, cls) {
    var td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; tr.appendChild(td);
  }
  function render() {
    var q = box.value.toLowerCase();
    body.textContent = '';
    var shown = 0;
    data.tasks.forEach(function (t) {
      var hay = [t.task_id, t.env, t.kind, t.instruction, t.answer || ''].join(' ').toLowerCase();
      if (q && hay.indexOf(q) < 0) return;
      var tr = document.createElement('tr');
      cell(tr, t.env); cell(tr, t.kind); cell(tr, t.tier === null ? '\\u2013' : String(t.tier), 'num');
      cell(tr, String(t.steps), 'num'); cell(tr, t.passes + '/' + t.attempts + ' (' + pct(t.pass_rate) + ')', 'num');
      cell(tr, t.instruction); cell(tr, t.answer || '');
      body.appendChild(tr); shown += 1;
    });
    count.textContent = shown + ' of ' + data.tasks.length + ' tasks';
  }
  box.addEventListener('input', render);
  render();
})();
"""


def _tasks_json(data: dict[str, Any]) -> dict[str, Any]:
    names = {e.get("env_id"): e.get("name") for e in data["environments"]}
    return {"tasks": [{"task_id": t["task_id"], "env": names.get(t["env_id"]) or t["env_id"], "kind": t["kind"],
                       "tier": t["tier"], "steps": t["steps"], "attempts": t["attempts"], "passes": t["passes"],
                       "pass_rate": t["pass_rate"], "instruction": t["instruction"], "answer": t["answer_text"]}
                      for t in data["tasks"]]}


def render_report(data: dict[str, Any], catalog_dir: str | Path, *, embed: bool = True) -> str:
    """The report page for ``data`` (from :func:`pipeline.report.data.load_catalog`)."""
    catalog_dir = Path(catalog_dir)
    envs = data["environments"]
    tasks = data["tasks"]
    sections = [summary_section(data)]
    if data["problems"]:
        items = "".join(f"<li>{esc(p)}</li>" for p in data["problems"])
        sections.append(f'<section class="problems" id="problems"><h2>Problems reading the catalog</h2><ul>{items}</ul></section>')
    sections.append(_map_section(data, catalog_dir, embed))
    sections.append(_rejections_section(data))
    sections.append(f'<section id="environments"><h2>Environments</h2>'
                    f"{_figure(plots.environments_chart(envs), 'no environment has tools or tasks yet')}</section>")
    sections.append('<section id="task-stats"><h2>Tasks</h2><div class="grid2">'
                    f"<div>{_figure(plots.tiers_kinds_chart(tasks), 'no tasks')}</div>"
                    f"<div>{_figure(plots.pass_rate_chart(tasks), 'no tasks')}</div></div></section>")
    sections.append(_usage_section(data))
    cards = "".join(env_card(e) for e in envs) or '<p class="muted">no environments</p>'
    sections.append(f'<section id="cards"><h2>Environment cards</h2><div class="cards">{cards}</div></section>')
    sections.append(
        '<section id="tasks"><h2>All tasks</h2><form class="filters" onsubmit="return false">'
        '<input type="search" id="task-search" placeholder="search instructions, kinds, environments" size="40">'
        '<span id="task-count" class="muted"></span></form>'
        + table(["environment", "kind", "tier", "steps", "passes", "instruction", "expected answer"], [],
                num={2, 3, 4}).replace("<tbody></tbody>", '<tbody id="task-rows"></tbody>')
        + "<noscript><p>Turn on JavaScript to list the tasks.</p></noscript></section>")
    nav = ('<nav class="sections">' + "".join(
        f'<a href="#{i}">{t}</a>' for i, t in (("summary", "Summary"), ("map", "Scenario map"),
                                               ("rejections", "Rejections"), ("environments", "Environments"),
                                               ("task-stats", "Task stats"), ("usage", "Usage"),
                                               ("cards", "Cards"), ("tasks", "All tasks"))) + "</nav>")
    script = (f'<script type="application/json" id="report-data">{script_json(_tasks_json(data))}</script>\n'
              f"<script>{TASK_TABLE_JS}</script>")
    return page(f"envfoundry report: {data['catalog']['name']}", "\n".join(sections), header=_header(data),
                nav=nav, script=script)


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
