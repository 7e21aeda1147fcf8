"""What the stages call on an LLM client: :class:`LLMClientProtocol`.

:class:`~pipeline.llm.client.LLMClient` is one; so are the same client with other sampling settings
(``pipeline.llm.sampling.sampled``, ``Escalating``) and the scripted fakes of the tests. A stage's ``client``
parameter is typed with it, so mypy checks what the stages ask of a client (nothing else changes at run time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from pipeline.config import LLMSettings
from pipeline.llm.replies import Reply, Usage

T = TypeVar("T", bound=BaseModel)
X = TypeVar("X")
R = TypeVar("R")


class LLMClientProtocol(Protocol):
    """Structured replies (validated, retried with the validation error fed back, cached), and the means to
    overlap requests: see :class:`~pipeline.llm.client.LLMClient` for what each member does."""

    @property
    def settings(self) -> LLMSettings: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def parallelism(self) -> int: ...

    def map(self, fn: Callable[[X], R], items: Iterable[X], *, max_workers: int | None = None) -> list[R]: ...

    def structured(self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str,
                   max_tokens: int = 1024) -> T: ...

    def structured_reply(self, response_model: type[T], messages: list[dict[str, Any]], *, stage: str,
                         max_tokens: int = 1024) -> tuple[T, Reply]: ...

    def prefetch(self, calls: Iterable[Callable[[], Any]]) -> None: ...
