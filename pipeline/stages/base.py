"""What every stage returns: its output (or None) plus the rejections it recorded, as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pipeline.ir import Rejection

T = TypeVar("T")


@dataclass(frozen=True)
class StageResult(Generic[T]):
    """``value`` is None when the stage gave up; ``rejections`` say why (stage, item, reason, evidence)."""

    value: T | None
    rejections: tuple[Rejection, ...] = field(default_factory=tuple)
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.value is not None
