"""A whole run against a real HTTP endpoint that misbehaves: every kind of fault on some of the library
scenario's requests (retried, then answered), and an endpoint that fails for good on an added scenario. The
example's environments come out exactly as committed, the other scenario is recorded as failed
with its cause, the run goes on to the end, and nothing half-written is left (cache, envs, catalog)."""

from __future__ import annotations

import json
import sqlite3
import threading

from pipeline.llm.simulated import CacheReplay, Fault, SimulatedEndpoint, request_key
from pipeline.run import run_catalog
from tests.executor.example_run import EXAMPLE, cache_rows, example_inputs, files, no_misses, plan

VET = {"name": "Veterinary appointment desk", "description": "Receptionists schedule appointments for pets "
       "with vets and record visit outcomes.", "entities": ["pet", "vet", "appointment"],
       "goals": ["schedule a visit", "record an outcome"], "simulation": "yes, tables", "suitable": True}
FAULTS = [Fault("timeout", hang_s=20), Fault("status", status=429, retry_after=0.2), Fault("status", status=500),
          Fault("status", status=502), Fault("status", status=503, retry_after=0.1), Fault("truncated"),
          Fault("non_json"), Fault("drop")]


class Misbehaving:
    """The example's replies, but the first try of every 2nd new request gets the next fault; the vet
    scenario's requests (after its expansion) fail for good."""

    def __init__(self) -> None:
        self.replay = CacheReplay(EXAMPLE / "llm_cache.sqlite")
        self.lock = threading.Lock()
        self.new = 0
        self.faulted: set[str] = set()
        self.injected: list[str] = []

    def __call__(self, body: dict) -> str | Fault:
        text = json.dumps(body["messages"])
        if "Domain seed: Veterinary" in text:
            return json.dumps(VET)
        if "Veterinary" in text:
            return Fault("status", status=500)
        key = request_key(body)
        with self.lock:
            if key not in self.faulted:
                self.faulted.add(key)
                self.new += 1
                if self.new % 2 == 0 and len(self.injected) < len(FAULTS):
                    fault = FAULTS[len(self.injected)]
                    self.injected.append(fault.kind + (f" {fault.status}" if fault.kind == "status" else ""))
                    return fault
        return self.replay(body)


def test_faults_are_retried_a_dead_scenario_is_recorded_and_the_run_goes_on(tmp_path):
    seeds, stages = example_inputs(tmp_path)
    seeds.write_text(seeds.read_text() + "Veterinary clinic: receptionists schedule pet visits\n")
    out = tmp_path / "catalog"
    answer = Misbehaving()
    with SimulatedEndpoint(answer) as ep:
        result = run_catalog(seeds, out, plan(ep.url, out / "llm_cache.sqlite", stages, timeout_s=1.5,
                                              max_retries=3))
        stats = ep.stats()
    assert len(answer.injected) == len(FAULTS), answer.injected
    assert {k for k in stats["outcomes"] if k != "ok"} == {"timeout", "status", "truncated", "non_json", "drop"}
    # the run went on to the end: the vet scenario failed with the endpoint's answer as the reason
    n_example = len(list((EXAMPLE / "envs").iterdir()))
    assert result.counts["kept"] == n_example + 1
    vet = [f for f in result.failed if f["scenario"] == VET["name"]]
    assert len(vet) == 1 and "HTTP 500" in vet[0]["reason"] and "after 4 tries" in vet[0]["reason"]
    # nothing half-written: whole cache entries only, the failures recorded apart
    cached = cache_rows(out / "llm_cache.sqlite")
    assert all(c in answer.replay.replies.values() or c == json.dumps(VET) for _, c in cached)
    con = sqlite3.connect(out / "llm_cache.sqlite")
    errors = [e for (e,) in con.execute("SELECT error FROM errors")]
    con.close()
    assert errors and all("HTTP 500" in e or "HTTP 400" in e for e in errors)
    # the library environment is the committed example's, byte for byte, despite the faults
    no_misses(answer.replay)
    assert result.counts["environments_verified"] == n_example and result.counts["environments_failed"] == 1
    assert files(out) == files(EXAMPLE)
    assert [p.name for p in (out / "envs").iterdir()] == [p.name for p in (EXAMPLE / "envs").iterdir()]
    con = sqlite3.connect(out / "catalog.db")
    rows = dict(con.execute("SELECT name, status FROM environments").fetchall())
    con.close()
    assert sorted(rows.values()) == ["failed"] + ["verified"] * n_example and rows[VET["name"]] == "failed"
