"""Canonical JSON and content hashes: the one way envfoundry derives ids and cache keys."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` to canonical JSON: sorted keys, no insignificant whitespace, UTF-8 kept."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def content_hash(obj: Any, length: int = 16) -> str:
    """Hex sha256 of the canonical JSON of ``obj``, truncated to ``length`` characters."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]
