"""The real embedded model end to end: a structured reply, then the same from the cache."""

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
