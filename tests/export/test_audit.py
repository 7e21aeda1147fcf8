"""The integrity audit in every bundle (issue 41): each format's bundle carries ``audit.json`` and a README table;
per task the reference scores 1, doing nothing and the adversarial panel 0, two replays give the same database;
the seed rows load and are initial.db's data. A task that fails stops the export, naming it and the check, unless
the caller lets it ship (then it is listed as shipped failing); a shipped initial.db that is not the seed rows'
is caught too."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pipeline.envdir import write_env_dir
from pipeline.export import AuditError, export_catalog, load_catalog
from pipeline.ir import Assertion, Task
from tests.export.conftest import build_catalog
from tests.fixtures.library import library_env, library_tasks

BUNDLES = {"verifiers": "*/*/data/audit.json", "openenv": "*/data/audit.json", "verl": "*/*/data/*/audit.json"}


def test_every_bundle_carries_its_audit(catalog_dir, tmp_path):
    cat = load_catalog(catalog_dir)
    n = len(cat.tasks)
    for fmt, pattern in BUNDLES.items():
        export_catalog(cat, fmt, tmp_path / fmt)
        (path,) = list((tmp_path / fmt).glob(pattern))
        audit = json.loads(path.read_text())
        assert audit["ok"] is True and audit["shipped_failing"] == [] and audit["seed"]["ok"] is True, audit["seed"]
        assert audit["summary"] == {"tasks": n, "reference": n, "do_nothing": n, "panel": n, "deterministic": n}
        for task_id, a in audit["tasks"].items():
            checks = a["checks"]
            assert checks["reference"]["reward"] == 1.0 and checks["do_nothing"]["reward"] == 0.0, task_id
            assert checks["panel"]["members"][0] == "no_op" and "destructive" in checks["panel"]["members"]
            assert len(checks["deterministic"]["state_sha256"]) == 64
        readme = next((tmp_path / fmt).rglob("README.md")).read_text()
        assert "## Integrity audit" in readme and f"| {n} / {n} | {n} / {n} | {n} / {n} | {n} / {n} | none |" in readme
    (sft,) = export_catalog(cat, "jsonl", tmp_path / "jsonl").paths
    audits = json.loads((sft.parent / "audit.json").read_text())
    assert set(audits) == set(cat.envs) and all(a["ok"] for a in audits.values())
    assert "## Integrity audit" in (sft.parent / "README.md").read_text()


def broken_catalog(root):
    """The library with one task whose verifier its reference misses (it expects a value no call writes)."""
    env = library_env()
    good, bad = library_tasks(env)
    first = bad.verifier.assertions[0]
    wrong = bad.verifier.model_copy(update={"assertions": [Assertion(sql=first.sql, expect="no such value"),
                                                             *bad.verifier.assertions[1:]]})
    bad = bad.model_copy(update={"verifier": wrong, "task_id": Task.make_id(env.env_id, bad.instruction,
                                                                             bad.reference_solution, wrong)})
    write_env_dir(env, root / "envs" / env.env_id, tasks=[good, bad], report={"source": "tests/export"})
    return root, bad.task_id


def test_a_failing_task_stops_the_export_unless_told(tmp_path):
    root, bad = broken_catalog(tmp_path / "cat")
    with pytest.raises(AuditError) as err:
        export_catalog(root, "openenv", tmp_path / "refused")
    assert f"task {bad}" in str(err.value) and "reference:" in str(err.value) and "--allow-failing" in str(err.value)
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    (pkg,) = export_catalog(root, "openenv", tmp_path / "shipped", allow_failing=True).paths
    audit = json.loads((pkg / "data" / "audit.json").read_text())
    assert audit["ok"] is False and audit["shipped_failing"] == [bad]
    assert audit["tasks"][bad]["checks"]["reference"]["ok"] is False
    assert f"| {bad} |" in (pkg / "README.md").read_text()


def test_an_initial_db_that_is_not_the_seed_rows_is_caught(tmp_path):
    root = build_catalog(tmp_path / "cat")
    (env_dir,) = (root / "envs").iterdir()
    with sqlite3.connect(env_dir / "initial.db") as conn:
        table = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                             "ORDER BY name").fetchone()[0]
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(f'DELETE FROM "{table}" WHERE rowid = (SELECT MAX(rowid) FROM "{table}")')
    with pytest.raises(AuditError, match="seed data: initial.db does not hold the seed rows of env.json"):
        export_catalog(root, "verl", tmp_path / "out")


def test_a_refusal_is_audited_against_its_own_gold(tmp_path):
    """A refusal (a write the policy forbids asked for alone, issue 40): its gold keeps the initial state and its
    reply says why, so the reference (ending with the rule's message) scores 1.0, doing nothing and the read-only
    member score the floor, and ``blind`` (the forbidden write done) is in the panel and fails."""
    from pipeline.export.audit import audit_task
    from tests.verify.test_tester_rules_bank import brewery_rule_bank

    env, tasks = brewery_rule_bank()
    refusal = next(t for t in tasks if t.metadata.get("shape") == "refuse_rule")
    allowed = next(t for t in tasks if t.metadata.get("rules") and t.metadata["shape"] not in
                   ("refuse_rule", "compound_rule", "exception"))
    write_env_dir(env, tmp_path / "envs" / env.env_id, tasks=[refusal, allowed], report={"source": "tests/export"})
    ce = load_catalog(tmp_path).envs[env.env_id]
    got = audit_task(ce, refusal, ce.path / "initial.db")
    checks = got["checks"]
    assert got["ok"], checks
    assert checks["do_nothing"]["reward"] == 0.0 and checks["reference"]["reward"] == 1.0
    assert checks["panel"]["members"][0] == "no_op" and "blind" in checks["panel"]["members"]
    other = audit_task(ce, allowed, ce.path / "initial.db")["checks"]  # its pair: doing nothing is the floor
    assert other["do_nothing"]["reward"] == 0.0 and other["panel"]["members"][0] == "no_op"
