"""The generated server.py over MCP streamable HTTP, driven by the real mcp SDK client."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pipeline.envdir import write_env_dir
from pipeline.runtime import EnvInstance
from pipeline.runtime.schemas import tool_schemas
from tests.fixtures.library import library_env
from tests.fixtures.server import http, running_server

ENV = library_env()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    env_dir = write_env_dir(ENV, root / "library")
    db = root / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db) as url:
        yield url


async def session_run(base: str, work):
    async with streamable_http_client(base + "/mcp") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)


def run(base: str, work):
    return asyncio.run(asyncio.wait_for(session_run(base, work), timeout=60))


def test_list_tools_has_the_same_input_schemas(base):
    async def work(session):
        return (await session.list_tools()).tools

    tools = run(base, work)
    assert [t.name for t in tools] == [t.name for t in ENV.tools]
    for listed, tool in zip(tools, ENV.tools, strict=True):
        assert listed.input_schema == tool_schemas(ENV)[tool.name]
        assert listed.description == tool.description
        assert listed.annotations.read_only_hint is (tool.kind == "read")


def test_call_tool_results_and_errors(base):
    http("POST", base + "/reset")

    async def work(session):
        return [
            await session.call_tool("get_book", {"book_id": 2}),
            await session.call_tool("borrow_book", {"member_id": 4, "book_id": 2, "days": 7}),
            await session.call_tool("borrow_book", {"member_id": 1, "book_id": 2}),
            await session.call_tool("get_book", {"book_id": "2"}),
            await session.call_tool("no_such_tool", {}),
            await session.call_tool("search_books", {"query": "Austen", "genre": "fiction"}),
        ]

    book, borrowed, guard, invalid, unknown, search = run(base, work)
    assert not book.is_error
    assert json.loads(book.content[0].text)["title"] == "A Brief History of Time"
    assert not borrowed.is_error and borrowed.structured_content["result"]["due_date"] == "2026-01-22"
    assert guard.is_error and guard.content[0].text == "book 2 is already on loan"
    assert invalid.is_error and "argument 'book_id'" in invalid.content[0].text
    assert invalid.structured_content["parameter"] == "book_id"
    assert unknown.is_error and "unknown tool 'no_such_tool'" in unknown.content[0].text
    assert [r["id"] for r in json.loads(search.content[0].text)] == [1, 5]


def test_an_mcp_session_has_its_own_database_and_matches_the_in_process_engine(base):
    http("POST", base + "/reset")
    inst = EnvInstance(ENV)
    calls = [("borrow_book", {"member_id": 4, "book_id": 6}), ("return_book", {"book_id": 4}),
             ("list_loans_for_member", {"member_id": 3}), ("return_book", {"book_id": 4})]

    async def session_and_id():
        async with streamable_http_client(base + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                results = [await session.call_tool(name, args) for name, args in calls]
                mine = await session.call_tool("list_loans_for_member", {"member_id": 4})
                shared = http("POST", base + "/tools/list_loans_for_member", {"member_id": 4})
                return results, mine, shared

    results, mine, shared = asyncio.run(asyncio.wait_for(session_and_id(), timeout=60))
    for (name, args), res in zip(calls, results, strict=True):
        expected = inst.call(name, args)
        if expected["ok"]:
            assert not res.is_error and res.structured_content == {"result": expected["result"]}, name
        else:
            assert res.is_error and res.structured_content == expected, name
    assert [row["book_id"] for row in mine.structured_content["result"]] == [6]
    assert shared == (200, {"ok": True, "result": []})  # the default session never saw the MCP session's loan
