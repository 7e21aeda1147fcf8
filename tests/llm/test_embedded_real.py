"""The real embedded model end to end: a structured reply, then the same from the cache; the server says how much of
each prompt it read (issue 42: ``pipeline.llm.serve.count_prompt_reads``)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field


class Colours(BaseModel):
    answer: int
    words: list[str] = Field(min_length=3, max_length=3)


@pytest.mark.real_llm
def test_real_model_structured_reply_and_cache(real_llm):
    msgs = [{"role": "system", "content": "Reply with JSON: answer (integer), words (three strings)."},
            {"role": "user", "content": "What is 17 + 25? Also name three colours."}]
    obj, reply = real_llm.structured_reply(Colours, msgs, stage="test", max_tokens=64)
    assert obj.answer == 42 and len(obj.words) == 3
    assert not reply.cached and reply.completion_tokens > 0
    obj2, reply2 = real_llm.structured_reply(Colours, msgs, stage="test", max_tokens=64)
    assert reply2.cached and obj2 == obj
    # the server says how much of each prompt it read; a request sharing the system prompt reads less than its whole
    assert reply.prompt_read is not None and 0 < reply.prompt_read <= reply.prompt_tokens
    assert reply2.prompt_read == reply.prompt_read  # the cache keeps it
    other = [msgs[0], {"role": "user", "content": "What is 20 + 22? Also name three fruits."}]
    _, reply3 = real_llm.structured_reply(Colours, other, stage="test", max_tokens=64)
    assert not reply3.cached and reply3.prompt_read is not None and reply3.prompt_read < reply3.prompt_tokens
    print(f"prompt tokens read: {reply.prompt_read} of {reply.prompt_tokens}, then {reply3.prompt_read} of "
          f"{reply3.prompt_tokens}")
