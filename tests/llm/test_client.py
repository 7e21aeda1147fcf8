"""The LLM client against a scripted fake transport: parsing, validation feedback, retries, cache, accounting."""

from __future__ import annotations

import httpx
import pytest
from pydantic import BaseModel, Field

from pipeline.llm import CacheError, LLMError, ResponseCache, fake_client


class Pair(BaseModel):
    name: str
    count: int = Field(ge=0)


MSGS = [{"role": "system", "content": "Reply in JSON."}, {"role": "user", "content": "one pair please"}]


def test_structured_reply_is_parsed_and_schema_sent():
    client = fake_client([{"name": "a", "count": 2}])
    assert client.structured(Pair, MSGS, stage="s") == Pair(name="a", count=2)
    fmt = client.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["count"]["minimum"] == 0
    assert client.bodies[0]["temperature"] == 0.0 and client.bodies[0]["seed"] == 0


def test_validation_error_is_fed_back_and_fixed():
    client = fake_client(['{"name": "a", "count": -1}', {"name": "a", "count": 1}])
    assert client.structured(Pair, MSGS, stage="s").count == 1
    retry = client.requests[1]
    assert retry[:2] == MSGS
    assert retry[2] == {"role": "assistant", "content": '{"name": "a", "count": -1}'}
    assert "count" in retry[3]["content"] and "greater than or equal to 0" in retry[3]["content"]


def test_gives_up_after_validation_retries():
    client = fake_client(["not json", "{}", '{"name": 3}'], validation_retries=2)
    with pytest.raises(LLMError, match="no valid Pair after 3 tries"):
        client.structured(Pair, MSGS, stage="s")
    assert len(client.requests) == 3


def test_cache_serves_second_call_and_key_ignores_retries(tmp_path):
    path = tmp_path / "c.sqlite"
    client = fake_client([{"name": "a", "count": 1}], cache_path=path)
    r1 = client.structured_reply(Pair, MSGS, stage="s")[1]
    assert not r1.cached
    # a new client with other retry/timeout settings and no scripted replies: answered from the cache
    client2 = fake_client([], cache_path=path, max_retries=0, validation_retries=5)
    obj, r2 = client2.structured_reply(Pair, MSGS, stage="s")
    assert r2.cached and obj.count == 1 and client2.requests == []
    assert client2.usage.by_stage()["s"]["cached"] == 1
    # a different message is a different key
    client3 = fake_client([{"name": "b", "count": 2}], cache_path=path)
    assert client3.structured(Pair, MSGS + [{"role": "user", "content": "again"}], stage="s").name == "b"


def test_errors_are_recorded_apart_and_never_served(tmp_path):
    path = tmp_path / "c.sqlite"
    client = fake_client([httpx.Response(400, json={"error": {"message": "bad request"}})], cache_path=path)
    with pytest.raises(LLMError, match="HTTP 400"):
        client.structured(Pair, MSGS, stage="s")
    cache = ResponseCache(path)
    assert len(cache) == 0
    client2 = fake_client([{"name": "ok", "count": 0}], cache_path=path)
    assert client2.structured(Pair, MSGS, stage="s").name == "ok"
    assert len(ResponseCache(path)) == 1


def test_transport_retries_on_429_then_succeeds():
    busy = httpx.Response(429, headers={"retry-after-ms": "1"}, json={"error": {"message": "slow down"}})
    client = fake_client([busy, {"name": "a", "count": 1}], max_retries=2)
    assert client.structured(Pair, MSGS, stage="s").name == "a"
    assert len(client.requests) == 2


def test_persistent_5xx_gives_one_line_error():
    err = httpx.Response(503, headers={"retry-after-ms": "1"}, json={"error": {"message": "overloaded"}})
    client = fake_client([err, err, err], max_retries=2)
    with pytest.raises(LLMError, match="HTTP 503") as e:
        client.chat(MSGS, stage="s")
    assert "\n" not in str(e.value)


def test_timeout_is_reported():
    client = fake_client([httpx.ReadTimeout("slow")], max_retries=0)
    with pytest.raises(LLMError, match="timed out"):
        client.chat(MSGS, stage="s")


