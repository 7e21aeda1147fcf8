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

No threshold separates those cleanly, so with an LLM client a pair in the ambiguous band
``[judge_low, judge_high)`` is judged by the LLM (``prompts/dedup_judge.md``: the same application, or
two distinct ones?) instead: above the band it is a duplicate, below it is not, in it the LLM decides and
its reason is recorded (in the rejection's evidence, and every judgement in the index's
``judgements.jsonl``). Without a client the threshold decides, as before.

The search is exact (a flat inner-product index) up to ``DedupIndex.APPROX_MIN`` indexed scenarios,
then an IVF index trained on the first ``APPROX_MIN`` vectors (deterministic: the same vectors in the
same order give the same answers, whether the index grew in this run or was loaded).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from pipeline.embed import Embedder, get_embedder, new_ip_index, read_index, write_index
from pipeline.hashing import canonical_json
from pipeline.ir import Frozen, Rejection, Scenario
from pipeline.llm import LLMError
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.settings import DedupSettings as DedupSettings

STAGE = "dedup"
INDEX_FORMAT = 1
_CHUNK = 1024


class DedupError(ValueError):
    """A dedup index or input that cannot be used; the message names the file."""


class JudgeReply(BaseModel):
    """The LLM's judgement of one pair (the reason first, then the verdict it supports)."""

    reason: str = Field(min_length=3, max_length=600)
    same_application: bool


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
    ``entries.jsonl`` (one canonical-JSON :class:`IndexEntry` per line, same order), ``meta.json``
    (model, dimension, text mode, count) and ``judgements.jsonl`` (every LLM judgement of a pair, in the
    order made). Same entries in the same order give the same bytes.
    """

    FILES = ("index.faiss", "entries.jsonl", "meta.json")
    JUDGEMENTS = "judgements.jsonl"
    #: from this many vectors on, search an IVF index instead of the flat one (see bench_dedup.py approx)
    APPROX_MIN = 50_000
    NLIST = 128
    NPROBE = 8

    def __init__(self, embedder: Embedder, text_mode: str = "scenario", path: str | Path | None = None):
        self.embedder = embedder
        self.text_mode = text_mode
        self.path = Path(path) if path is not None else None
        self.entries: list[IndexEntry] = []
        self._index: Any = None
        self._pos: dict[str, int] = {}
        self._seeds: Counter[str] = Counter()
        self._ivf: Any = None
        self.judgements: list[dict[str, Any]] = []

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
        jpath = path / cls.JUDGEMENTS
        if jpath.is_file():
            for lineno, line in enumerate(jpath.read_text(encoding="utf-8").splitlines(), start=1):
                try:
                    self.judgements.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DedupError(f"{jpath}:{lineno}: not valid JSON ({e})") from None
        return self

    def save(self, path: str | Path | None = None) -> Path:
        """Write the index to ``path`` (default: where it was opened). Deterministic bytes."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise DedupError("this dedup index has no directory; pass one to save()")
        target.mkdir(parents=True, exist_ok=True)
        names = ((self.JUDGEMENTS,) if self.judgements else ()) + self.FILES  # no judgement made: no file
        tmp = {name: target / f".{name}.tmp" for name in names}
        write_index(self._faiss(), tmp["index.faiss"])
        tmp["entries.jsonl"].write_text("".join(canonical_json(e) + "\n" for e in self.entries), encoding="utf-8")
        if self.judgements:
            tmp[self.JUDGEMENTS].write_text("".join(canonical_json(j) + "\n" for j in self.judgements),
                                            encoding="utf-8")
        meta = {"format": INDEX_FORMAT, "model": self.embedder.label, "dim": self._faiss().d, "text": self.text_mode,
                "count": len(self.entries), "metric": "cosine (inner product of unit vectors)"}
        tmp["meta.json"].write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for name in names:  # meta.json last: a reader never sees a new meta with old data
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

    def nearest(self, vectors: Any, k: int = 1) -> tuple[Any, Any]:
        """Best match in the index for each row: (similarities, positions); position -1 when empty.
        With ``k > 1``: the ``k`` best per row, as (n, k) arrays, best first."""
        import numpy as np

        n = vectors.shape[0]
        if len(self.entries) == 0 or n == 0:
            shape = (n,) if k == 1 else (n, k)
            return np.full(shape, -1.0, dtype=np.float32), np.full(shape, -1, dtype=np.int64)
        sims, pos = self._search_index().search(vectors, k)
        return (sims[:, 0], pos[:, 0]) if k == 1 else (sims, pos)

    @property
    def approximate(self) -> bool:
        """Whether searches go to the IVF index (at ``APPROX_MIN`` vectors and more)."""
        return len(self.entries) >= self.APPROX_MIN

    def _search_index(self) -> Any:
        if not self.approximate:
            return self._faiss()
        if self._ivf is None:
            from pipeline.embed import new_ivf_index

            flat = self._faiss()
            self._ivf = new_ivf_index(flat.reconstruct_n(0, self.APPROX_MIN), self.NLIST, self.NPROBE)
            self._ivf.add(flat.reconstruct_n(0, flat.ntotal))
        return self._ivf

    def add(self, entries: Sequence[IndexEntry], vectors: Any) -> None:
        if len(entries) != vectors.shape[0]:
            raise ValueError("one vector per entry")
        if len(entries):
            self._faiss().add(vectors)
            if self._ivf is not None:
                self._ivf.add(vectors)
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
    judgements: tuple[dict[str, Any], ...] = ()
    """Every LLM judgement made in this call (also appended to the index's ``judgements``)."""


