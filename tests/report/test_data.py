"""The catalog loader shared by the report and the browser."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from pipeline.catalog import CatalogError
from pipeline.report.data import load_catalog, normalize_task, reason_class
from tests.report.catalog_factory import CLINIC, DUPLICATE, UNSUITABLE, XSS
from tests.report.conftest import tree_digest


def test_example_catalog_loads_as_committed(example: Path) -> None:
    before = tree_digest(example)
    data = load_catalog(example)
    assert data["catalog"] == {"name": "quickstart", "fingerprint": "9f90eea6f51094e9"}
    assert data["problems"] == []
    assert [e["name"] for e in data["environments"]] == ["Book Lending System"]
    env = data["environments"][0]
    assert [t["name"] for t in env["detail"]["tables"]] == ["books", "members", "loans", "renewals", "overdue_fines"]
    loans = next(t for t in env["detail"]["tables"] if t["name"] == "loans")
    assert {(fk["column"], fk["table"]) for fk in loans["foreign_keys"]} == {("book_id", "books"), ("member_id", "members")}
    assert loans["rows"] == 12
    assert len(data["tasks"]) == 4 and {t["kind"] for t in data["tasks"]} == {"lookup", "create", "update"}
    assert sorted(r["stage"] for r in data["rejections"]) == ["tasks", "tasks", "tools"]
    assert data["usage"]["tester"]["calls"] == 20 and data["usage"]["tools"]["prompt_tokens"] == 13641
    assert len(env["detail"]["trajectories"]["t_0afbc0c550e92637"]) == 2
    assert data["dedup"]["meta"]["count"] == 1
    assert tree_digest(example) == before  # read-only: not a byte changed, no file added


def test_extended_task_fields_are_read_when_present(rich_catalog: Path) -> None:
    data = load_catalog(rich_catalog)
    tasks = {t["task_id"]: t for t in data["tasks"]}
    look = tasks["t_clinic_lookup"]
    assert (look["tier"], look["steps"], look["pass_rate"], look["wilson"], look["hard_pool"]) == (1, 1, 0.25, [0.05, 0.7], True)
    assert look["answer"] == {"type": "number", "value": 1, "tolerance": 0}
    assert look["answer_text"] == "1 (number)"
    assert look["assertions"][0]["role"] == "gate"
    assert tasks["t_clinic_book"]["instruction"].endswith(XSS)
    rebook = tasks["t_clinic_rebook"]
    assert (rebook["tier"], rebook["steps"], rebook["pass_rate"], rebook["attempts"]) == (3, 2, None, 0)
    old = tasks["t_0afbc0c550e92637"]  # today's format: no tier, no interval, a plain answer
    assert (old["tier"], old["wilson"], old["hard_pool"], old["answer_text"], old["pass_rate"]) == (None, None, None, "1813", 1.0)


def test_rejected_scenarios_carry_their_status_and_match(rich_catalog: Path) -> None:
    data = load_catalog(rich_catalog)
    by_name = {s["name"]: s for s in data["scenarios"]}
    assert by_name[CLINIC.name]["status"] == "kept"
    assert by_name[DUPLICATE.name]["status"] == "duplicate"
    assert by_name[DUPLICATE.name]["duplicate_of"]["name"] == "Book Lending System"
    assert by_name[DUPLICATE.name]["similarity"] == 0.812
    assert by_name[UNSUITABLE.name]["status"] == "unsuitable"
    assert by_name[UNSUITABLE.name]["seed"] == "Weather oracle"
    assert data["usage"]["tasks"]["calls"] == 12 + 5  # summed over both runs
    statuses = {e["name"]: (e["status"], e["detail"] is not None) for e in data["environments"]}
    assert statuses["Library Acquisitions"] == ("rejected", False)


def test_damaged_files_become_problems_not_crashes(rich_catalog: Path, tmp_path: Path) -> None:
    root = tmp_path / "damaged"
    shutil.copytree(rich_catalog, root)
    env_dirs = sorted((root / "envs").iterdir())
    with open(env_dirs[0] / "tasks.jsonl", "a", encoding="utf-8") as f:
        f.write("{not json\n")
    (env_dirs[0] / "report.json").write_text("[", encoding="utf-8")
    shutil.rmtree(env_dirs[1])
    data = load_catalog(root)
    text = "\n".join(data["problems"])
    assert f"{env_dirs[0] / 'tasks.jsonl'}:" in text and "not valid JSON" in text
    assert "report.json" in text
    assert f"directory envs/{env_dirs[1].name} is missing" in text
    assert len(data["tasks"]) >= 3  # the readable lines still load


def test_a_directory_without_catalog_db_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="is not a catalog"):
        load_catalog(tmp_path)


def test_normalize_task_survives_a_bare_record() -> None:
    t = normalize_task({})
    assert (t["task_id"], t["kind"], t["steps"], t["pass_rate"], t["assertions"], t["answer_text"]) == ("", "unknown", 0, None, [], None)
    t = normalize_task({"difficulty": {"attempts": 3, "passes": 1, "wilson": {"low": 0.1, "high": 0.8}},
                        "verifier": {"answer": {"type": "list", "value": ["a", "b"]}}, "metadata": {"tier": 2.0}})
    assert (t["tier"], t["wilson"], t["answer_text"]) == (2, [0.1, 0.8], '["a", "b"] (list)')
    assert t["pass_rate"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("reason", "evidence", "stage", "expected"), [
    ("near duplicate of 'X' (cosine 0.9 >= 0.6)", {"kind": "duplicate"}, "dedup", "duplicate"),
    ("- tool 'place_hold' step 3 (write): no such table: holds", {"kind": "write"}, "tools",
     "tool … step N (write): no such table"),
    ("replaying the calls failed: call 1 add_book(title='A') failed", {}, "tasks", "replaying the calls failed"),
    ("the request mentions loan_id 7 as an id; users do not know ids", {}, "tasks", "the request mentions loan_id N as an id"),
    ("", {}, "tasks", "(no reason)"),
])
def test_reason_class(reason: str, evidence: dict, stage: str, expected: str) -> None:
    assert reason_class(reason, evidence, stage) == expected


def test_a_database_with_tables_missing_is_a_problem_and_an_empty_one_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "catalog.db") as con:  # a run killed after its first tables
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    con.close()
    before = tree_digest(tmp_path)
    data = load_catalog(tmp_path)
    assert data["problems"] == [f"{tmp_path / 'catalog.db'}: missing tables "
                                "['runs', 'seeds', 'scenarios', 'rejections', 'environments', 'tasks']"]
    assert data["environments"] == [] and tree_digest(tmp_path) == before  # read-only: no table created
    (tmp_path / "catalog.db").write_bytes(b"")
    with pytest.raises(CatalogError, match="empty file"):
        load_catalog(tmp_path)