def test_garbage_body_is_reported():
    client = fake_client([httpx.Response(200, text="<html>oops</html>")], max_retries=0)
    with pytest.raises(LLMError, match="malformed|no text"):
        client.chat(MSGS, stage="s")


def test_corrupt_cache_file_is_refused_with_advice(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(CacheError, match="unusable.*delete it"):
        fake_client([], cache_path=path)
    assert path.read_bytes().startswith(b"this is not")  # nothing of the user's was destroyed


def test_usage_is_accounted_per_stage():
    client = fake_client([{"name": "a", "count": 1}, "hello", "world"])
    client.structured(Pair, MSGS, stage="schema")
    client.chat(MSGS, stage="tester")
    client.chat(MSGS + [{"role": "user", "content": "x"}], stage="tester")
    by = client.usage.by_stage()
    assert by["schema"]["calls"] == 1 and by["tester"]["calls"] == 2
    assert client.usage.total()["calls"] == 3 and client.usage.total()["completion_tokens"] > 0


def test_refs_are_inlined_for_nested_models():
    class Outer(BaseModel):
        pairs: list[Pair] = Field(min_length=1, max_length=2)

    client = fake_client([{"pairs": [{"name": "a", "count": 1}]}])
    client.structured(Outer, MSGS, stage="s")
    schema = client.bodies[0]["response_format"]["json_schema"]["schema"]
    assert "$defs" not in schema and schema["properties"]["pairs"]["items"]["properties"]["count"]["type"] == "integer"
    assert schema["properties"]["pairs"]["minItems"] == 1


def test_a_field_named_title_survives_schema_cleaning():
    class Book(BaseModel):
        title: str
        pages: int

    client = fake_client([{"title": "Emma", "pages": 3}])
    assert client.structured(Book, MSGS, stage="s").title == "Emma"
    schema = client.bodies[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"title", "pages"} and "title" not in schema


def test_prompt_tokens_read_are_recorded_beside_prompt_tokens(tmp_path):
    """Issue 42: an endpoint that says how much of a prompt its prefix cache served (llama.cpp's ``timings``, which
    the embedded server reports too; OpenAI's ``cached_tokens``) has the tokens it read recorded, in the cache too;
    one that does not say leaves the ledger as it was."""
    import httpx

    from pipeline.llm.client import completion_json

    path = tmp_path / "c.sqlite"
    llama = httpx.Response(200, json={**completion_json('{"name": "a", "count": 1}', prompt_tokens=900),
                                      "timings": {"prompt_n": 120, "cache_n": 780}})
    body = completion_json('{"name": "b", "count": 2}', prompt_tokens=500)
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 448}
    client = fake_client([llama, httpx.Response(200, json=body), {"name": "c", "count": 3}], cache_path=path)
    first = client.structured_reply(Pair, MSGS, stage="s")[1]
    second = client.structured_reply(Pair, [*MSGS, {"role": "user", "content": "again"}], stage="s")[1]
    third = client.structured_reply(Pair, [*MSGS, {"role": "user", "content": "once more"}], stage="t")[1]
    assert (first.prompt_tokens, first.prompt_read) == (900, 120)
    assert (second.prompt_tokens, second.prompt_read) == (500, 52)
    assert third.prompt_read is None
    usage = client.usage.by_stage()
    assert usage["s"]["prompt_read"] == 172 and usage["s"]["prompt_tokens"] == 1400
    assert usage["t"]["prompt_read"] == usage["t"]["prompt_tokens"]  # not said: counted as read whole
    assert client.usage.total()["prompt_read"] == 172 + usage["t"]["prompt_tokens"]
    replay = fake_client([], cache_path=path)  # the cache keeps what was read when the reply was made
    hit = replay.structured_reply(Pair, MSGS, stage="s")[1]
    assert hit.cached and hit.prompt_read == 120
    quiet = fake_client([{"name": "a", "count": 1}])
    quiet.structured(Pair, MSGS, stage="s")
    assert "prompt_read" not in quiet.usage.by_stage()["s"] and "prompt_read" not in quiet.usage.total()
