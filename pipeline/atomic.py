"""Atomic file writes: readers see the old file or the new one, never half of one (a killed run leaves no
torn ``tasks.jsonl``). The one implementation every writer of envfoundry uses."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_text(path: str | Path, text: str, *, mode: int = 0o644) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` through a temporary file in the same directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # one fixed name: a write killed mid-way leaves no stray file behind
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:  # (the next write of the same file replaces it)
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that take a file name (``VACUUM INTO``, pyarrow); it
    replaces ``path`` when the block ends without an error and is removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
