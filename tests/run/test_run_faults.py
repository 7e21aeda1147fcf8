"""A run whose endpoint fails after expansion: retries, then the affected scenarios are marked failed with the
reason, the run finishes, the summary lists them, and a rerun retries them (with the real pipeline code; the
LLM is a scripted fake at the HTTP layer)."""

from __future__ import annotations

import json

import httpx

from pipeline.catalog import Catalog
from pipeline.config import Config
from pipeline.llm import fake_client
from pipeline.run import plan_from_config, run_catalog, summary_dict

SCENARIOS = {
    "hotel": {"name": "Hotel room reservations", "description": "Front-desk staff book rooms for guests and "
              "manage check-in and check-out of reservations.", "entities": ["guest", "room", "reservation"],
              "goals": ["book a room", "cancel a reservation"], "simulation": "yes, tables", "suitable": True},
    "clinic": {"name": "Veterinary appointment desk", "description": "Receptionists schedule appointments for "
               "pets with vets and record visit outcomes.", "entities": ["pet", "vet", "appointment"],
               "goals": ["schedule a visit", "record an outcome"], "simulation": "yes, tables", "suitable": True},
}


def _expansion_only(messages):
    text = messages[-1]["content"]
    if "Domain seed:" in text:
        return json.dumps(SCENARIOS["hotel" if "hotel" in text.lower() else "clinic"])
    return httpx.Response(503, headers={"retry-after-ms": "1"}, json={"error": {"message": "server died"}})


def test_endpoint_dies_mid_run_marks_items_failed_and_rerun_retries(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("hotel booking\nveterinary clinic\n")
    plan = plan_from_config(Config(), {"expand": {"scenarios_per_seed": 1}})
    made = []

    def factory(settings):
        c = fake_client([_expansion_only] * 200, max_retries=1)
        made.append(c)
        return c

    out = tmp_path / "cat"
    result = run_catalog(seeds, out, plan, client_factory=factory)
    assert result.counts["kept"] == 2
    assert result.counts["environments_failed"] == 2
    assert sorted(f["scenario"] for f in result.failed) == sorted(s["name"] for s in SCENARIOS.values())
    assert all("HTTP 503" in f["reason"] for f in result.failed)
    assert summary_dict(result)["failed"] == result.failed
    # each failed request was retried by the transport before giving up
    assert any(len(c.requests) >= 2 for c in made[1:])
    envs = Catalog(out, create=False).environments()
    assert {e["status"] for e in envs} == {"failed"}

    # the rerun retries the failed scenarios (not skipped as done)
    result2 = run_catalog(seeds, out, plan, client_factory=factory)
    assert result2.counts["skipped_done"] == 0 and result2.counts["environments_failed"] == 2
    assert len(Catalog(out, create=False).environments()) == 2  # no duplicates
