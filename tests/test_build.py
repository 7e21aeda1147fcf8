"""build_environment end to end on scripted replies, and the ``envfoundry build`` command over real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.build import BuildSettings, build_environment
from pipeline.cli import main
from pipeline.envdir import load_env_dir
from pipeline.llm import fake_client
from pipeline.llm.client import completion_json, encode_reply
from pipeline.runtime import EnvInstance
from tests.stages.library_replies import MEMBER_ROWS, SCENARIO, SCHEMA, all_replies, small_settings
from tests.stages.test_rowgen import BOOK_PAIRS, BOOKS_GEN, LOANS_GEN, LOANS_TENSE, MEMBERS_GEN, TITLE_LISTS

BROKEN = {"tables": [{"name": "members", "ddl": "CREATE TABLE members (member_id INTEGER PRIMARY KEY DEFAULT) STRICT", "natural_key": ["email"]},
                    *SCHEMA["tables"][1:]]}


def build_replies() -> list[Any]:
    """Every reply of a build with ``small_settings()`` and the default switches: each table's example rows are
    followed by its generator choice (``row_generators``), the books' titles, authors and copies, then titles and
    authors, by rows continued together that add nothing, then the titles by the list continued from the examples (issue 40); the tools the LLM misses
    are written by code."""
    intents, schema, members, books, loans, *tools = all_replies()
    return [intents, schema, members, MEMBERS_GEN, books, BOOKS_GEN, *BOOK_MATES, *BOOK_PAIRS, *TITLE_LISTS, loans,
            LOANS_GEN, *LOANS_TENSE, *tools]


BOOK_MATES = [{"rows": [{"title": "Emma", "author": "Jane Austen", "copies_available": "2"}]}] * 2
"""Rows continued with the copies a book has (its example values vary with the title: ``row_mates``), adding
nothing: two dry calls, then the titles with their authors alone, as before."""


ADDED = ["create_books", "update_loans_status", "update_books_copies_available", "list_loans_by_book_id",
         "list_members", "list_books", "list_loans", "find_books_by_title", "find_loans_by_member_id_and_loan_date"]


def test_build_produces_a_working_environment() -> None:
    client = fake_client(build_replies())
    res = build_environment(SCENARIO, client, small_settings())
    # nothing rejected: the records are what code fixed or added (parameter descriptions, paging, the creates,
    # updates, listers and finders the written tools lacked)
    assert res.ok and [r.reason.split(":")[0] for r in res.rejections] == [
        "a UNIQUE column's list holds 16 values", "members held to 48 of its 218 rows"] + ["names fixed by code"] * 3 + ["paged by code", "tool added by code (create)"] + \
        ["tool added by code (update)"] * 2 + ["tool added by code (lister)"] * 4 + ["tool added by code (finder)"] * 2
    env = res.env
    assert [t.name for t in env.tables] == ["members", "books", "loans"]
    # the LLM's four example rows first, then code's rows at scale (a plan per table records how)
    rows = {s.table: s.rows for s in env.seed}
    # (the example members' names and e-mail addresses are drawn again by their generators: issue 40)
    assert [r["status"] for r in rows["members"][:4]] == [r[2] for r in MEMBER_ROWS["rows"]]
    assert 4 < len(rows["loans"]) <= 1000
    assert len(rows["books"]) == 16  # titles are UNIQUE: as many books as the continued list holds
    # the members, drawn before (218), held to the spread entity_rows allows beside 16 books: 16 x 300/100
    assert len(rows["members"]) == 48
    assert all(s.plan is not None and s.plan.examples == 4 for s in env.seed)
    assert [t.name for t in env.tools] == ["find_member", "list_member_loans", "lend_book", "return_book", *ADDED]
    assert set(res.timings) == {"intents", "schema", "seed_data", "tools", "total"}
    assert set(res.usage) == {"intents", "schema", "seed_data", "tools"}
    # seed data: 3 tables x (rows + generators), 2 calls for titles with authors and copies, 2 for titles with
    # authors and 3 title continuations (each
    # list ends after two dry calls), and 2 on the side of the clock an open and a returned loan are dated on
    assert res.usage["seed_data"]["calls"] == 15 and res.usage["tools"]["calls"] == 5
    s = res.summary()
    assert s["ok"] and s["llm"]["calls"] == 22 and s["rows"]["loans"] == len(rows["loans"])
    with EnvInstance(env) as inst:
        bob = rows["members"][1]
        assert inst.call("find_member", {"email": bob["email"]})["result"]["name"] == bob["name"]
        page = inst.call("list_members", {"status": "active"})["result"]
        active = sum(r["status"] == "active" for r in rows["members"])
        assert len(page) == 20 and {r["total_matched"] for r in page} == {active}
        loans = inst.call("list_member_loans", {"member_id": 1, "limit": 50})["result"]
        assert [r["loan_id"] for r in loans] == [r["loan_id"] for r in rows["loans"]
                                                 if r["member_id"] == 1 and r["status"] == "open"]
        made = inst.call("update_loans_status", {"loan_id": 1, "status": "returned"})
        assert made["ok"] and made["result"]["status"] == "returned"


def test_same_replies_same_environment_bytes() -> None:
    a = build_environment(SCENARIO, fake_client(build_replies()), small_settings()).env
    b = build_environment(SCENARIO, fake_client(build_replies()), small_settings()).env
    assert a is not None and a.model_dump_json() == b.model_dump_json() and a.env_id == b.env_id


def test_a_stage_that_gives_up_rejects_the_build_with_reasons() -> None:
    replies = all_replies()[:1] + [BROKEN, {"ddl": BROKEN["tables"][0]["ddl"]}]
    res = build_environment(SCENARIO, fake_client(replies), small_settings(max_attempts=2))
    assert not res.ok and res.env is None
    assert [(r.stage, r.item) for r in res.rejections] == [("schema", "members"), ("schema", "loans"),
                                                            ("schema", SCENARIO.name)]
    assert res.rejections[0].reason == 'near ")": syntax error'
    assert "references table members, which does not exist" in res.rejections[1].reason
    assert res.rejections[2].reason == "only 1 valid tables, at least 2 needed"
    assert "tools" not in res.timings and res.usage["schema"]["calls"] == 2


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="tools_min"):
        BuildSettings(tools_min=9, tools_max=8)
    with pytest.raises(ValueError, match="extra"):
        BuildSettings(rows=3)  # type: ignore[call-arg]
    for name, field in BuildSettings.model_fields.items():
        assert field.description, f"BuildSettings.{name} has no docstring"


# ------------------------------------------------------------------ the CLI over a loopback endpoint


class _Handler(BaseHTTPRequestHandler):
    replies: list[Any]

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        item = self.server.replies.pop(0) if self.server.replies else "{}"  # type: ignore[attr-defined]
        body = json.dumps(completion_json(encode_reply(item))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)  # listening once constructed
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _cli(server: ThreadingHTTPServer, replies: list[Any], *args: str) -> Any:
    server.replies = list(replies)  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    return CliRunner().invoke(main, ["build", "--base-url", url, "--model", "scripted", "--no-cache", *args])


def test_cli_builds_and_writes_the_env_dir(endpoint: ThreadingHTTPServer, tmp_path: Path) -> None:
    config = tmp_path / "envfoundry.toml"
    config.write_text("[stages.build]\nrows_per_table = 4\nrows_per_call = 4\nintents_max = 6\ntools_min = 3\n")
    out = tmp_path / "library"
    res = _cli(endpoint, build_replies(), "--scenario", SCENARIO.description, "--name", SCENARIO.name,
               "--out", str(out), "--config", str(config))
    assert res.exit_code == 0, res.output
    env, tasks, report = load_env_dir(out)
    rows = {s.table: len(s.rows) for s in env.seed}
    assert f"tables:     3 (members {rows['members']}, books {rows['books']}, loans {rows['loans']} rows)" in res.output
    assert f"tools:      13 (find_member, list_member_loans, lend_book, return_book, {', '.join(ADDED)})" in res.output
    assert "22 calls" in res.output
    assert env.scenario.name == SCENARIO.name and len(env.tools) == 13 and tasks == []
    assert report["build"]["settings"]["rows_per_table"] == 4
    assert {p.name for p in out.iterdir()} >= {"env.json", "schema.sql", "initial.db", "server.py", "report.json"}


def test_cli_rejection_exits_1_with_reasons(endpoint: ThreadingHTTPServer, tmp_path: Path) -> None:
    replies = all_replies()[:1] + [BROKEN, {"ddl": BROKEN["tables"][0]["ddl"]}]
    res = _cli(endpoint, replies, "--scenario", SCENARIO.description, "--out", str(tmp_path / "x"),
               "--max-attempts", "2", "--json")
    assert res.exit_code == 1
    summary = json.loads(res.output)
    assert summary["ok"] is False and summary["rejections"][0]["reason"] == 'near ")": syntax error'
    assert not (tmp_path / "x").exists()


def test_cli_names_a_bad_settings_key(endpoint: ThreadingHTTPServer, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[stages.build]\nrows_per_tabel = 4\n")
    res = _cli(endpoint, [SCHEMA], "--scenario", "x", "--out", str(tmp_path / "y"), "--config", str(config))
    assert res.exit_code == 2 and "unknown key 'stages.build.rows_per_tabel'" in res.output
