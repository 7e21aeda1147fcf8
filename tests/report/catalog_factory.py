"""A richer catalog for the report and browser tests, built from the committed example with the project's
own writers: a second environment (three tables with foreign keys, write tools), tasks in the extended
record format (tier, steps, Wilson interval, hard pool, answer objects, assertion roles), scenarios
rejected as unsuitable and as duplicates, environments rejected and failed, and a dedup index holding
real MiniLM vectors of every kept scenario."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pipeline.catalog import Catalog
from pipeline.envdir import write_env_dir
from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Rejection, Scenario
from pipeline.seeds import Seed

EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "data" / "old_example" / "quickstart"
"""A frozen copy of an earlier committed example catalog (older task format: no tiers, plain answers), so the
report is tested on a catalog whose contents the assertions know, whatever the current example holds."""
XSS = "</script><script>alert(1)</script>"
XSS_TITLE = '</script><script>document.title="pwned"</script><!-- '

CLINIC = Scenario(
    name="Clinic Appointment Desk", seed="Clinic appointments",
    description="Receptionists book, move and cancel patient appointments with the clinic's doctors.",
    entities=["patient", "doctor", "appointment"], goals=["book an appointment", "cancel an appointment"],
)
KEPT_EXTRA = Scenario(
    name="Library Acquisitions", seed="Library lending",
    description="Librarians order new books from suppliers and track deliveries and invoices.",
    entities=["supplier", "order", "invoice"], goals=["order a book", "record a delivery"],
)
DUPLICATE = Scenario(
    name="Library Loans Desk", seed="Library lending",
    description="A system for members to borrow, renew and return library books, with holds and fines.",
    entities=["book", "member", "loan", "hold", "fine"], goals=["borrow a book", "return a book"],
)
UNSUITABLE = Scenario(
    name="Live Weather Radar", seed="Weather oracle",
    description="Streams live radar images and forecasts the weather minute by minute.",
    entities=["radar image", "forecast"], goals=["forecast rain"],
)


def clinic_env() -> Environment:
    return Environment.model_validate({
        "scenario": CLINIC.model_dump(mode="json"),
        "tables": [
            {"name": "doctors", "ddl": "CREATE TABLE doctors (doctor_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                                       "specialty TEXT NOT NULL) STRICT"},
            {"name": "patients", "ddl": "CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)"
                                        " STRICT"},
            {"name": "appointments", "ddl": "CREATE TABLE appointments (appointment_id INTEGER PRIMARY KEY, "
             "patient_id INTEGER NOT NULL REFERENCES patients(patient_id), doctor_id INTEGER NOT NULL "
             "REFERENCES doctors(doctor_id), day TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'booked' "
             "CHECK (status IN ('booked', 'cancelled'))) STRICT"},
        ],
        "seed": [
            {"table": "doctors", "rows": [{"doctor_id": 1, "name": "Dr. Hale", "specialty": "cardiology"},
                                          {"doctor_id": 2, "name": "Dr. Ruiz", "specialty": "dermatology"}]},
            {"table": "patients", "rows": [{"patient_id": 1, "name": "Ana Lima"}, {"patient_id": 2, "name": "Bo Chen"}]},
            {"table": "appointments", "rows": [{"appointment_id": 1, "patient_id": 2, "doctor_id": 1, "day": "2026-01-20"}]},
        ],
        "tools": [
            {"name": "find_doctor", "description": "Find doctors by specialty.", "kind": "read",
             "params": [{"name": "specialty", "type": "string", "description": "the specialty"}],
             "returns": {"sql": "SELECT * FROM doctors WHERE specialty = :specialty ORDER BY name", "mode": "all"}},
            {"name": "book_appointment", "description": "Book an appointment for a patient with a doctor.", "kind": "write",
             "params": [{"name": "patient", "type": "string"}, {"name": "doctor", "type": "string"},
                        {"name": "day", "type": "string"}],
             "steps": [
                 {"kind": "query", "sql": "SELECT patient_id FROM patients WHERE name = :patient", "bind": "p"},
                 {"kind": "guard", "sql": "SELECT 1 FROM doctors WHERE name = :doctor", "must": "exist",
                  "error": "no doctor named {doctor}"},
                 {"kind": "write", "sql": "INSERT INTO appointments (patient_id, doctor_id, day) VALUES (:p_patient_id, "
                                          "(SELECT doctor_id FROM doctors WHERE name = :doctor), :day)"}],
             "returns": {"sql": "SELECT appointment_id FROM appointments WHERE appointment_id = :last_id", "mode": "one"}},
            {"name": "cancel_appointment", "description": "Cancel an appointment.", "kind": "write",
             "params": [{"name": "appointment_id", "type": "integer"}],
             "steps": [{"kind": "guard", "sql": "SELECT 1 FROM appointments WHERE appointment_id = :appointment_id AND "
                                                "status = 'booked'", "must": "exist", "error": "no booked appointment"},
                       {"kind": "write", "sql": "UPDATE appointments SET status = 'cancelled' WHERE appointment_id = "
                                                ":appointment_id"}]},
        ],
    })


def clinic_tasks(env_id: str) -> list[dict[str, Any]]:
    """Task records in the extended format (read as raw JSON by the report, so ``Task`` need not know it)."""
    common = {"env_id": env_id, "tools": [], "provenance": {"stage": "tasks"}}
    return [
        {**common, "task_id": "t_clinic_lookup", "kind": "lookup", "instruction": "How many doctors practise cardiology?",
         "reference_solution": [{"tool": "find_doctor", "arguments": {"specialty": "cardiology"}}],
         "verifier": {"answer": {"type": "number", "value": 1, "tolerance": 0},
                      "assertions": [{"sql": "SELECT COUNT(*) FROM doctors", "expect": 2, "description": "doctors unchanged",
                                      "name": "gate"}], "mutable_tables": []},
         "difficulty": {"attempts": 4, "passes": 1, "pass_rate": 0.25, "wilson": [0.05, 0.7], "hard_pool": True},
         "metadata": {"tier": 1, "steps": 1, "tools_used": ["find_doctor"]}},
        {**common, "task_id": "t_clinic_book", "kind": "create", "instruction": f"Book Ana Lima with Dr. Ruiz on 2026-02-02 {XSS}",
         "reference_solution": [{"tool": "book_appointment",
                                 "arguments": {"patient": "Ana Lima", "doctor": "Dr. Ruiz", "day": "2026-02-02"}}],
         "verifier": {"answer": None, "assertions": [
             {"sql": "SELECT COUNT(*) FROM appointments WHERE patient_id = 1 AND doctor_id = 2 AND day = '2026-02-02'",
              "expect": 1, "description": "the new appointment"}], "mutable_tables": ["appointments"]},
         "difficulty": {"attempts": 2, "passes": 2}, "metadata": {"tier": 2, "steps": 1}},
        {**common, "task_id": "t_clinic_rebook", "kind": "multi_step",
         "instruction": f"Book Bo Chen with Dr. Ruiz on 2026-02-03, then cancel that booking. {XSS_TITLE}",
         "reference_solution": [
             {"tool": "book_appointment", "arguments": {"patient": "Bo Chen", "doctor": "Dr. Ruiz", "day": "2026-02-03"}},
             {"tool": "cancel_appointment", "arguments": {"appointment_id": "$1.appointment_id"}}],
         "verifier": {"assertions": [
             {"sql": "SELECT status FROM appointments WHERE patient_id = 2 AND day = '2026-02-03'", "expect": "cancelled",
              "description": "booked then cancelled"}], "mutable_tables": ["appointments"]},
         "difficulty": {"attempts": 0, "passes": 0}, "metadata": {"tier": 3, "steps": 2}},
    ]


def clinic_trajectories() -> list[dict[str, Any]]:
    return [{
        "task_id": "t_clinic_lookup", "attempt": 1, "passed": False, "stop": "answer", "final_answer": "2",
        "failures": ["answer '2' does not match the expected answer 1"], "error": None,
        "steps": [{"index": 1, "tool": "find_doctor", "arguments": {"specialty": "cardiology"}, "changes": [],
                   "thought": "List the cardiologists.", "response": {"ok": True, "result": [
                       {"doctor_id": 1, "name": "Dr. Hale", "specialty": "cardiology"}]}}],
        "review": {"blame": "agent", "reason": "the agent miscounted", "notes": [], "verdicts": [
            {"index": 1, "tool": "find_doctor", "source": "llm", "verdict": "fail", "reason": "CHECKER-VERDICT-MARK"}]},
    }]


def build(root: Path, embedder: Any) -> Path:
    """Copy the example catalog to ``root`` and add the richer content; returns ``root``."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("llm_cache.sqlite", "*.parquet", "server.py"))
    env = clinic_env()
    env_dir = root / "envs" / env.env_id
    write_env_dir(env, env_dir, [], {"verify": {"summary": {"kept": 3}}})
    tasks = clinic_tasks(env.env_id)
    (env_dir / "tasks.jsonl").write_text("".join(canonical_json(t) + "\n" for t in tasks), encoding="utf-8")
    (env_dir / "trajectories.jsonl").write_text("".join(canonical_json(t) + "\n" for t in clinic_trajectories()),
                                                encoding="utf-8")
    cat = Catalog(root, create=False)
    try:
        cat.add_seeds([Seed(name="Clinic appointments", description="book doctors", source="seeds/x.txt", line=1),
                       Seed(name="Weather oracle", description="live weather", source="seeds/x.txt", line=2)])
        cat.add_scenarios([CLINIC, KEPT_EXTRA])
        cat.add_rejections([
            Rejection(stage="dedup", item=DUPLICATE.scenario_id, reason="near duplicate of 'Book Lending System' "
                      "(cosine 0.812 >= 0.6)", evidence={"kind": "duplicate", "scenario": DUPLICATE.model_dump(mode="json"),
                                                        "duplicate_of": {"id": "4da80cfbe414b78f", "name": "Book Lending System"},
                                                        "similarity": 0.812}),
            Rejection(stage="expand", item=UNSUITABLE.scenario_id, reason="unsuitable for a database + tools "
                      "simulation: needs live sensor data", evidence={"kind": "unsuitable",
                                                                      "scenario": UNSUITABLE.model_dump(mode="json")}),
            Rejection(stage="seed_data", item="appointments", reason="table 'appointments' row 3: CHECK constraint failed"),
        ])
        cat.set_environment(CLINIC.scenario_id, env_id=env.env_id, name=CLINIC.name, status="verified", reason="",
                            dir=f"envs/{env.env_id}", tables=3, rows=5, tools=3, tasks=3, prompt_tokens=20000,
                            completion_tokens=4000, seconds=300.5)
        cat.set_environment(KEPT_EXTRA.scenario_id, name=KEPT_EXTRA.name, status="rejected",
                            reason=f"no task survived verification {XSS}", tables=4, rows=30, tools=2, tasks=0,
                            prompt_tokens=9000, completion_tokens=1000, seconds=120.0)
        cat.db["tasks"].insert_all([{"task_id": t["task_id"], "env_id": t["env_id"], "kind": t["kind"],
                                     "instruction": t["instruction"], "steps": len(t["reference_solution"]),
                                     "attempts": t["difficulty"]["attempts"], "passes": t["difficulty"]["passes"]}
                                    for t in tasks])
        run = dict(cat.runs()[0])
        run.update(run_id="second-run", started="2026-11-22T10:00:00+00:00", finished="2026-11-22T10:10:00+00:00",
                   usage=json.dumps({"tasks": {"calls": 5, "cached": 0, "prompt_tokens": 1000, "completion_tokens": 100,
                                               "seconds": 10.0}}), timings=json.dumps({"total": 600.0}))
        cat.record_run(run)
    finally:
        cat.close()
    from pipeline.scenarios.dedup import DedupIndex, IndexEntry

    index = DedupIndex.load(root / "dedup", embedder)
    texts = [index.text(s) for s in (CLINIC, KEPT_EXTRA)]
    index.add([IndexEntry(id=s.scenario_id, name=s.name, seed=s.seed, text=t)
               for s, t in zip((CLINIC, KEPT_EXTRA), texts, strict=True)], embedder.encode(texts))
    index.save()
    return root
