"""Expand stage: each domain seed becomes N distinct, concrete, simulatable scenarios.

``expand_seed(seed, client, settings) -> StageResult[tuple[Scenario, ...]]`` asks for one scenario per LLM
call (small models do better with small steps), each focused on a different part of the business and
listing what was already proposed for the seed so the model does not repeat itself, until N are
accepted or the attempts run out. Each proposal carries a
suitability judgement (can a relational database plus tools simulate it faithfully?); unsuitable ones,
and repeats of earlier proposals, are rejected as data.

``expand_and_dedup(seeds, client, settings, index)`` runs expansion for every seed and then the dedup
stage against the batch and the catalog's :class:`~pipeline.scenarios.dedup.DedupIndex`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from pipeline.ir import Rejection, Scenario
from pipeline.llm import LLMError
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.scenarios.dedup import DedupIndex, dedup_scenarios
from pipeline.seeds import Seed, normalise
from pipeline.settings import ExpandSettings as ExpandSettings
from pipeline.settings import ScenarioSettings as ScenarioSettings
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import render_section, user

STAGE = "expand"


class ScenarioReply(BaseModel):
    """What the LLM fills for one proposal (field order: judgement after the content it judges)."""

    name: str = Field(min_length=3, max_length=80)
    description: str = Field(min_length=20, max_length=500)
    entities: list[str] = Field(min_length=2, max_length=6)
    goals: list[str] = Field(min_length=2, max_length=5)
    simulation: str = Field(min_length=3, max_length=400)
    suitable: bool


def _clean(text: str) -> str:
    return " ".join(text.split())


def _previous(proposals: Sequence[tuple[Scenario, str | None]]) -> str:
    if not proposals:
        return ""
    items = "\n".join(
        f"- {s.name}: {s.description}" + (f" ({why})" if why else "") for s, why in proposals
    )
    return "\n" + render_section(STAGE, "previous", items=items)


def focus(number: int) -> str:
    """The part of the business proposal ``number`` (1-based) is asked to focus on: a small model asked
    "something different" again and again restates the seed, so each call names a different angle."""
    lines = [x.strip() for x in render_section(STAGE, "focus").splitlines() if x.strip()]
    return lines[(number - 1) % len(lines)]


def expansion_messages(seed: Seed, number: int, proposals: Sequence[tuple[Scenario, str | None]]) -> list[dict[str, Any]]:
    """The request for proposal ``number`` (1-based); ``proposals`` are earlier ones with a note for rejects."""
    return user(render_section(STAGE, "ask", seed=seed.text, focus=focus(number), previous=_previous(proposals)))


def _reject(seed: Seed, kind: str, reason: str, item: str, **evidence: Any) -> Rejection:
    return Rejection(stage=STAGE, item=item, reason=reason,
                     evidence={"kind": kind, "seed": seed.model_dump(mode="json"), **evidence})


def expand_seed(seed: Seed, client: LLMClientProtocol, settings: ExpandSettings | None = None) -> StageResult[tuple[Scenario, ...]]:
    """Up to ``scenarios_per_seed`` accepted scenarios for ``seed``, one LLM call each, plus the rejections
    (evidence ``kind``: ``unsuitable``, ``repeat`` or ``llm_error``). ``attempts`` counts LLM proposals."""
    settings = settings or ExpandSettings()
    n = settings.scenarios_per_seed
    accepted: list[Scenario] = []
    proposals: list[tuple[Scenario, str | None]] = []
    rejections: list[Rejection] = []
    seen: dict[str, Scenario] = {}
    attempts = 0
    for number in range(1, n + settings.extra_attempts + 1):
        if len(accepted) >= n:
            break
        messages = expansion_messages(seed, number, proposals)
        try:
            reply = client.structured(ScenarioReply, messages, stage=STAGE, max_tokens=settings.max_tokens)
        except LLMError as e:
            # The client already retried with its validation errors fed back; the same request again
            # (temperature 0, cached) would fail the same way.
            rejections.append(_reject(seed, "llm_error", f"no usable scenario from the LLM: {e}", seed.name,
                                      attempt=number))
            break
        attempts += 1
        scenario = Scenario(
            name=_clean(reply.name), description=_clean(reply.description), seed=seed.name,
            entities=[_clean(x) for x in reply.entities if x.strip()],
            goals=[_clean(x) for x in reply.goals if x.strip()],
        )
        evidence = {"scenario": scenario.model_dump(mode="json"), "simulation": _clean(reply.simulation),
                    "attempt": number}
        key = normalise(scenario.name)
        if key in seen:
            first = seen[key]
            rejections.append(_reject(seed, "repeat", f"repeats the earlier proposal {first.name!r}",
                                      scenario.scenario_id, duplicate_of={"id": first.scenario_id, "name": first.name},
                                      similarity=1.0, **evidence))
            continue  # the list in the next prompt is unchanged, but its focus differs
        seen[key] = scenario
        if not reply.suitable:
            why = _clean(reply.simulation)
            rejections.append(_reject(seed, "unsuitable", f"unsuitable for a database + tools simulation: {why}",
                                      scenario.scenario_id, **evidence))
            proposals.append((scenario, "rejected: not simulatable"))
            continue
        accepted.append(scenario)
        proposals.append((scenario, None))
    return StageResult(tuple(accepted), tuple(rejections), attempts)


# ---------------------------------------------------------------- seeds -> unique scenarios


COUNT_KEYS = ("seeds", "generated", "unsuitable", "duplicates", "capped", "failed", "kept", "already_indexed")


@dataclass(frozen=True)
class SeedProgress:
    """Reported after each seed: its index (1-based), the seed and what its expansion returned."""

    index: int
    total: int
    seed: Seed
    result: StageResult[tuple[Scenario, ...]]


def _expansions(seeds: Sequence[Seed], client: LLMClientProtocol,
                settings: ExpandSettings) -> Iterator[tuple[Seed, StageResult[tuple[Scenario, ...]]]]:
    """``(seed, expand_seed(seed))`` in seed order. Seeds are independent: with a client that takes several
    requests at once (``prefetches``: a remote endpoint) they are expanded together, each still one proposal
    at a time, and handed out in seed order; otherwise one after another."""
    if len(seeds) < 2 or not getattr(client, "prefetches", False):
        for seed in seeds:
            yield seed, expand_seed(seed, client, settings)
        return
    pool = ThreadPoolExecutor(min(len(seeds), max(1, int(client.parallelism))), thread_name_prefix="expand")
    try:
        futures = [pool.submit(expand_seed, seed, client, settings) for seed in seeds]
        for seed, fut in zip(seeds, futures, strict=True):
            yield seed, fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def expand_and_dedup(
    seeds: Sequence[Seed],
    client: LLMClientProtocol,
    settings: ScenarioSettings | None = None,
    index: DedupIndex | None = None,
    *,
    on_seed: Callable[[SeedProgress], None] | None = None,
) -> tuple[list[Scenario], list[Rejection], dict[str, int]]:
    """Expand every seed, then drop near duplicates (within the batch and against ``index``).

    Returns (kept scenarios in seed order, all rejections, counts). ``counts`` has ``generated``
    (proposals the LLM made) = ``unsuitable`` + ``duplicates`` + ``capped`` + ``kept``; ``failed`` counts
    seeds whose LLM calls gave up; ``already_indexed`` counts kept scenarios that were already in the
    index (a rerun keeps them without adding them twice). When ``index`` was opened from a directory it
    is saved there; with no ``index`` an in-memory one is used.
    """
    settings = settings or ScenarioSettings()
    if index is None:
        from pipeline.embed import get_embedder

        index = DedupIndex(get_embedder(settings.dedup.model, settings.dedup.quantize), settings.dedup.text)
    scenarios: list[Scenario] = []
    rejections: list[Rejection] = []
    counts = dict.fromkeys(COUNT_KEYS, 0)
    counts["seeds"] = len(seeds)
    for i, (seed, result) in enumerate(_expansions(seeds, client, settings.expand), start=1):
        scenarios.extend(result.value or ())
        rejections.extend(result.rejections)
        counts["generated"] += result.attempts
        for r in result.rejections:
            kind = str(r.evidence.get("kind"))
            counts[{"unsuitable": "unsuitable", "repeat": "duplicates", "llm_error": "failed"}[kind]] += 1
        if on_seed is not None:
            on_seed(SeedProgress(i, len(seeds), seed, result))
    dedup = dedup_scenarios(scenarios, index, settings.dedup, client=client)  # the LLM judges ambiguous pairs
    rejections.extend(dedup.rejections)
    for key in ("duplicates", "capped", "kept", "already_indexed"):
        counts[key] += dedup.counts[key]
    if index.path is not None:
        index.save()
    return list(dedup.kept), rejections, counts
