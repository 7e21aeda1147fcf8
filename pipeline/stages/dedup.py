"""Dedup stage: drop scenarios that are near duplicates of the catalog or of earlier ones in the batch.

Scenarios are embedded (all-MiniLM-L6-v2 by default, see ``pipeline.embed``) as one text holding the
whole record (name, description, entities, goals) and compared by cosine
similarity against a persistent :class:`DedupIndex` (everything already in the catalog) and against the
scenarios kept so far in the batch, in input order: a scenario is dropped when its best match reaches
``threshold``. A per-seed cap stops one prolific seed from crowding out the rest. Every drop is a
:class:`~pipeline.ir.Rejection` naming the scenario it duplicated and the similarity.

The default threshold (0.60 on the whole record) was measured on the labelled pairs in
``tests/data/dedup_pairs.jsonl``; see ``benchmarks/results/dedup.md``. AWM's 0.85 was for another
embedding model and does not carry over: on MiniLM, paraphrased scenarios mostly score 0.6-0.85, and
different scenarios of one domain that share their users ("Librarians lend ..." / "Librarians order
...") reach 0.6-0.7 on their descriptions alone; the entities and goals are what separate them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.embed import Embedder, get_embedder, new_ip_index, read_index, write_index
from pipeline.hashing import canonical_json
from pipeline.ir import Frozen, Rejection, Scenario
from pipeline.settings import DedupSettings as DedupSettings

STAGE = "dedup"
INDEX_FORMAT = 1
_CHUNK = 1024


class DedupError(ValueError):
    """A dedup index or input that cannot be used; the message names the file."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def scenario_text(name: str, description: str, mode: str = "scenario", entities: Sequence[str] = (),
                  goals: Sequence[str] = ()) -> str:
    """The text embedded for a scenario under ``mode`` (see :class:`DedupSettings.text`)."""
    if mode == "description":
        return _one_line(description) or _one_line(name)
    text = f"{_one_line(name)}: {_one_line(description)}"
    if mode == "scenario":
        if entities:
            text += f" Records: {', '.join(_one_line(e) for e in entities)}."
        if goals:
            text += f" Goals: {'; '.join(_one_line(g) for g in goals)}."
    return text


class IndexEntry(Frozen):
    """One scenario in the index: its id, name, seed and the exact text that was embedded."""

    id: str
    name: str
    seed: str | None = None
    text: str


