"""The browser's pages: environments (schema diagram, tools with their SQL), the task list with search and
filters, and one task with its replayed reference solution and the testers' trajectories."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from pipeline.report.bundle import env_card, summary_section
from pipeline.report.data import arr, obj
from pipeline.report.html import badge, compact, esc, page, pct, plural, table
from pipeline.report.schema_svg import schema_svg

NAV = ('<nav class="sections"><a href="/">Environments</a><a href="/tasks">Tasks</a>'
       '<a href="/report">Report</a></nav>')


def _page(data: dict[str, Any], title: str, body: str, script: str = "") -> str:
    header = (f'<h1>{esc(title)}</h1><p>envfoundry browse · catalog <a href="/">{esc(data["catalog"]["name"])}</a>'
              f' · fingerprint {esc(data["catalog"]["fingerprint"] or "–")}</p>')
    return page(title, body, header=header, nav=NAV, script=script)


def env_link(env_id: str) -> str:
    return f"/env/{quote(env_id, safe='')}"


def task_link(task_id: str) -> str:
    return f"/task/{quote(task_id, safe='')}"


def index_page(data: dict[str, Any]) -> str:
    cards = "".join(env_card(e, env_link(e["env_id"]) if e.get("detail") and e.get("env_id") else None)
                    for e in data["environments"]) or '<p class="muted">no environments yet</p>'
    problems = ""
    if data["problems"]:
        problems = ('<section class="problems"><h2>Problems reading the catalog</h2><ul>'
                    + "".join(f"<li>{esc(p)}</li>" for p in data["problems"]) + "</ul></section>")
    body = (summary_section(data) + problems
            + f'<section id="envs"><h2>Environments</h2><div class="cards">{cards}</div></section>')
    return _page(data, f"Catalog {data['catalog']['name']}", body)


# ---------------------------------------------------------------- one environment


def _tool_html(tool: dict[str, Any]) -> str:
    params = [[f"<code>{esc(p.get('name'))}</code>", esc(p.get("type")), "yes" if p.get("required", True) else "no",
               esc(", ".join(f"{k}={v}" for k, v in p.items() if k in ("enum", "minimum", "maximum", "max_length")
                             and v is not None)), esc(p.get("description"))]
              for p in tool.get("params") or [] if isinstance(p, dict)]
    out = [f'<div class="card" id="tool-{esc(tool.get("name"))}"><h3><code>{esc(tool.get("name"))}</code> '
           f'{badge(tool.get("kind"), "warn" if tool.get("kind") == "write" else "")}</h3>'
           f"<p>{esc(tool.get('description'))}</p>"]
    if params:
        out.append(table(["parameter", "type", "required", "limits", "description"], params))
    for i, step in enumerate(tool.get("steps") or [], 1):
        if not isinstance(step, dict):
            continue
        extra = []
        if step.get("bind"):
            extra.append(f"binds <code>{esc(step['bind'])}</code>")
        if step.get("must"):
            extra.append(f"must {esc(step['must'])}; else “{esc(step.get('error'))}”")
        out.append(f'<div class="muted">step {i}: <b>{esc(step.get("kind"))}</b> {" · ".join(extra)}</div>'
                   f"<pre>{esc(step.get('sql'))}</pre>")
    ret = tool.get("returns")
    if isinstance(ret, dict):
        out.append(f'<div class="muted">returns ({esc(ret.get("mode", "all"))})</div><pre>{esc(ret.get("sql"))}</pre>')
    out.append("</div>")
    return "".join(out)


def env_page(data: dict[str, Any], env: dict[str, Any]) -> str:
    d = env["detail"]
    scn = d.get("scenario") or {}
    head = [f"<p>{badge(env.get('status'))} <code>{esc(env.get('env_id'))}</code> · seed {esc(scn.get('seed') or '–')}"
            f" · clock {esc(d.get('clock'))}</p><p>{esc(scn.get('description'))}</p>"]
    for key in ("entities", "goals"):
        if scn.get(key):
            head.append(f"<p><b>{key}:</b> {esc('; '.join(map(str, scn[key])))}</p>")
    tables = "".join(
        f"<details><summary><code>{esc(t['name'])}</code> — {plural(t.get('rows', 0), 'row')}</summary>"
        + table(["column", "type", "key"], [[f"<code>{esc(c['name'])}</code>", esc(c["type"]),
                                             "primary key" if c["pk"] else ", ".join(
                                                 f"→ {esc(fk['table'])}.{esc(fk['to'])}" for fk in t["foreign_keys"]
                                                 if fk["column"] == c["name"])] for c in t["columns"]])
        + f"<pre>{esc(t['ddl'])}</pre></details>" for t in d["tables"])
    tools = "".join(_tool_html(t) for t in d["tools"]) or '<p class="muted">no tools</p>'
    body = (f'<section><h2>Scenario</h2>{"".join(head)}</section>'
            f'<section id="schema"><h2>Schema</h2><div style="overflow:auto">{schema_svg(d["tables"])}</div>{tables}</section>'
            f'<section id="tools"><h2>Tools ({len(d["tools"])})</h2><div class="cards wide">{tools}</div></section>'
            f'<section id="env-tasks"><h2>Tasks ({len(d["tasks"])})</h2>{task_table(d["tasks"], data)}</section>')
    return _page(data, str(env.get("name") or env.get("env_id")), body)


# ---------------------------------------------------------------- task list


def filter_tasks(tasks: list[dict[str, Any]], *, env: str = "", kind: str = "", tier: str = "",
                 q: str = "") -> list[dict[str, Any]]:
    """Tasks matching every given filter; ``tier`` is a number or ``none``; ``q`` searches the instruction,
    the expected answer, the task id and the tools used (case-insensitive)."""
    words = q.lower().split()
    out = []
    for t in tasks:
        if env and t["env_id"] != env:
            continue
        if kind and t["kind"] != kind:
            continue
        if tier and (str(t["tier"]) if t["tier"] is not None else "none") != tier:
            continue
        hay = " ".join([t["instruction"], t["answer_text"] or "", t["task_id"], " ".join(t["tools_used"])]).lower()
        if any(w not in hay for w in words):
            continue
        out.append(t)
    return out


def task_table(tasks: list[dict[str, Any]], data: dict[str, Any]) -> str:
    names = {e.get("env_id"): e.get("name") for e in data["environments"]}
    rows = []
    for t in tasks:
        text = " ".join([t["instruction"], t["answer_text"] or "", t["task_id"], " ".join(t["tools_used"])]).lower()
        rows.append(
            f'<tr data-text="{esc(text)}"><td><a href="{task_link(t["task_id"])}">{esc(t["task_id"])}</a></td>'
            f"<td>{esc(names.get(t['env_id']) or t['env_id'])}</td><td>{esc(t['kind'])}</td>"
            f'<td class="num">{esc(t["tier"] if t["tier"] is not None else "–")}</td><td class="num">{t["steps"]}</td>'
            f'<td class="num">{t["passes"]}/{t["attempts"]} ({pct(t["pass_rate"])})</td>'
            f"<td>{esc(t['instruction'])}</td></tr>")
    return ('<table id="task-table"><thead><tr><th>task</th><th>environment</th><th>kind</th><th class="num">tier</th>'
            '<th class="num">steps</th><th class="num">passes</th><th>instruction</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


LIVE_FILTER_JS = """
(function () {
  var box = document.getElementById('q');
  var rows = document.querySelectorAll('#task-table tbody tr');
  var count = document.getElementById('shown');
  function apply() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (tr) {
      var text = tr.getAttribute('data-text') || '';
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; });
      tr.style.display = ok ? '' : 'none';
      if (ok) shown += 1;
    });
    count.textContent = shown + ' shown';
  }
  box.addEventListener('input', apply);
  document.querySelectorAll('form.filters select').forEach(function (s) {
    s.addEventListener('change', function () { s.form.submit(); });
  });
  apply();
})();
"""


def _select(label: str, current: str, options: list[tuple[str, str]], name: str | None = None) -> str:
    opts = "".join(f'<option value="{esc(v)}"{" selected" if v == current else ""}>{esc(text)}</option>'
                   for v, text in [("", f"any {label}")] + options)
    return f'<select name="{esc(name or label)}" aria-label="{esc(label)}">{opts}</select>'


def tasks_page(data: dict[str, Any], *, env: str = "", kind: str = "", tier: str = "", q: str = "") -> str:
    tasks = data["tasks"]
    found = filter_tasks(tasks, env=env, kind=kind, tier=tier, q=q)
    envs = sorted({(e["env_id"], str(e.get("name") or e["env_id"])) for e in data["environments"] if e.get("env_id")},
                  key=lambda p: p[1])
    kinds = sorted({t["kind"] for t in tasks})
    tiers = sorted({str(t["tier"]) for t in tasks if t["tier"] is not None})
    tier_opts = [(x, f"tier {x}") for x in tiers] + ([("none", "no tier")] if any(t["tier"] is None for t in tasks) else [])
    form = ('<form class="filters" method="get" action="/tasks">'
            + _select("environment", env, envs, "env") + _select("kind", kind, [(k, k) for k in kinds])
            + _select("tier", tier, tier_opts)
            + f'<input type="search" id="q" name="q" value="{esc(q)}" placeholder="search text" size="32">'
            '<button type="submit">filter</button>'
            f'<span class="muted">{len(found)} of {len(tasks)} tasks · <span id="shown"></span></span></form>')
    link = "/api/tasks?" + urlencode({k: v for k, v in (("env", env), ("kind", kind), ("tier", tier), ("q", q)) if v})
    body = (f'<section><h2>Tasks</h2>{form}{task_table(found, data)}'
            f'<p class="note">as JSON: <a href="{esc(link)}">{esc(link)}</a></p></section>')
    return _page(data, "Tasks", body, script=f"<script>{LIVE_FILTER_JS}</script>")


# ---------------------------------------------------------------- one task


def _change(c: dict[str, Any]) -> str:
    op = str(c.get("op"))
    key = compact(c.get("key"), 60)
    if op == "update":
        what = ", ".join(f"{k}: {compact((c.get('was') or {}).get(k), 60)} → {compact(v, 60)}"
                         for k, v in (c.get("set") or {}).items())
    else:
        what = compact(c.get("row"), 300)
    return f'<li class="change-{esc(op)}"><b>{esc(op)}</b> <code>{esc(c.get("table"))}</code> {esc(key)}: {esc(what)}</li>'


def _changes(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return '<div class="muted">no rows changed</div>'
    return "<ul>" + "".join(_change(c) for c in changes if isinstance(c, dict)) + "</ul>"


def _call(tool: Any, args: Any) -> str:
    return f"<code>{esc(tool)}({esc(compact(args, 300))})</code>"


def _assertions(task: dict[str, Any], replayed: dict[str, Any] | None) -> str:
    results = (replayed or {}).get("assertions") or []
    rows = []
    for i, a in enumerate(task["assertions"]):
        r = results[i] if i < len(results) else None
        got = "–" if r is None else (f"error: {esc(r['error'])}" if r["error"] else
                                     f"{badge('holds', 'pass') if r['holds'] else badge('differs', 'fail')} "
                                     f"<code>{esc(compact(r['actual'], 120))}</code>")
        rows.append([badge(a["role"]) if a.get("role") else '<span class="muted">–</span>', esc(a["description"]),
                     f"<pre>{esc(a['sql'])}</pre>", f"<code>{esc(compact(a['expect'], 120))}</code>", got])
    if not rows:
        return '<p class="muted">no assertions</p>'
    return table(["role", "what", "SQL", "expected", "after the reference replay"], rows)


def _reference(replayed: dict[str, Any] | None) -> str:
    if replayed is None:
        return '<p class="muted">the environment directory is missing; nothing to replay</p>'
    out = []
    for s in replayed["steps"]:
        resp = s["response"]
        shown = resp.get("result") if s["ok"] else resp.get("error", resp)
        out.append(f'<div class="step{"" if s["ok"] else " failed"}"><b>call {s["index"]}</b> {_call(s["tool"], s["arguments"])}'
                   f' {badge("ok", "pass") if s["ok"] else badge("failed", "fail")}'
                   f"<pre>{esc(compact(shown, 1200))}</pre>{_changes(s['changes'])}</div>")
    if replayed.get("error"):
        out.append(f'<p>{badge("replay problem", "fail")} {esc(replayed["error"])}</p>')
    return "".join(out) or '<p class="muted">no calls</p>'


def _trajectory(t: dict[str, Any]) -> str:
    review = obj(t.get("review"))
    verdicts = {v.get("index"): v for v in review.get("verdicts") or [] if isinstance(v, dict)}
    head = (f"<h3>attempt {esc(t.get('attempt'))} {badge('passed', 'pass') if t.get('passed') else badge('failed', 'fail')}"
            f" <span class=muted>stop: {esc(t.get('stop'))}"
            f"{' · blame: ' + esc(review.get('blame')) if review.get('blame') else ''}</span></h3>")
    out = [head]
    if review.get("reason"):
        out.append(f"<p><b>checker:</b> {esc(review['reason'])}</p>")
    for note in review.get("notes") or []:
        out.append(f'<p class="note">{esc(compact(note, 400))}</p>')
    for s in t.get("steps") or []:
        if not isinstance(s, dict):
            continue
        v = verdicts.get(s.get("index"))
        verdict = ""
        if v:
            verdict = (f"<div>checker ({esc(v.get('source'))}): {badge(v.get('verdict'))} "
                       f"{esc(compact(v.get('reason'), 300))}</div>")
        resp = obj(s.get("response"))
        shown = resp.get("result") if resp.get("ok") else resp.get("error", resp)
        thought = f'<div class="muted">{esc(compact(s.get("thought"), 600))}</div>' if s.get("thought") else ""
        out.append(f'<div class="step{"" if resp.get("ok") else " failed"}"><b>step {esc(s.get("index"))}</b> '
                   f"{_call(s.get('tool'), s.get('arguments'))}{thought}<pre>{esc(compact(shown, 800))}</pre>"
                   f"{_changes(s.get('changes') or [])}{verdict}</div>")
    out.append(f"<p><b>final answer:</b> {esc(t.get('final_answer') if t.get('final_answer') is not None else '–')}</p>")
    for f in t.get("failures") or []:
        out.append(f'<p class="note">verifier: {esc(compact(f, 400))}</p>')
    if t.get("error"):
        out.append(f'<p>{badge("error", "fail")} {esc(t["error"])}</p>')
    return f'<div class="card">{"".join(out)}</div>'


def task_page(data: dict[str, Any], task: dict[str, Any], env: dict[str, Any] | None,
              replayed: dict[str, Any] | None) -> str:
    d = (env or {}).get("detail") or {}
    facts = [badge(task["kind"], ""), f"tier {esc(task['tier'])}" if task["tier"] is not None else "no tier",
             f"{task['steps']} step{'' if task['steps'] == 1 else 's'}", f"passes {task['passes']}/{task['attempts']} ({pct(task['pass_rate'])})"]
    if task["wilson"]:
        facts.append(f"Wilson interval [{task['wilson'][0]:.2f}, {task['wilson'][1]:.2f}]")
    if task["hard_pool"]:
        facts.append(badge("hard pool", "warn"))
    if task["difficulty_tag"]:
        facts.append(f"tagged {esc(task['difficulty_tag'])}")
    env_name = esc((env or {}).get("name") or task["env_id"])
    where = f'<a href="{env_link(task["env_id"])}">{env_name}</a>' if env and env.get("detail") else env_name
    answer = (f"<p><b>expected answer:</b> <code>{esc(task['answer_text'])}</code></p>"
              if task["answer_text"] is not None else '<p class="muted">no answer expected (the state is checked)</p>')
    spec = obj(task["answer"])
    for key, label in (("others", "must not also name"), ("stated", "stated in the request (may be repeated)")):
        if arr(spec.get(key)):
            answer += f'<p class="muted">{label}: {esc(", ".join(map(str, spec[key])))}</p>'
    if task["metadata"].get("shape"):
        facts.append(f"shape {esc(task['metadata']['shape'])}")
    proofs = ((d.get("verify_tasks") or {}).get(task["task_id"]) or {}).get("proofs") or []
    proof_rows = [[esc(p.get("name")), badge("ok", "pass") if p.get("ok") else badge("failed", "fail"),
                   esc(compact(p.get("detail"), 300))] for p in proofs if isinstance(p, dict)]
    trajs = (d.get("trajectories") or {}).get(task["task_id"]) or []
    body = (f'<section><h2>Instruction</h2><p style="font-size:16px">{esc(task["instruction"])}</p>'
            f'<p>{" · ".join(facts)} · environment {where}</p>{answer}'
            f'<p class="muted">mutable tables: {esc(", ".join(task["mutable_tables"]) or "none")}</p></section>'
            f'<section id="verifier"><h2>Verifier</h2>{_assertions(task, replayed)}'
            + (f"<h3>proofs</h3>{table(['proof', 'result', 'detail'], proof_rows)}" if proof_rows else "")
            + f'</section><section id="reference"><h2>Reference solution, replayed on a fresh instance</h2>'
            f"{_reference(replayed)}</section>"
            f'<section id="trajectories"><h2>Tester trajectories ({len(trajs)})</h2>'
            + ("".join(_trajectory(t) for t in trajs) or '<p class="muted">no trajectories recorded</p>')
            + "</section>")
    return _page(data, f"Task {task['task_id']}", body)


def not_found_page(data: dict[str, Any], what: str) -> str:
    return _page(data, "Not found", f'<section><h2>Not found</h2><p>{esc(what)}</p><p><a href="/">back</a></p></section>')
