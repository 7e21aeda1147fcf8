"""The embedded server's speed, alone and beside a CPU-bound process, for each way of starting it.

Usage: .venv/bin/python benchmarks/bench_embedded.py [--model NAME] [--tokens 96] [--reps 2]
       [--settings NAME,...] [--busy-session own|same] [--json]

For each setting (below) one embedded server is started as ``pipeline.llm.embedded.EmbeddedServer`` starts it,
with that setting's thread count and environment; it answers the same requests (a ~300-token prompt, greedy,
``--tokens`` generated) ``--reps`` times on a quiet machine and ``--reps`` times beside ``python3 -c 'while True:
pass'`` (one busy core; in a session of its own by default, as another terminal's work is). Each request has its own opening line, so none is served from llama.cpp's prompt cache.
Speeds are measured on the streamed reply: prompt reading = the prompt's tokens (as the server log
counts them) over the time to the first token; generation = the tokens after the first over the time they took. Replies are compared byte for byte across settings (request by request).

The machine must be otherwise quiet for the quiet figures to mean anything: the table says the load average
before each setting. A table goes to stdout; with --json, one JSON object as the last line. Exit 1 if a request
failed or a reply differs between settings.

Settings:
  fixed        --n_threads = cores, llama.cpp's fixed threads (before issue 42)
  passive      fixed, with OMP_WAIT_POLICY=PASSIVE (threads sleep at barriers)
  spin0        fixed, with GOMP_SPINCOUNT=0
  one          --n_threads 1
  fitted       pipeline.llm.serve fits the threads to the free cores before each decode, usual priority
               (the default where the priority cannot be raised)
  fitted+spin0 fitted, with GOMP_SPINCOUNT=0
  fitted+nice-10  fitted, at nice -10
  nice-10      nice -10 where allowed (root or CAP_SYS_NICE), threads fixed (fitted if not allowed), the server
               leading a session of its own whose scheduling group has the same nice
  nice-19      the default since 2026-11-28: nice-10 at -19
  nice-10-samegroup  nice-10 without the session of its own (ENVFOUNDRY_SERVER_AUTOGROUP=0): where the kernel
               groups tasks by session (sched_autogroup_enabled=1) the nice then weighs nothing against other sessions
Every setting but the nice ones runs at the usual priority (ENVFOUNDRY_SERVER_NICE=0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.llm.embedded import EmbeddedServer  # noqa: E402
from pipeline.settings import LLMSettings  # noqa: E402

SETTINGS: dict[str, tuple[int | None, dict[str, str]]] = {
    "fixed": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "0"}),
    "passive": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "0", "OMP_WAIT_POLICY": "PASSIVE"}),
    "spin0": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "0", "GOMP_SPINCOUNT": "0"}),
    "one": (1, {}),
    "fitted": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "1"}),
    "fitted+spin0": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "1", "GOMP_SPINCOUNT": "0"}),
    "fitted+nice-10": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "1", "ENVFOUNDRY_SERVER_NICE": "-10"}),
    "nice-10": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "auto", "ENVFOUNDRY_SERVER_NICE": "-10"}),
    "nice-19": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "auto", "ENVFOUNDRY_SERVER_NICE": "-19"}),
    "nice-10-samegroup": (None, {"ENVFOUNDRY_ADAPTIVE_THREADS": "auto", "ENVFOUNDRY_SERVER_NICE": "-10",
                                 "ENVFOUNDRY_SERVER_AUTOGROUP": "0"}),
}
ENV_KEYS = ("ENVFOUNDRY_ADAPTIVE_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ENVFOUNDRY_SERVER_NICE",
            "ENVFOUNDRY_SERVER_AUTOGROUP")
#: the busy process runs in a session of its own (``--busy-session own``, as another terminal's or a test run's
#: work does; with the kernel's autogroups each session weighs the same whatever its nice) or in the
#: benchmark's session (``same``)
BUSY_SESSION = {"own": True, "same": False}

PASSAGE = (
    "A small lending library keeps a catalogue of books, a list of members and a ledger of loans. Each loan "
    "records the book, the member, the day it was made and the day it is due, usually three weeks later. "
    "Members may renew a loan once if nobody has reserved the book; overdue books accrue a small daily fine "
    "that is settled at the desk. The library also runs reading groups, orders new titles on request and "
    "withdraws damaged copies after an inspection. Staff answer questions about opening hours, availability "
    "and fines, and they help members find books by author, subject or year of publication. "
)
PROMPT_EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def _request(base_url: str, model: str, opening: str, tokens: int) -> tuple[str, float, float, int]:
    """(reply, seconds to the first token, seconds from there to the last, tokens generated), streamed."""
    body = {"model": model, "temperature": 0, "seed": 0, "max_tokens": tokens, "stream": True,
            "messages": [{"role": "system", "content": f"{opening} You are a helpful assistant for a library."},
                         {"role": "user", "content": PASSAGE * 2 + "\nList, one per line and numbered, forty "
                                                     "questions members ask the library's staff."}]}
    req = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first = last = 0.0
    parts: list[str] = []
    with urllib.request.urlopen(req, timeout=900) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content")
            if delta:
                last = time.perf_counter() - t0
                if not parts:
                    first = last
                parts.append(delta)
    return "".join(parts), first, last - first, len(parts)


def _prompt_tokens(log: str) -> int:
    """Prompt tokens of the last request, as llama.cpp counted them in the server log."""
    found = PROMPT_EVAL.findall(log)
    if not found:
        raise RuntimeError("the server log does not say how many tokens the prompt had (prompt eval time)")
    return int(found[-1][1])


def _loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run_setting(name: str, model: str, tokens: int, reps: int, own_session: bool = True) -> dict[str, object]:
    threads, env = SETTINGS[name]
    saved = {k: os.environ.get(k) for k in ENV_KEYS}
    for k in ENV_KEYS:
        os.environ.pop(k, None)
    os.environ.update({"ENVFOUNDRY_SERVER_NICE": "0", **env})
    server = EmbeddedServer(LLMSettings(embedded_model=model, threads=threads))  # type: ignore[call-arg]
    load = _loadavg()
    try:
        url = server.start()
        _request(url, model, "Warm-up.", 4)
        out: dict[str, object] = {"setting": name, "load_before": load}
        replies: list[str] = []
        for cond in ("quiet", "busy"):
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=own_session)
                    if cond == "busy" else None)
            try:
                if busy:
                    time.sleep(1.0)
                prompt_s, gen_s = [], []
                for rep in range(reps):
                    assert server.log_path is not None
                    reply, ttft, rest, n = _request(url, model, f"Request {cond}-{rep}.", tokens)
                    time.sleep(0.3)  # llama.cpp prints its counts just after the reply
                    prompt_s.append(_prompt_tokens(server.log_path.read_text(errors="replace")) / ttft)
                    gen_s.append((n - 1) / rest if rest > 0 else 0.0)
                    replies.append(reply)
            finally:
                if busy:
                    busy.kill()
                    busy.wait()
            out[cond] = {"prompt_tok_s": [round(x, 2) for x in prompt_s], "gen_tok_s": [round(x, 2) for x in gen_s]}
        out["replies"] = replies
        return out
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--busy-session", choices=sorted(BUSY_SESSION), default="own",
                    help="the busy process in a session of its own (default; as another terminal's work) or in ours")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    names = [n.strip() for n in args.settings.split(",") if n.strip()]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        sys.exit(f"bench_embedded: unknown setting(s) {unknown}; known: {', '.join(SETTINGS)}")
    results, failed = [], []
    for name in names:
        try:
            results.append(run_setting(name, args.model, args.tokens, args.reps, BUSY_SESSION[args.busy_session]))
        except Exception as e:  # a failed setting is reported, and makes the run fail
            failed.append({"setting": name, "error": f"{type(e).__name__}: {e}"})
    base = results[0]["replies"] if results else []
    differ = [r["setting"] for r in results if r["replies"] != base]
    print(f"{'setting':<14} {'load':>5} {'quiet gen':>10} {'busy gen':>9} {'ratio':>6} {'quiet prompt':>13} "
          f"{'busy prompt':>12}")
    rows = []
    for r in results:
        q, b = r["quiet"], r["busy"]
        qg, bg = _mean(q["gen_tok_s"]), _mean(b["gen_tok_s"])  # type: ignore[index]
        qp, bp = _mean(q["prompt_tok_s"]), _mean(b["prompt_tok_s"])  # type: ignore[index]
        ratio = bg / qg if qg else 0.0
        rows.append({**{k: v for k, v in r.items() if k != "replies"}, "gen_ratio": round(ratio, 3),
                     "replies_same_as_first": r["setting"] not in differ})
        print(f"{r['setting']:<14} {r['load_before']:>5.2f} {qg:>10.2f} {bg:>9.2f} {ratio:>6.2f} {qp:>13.1f} "
              f"{bp:>12.1f}")
    for f in failed:
        print(f"FAILED {f['setting']}: {f['error']}")
    if differ:
        print(f"replies differ from {results[0]['setting']}'s: {', '.join(differ)}")
    else:
        print(f"replies: the same bytes in every setting ({len(base)} requests each)")
    if args.json:
        print(json.dumps({"model": args.model, "tokens": args.tokens, "reps": args.reps, "cores": os.cpu_count(),
                          "results": rows, "failed": failed, "replies_differ": differ}))
    sys.exit(1 if failed or differ else 0)


if __name__ == "__main__":
    main()
