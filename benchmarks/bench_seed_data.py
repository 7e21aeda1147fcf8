"""Seed rows before and after code-made rows, on the committed example's schemas.

    .venv/bin/python benchmarks/bench_seed_data.py            # a table per environment
    .venv/bin/python benchmarks/bench_seed_data.py --json     # one JSON line
    .venv/bin/python benchmarks/bench_seed_data.py --catalog generated/quickstart --config seeds/quickstart.toml

Before: the rows the LLM wrote (``env.json``; with a ``plan``, its first ``examples`` rows), their LLM tokens and
seconds as the catalog's LLM cache recorded them (the embedded model on this machine kind). After: the same rows
as examples, then ``pipeline.stages.rows.generators.fill_table`` with the seed stage's settings and ``row_generators`` on.
Its generator choice is the catalog's cached real reply when the cache holds that exact request (a catalog built
with ``row_generators``); else the scripted choice below for the example's tables (source ``scripted``), or none
(every column falls back, source ``fallback``). Scripted and fallback choices count tokens at the cache's measured
characters per token and seconds at the embedded model's measured speed (``est``). Placeholder share: the share of text
values that look like placeholders (``rowgen.PLACEHOLDER``, issue 26's measure). Contradicting columns (issue 40):
the share of judged columns (neither id nor reference) with a semantic finding (``pipeline.meaning.findings``:
values unlike the column's example values, words said twice, glued values, dates in an order no example has, NULL in
every row); before: the catalog's rows as built; after: this run's rows.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PROMPT_TOKENS_PER_S, GRAMMAR_TOKENS_PER_S = 68.0, 10.5
"""The embedded 1.5B model on 2 CPU cores (``shared/design/EMBEDDED_LLM.md``): prompt reading, and generation under a
JSON-schema grammar; what an estimated choice request costs."""
sys.path.insert(0, str(ROOT))

from pipeline import ir  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.envdir import load_env_dir  # noqa: E402
from pipeline.hashing import canonical_json  # noqa: E402
from pipeline.llm import fake_client  # noqa: E402
from pipeline.llm.client import completion_json  # noqa: E402
from pipeline.meaning import findings as semantic  # noqa: E402
from pipeline.settings import BuildSettings  # noqa: E402
from pipeline.stages.rows import counts  # noqa: E402
from pipeline.stages.rows import generators as rowgen  # noqa: E402
from pipeline.stages.rows.populate import _empty_db, _similarity  # noqa: E402

_BOOK_WORDS = ["Silent", "Golden", "Hidden", "Northern", "Last", "Broken", "Winter", "Distant", "Crimson", "Quiet",
               "Burning", "Paper", "Velvet", "Iron", "Secret", "Long"]
_BOOK_NOUNS = ["Harbour", "Garden", "Letters", "River", "Kingdom", "Orchard", "Lantern", "Voyage", "Tides", "Mirror",
               "Shadows", "Island", "Season", "Promise", "Bridge", "Meadow", "Archive", "Summer", "Hours", "Road"]
_DRUGS = ["Amoxicillin", "Atorvastatin", "Metformin", "Lisinopril", "Omeprazole", "Amlodipine", "Sertraline",
          "Levothyroxine", "Salbutamol", "Ibuprofen", "Paracetamol", "Cetirizine", "Losartan", "Simvastatin",
          "Prednisolone", "Warfarin", "Clopidogrel", "Citalopram", "Ramipril", "Furosemide"]
_STRENGTHS = ["10 mg", "20 mg", "25 mg", "40 mg", "50 mg", "100 mg", "250 mg", "500 mg", "5 mg/5 ml", "200 mg",
              "2.5 mg", "75 mg", "150 mg", "1 g", "400 mg", "30 mg"]
SCRIPTED: dict[str, dict[str, Any]] = {
    "books": {"title": {"kind": "text_combo", "pool": _BOOK_WORDS, "pool2": _BOOK_NOUNS},
              "author": {"kind": "person_name"}, "genre": {"kind": "enum", "values": ["fiction", "non-fiction"],
                                                           "weights": [3, 2]},
              "publication_year": {"kind": "integer", "min": 1950, "max": 2025, "distribution": "skewed"}},
    "members": {"name": {"kind": "person_name"}, "email": {"kind": "email"}, "phone_number": {"kind": "phone"}},
    # the scripted text_combo choices below are kept as written before issue 40: the menu no longer offers
    # text_combo, so a reply holding one is refused, fed back, and the column falls back to the examples' list
    "loans": {"loan_date": {"kind": "date", "start": "2025-09-01", "end": "2026-01-15"},
              "due_date": {"kind": "date_after", "after": "loan_date", "min": 14, "max": 28},
              "status": {"kind": "enum", "values": ["open", "closed"], "weights": [1, 3]}},
    "renewals": {"renewal_date": {"kind": "date", "start": "2025-10-01", "end": "2026-01-15"},
                 "status": {"kind": "enum", "values": ["open", "closed"], "weights": [1, 2]}},
    "overdue_fines": {"fine_amount": {"kind": "amount", "min": 0.5, "max": 25, "distribution": "skewed"}},
    "patients": {"name": {"kind": "person_name"}, "age": {"kind": "integer", "min": 1, "max": 95,
                                                          "distribution": "normal"},
                 "gender": {"kind": "enum", "values": ["male", "female"]},
                 "medical_history": {"kind": "text_pool", "pool": [
                     "Type 2 diabetes", "Asthma", "Hypertension", "No chronic conditions", "Migraine",
                     "High cholesterol", "Hypothyroidism", "Atrial fibrillation", "Eczema", "Depression"]},
                 "allergies": {"kind": "text_pool", "pool": [
                     "None known", "Penicillin", "Aspirin", "Sulfonamides", "Latex", "Codeine", "Ibuprofen",
                     "Peanuts"]},
                 "medications": {"kind": "text_pool", "pool": _DRUGS},
                 "stock": {"kind": "text_pool", "pool": ["in stock", "low", "reordered", "out of stock", "on hold",
                                                         "delivered", "awaiting delivery", "reserved"]}},
    "medications": {"name": {"kind": "text_combo", "pool": _DRUGS, "pool2": _STRENGTHS},
                    "description": {"kind": "text_pool", "pool": [
                        "Antibiotic for bacterial infections", "Lowers cholesterol", "Controls blood sugar",
                        "Lowers blood pressure", "Reduces stomach acid", "Antidepressant", "Thyroid hormone",
                        "Relieves asthma symptoms", "Pain and fever relief", "Antihistamine for allergies"]},
                    "quantity": {"kind": "amount", "min": 5, "max": 500, "distribution": "skewed"},
                    "stock": {"kind": "enum", "values": ["in stock", "low", "out of stock"], "weights": [6, 2, 1]}},
    "orders": {"quantity": {"kind": "integer", "min": 1, "max": 6, "distribution": "skewed"},
               "status": {"kind": "enum", "values": ["open", "closed"], "weights": [1, 3]},
               "order_date": {"kind": "date", "start": "2025-10-01", "end": "2026-01-15"}},
}


def _texts(rows: list[dict[str, Any]]) -> list[str]:
    return [v for r in rows for v in r.values() if isinstance(v, str) and not re.fullmatch(r"[\d\s:T.+-]+", v)]


def placeholder_share(rows: list[dict[str, Any]]) -> float:
    values = _texts(rows)
    return round(sum(bool(rowgen.PLACEHOLDER.search(v.strip())) for v in values) / max(1, len(values)), 4)


class Cache:
    """The catalog's LLM cache: requests by their messages, and the measured rates of the seed-rows calls."""

    def __init__(self, path: Path) -> None:
        self.by_messages: dict[str, tuple[str, dict[str, Any]]] = {}
        self.rows_calls: list[tuple[str, dict[str, Any]]] = []
        if path.is_file():
            conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)  # no -wal/-shm beside it
            for request, content, usage in conn.execute("SELECT request, content, usage FROM responses"):
                msgs = json.loads(request).get("messages", [])
                use = json.loads(usage)
                self.by_messages[canonical_json(msgs)] = (content, use)
                if msgs and msgs[0]["content"].startswith("You write realistic sample data"):
                    self.rows_calls.append((msgs[0]["content"], {**use, "chars": len(msgs[0]["content"]),
                                                                 "out_chars": len(content)}))
            conn.close()
        uses = [u for _, u in self.rows_calls]
        self.chars_per_token = (sum(u["chars"] + u["out_chars"] for u in uses)
                                / max(1, sum(u["prompt_tokens"] + u["completion_tokens"] for u in uses))) or 4.0

    def rows_usage(self, scenario: str, table: str) -> dict[str, float]:
        """Tokens and seconds of the LLM calls that wrote ``table``'s rows in ``scenario``."""
        mine = [u for p, u in self.rows_calls if f'database of "{scenario}"' in p and f"rows for table {table}." in p]
        return {"calls": len(mine), "tokens": sum(u["prompt_tokens"] + u["completion_tokens"] for u in mine),
                "seconds": round(sum(u["seconds"] for u in mine), 1)}


