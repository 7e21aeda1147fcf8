"""Domain seed files: parsing and checking.

A seed file is either

* plain text: one seed per line, ``name`` or ``name: description``; blank lines and lines starting
  with ``#`` are ignored (a ``#`` after text is kept: names like "C# course platform" exist); or
* JSONL (``.jsonl`` files, or any file whose first seed line starts with ``{``): one object per
  line with ``name`` and optional ``description``.

Every problem raises :class:`SeedFileError` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MAX_NAME = 120
_NAME_SPLIT_MAX = 80  # "name: description" only when the part before ':' is short enough to be a name


class SeedFileError(ValueError):
    """A seed file that cannot be used; the message names the file and line."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class Seed(BaseModel):
    """One domain seed, with where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str = ""
    source: str = Field(default="", description="path of the seed file")
    line: int = Field(default=0, description="1-based line number in the seed file")

    @property
    def text(self) -> str:
        """The seed as a single line (what the expansion prompt and the duplicate check see)."""
        return f"{self.name}: {self.description}" if self.description else self.name


def _read_text(path: Path) -> str:
    if not path.exists():
        raise SeedFileError(path, None, "seed file not found")
    if not path.is_file():
        raise SeedFileError(path, None, "not a regular file")
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise SeedFileError(path, data.count(b"\n", 0, nul) + 1, "binary content (NUL byte); a seed file is UTF-8 text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SeedFileError(path, data.count(b"\n", 0, e.start) + 1, f"not valid UTF-8 text ({e.reason} at byte {e.start})") from None
    return text.removeprefix("\ufeff")


def _clean(value: str) -> str:
    return " ".join(value.split())


def _seed(path: Path, lineno: int, name: str, description: str) -> Seed:
    name, description = _clean(name), _clean(description)
    if not name:
        raise SeedFileError(path, lineno, "empty seed name")
    if len(name) > MAX_NAME:
        raise SeedFileError(path, lineno, f"seed name is {len(name)} characters long (at most {MAX_NAME})")
    return Seed(name=name, description=description, source=str(path), line=lineno)


def _parse_text_line(path: Path, lineno: int, line: str) -> Seed:
    if line.startswith(("{", "[")):
        raise SeedFileError(path, lineno, "looks like JSON in a text seed file (JSONL files start with a JSON "
                            "object on their first seed line, or are named *.jsonl)")
    head, sep, tail = line.partition(":")
    if sep and not head.strip():
        raise SeedFileError(path, lineno, "empty seed name before ':' (write 'name: description')")
    if sep and head.strip() and len(head.strip()) <= _NAME_SPLIT_MAX:
        return _seed(path, lineno, head, tail)
    return _seed(path, lineno, line, "")


def _parse_json_line(path: Path, lineno: int, line: str) -> Seed:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise SeedFileError(path, lineno, f"malformed JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise SeedFileError(path, lineno, f"expected a JSON object with 'name', got {type(obj).__name__}")
    unknown = sorted(set(obj) - {"name", "description"})
    if unknown:
        raise SeedFileError(path, lineno, f"unknown key(s) {unknown} (allowed: 'name', 'description')")
    name, description = obj.get("name"), obj.get("description", "")
    if not isinstance(name, str):
        raise SeedFileError(path, lineno, "'name' is missing or not a string")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise SeedFileError(path, lineno, "'description' is not a string")
    return _seed(path, lineno, name, description)


def load_seeds(path: str | Path) -> list[Seed]:
    """Parse a seed file (text or JSONL). Raises :class:`SeedFileError` naming file and line."""
    path = Path(path)
    text = _read_text(path)
    lines = [(i, raw.strip()) for i, raw in enumerate(text.splitlines(), start=1)]
    content = [(i, s) for i, s in lines if s and not s.startswith("#")]
    if not content:
        raise SeedFileError(path, None, "no seeds (the file is empty or holds only comments)")
    is_jsonl = path.suffix.lower() == ".jsonl" or content[0][1].startswith("{")
    parse = _parse_json_line if is_jsonl else _parse_text_line
    return [parse(path, i, s) for i, s in content]


def load_many(paths: Sequence[str | Path]) -> list[Seed]:
    """Seeds of several files, in order."""
    return [s for p in paths for s in load_seeds(p)]


# ---------------------------------------------------------------- duplicate check


def normalise(text: str) -> str:
    """Case-, accent- and punctuation-insensitive form used for exact duplicate detection."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").casefold()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


