"""Replay the example's task stage (the planner, the model's wording from the cache, code's fallback wording) on a
COPY of its LLM cache, without the model: a reply that is not in the cache counts as a miss (the stage sees an
LLM error, as when the model gives no usable reply, and code words that task). Prints one JSON line per task:
env, shape, worded_by, whether any of its wording requests missed the cache, and the request. From REPO:
    cp generated/quickstart/llm_cache.sqlite /tmp/x/llm_cache.sqlite
    PYTHONPATH=$PWD .venv/bin/python docs/house/replay_requests.py /tmp/x/llm_cache.sqlite [ENV_DIR...]
(ENV_DIRs default to generated/quickstart/envs/*). The environments are read from their env.json and initial.db
as committed; conversations are off (they do not change a request). With REPLAY_TEMPLATES=1 the phrasing stage's
request templates (templates.json) are replayed too: one JSON line per template kept, then the failed ones."""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pipeline.llm.client as c
from pipeline import ir
from pipeline.config import load_config
from pipeline.llm import LLMError, embedded_client
from pipeline.stages.tasks.bank import generate_tasks
from pipeline.stages.tasks.templates import phrase_environment

MISSES: list[str] = []


def _no_model(self):
    MISSES.append("miss")
    raise LLMError("replay: a request missed the cache; no model call is allowed")


c.LLMClient._ensure_started = _no_model

cache = Path(sys.argv[1])
dirs = [Path(d) for d in sys.argv[2:]] or sorted(Path("generated/quickstart/envs").iterdir())
cfg = load_config("seeds/quickstart.toml")
settings = cfg.stages.tasks.model_copy(update={"conversations": False})
n = cfg.stages.run.tasks_per_env
client = embedded_client(cfg.llm.model_copy(update={"cache_path": cache}))
for d in dirs:
    env = ir.Environment.model_validate_json((d / "env.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "initial.db"
        shutil.copy(d / "initial.db", db)
        before = len(MISSES)
        res = generate_tasks(env, client, n=n, initial_db=db, settings=settings)
        if os.environ.get("REPLAY_TEMPLATES"):
            m0 = len(MISSES)
            made, info = phrase_environment(env, client, db, limit=settings.sample_templates,
                                            language=settings.template_language)
            for t in made.get("templates", []) if made else []:
                print(json.dumps({"env": env.env_id, "template": t.get("template")}))
            print(json.dumps({"env": env.env_id, "template_misses": len(MISSES) - m0,
                              "failed": info.get("failed"), "kept": info.get("kept")}))
    for t in res.value or []:
        print(json.dumps({"env": env.env_id, "shape": t.metadata.get("shape"), "worded_by": t.metadata.get("worded_by"),
                          "instruction": t.instruction}))
    print(json.dumps({"env": env.env_id, "misses": len(MISSES) - before,
                      "rejections": [r.reason[:300] for r in res.rejections]}))