class DedupIndex:
    """Vectors of every scenario already accepted (a faiss inner-product index) plus their entries.

    Saved as a directory: ``index.faiss`` (exact flat index, float32 unit vectors in insertion order),
    ``entries.jsonl`` (one canonical-JSON :class:`IndexEntry` per line, same order) and ``meta.json``
    (model, dimension, text mode, count). Same entries in the same order give the same bytes.
    """

    FILES = ("index.faiss", "entries.jsonl", "meta.json")

    def __init__(self, embedder: Embedder, text_mode: str = "scenario", path: str | Path | None = None):
        self.embedder = embedder
        self.text_mode = text_mode
        self.path = Path(path) if path is not None else None
        self.entries: list[IndexEntry] = []
        self._index: Any = None
        self._pos: dict[str, int] = {}
        self._seeds: Counter[str] = Counter()

    # ---------------------------------------------------------------- persistence

    @classmethod
    def open(cls, path: str | Path, settings: DedupSettings | None = None, embedder: Embedder | None = None) -> DedupIndex:
        """Load the index saved in ``path``, or start an empty one that :meth:`save` will write there."""
        settings = settings or DedupSettings()
        embedder = embedder or get_embedder(settings.model, settings.quantize)
        path = Path(path)
        if (path / "meta.json").exists():
            return cls.load(path, embedder, settings.text)
        return cls(embedder, settings.text, path)

    @classmethod
    def load(cls, path: str | Path, embedder: Embedder, text_mode: str | None = None) -> DedupIndex:
        path = Path(path)
        missing = [f for f in cls.FILES if not (path / f).is_file()]
        if missing:
            raise DedupError(f"dedup index {path} is incomplete: missing {missing}")
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise DedupError(f"{path / 'meta.json'}: not valid JSON ({e})") from None
        if meta.get("format") != INDEX_FORMAT:
            raise DedupError(f"{path / 'meta.json'}: unsupported index format {meta.get('format')!r}")
        if meta.get("model") != embedder.label:
            raise DedupError(
                f"dedup index {path} was built with model {meta.get('model')!r}, not {embedder.label!r}; "
                "vectors of different models cannot be compared (use that model or a new index directory)"
            )
        if text_mode is not None and meta.get("text") != text_mode:
            raise DedupError(f"dedup index {path} embeds {meta.get('text')!r} texts, not {text_mode!r}")
        self = cls(embedder, meta["text"], path)
        with open(path / "entries.jsonl", encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                try:
                    self.entries.append(IndexEntry.model_validate_json(line))
                except ValueError as e:
                    raise DedupError(f"{path / 'entries.jsonl'}:{lineno}: bad entry ({e})") from None
        self._index = read_index(path / "index.faiss")
        if not (self._index.ntotal == len(self.entries) == meta.get("count")) or self._index.d != meta.get("dim"):
            raise DedupError(
                f"dedup index {path} is inconsistent: {self._index.ntotal} vectors of dim {self._index.d}, "
                f"{len(self.entries)} entries, meta says {meta.get('count')} of dim {meta.get('dim')}"
            )
        self._pos = {e.id: i for i, e in enumerate(self.entries)}
        self._seeds = Counter(e.seed for e in self.entries if e.seed is not None)
        return self

    def save(self, path: str | Path | None = None) -> Path:
        """Write the index to ``path`` (default: where it was opened). Deterministic bytes."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise DedupError("this dedup index has no directory; pass one to save()")
        target.mkdir(parents=True, exist_ok=True)
        tmp = {name: target / f".{name}.tmp" for name in self.FILES}
        write_index(self._faiss(), tmp["index.faiss"])
        tmp["entries.jsonl"].write_text("".join(canonical_json(e) + "\n" for e in self.entries), encoding="utf-8")
        meta = {"format": INDEX_FORMAT, "model": self.embedder.label, "dim": self._faiss().d, "text": self.text_mode,
                "count": len(self.entries), "metric": "cosine (inner product of unit vectors)"}
        tmp["meta.json"].write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for name in self.FILES:  # meta.json last: a reader never sees a new meta with old data
            os.replace(tmp[name], target / name)
        self.path = target
        return target

    # ---------------------------------------------------------------- queries

    def _faiss(self) -> Any:
        if self._index is None:
            self._index = new_ip_index(self.embedder.dim)
        return self._index

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, scenario_id: object) -> bool:
        return scenario_id in self._pos

    def entry(self, scenario_id: str) -> IndexEntry:
        return self.entries[self._pos[scenario_id]]

    def seed_count(self, seed: str | None) -> int:
        return self._seeds[seed] if seed is not None else 0

    def text(self, scenario: Scenario) -> str:
        return scenario_text(scenario.name, scenario.description, self.text_mode, scenario.entities, scenario.goals)

    def nearest(self, vectors: Any) -> tuple[Any, Any]:
        """Best match in the index for each row: (similarities, positions); position -1 when empty."""
        import numpy as np

        n = vectors.shape[0]
        if len(self.entries) == 0 or n == 0:
            return np.full(n, -1.0, dtype=np.float32), np.full(n, -1, dtype=np.int64)
        sims, pos = self._faiss().search(vectors, 1)
        return sims[:, 0], pos[:, 0]

    def add(self, entries: Sequence[IndexEntry], vectors: Any) -> None:
        if len(entries) != vectors.shape[0]:
            raise ValueError("one vector per entry")
        if len(entries):
            self._faiss().add(vectors)
        for e in entries:
            self._pos.setdefault(e.id, len(self.entries))
            self.entries.append(e)
            if e.seed is not None:
                self._seeds[e.seed] += 1


# ---------------------------------------------------------------- the stage


@dataclass(frozen=True)
class DedupResult:
    kept: tuple[Scenario, ...]
    rejections: tuple[Rejection, ...]
    counts: dict[str, int] = field(default_factory=dict)
    kept_positions: tuple[int, ...] = ()
    """Input position of each kept scenario."""
    rejected_positions: tuple[int, ...] = ()
    """Input position of the scenario of each rejection."""


def _match(entry: IndexEntry, where: str) -> dict[str, Any]:
    return {"id": entry.id, "name": entry.name, "seed": entry.seed, "text": entry.text, "in": where}


def dedup_scenarios(
    scenarios: Sequence[Scenario], index: DedupIndex, settings: DedupSettings | None = None
) -> DedupResult:
    """Keep scenarios that are not near duplicates of the index or of earlier kept ones; add them to
    ``index`` (in memory: call ``index.save()`` to persist). A scenario whose id is already in the index
    is kept without being added again, so rerunning the same input is idempotent."""
    import numpy as np

    settings = settings or DedupSettings()
    t = settings.threshold
    texts = [index.text(s) for s in scenarios]
    vectors = index.embedder.encode(texts)
    kept: list[Scenario] = []
    rejections: list[Rejection] = []
    counts = Counter(input=len(scenarios), kept=0, duplicates=0, capped=0, already_indexed=0)
    kept_pos: list[int] = []
    rejected_pos: list[int] = []
    seen: dict[str, IndexEntry] = {}  # ids kept in this call
    added: set[str] = set()  # ids this call added to the index

    def reject(i: int, kind: str, reason: str, **evidence: Any) -> None:
        s = scenarios[i]
        rejected_pos.append(i)
        counts["duplicates" if kind == "duplicate" else "capped"] += 1
        rejections.append(Rejection(stage=STAGE, item=s.scenario_id, reason=reason, evidence={
            "kind": kind, "scenario": s.model_dump(mode="json"), "threshold": t, "model": index.embedder.label,
            **evidence}))

    for start in range(0, len(scenarios), _CHUNK):
        chunk = range(start, min(start + _CHUNK, len(scenarios)))
        cvecs = vectors[chunk.start:chunk.stop]
        best_sim, best_pos = index.nearest(cvecs)  # against the catalog and everything kept before this chunk
        local = cvecs @ cvecs.T
        new_rows: list[int] = []  # chunk rows added to the index in this chunk
        new_entries: list[IndexEntry] = []
        new_seeds: Counter[str | None] = Counter()
        for r, i in enumerate(chunk):
            s = scenarios[i]
            sid = s.scenario_id
            if sid in seen:
                e = seen[sid]
                reject(i, "duplicate", f"same scenario as {e.name!r} earlier in this batch (cosine 1.0)",
                       duplicate_of=_match(e, "batch"), similarity=1.0)
                continue
            if sid in index:
                seen[sid] = index.entry(sid)
                counts["already_indexed"] += 1
                counts["kept"] += 1
                kept.append(s)
                kept_pos.append(i)
                continue
            sim, match = float(best_sim[r]), None
            if best_pos[r] >= 0:
                e = index.entries[int(best_pos[r])]
                match = _match(e, "batch" if e.id in added else "catalog")
            if new_rows:
                local_sims = local[r, new_rows]
                j = int(np.argmax(local_sims))
                if float(local_sims[j]) > sim:
                    sim, match = float(local_sims[j]), _match(new_entries[j], "batch")
            if match is not None and sim >= t:
                reject(i, "duplicate", f"near duplicate of {match['name']!r} (cosine {sim:.3f} >= {t})",
                       duplicate_of=match, similarity=round(sim, 4))
                continue
            if settings.max_per_seed is not None and s.seed is not None and \
                    index.seed_count(s.seed) + new_seeds[s.seed] >= settings.max_per_seed:
                reject(i, "cap", f"seed {s.seed!r} already has {settings.max_per_seed} scenarios (max_per_seed)",
                       seed=s.seed)
                continue
            entry = IndexEntry(id=sid, name=s.name, seed=s.seed, text=texts[i])
            seen[sid] = entry
            new_rows.append(r)
            new_entries.append(entry)
            new_seeds[s.seed] += 1
            kept.append(s)
            kept_pos.append(i)
            counts["kept"] += 1
        index.add(new_entries, cvecs[new_rows] if new_rows else cvecs[:0])
        added.update(e.id for e in new_entries)
    return DedupResult(tuple(kept), tuple(rejections), dict(counts), tuple(kept_pos), tuple(rejected_pos))