def _continuation(messages: list[dict[str, Any]]) -> str | None:
    """A scripted reply to a vocabulary continuation request: the column's scripted pool, items not yet shown."""
    m = re.search(r"Write \d+ more values for (\w+)", messages[0]["content"])
    if m is None:
        return None
    pools = [c.get("pool") or [] for t in SCRIPTED.values() for n, c in t.items() if n == m.group(1)]
    fresh = [v for p in pools for v in p if f"- {v}\n" not in messages[0]["content"]][:12]
    return json.dumps({"values": fresh or [""]})


def judged_columns(env: ir.Environment, table: str) -> list[str]:
    seed = next((s for s in env.seed if s.table == table), None)
    if seed is None or not seed.rows:
        return []
    refs = {g.column for g in (seed.plan.generators if seed.plan else []) if g.kind == "reference"}
    ddl = next(t.ddl for t in env.tables if t.name == table)
    return [c for c in seed.rows[0] if c not in refs and not semantic._is_auto_id(ddl, c)]


def contradicting(env: ir.Environment, table: str) -> list[str]:
    """Columns of ``table`` with a semantic finding in ``env`` (rows as stored)."""
    return sorted({f.column for f in semantic.env_findings(env) if f.table == table})


def bench_env(env: ir.Environment, cache: Cache, settings: BuildSettings) -> list[dict[str, Any]]:
    conn = _empty_db(env.tables)
    out = []
    locale: str | None = None
    shown_examples: dict[str, int | None] = {}  # per table filled so far, its example rows (a parent's counter)
    try:
        for table in env.tables:
            seed = next((s for s in env.seed if s.table == table.name), None)
            examples = (seed.rows[: seed.plan.examples] if seed and seed.plan else seed.rows if seed else [])
            for row in examples:  # with their ids, as in env.json
                quoted = ", ".join(f'"{c}"' for c in row)
                conn.execute(f'INSERT INTO "{table.name}" ({quoted}) VALUES ({", ".join("?" for _ in row)})',
                             list(row.values()))
            before = cache.rows_usage(env.scenario.name, table.name)
            source: list[str] = []
            spent: list[float] = []

            def reply(messages: list[dict[str, Any]], name: str = table.name, used: list[str] = source,
                      seconds: list[float] = spent) -> Any:
                hit = cache.by_messages.get(canonical_json(messages))
                vocab_reply = _continuation(messages)
                if hit is None and vocab_reply is not None:
                    used.append("scripted")
                    return httpx.Response(200, json=completion_json(vocab_reply, 50, 50))
                if hit is not None:
                    used.append("cache")
                    seconds.append(float(hit[1].get("seconds", 0.0)))
                    return httpx.Response(200, json=completion_json(hit[0], hit[1]["prompt_tokens"],
                                                                    hit[1]["completion_tokens"]))
                content = json.dumps({**({"locale": "en_US"} if "\"locale\"" in messages[0]["content"] else {}),
                                      "columns": SCRIPTED[name]}) if name in SCRIPTED else "{}"
                used.append("scripted" if name in SCRIPTED else "fallback")
                pt = round(sum(len(m["content"]) for m in messages) / cache.chars_per_token)
                ct = round(len(content) / cache.chars_per_token)
                seconds.append(pt / PROMPT_TOKENS_PER_S + ct / GRAMMAR_TOKENS_PER_S)
                return httpx.Response(200, json=completion_json(content, pt, ct))

            client = fake_client([reply] * 20, validation_retries=0)
            t0 = time.perf_counter()
            shown = counts.shown_most(conn, env.tables, shown_examples, table.name, _similarity)
            made = rowgen.fill_table(env.scenario, table, conn, client, settings, locale, shown=shown)
            shown_examples[table.name] = len(examples)
            code_s = time.perf_counter() - t0
            locale = locale or made.plan.locale
            use = client.usage.by_stage().get("seed_data", {})
            choice_tokens = int(use.get("prompt_tokens", 0)) + int(use.get("completion_tokens", 0))
            real = bool(source) and all(s == "cache" for s in source)
            choice_s = sum(spent)
            cur = conn.execute(f'SELECT * FROM "{table.name}"')
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur]
            judged = judged_columns(env, table.name)
            after_env = ir.Environment(scenario=env.scenario, tables=env.tables, seed=[
                ir.SeedRows(table=table.name, rows=rows, plan=made.plan)])
            out.append({
                "env": env.env_id, "table": table.name,
                "before": {"rows": len(examples), "llm_tokens": before["tokens"], "llm_seconds": before["seconds"],
                           "rows_per_s": round(len(examples) / before["seconds"], 2) if before["seconds"] else None,
                           "placeholder_share": placeholder_share(examples),
                           "columns": len(judged), "contradicting": contradicting(env, table.name)},
                "after": {"rows": len(rows), "code_rows": len(rows) - len(examples),
                          "llm_tokens": before["tokens"] + choice_tokens, "choice_tokens": choice_tokens,
                          "choice_source": source[-1] if source else "none", "choice_estimated": not real,
                          "choice_seconds": round(choice_s, 1), "code_seconds": round(code_s, 3),
                          "rows_per_s": round(len(rows) / (before["seconds"] + choice_s + code_s), 2),
                          "code_rows_per_s": round((len(rows) - len(examples)) / code_s, 1),
                          "placeholder_share": placeholder_share(rows),
                          "columns": len(judged), "contradicting": contradicting(after_env, table.name),
                          "fallbacks": [r.item for r in made.rejections if "fell back" in r.reason]},
            })
    finally:
        conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--catalog", type=Path, default=ROOT / "generated" / "quickstart")
    ap.add_argument("--config", type=Path, default=ROOT / "seeds" / "quickstart.toml")
    ap.add_argument("--json", action="store_true", help="one JSON line")
    args = ap.parse_args()
    build = load_config(args.config).stages.build.model_copy(update={"row_generators": True})
    cache = Cache(args.catalog / "llm_cache.sqlite")
    results = []
    for env_json in sorted((args.catalog / "envs").glob("*/env.json")):
        env, _, _ = load_env_dir(env_json.parent)
        results.extend(bench_env(env, cache, build))
    if not results:
        sys.exit(f"bench_seed_data: FAILED: no environment with tables under {args.catalog / 'envs'}")
    summary = {
        key: {"rows": sum(r[key]["rows"] for r in results),
              "llm_tokens": sum(r[key]["llm_tokens"] for r in results),
              "llm_tokens_per_table": round(sum(r[key]["llm_tokens"] for r in results) / max(1, len(results)), 1),
              "placeholder_share": round(sum(r[key]["placeholder_share"] * r[key]["rows"] for r in results)
                                         / max(1, sum(r[key]["rows"] for r in results)), 4),
              "contradicting_columns": sum(len(r[key]["contradicting"]) for r in results),
              "judged_columns": sum(r[key]["columns"] for r in results),
              "contradicting_share": round(sum(len(r[key]["contradicting"]) for r in results)
                                           / max(1, sum(r[key]["columns"] for r in results)), 3)}
        for key in ("before", "after")}
    if args.json:
        print(json.dumps({"tables": results, "summary": summary}, sort_keys=True))
        return
    print("| env / table | rows before -> after | LLM tokens before -> after (choice) | rows/s before -> after | "
          "code rows/s | placeholders before -> after | contradicting columns before -> after |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        b, a = r["before"], r["after"]
        est = " est" if a["choice_estimated"] else ""
        print(f"| {r['env'][:24]} / {r['table']} | {b['rows']} -> {a['rows']} | {b['llm_tokens']} -> {a['llm_tokens']} "
              f"({a['choice_tokens']}{est}, {a['choice_source']}) | {b['rows_per_s']} -> {a['rows_per_s']} | "
              f"{a['code_rows_per_s']} | {b['placeholder_share']:.1%} -> {a['placeholder_share']:.1%} | "
              f"{','.join(b['contradicting']) or '-'} -> {','.join(a['contradicting']) or '-'} |")
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
