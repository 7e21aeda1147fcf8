"""The simulated user, measured: its user error rate over a catalog's tasks in their conversational form.

Usage: .venv/bin/python benchmarks/bench_user_sim.py [CATALOG] [--tasks N] [--base-url URL --model NAME]
       [--cache-path FILE] [--json]

CATALOG defaults to the committed example (generated/quickstart). Each task is played once: the agent is scripted
(``tests/eval/scripted_conversation.Asker`` on a loopback OpenAI-compatible server: it asks for each of the task's
facts, one question per turn, then replays the reference solution with the values it was given and says the
answer), so every mistake counted is the user's; the user is the embedded model (or ``--base-url``), through the
LLM client and its cache, exactly as ``envfoundry eval --conversation`` runs it. Reported: conversations with a user
error (the user error rate), errors by kind (``pipeline.runtime.usercheck``: leak, invented, tool_or_id, early_stop, empty),
user turns, how many conversations the scripted agent still solved (a user that answers wrong or ends early makes
it fail), and seconds per user turn. A table goes to stdout; with --json, one JSON object as the last line. Exit 1,
the reasons on stderr, when a run fails: a conversation stopped by an endpoint error or by the scripted agent
(``endpoint_error``, ``llm_error``: nothing of the user was measured there), or no task to play.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.eval import load_items  # noqa: E402
from pipeline.llm import LLMClient, client_from_settings  # noqa: E402
from pipeline.settings import LLMSettings  # noqa: E402
from tests.eval.scripted_conversation import Asker  # noqa: E402
from tests.eval.scripted_server import serve  # noqa: E402
from verify.agent import AgentSettings, run_attempt  # noqa: E402
from verify.conversation import UserSettings, script_of  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog", nargs="?", type=Path, default=ROOT / "generated" / "quickstart")
    ap.add_argument("--tasks", type=int, default=None, help="the first N tasks only")
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--model", default=None)
    ap.add_argument("--cache-path", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    items = load_items(args.catalog)[: args.tasks]
    user_llm = client_from_settings(LLMSettings(base_url=args.base_url, model=args.model, cache_path=args.cache_path))
    settings = AgentSettings(max_turns=30, protocol="native")
    rows = []
    t0 = time.perf_counter()
    for it in items:
        script = script_of(it.env, it.task)
        with serve(Asker(it.task, script)) as server:
            s = LLMSettings(base_url=server.base_url, model="scripted-asker", cache=False, max_retries=1)
            agent = LLMClient(s, base_url=server.base_url, model="scripted-asker")
            t = time.perf_counter()
            a = run_attempt(agent, it.env, it.task, initial_db=it.initial_db, settings=settings, stage="eval",
                            user=user_llm, user_settings=UserSettings())
        rows.append({"task_id": it.task.task_id, "env_id": it.env.env_id, "facts": len(script.facts),
                     "derived": script.derived, "passed": a.passed, "stop": a.stop, "user_turns": a.user_turns,
                     "user_errors": a.user_errors, "seconds": round(time.perf_counter() - t, 1)})
        if not args.json:
            kinds = ",".join(sorted({e["kind"] for e in a.user_errors})) or "-"
            print(f"{it.task.task_id} facts={len(script.facts)} passed={a.passed} user_turns={a.user_turns} "
                  f"errors={kinds} {rows[-1]['seconds']}s", flush=True)
    n = len(rows)
    turns = sum(r["user_turns"] for r in rows)
    by_kind = Counter(e["kind"] for r in rows for e in r["user_errors"])
    out = {
        "catalog": str(args.catalog), "user_model": user_llm.model, "conversations": n,
        "user_error_rate": round(sum(bool(r["user_errors"]) for r in rows) / n, 4) if n else None,
        "user_errors_by_kind": dict(sorted(by_kind.items())), "user_turns": turns,
        "errors_per_user_turn": round(sum(by_kind.values()) / turns, 4) if turns else None,
        "scripted_agent_solved": sum(r["passed"] for r in rows),
        "seconds": round(time.perf_counter() - t0, 1),
        "seconds_per_user_turn": round((time.perf_counter() - t0) / turns, 1) if turns else None,
        "usage": user_llm.usage.total(), "rows": rows,
    }
    failed = out["problems"] = problems_of(rows, args.catalog)
    if args.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(f"\nuser: {out['user_model']}  conversations: {n}  user error rate: {out['user_error_rate']}  "
              f"errors by kind: {out['user_errors_by_kind']}  user turns: {turns}  "
              f"scripted agent solved: {out['scripted_agent_solved']}/{n}  {out['seconds']}s")
    for f in failed:
        print(f"FAILED: {f}", file=sys.stderr)
    if failed:
        sys.exit(f"bench_user_sim: FAILED ({len(failed)} problem(s)); the figures above measure failed runs")


def problems_of(rows: list[dict[str, Any]], catalog: Path) -> list[str]:
    """Why the run failed: conversations stopped by an endpoint or the scripted agent, or none played."""
    out = [f"{r['task_id']}: the conversation stopped on {r['stop']} (an endpoint or the scripted agent failed, not "
           "the user)" for r in rows if r["stop"] in ("endpoint_error", "llm_error")]
    if not rows:
        out.append(f"{catalog}: no task to play")
    return out


if __name__ == "__main__":
    main()