def _match(entry: IndexEntry, where: str) -> dict[str, Any]:
    return {"id": entry.id, "name": entry.name, "seed": entry.seed, "text": entry.text, "in": where}


def judge_messages(text_a: str, text_b: str) -> list[dict[str, Any]]:
    """The request asking whether two scenario texts describe the same application."""
    from pipeline.stages.feedback import render_section, user

    return user(render_section("dedup_judge", "ask", a=text_a, b=text_b))


def judge_pair(client: LLMClientProtocol, text_a: str, text_b: str) -> JudgeReply:
    """One LLM judgement (cached like every request: the same pair is never asked twice)."""
    return client.structured(JudgeReply, judge_messages(text_a, text_b), stage=STAGE, max_tokens=300)


@dataclass
class _Decision:
    duplicate: bool
    similarity: float
    match: dict[str, Any] | None
    judgement: dict[str, Any] | None = None


def _decide(text: str, cands: list[tuple[float, IndexEntry, str]], settings: DedupSettings,
            judge: Any, log: list[dict[str, Any]], scenario: Scenario) -> _Decision:
    """Duplicate or not, from the candidates (best first): by the threshold, or in the band by the LLM."""
    if not cands:
        return _Decision(False, -1.0, None)
    best_sim, best, where = cands[0]
    if judge is None:
        return _Decision(best_sim >= settings.threshold, best_sim, _match(best, where))
    if best_sim >= settings.judge_high:
        return _Decision(True, best_sim, _match(best, where))
    in_band = [c for c in cands if c[0] >= settings.judge_low][: settings.judge_candidates]
    last: dict[str, Any] | None = None
    for sim, entry, where in in_band:
        rec: dict[str, Any] = {"scenario": {"id": scenario.scenario_id, "name": scenario.name, "text": text},
                               "candidate": _match(entry, where), "similarity": round(sim, 4)}
        try:
            reply = judge_pair(judge, text, entry.text)
            rec.update(same_application=reply.same_application, reason=" ".join(reply.reason.split()))
        except LLMError as e:  # no usable judgement: the threshold decides this pair, and says so
            rec.update(same_application=sim >= settings.threshold,
                       reason=f"no LLM judgement ({str(e).splitlines()[0][:200]}); threshold "
                              f"{settings.threshold} decided")
        log.append(rec)
        last = rec
        if rec["same_application"]:
            return _Decision(True, sim, rec["candidate"], rec)
    return _Decision(False, best_sim, _match(best, where), last)


def dedup_scenarios(
    scenarios: Sequence[Scenario], index: DedupIndex, settings: DedupSettings | None = None,
    *, client: LLMClientProtocol | None = None,
) -> DedupResult:
    """Keep scenarios that are not near duplicates of the index or of earlier kept ones; add them to
    ``index`` (in memory: call ``index.save()`` to persist). A scenario whose id is already in the index
    is kept without being added again, so rerunning the same input is idempotent.

    With ``client`` (and ``settings.judge``), matches in the band ``[judge_low, judge_high)`` are judged
    by the LLM instead of the threshold; each judgement is recorded with its reason."""
    import numpy as np

    settings = settings or DedupSettings()
    judge = client if settings.judge else None
    k = settings.judge_candidates if judge is not None else 1
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
    log: list[dict[str, Any]] = []

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
        # against the catalog and everything kept before this chunk
        top_sim, top_pos = index.nearest(cvecs, k)
        if k == 1:
            top_sim, top_pos = top_sim[:, None], top_pos[:, None]
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
            cands: list[tuple[float, IndexEntry, str]] = []
            for sim, pos in zip(top_sim[r], top_pos[r], strict=True):
                if pos >= 0:
                    e = index.entries[int(pos)]
                    cands.append((float(sim), e, "batch" if e.id in added else "catalog"))
            if new_rows:
                local_sims = local[r, new_rows]
                for j in np.argsort(-local_sims, kind="stable")[:k]:
                    cands.append((float(local_sims[j]), new_entries[int(j)], "batch"))
            cands.sort(key=lambda c: -c[0])  # stable: index matches before batch ones on ties
            d = _decide(texts[i], cands[:k], settings, judge, log, s)
            if d.duplicate and d.match is not None:
                if d.judgement is not None:
                    reason = (f"same application as {d.match['name']!r} (cosine {d.similarity:.3f}, judged by "
                              f"the LLM: {d.judgement['reason']})")
                    reject(i, "duplicate", reason[:1000], duplicate_of=d.match, similarity=round(d.similarity, 4),
                           judgement=d.judgement)
                else:
                    bound = settings.judge_high if judge is not None else t
                    reject(i, "duplicate", f"near duplicate of {d.match['name']!r} (cosine {d.similarity:.3f} "
                           f">= {bound})", duplicate_of=d.match, similarity=round(d.similarity, 4))
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
    index.judgements.extend(log)
    return DedupResult(tuple(kept), tuple(rejections), dict(counts), tuple(kept_pos), tuple(rejected_pos),
                       tuple(log))
