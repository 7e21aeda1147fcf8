"""The generated server.py over real HTTP on loopback: routes, status codes, persistence, hostile input."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3

import pytest

from pipeline.envdir import write_env_dir
from pipeline.runtime.schemas import tool_schemas
from tests.fixtures.library import library_env, library_tasks
from tests.fixtures.server import http, running_server

ENV = library_env()
SCHEMAS = tool_schemas(ENV)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("http")
    env_dir = write_env_dir(ENV, root / "library", library_tasks(ENV))
    db = root / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db) as base:
        yield base, db


@pytest.fixture
def base(served):
    url, _ = served
    assert http("POST", url + "/reset") == (200, {"ok": True})
    return url


def rows(db, sql):
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def test_health_and_tool_list(base):
    assert http("GET", base + "/health") == (200, {"ok": True, "env_id": ENV.env_id, "tools": len(ENV.tools), "sessions": 0})
    status, tools = http("GET", base + "/tools")
    assert status == 200
    assert [t["name"] for t in tools] == [t.name for t in ENV.tools]
    for listed, tool in zip(tools, ENV.tools, strict=True):
        assert listed["input_schema"] == SCHEMAS[tool.name]
        assert (listed["description"], listed["kind"]) == (tool.description, tool.kind)


def test_openapi_has_a_request_schema_per_tool(base):
    status, spec = http("GET", base + "/openapi.json")
    assert status == 200 and spec["info"]["title"] == ENV.scenario.name
    for tool in ENV.tools:
        op = spec["paths"][f"/tools/{tool.name}"]["post"]
        assert op["operationId"] == tool.name
        assert op["requestBody"]["content"]["application/json"]["schema"] == SCHEMAS[tool.name]
        assert set(op["responses"]) == {"200", "400", "401", "403", "413", "415", "422", "429", "503"}
        assert [p["name"] for p in op["parameters"]] == ["X-Session-Id"]
        ok = op["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["required"] == ["ok", "result"]
        error = op["responses"]["400"]["content"]["application/json"]["schema"]
        assert error["required"] == ["ok", "error", "parameter", "kind"]
    assert "/tools/{name}" not in spec["paths"]


def test_status_codes(base):
    ok = http("POST", base + "/tools/get_book", {"book_id": 2})
    assert ok[0] == 200 and ok[1]["ok"] is True and ok[1]["result"]["title"] == "A Brief History of Time"
    invalid = http("POST", base + "/tools/get_book", {"book_id": "2"})
    assert invalid[0] == 422 and invalid[1]["parameter"] == "book_id" and invalid[1]["kind"] == "validation"
    missing = http("POST", base + "/tools/get_book", {})
    assert missing[0] == 422 and missing[1]["parameter"] == "book_id"
    guard = http("POST", base + "/tools/borrow_book", {"member_id": 1, "book_id": 3})
    assert guard == (400, {"ok": False, "error": "book 3 is already on loan", "parameter": None, "kind": "guard"})
    not_found = http("POST", base + "/tools/return_book", {"book_id": 2})
    assert not_found[0] == 400 and not_found[1]["kind"] == "not_found"
    constraint = http("POST", base + "/tools/update_member_email", {"member_id": 1, "email": "bob@example.org"})
    assert constraint[0] == 400 and "UNIQUE constraint failed" in constraint[1]["error"]
    unknown = http("POST", base + "/tools/launch_rocket", {})
    assert unknown[0] == 404 and "unknown tool 'launch_rocket'" in unknown[1]["error"]
    assert http("GET", base + "/tools/get_book")[0] == 405


def test_writes_are_committed_to_the_db_file_and_reset_restores_it(served, base):
    _, db = served
    out = http("POST", base + "/tools/borrow_book", {"member_id": 4, "book_id": 2, "days": 7})
    assert out[0] == 200 and out[1]["result"]["due_date"] == "2026-01-22"
    assert rows(db, "SELECT member_id, book_id FROM loans WHERE id = 5") == [(4, 2)]
    failed = http("POST", base + "/tools/delete_member", {"member_id": 3})
    assert failed[0] == 400 and rows(db, "SELECT COUNT(*) FROM members") == [(4,)]
    assert http("POST", base + "/reset") == (200, {"ok": True})
    assert rows(db, "SELECT COUNT(*) FROM loans") == [(4,)]
    assert http("POST", base + "/tools/borrow_book", {"member_id": 4, "book_id": 2})[1]["result"]["id"] == 5


def test_unicode_round_trips(base):
    name = "Zoë Łukasz 日本語 🎉 مرحبا"
    out = http("POST", base + "/tools/update_member_email", {"member_id": 2, "email": name})
    assert out[0] == 200 and out[1]["result"]["email"] == name
    assert http("POST", base + "/tools/find_member_by_name", {"name": "Bob"})[1]["result"][0]["email"] == name


HOSTILE = [
    ("get_book", b"not json"),
    ("get_book", b"{"),
    ("get_book", b"[1, 2]"),
    ("get_book", b'"a string"'),
    ("get_book", b"null"),
    ("get_book", b"42"),
    ("get_book", b"true"),
    ("get_book", b'{"book_id": 1e999}'),
    ("get_book", b'{"book_id": NaN}'),
    ("get_book", b'{"book_id": -Infinity}'),
    ("get_book", b'{"book_id": ' + b"9" * 5000 + b"}"),
    ("get_book", b'{"book_id": 99999999999999999999999999}'),
    ("get_book", b"[" * 100_000),
    ("get_book", b'{"book_id": {"$gt": 0}}'),
    ("get_book", b'{"book_id": [1]}'),
    ("get_book", b'{"book_id": 1, "book_id": "x"}'),
    ("get_book", b'{"__bogus__": [1, {"a": null}]}'),
    ("get_book", b'{"\\ud800": 1}'),
    ("get_book", b"\xff\xfe\x00garbage"),
    ("search_books", b'{"query": "\\ud800"}'),
    ("search_books", b'{"query": "\\u0000; DROP TABLE books; --"}'),
    ("search_books", b'{"query": "%", "limit": -5}'),
    ("add_book", b'{"title": "t", "author": "a", "genre": "fiction", "year": 9223372036854775807, "replacement_cost": 1}'),
    ("borrow_book", b'{"member_id": 1e308, "book_id": 2}'),
    ("launch_rocket", b"{}"),
    ("..%2F..%2Freset", b"{}"),
    ("%F0%9F%8E%89", b"{}"),
    ("get_book", b"{" + b'"k": 1, ' * 20000 + b'"book_id": 1}'),
]


@pytest.mark.parametrize(("tool", "raw"), HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_requests_never_get_a_5xx(base, tool, raw):
    status, body = http("POST", f"{base}/tools/{tool}", raw=raw)
    assert status < 500, (status, body)
    assert status in (200, 400, 404, 422), (status, body)
    assert isinstance(body, dict) and "Traceback" not in str(body)
    if status != 200:
        assert body["ok"] is False and body["error"]
    assert rows_count_ok(base)


def rows_count_ok(base) -> bool:
    status, body = http("GET", base + "/health")
    return status == 200 and body["ok"] is True


def test_oversized_body_is_413_before_it_is_read(base):
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /tools/search_books HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000000\r\nConnection: close\r\n\r\n{")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert json.loads(body)["kind"] == "validation"


def test_non_json_content_type_and_empty_body(base):
    status, body = http("POST", base + "/tools/get_book", raw=b'{"book_id": 1}', headers={"Content-Type": "text/plain"})
    assert status == 415 and body["kind"] == "validation" and "application/json" in body["error"]
    status, body = http("POST", base + "/tools/get_book", raw=b'{"book_id": 1}', headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 200 and body["result"]["id"] == 1
    status, body = http("POST", base + "/tools/get_book", raw=b"")
    assert status == 422 and body["parameter"] == "book_id"


@pytest.mark.parametrize(
    ("raw", "headers"),
    [
        (b"garbage", {"Accept": "application/json, text/event-stream"}),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_book"}}', {"Accept": "application/json, text/event-stream"}),
        (b"[]", {}),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": null}', {"Accept": "application/json, text/event-stream"}),
    ],
)
def test_hostile_mcp_requests_never_get_a_5xx(base, raw, headers):
    status, _ = http("POST", base + "/mcp", raw=raw, headers=headers)
    assert status < 500