@dataclass(frozen=True)
class SeedDuplicate:
    """``second`` repeats ``first`` (exact: same normalised name; near: cosine >= threshold)."""

    kind: str  # "exact" | "near"
    first: Seed
    second: Seed
    similarity: float

    def describe(self) -> str:
        return (
            f"{self.second.source}:{self.second.line}: {self.kind} duplicate of line {self.first.line} "
            f"({self.first.name!r} ~ {self.second.name!r}, cosine {self.similarity:.3f})"
        )


LINES_SHOWN = 20
"""Line numbers listed per group of exact duplicates (the rest are counted)."""


@dataclass(frozen=True)
class DuplicateGroup:
    """Seeds sharing one normalised name: ``seeds[0]`` is the first, the others repeat it."""

    key: str
    seeds: tuple[Seed, ...]

    @property
    def first(self) -> Seed:
        return self.seeds[0]

    @property
    def repeats(self) -> tuple[Seed, ...]:
        return self.seeds[1:]

    def describe(self, lines_shown: int = LINES_SHOWN) -> str:
        first, repeats = self.first, self.repeats
        head = f"{repeats[0].source}:{repeats[0].line}: exact duplicate of line {first.line} ({first.name!r})"
        if len(repeats) == 1:
            return head
        shown = ", ".join(str(s.line) for s in repeats[:lines_shown])
        more = len(repeats) - lines_shown
        return f"{head}; {len(repeats):,} repeats on lines {shown}" + (f" and {more:,} more" if more > 0 else "")


def duplicate_groups(seeds: Sequence[Seed]) -> list[DuplicateGroup]:
    """Groups of seeds with the same normalised name (two or more), in order of their first line.

    Linear in the number of seeds: each repeated name is one group however often it repeats."""
    by_key: dict[str, list[Seed]] = {}
    for s in seeds:
        by_key.setdefault(normalise(s.name), []).append(s)
    return [DuplicateGroup(k, tuple(v)) for k, v in by_key.items() if len(v) > 1]


def exact_duplicates(seeds: Sequence[Seed]) -> list[SeedDuplicate]:
    """Seeds whose normalised name repeats an earlier seed's (one pair per repeating seed)."""
    return [SeedDuplicate("exact", g.first, s, 1.0) for g in duplicate_groups(seeds) for s in g.repeats]


def distinct_seeds(seeds: Sequence[Seed]) -> list[Seed]:
    """The first seed of every normalised name, in file order."""
    seen: set[str] = set()
    out = []
    for s in seeds:
        key = normalise(s.name)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


@dataclass(frozen=True)
class NearDuplicates:
    """The ``pairs`` most similar pairs above the threshold (most similar first) out of ``total``."""

    pairs: tuple[SeedDuplicate, ...]
    total: int


NEAR_SHOWN = 50
_BLOCK = 512  # rows of the similarity matrix computed at once: memory is _BLOCK x len(seeds) floats


def near_duplicates(seeds: Sequence[Seed], embedder: Any, threshold: float, limit: int = NEAR_SHOWN) -> NearDuplicates:
    """Pairs of seeds with different normalised names whose texts embed with cosine >= ``threshold``.

    Exact duplicates are left to :func:`duplicate_groups` (only the first seed of each name is embedded).
    The similarity matrix is computed a block of rows at a time and only the ``limit`` most similar pairs
    are kept, so memory stays bounded however many pairs match; ``total`` counts them all."""
    import heapq

    import numpy as np

    reps = distinct_seeds(seeds)
    if len(reps) < 2 or threshold > 1:
        return NearDuplicates((), 0)
    vectors = np.asarray(embedder.encode([s.text for s in reps]), dtype=np.float32)
    n = len(reps)
    total = 0
    heap: list[tuple[float, int, int]] = []  # (similarity, -i, -j): the smallest is dropped first
    cols = np.arange(n)
    for start in range(0, n - 1, _BLOCK):
        stop = min(start + _BLOCK, n)
        sims = vectors[start:stop] @ vectors.T
        upper = cols[None, :] > np.arange(start, stop)[:, None]  # each pair once, i < j
        rows, js = np.nonzero((sims >= threshold) & upper)
        total += len(rows)
        if not len(rows):
            continue
        vals = sims[rows, js]
        if len(vals) > limit:
            top = np.argpartition(-vals, limit - 1)[:limit]
            rows, js, vals = rows[top], js[top], vals[top]
        for r, j, v in zip(rows.tolist(), js.tolist(), vals.tolist(), strict=True):
            item = (round(v, 4), -(start + r), -j)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
    best = sorted(heap, key=lambda t: (-t[0], -t[1], -t[2]))
    pairs = tuple(SeedDuplicate("near", reps[-i], reps[-j], v) for v, i, j in best)
    return NearDuplicates(pairs, total)
