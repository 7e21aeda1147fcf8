"""The browser's pages: environments (schema diagram, tools with their SQL), the task list with search and
filters, and one task with its replayed reference solution and the testers' trajectories.

Each page is a template under ``templates/`` (autoescaped); the functions here only gather its context.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from pipeline.report.bundle import env_card, summary_tiles
from pipeline.report.data import arr, obj
from pipeline.report.html import markup, render
from pipeline.report.schema_svg import schema_svg

LIMITS = ("enum", "minimum", "maximum", "max_length")


def env_link(env_id: str) -> str:
    return f"/env/{quote(env_id, safe='')}"


def task_link(task_id: str) -> str:
    return f"/task/{quote(task_id, safe='')}"


def index_page(data: dict[str, Any]) -> str:
    cards = [env_card(e, env_link(e["env_id"]) if e.get("detail") and e.get("env_id") else None)
             for e in data["environments"]]
    return render("index.html.jinja", data=data, title=f"Catalog {data['catalog']['name']}",
                  tiles=summary_tiles(data), cards=cards)


# ---------------------------------------------------------------- one environment


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool as the environment page shows it: parameters with their limits, numbered steps, the return."""
    params = [{"name": p.get("name"), "type": p.get("type"), "required": "yes" if p.get("required", True) else "no",
               "limits": ", ".join(f"{k}={v}" for k, v in p.items() if k in LIMITS and v is not None),
               "description": p.get("description")}
              for p in tool.get("params") or [] if isinstance(p, dict)]
    steps = [{"index": i, "kind": s.get("kind"), "bind": s.get("bind"), "must": s.get("must"), "error": s.get("error"),
              "sql": s.get("sql")} for i, s in enumerate(tool.get("steps") or [], 1) if isinstance(s, dict)]
    ret = tool.get("returns")
    return {"name": tool.get("name"), "kind": tool.get("kind"), "description": tool.get("description"),
            "params": params, "steps": steps,
            "returns": {"mode": ret.get("mode", "all"), "sql": ret.get("sql")} if isinstance(ret, dict) else None}


def _key(t: dict[str, Any], c: dict[str, Any]) -> str:
    if c["pk"]:
        return "primary key"
    return ", ".join(f"→ {fk['table']}.{fk['to']}" for fk in t["foreign_keys"] if fk["column"] == c["name"])


def env_page(data: dict[str, Any], env: dict[str, Any]) -> str:
    d = env["detail"]
    scn = d.get("scenario") or {}
    tables = [{"name": t["name"], "rows": t.get("rows", 0), "ddl": t["ddl"],
               "columns": [{"name": c["name"], "type": c["type"], "key": _key(t, c)} for c in t["columns"]]}
              for t in d["tables"]]
    facts = [(key, "; ".join(map(str, scn[key]))) for key in ("entities", "goals") if scn.get(key)]
    return render("env.html.jinja", data=data, title=str(env.get("name") or env.get("env_id")), env=env, scenario=scn,
                  clock=d.get("clock"), facts=facts, schema=markup(schema_svg(d["tables"])), tables=tables,
                  tools=[_tool(t) for t in d["tools"]], tasks=task_rows(d["tasks"], data))


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


def task_rows(tasks: list[dict[str, Any]], data: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the ``task_table`` macro: each task with its link, its environment's name and the text
    the live filter searches."""
    names = {e.get("env_id"): e.get("name") for e in data["environments"]}
    return [{"task": t, "link": task_link(t["task_id"]), "env": names.get(t["env_id"]) or t["env_id"],
             "text": " ".join([t["instruction"], t["answer_text"] or "", t["task_id"], " ".join(t["tools_used"])]).lower()}
            for t in tasks]


def tasks_page(data: dict[str, Any], *, env: str = "", kind: str = "", tier: str = "", q: str = "") -> str:
    tasks = data["tasks"]
    found = filter_tasks(tasks, env=env, kind=kind, tier=tier, q=q)
    envs = sorted({(e["env_id"], str(e.get("name") or e["env_id"])) for e in data["environments"] if e.get("env_id")},
                  key=lambda p: p[1])
    kinds = sorted({t["kind"] for t in tasks})
    tiers = sorted({str(t["tier"]) for t in tasks if t["tier"] is not None})
    tier_opts = [(x, f"tier {x}") for x in tiers] + ([("none", "no tier")] if any(t["tier"] is None for t in tasks) else [])
    selects = [("environment", "env", env, envs), ("kind", "kind", kind, [(k, k) for k in kinds]),
               ("tier", "tier", tier, tier_opts)]
    link = "/api/tasks?" + urlencode({k: v for k, v in (("env", env), ("kind", kind), ("tier", tier), ("q", q)) if v})
    return render("tasks.html.jinja", data=data, title="Tasks", selects=selects, q=q, found=len(found), total=len(tasks),
                  tasks=task_rows(found, data), link=link)


# ---------------------------------------------------------------- one task


def _trajectory(t: dict[str, Any]) -> dict[str, Any]:
    """A tester's attempt with the checker's verdict on each step."""
    review = obj(t.get("review"))
    verdicts = {v.get("index"): v for v in review.get("verdicts") or [] if isinstance(v, dict)}
    steps = []
    for s in t.get("steps") or []:
        if not isinstance(s, dict):
            continue
        resp = obj(s.get("response"))
        steps.append({"index": s.get("index"), "tool": s.get("tool"), "arguments": s.get("arguments"),
                      "ok": bool(resp.get("ok")), "shown": resp.get("result") if resp.get("ok") else resp.get("error", resp),
                      "thought": s.get("thought"), "changes": s.get("changes") or [], "verdict": verdicts.get(s.get("index"))})
    return {"attempt": t.get("attempt"), "passed": bool(t.get("passed")), "stop": t.get("stop"),
            "blame": review.get("blame"), "reason": review.get("reason"), "notes": review.get("notes") or [],
            "steps": steps, "final_answer": t.get("final_answer"), "failures": t.get("failures") or [],
            "error": t.get("error")}


def task_page(data: dict[str, Any], task: dict[str, Any], env: dict[str, Any] | None,
              replayed: dict[str, Any] | None) -> str:
    d = (env or {}).get("detail") or {}
    spec = obj(task["answer"])
    also = [(label, ", ".join(map(str, spec[key]))) for key, label in
            (("others", "must not also name"), ("stated", "stated in the request (may be repeated)")) if arr(spec.get(key))]
    proofs = [p for p in ((d.get("verify_tasks") or {}).get(task["task_id"]) or {}).get("proofs") or []
              if isinstance(p, dict)]
    results = (replayed or {}).get("assertions") or []
    assertions = [(a, results[i] if i < len(results) else None) for i, a in enumerate(task["assertions"])]
    return render("task.html.jinja", data=data, title=f"Task {task['task_id']}", task=task,
                  env_name=(env or {}).get("name") or task["env_id"],
                  env_link=env_link(task["env_id"]) if env and env.get("detail") else None,
                  also=also, shape=task["metadata"].get("shape"), assertions=assertions, proofs=proofs,
                  replayed=replayed,
                  trajectories=[_trajectory(t) for t in (d.get("trajectories") or {}).get(task["task_id"]) or []])


def not_found_page(data: dict[str, Any], what: str) -> str:
    return render("not_found.html.jinja", data=data, title="Not found", what=what)
