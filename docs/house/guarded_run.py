"""The README's main command (envfoundry run) with a guard: a cache miss raises instead of starting the embedded
model, so a check on a warm copy of the example's cache makes no model call. From REPO, with OUT holding a copy of
generated/quickstart/llm_cache.sqlite:
    PYTHONPATH=$PWD .venv/bin/python docs/house/guarded_run.py OUT; python3 docs/house/compare_quickstart.py . OUT"""
import sys

import pipeline.llm.client as c

MISSES = []


def _no_model(self):
    MISSES.append(1)
    raise RuntimeError("house check: a request missed the cache; no model call is allowed")


c.LLMClient._ensure_started = _no_model
from pipeline.cli import main  # noqa: E402

try:
    main(["run", "--seeds", "seeds/quickstart.txt", "--out", sys.argv[1], "--config", "seeds/quickstart.toml"],
         standalone_mode=False)
finally:
    print(f"house check: {len(MISSES)} cache misses", file=sys.stderr)
