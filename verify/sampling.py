"""Per-request sampling settings: moved to :mod:`pipeline.llm.sampling` (the build stages use them too)."""

from pipeline.llm.sampling import Escalating, sampled

__all__ = ["Escalating", "sampled"]
