"""``envfoundry browse`` through its ASGI app: pages, filters, replays, loopback guard, live reload."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pipeline.report.browse import create_app, loopback_request
from tests.report.catalog_factory import XSS, clinic_env
from tests.report.conftest import tree_digest


@pytest.fixture(scope="module")
def client(rich_catalog: Path) -> TestClient:
    return TestClient(create_app(rich_catalog, embed=False), base_url="http://127.0.0.1:8765")


def test_pages_answer(client: TestClient, rich_catalog: Path) -> None:
    env_id = clinic_env().env_id
    home = client.get("/")
    assert home.status_code == 200 and "Clinic Appointment Desk" in home.text and f'href="/env/{env_id}"' in home.text
    env = client.get(f"/env/{env_id}")
    assert env.status_code == 200
    assert 'class="schema"' in env.text and 'data-table="appointments"' in env.text
    assert env.text.count('class="fk"') == 2  # appointments -> patients, appointments -> doctors
    assert "INSERT INTO appointments" in env.text and "binds <code>p</code>" in env.text
    assert client.get("/report").status_code == 200
    assert client.get("/health").json()["tasks"] == 7


def test_missing_things_are_404_pages(client: TestClient) -> None:
    r = client.get("/task/t_nope")
    assert r.status_code == 404 and "no task &#39;t_nope&#39;" in r.text
    assert client.get("/env/nope").status_code == 404


@pytest.mark.parametrize(("query", "expected"), [
    ("", 7),
    ("?kind=lookup", 3),
    ("?tier=2", 1),
    ("?tier=none", 4),
    ("?q=ana+ruiz", 1),
    ("?q=CARDIOLOGY", 1),
    ("?kind=create&q=animal", 1),
])
def test_task_filters(client: TestClient, query: str, expected: int) -> None:
    assert len(client.get(f"/api/tasks{query}").json()) == expected
    page = client.get(f"/tasks{query}")
    assert page.status_code == 200 and page.text.count('<tr data-text="') == expected


def test_filter_by_environment(client: TestClient) -> None:
    env_id = clinic_env().env_id
    found = client.get("/api/tasks", params={"env": env_id}).json()
    assert {t["task_id"] for t in found} == {"t_clinic_lookup", "t_clinic_book", "t_clinic_rebook"}


def test_task_page_replays_the_reference_with_the_state_change_of_each_call(client: TestClient) -> None:
    page = client.get("/task/t_clinic_rebook").text
    # call 1 inserts appointment 2, call 2 (its id taken from call 1's result) cancels it
    assert "call 1" in page and "call 2" in page
    assert '<li class="change-insert"><b>insert</b> <code>appointments</code> [2]' in page
    assert '<li class="change-update"><b>update</b> <code>appointments</code> [2]: status: booked → cancelled' in page
    assert "holds" in page and "tier 3" in page and 'badge goal' in page


def test_task_page_shows_trajectories_with_verdicts(client: TestClient) -> None:
    page = client.get("/task/t_clinic_lookup").text
    assert "Tester trajectories (1)" in page and "CHECKER-VERDICT-MARK" in page
    assert "blame: agent" in page and "Wilson interval [0.05, 0.70]" in page and "hard pool" in page
    assert "1 (number)" in page and "badge gate" in page


def test_llm_text_is_escaped_in_pages(client: TestClient) -> None:
    for url in ("/tasks", "/task/t_clinic_book", "/"):
        text = client.get(url).text
        assert XSS not in text
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/task/t_clinic_book").text


def test_foreign_hosts_and_origins_are_refused(client: TestClient) -> None:
    assert client.get("/", headers={"host": "evil.example:8765"}).status_code == 403
    assert client.get("/", headers={"origin": "http://evil.example"}).status_code == 403
    assert client.get("/", headers={"host": "localhost:8765", "origin": "http://localhost:3000"}).status_code == 200
    assert client.get("/", headers={"host": "[::1]:8765"}).status_code == 200


@pytest.mark.parametrize(("host", "origin", "ok"), [
    ("127.0.0.1:80", None, True), ("localhost", None, True), ("[::1]:9", "http://[::1]:9", True),
    ("127.0.0.1.evil.com", None, False), ("evil.com", None, False), (None, None, False),
    ("127.0.0.1:8", "null", False), ("127.0.0.1:8", "http://127.0.0.1.nip.io", False),
    ("127.0.0.1:8", "https://localhost:1", True),
])
def test_loopback_request(host: str | None, origin: str | None, ok: bool) -> None:
    assert loopback_request(host, origin) is ok


def test_browsing_writes_nothing_and_sees_new_results(rich_catalog: Path, tmp_path: Path) -> None:
    root = tmp_path / "live"
    shutil.copytree(rich_catalog, root)
    before = tree_digest(root)
    c = TestClient(create_app(root, embed=False), base_url="http://127.0.0.1:8765")
    for url in ("/", "/tasks", "/task/t_clinic_rebook", f"/env/{clinic_env().env_id}"):
        assert c.get(url).status_code == 200
    assert tree_digest(root) == before
    # a verify run rewrites tasks.jsonl: the next request shows it
    tasks_file = root / "envs" / clinic_env().env_id / "tasks.jsonl"
    lines = tasks_file.read_text(encoding="utf-8").splitlines()
    extra = json.loads(lines[0]) | {"task_id": "t_clinic_new", "instruction": "A freshly verified task"}
    tasks_file.write_text("\n".join([*lines, json.dumps(extra)]) + "\n", encoding="utf-8")
    assert "A freshly verified task" in c.get("/tasks").text
