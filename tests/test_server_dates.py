"""A generated server.py on a tiny schema with ISO-dated columns (issue 40/42), over real HTTP on loopback and
through the real mcp SDK client: a parameter bound to a date column says its format in the schema it serves,
and "January 15, 2026" is a 422 (an MCP tool error) naming the tool, the parameter and the form, never a 5xx
nor a silent empty result; "2026-01-15" is accepted."""

from __future__ import annotations

import asyncio
import shutil

import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from pipeline.envdir import write_env_dir
from tests.fixtures.server import http, running_server
from tests.fixtures.visits import visits_env

PROSE = "January 15, 2026"
FORM_ERROR = ("argument 'visit_date' of tool 'find_visits_on': expected a date written YYYY-MM-DD, "
              'got "January 15, 2026"')


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("dates")
    env_dir = write_env_dir(visits_env(), root / "visits")
    db = root / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db) as url:
        yield url


def test_http_refuses_a_prose_date_naming_the_parameter_and_accepts_iso(base):
    status, body = http("POST", base + "/tools/find_visits_on", {"visit_date": PROSE})
    assert status == 422, body
    assert body == {"ok": False, "error": FORM_ERROR, "parameter": "visit_date", "kind": "validation"}
    status, body = http("POST", base + "/tools/book_visit", {"guest": "Dee", "visit_date": "banana"})
    assert status == 422 and body["parameter"] == "visit_date" and "YYYY-MM-DD" in body["error"]
    status, body = http("POST", base + "/tools/find_visits_on", {"visit_date": "2026-01-15"})
    assert status == 200 and [r["id"] for r in body["result"]] == [1]
    status, tools = http("GET", base + "/tools")
    served = {t["name"]: t["input_schema"] for t in tools}
    assert served["find_visits_on"]["properties"]["visit_date"]["format"] == "date"
    assert served["find_visits_on"]["properties"]["visit_date"]["description"].endswith("YYYY-MM-DD, e.g. 2026-01-15)")


def test_mcp_lists_the_format_and_answers_a_prose_date_with_a_tool_error(base):
    async def work():
        async with streamable_http_client(base + "/mcp") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = {t.name: t.input_schema for t in (await session.list_tools()).tools}
                return (listed, await session.call_tool("find_visits_on", {"visit_date": PROSE}),
                        await session.call_tool("find_visits_on", {"visit_date": "2026-01-15"}))

    listed, refused, found = asyncio.run(asyncio.wait_for(work(), timeout=60))
    assert listed["find_visits_on"]["properties"]["visit_date"]["format"] == "date"
    assert refused.is_error and refused.content[0].text == FORM_ERROR
    assert refused.structured_content["parameter"] == "visit_date"
    assert not found.is_error and [r["id"] for r in found.structured_content["result"]] == [1]
