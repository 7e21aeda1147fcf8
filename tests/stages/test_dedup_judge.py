"""Dedup's LLM judge for the ambiguous band, with a scripted fake LLM and vectors of chosen similarity:
above the band a duplicate without asking, below it distinct, in it the LLM decides with a recorded reason."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from pipeline.ir import Scenario
from pipeline.llm import fake_client
from pipeline.scenarios.dedup import DedupIndex, DedupSettings, dedup_scenarios, scenario_text


class FixedEmbedder:
    """Vectors chosen per scenario name (an embedder stand-in, so similarities are exact)."""

    label = "fixed-test-vectors"
    dim = 4

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = {k: np.array(v, dtype=np.float32) / np.linalg.norm(v) for k, v in vectors.items()}

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        return np.stack([self.vectors[t.split(":")[0]] for t in texts]) if texts else np.zeros((0, 4), np.float32)


def _at(cos: float, axis: int) -> list[float]:
    """A unit vector with cosine ``cos`` to e0, the rest along ``axis``."""
    v = [0.0] * 4
    v[0], v[axis] = cos, math.sqrt(1 - cos * cos)
    return v


def scn(name: str) -> Scenario:
    return Scenario(name=name, description=f"The {name.lower()} application of a test.", seed="s")


A, B, C, D = scn("Alpha"), scn("Bravo"), scn("Charlie"), scn("Delta")
VECTORS = {"Alpha": [1, 0, 0, 0], "Bravo": _at(0.65, 1), "Charlie": _at(0.90, 2), "Delta": _at(0.30, 3)}
SETTINGS = DedupSettings(max_per_seed=None, judge_low=0.50)  # band [0.50, 0.80), threshold 0.60


def _index(vectors: dict[str, list[float]] = VECTORS, path: Path | None = None) -> DedupIndex:
    return DedupIndex(FixedEmbedder(vectors), "scenario", path)  # type: ignore[arg-type]


def test_in_band_pair_is_judged_distinct_and_the_reason_recorded(tmp_path: Path) -> None:
    client = fake_client([{"reason": "Alpha tracks parcels, Bravo invoices them.", "same_application": False}])
    index = _index(path=tmp_path / "dedup")
    result = dedup_scenarios([A, B, C, D], index, SETTINGS, client=client)
    assert [s.name for s in result.kept] == ["Alpha", "Bravo", "Delta"]
    assert len(client.requests) == 1  # only Bravo (0.65) was asked about; Charlie (0.90) and Delta (0.30) not
    prompt = client.requests[0][-1]["content"]
    assert scenario_text(B.name, B.description) in prompt and scenario_text(A.name, A.description) in prompt
    (j,) = result.judgements
    assert j["scenario"]["name"] == "Bravo" and j["candidate"]["name"] == "Alpha" and j["similarity"] == 0.65
    assert j["same_application"] is False and j["reason"] == "Alpha tracks parcels, Bravo invoices them."
    (rej,) = result.rejections  # Charlie, above the band: a duplicate without asking
    assert rej.item == C.scenario_id and "cosine 0.900 >= 0.8" in rej.reason and "judgement" not in rej.evidence
    assert client.usage.by_stage()["dedup"]["calls"] == 1
    index.save()
    saved = [json.loads(line) for line in (tmp_path / "dedup" / "judgements.jsonl").read_text().splitlines()]
    assert saved == [j]
    assert DedupIndex.load(tmp_path / "dedup", index.embedder).judgements == [j]  # type: ignore[arg-type]


def test_in_band_pair_judged_the_same_is_a_duplicate_with_the_reason() -> None:
    client = fake_client([{"reason": "Both record the same alpha jobs.", "same_application": True}])
    result = dedup_scenarios([A, B], _index(), SETTINGS, client=client)
    assert [s.name for s in result.kept] == ["Alpha"]
    (rej,) = result.rejections
    assert rej.evidence["kind"] == "duplicate" and rej.evidence["duplicate_of"]["name"] == "Alpha"
    assert rej.evidence["judgement"]["reason"] == "Both record the same alpha jobs."
    assert "judged by the LLM: Both record the same alpha jobs." in rej.reason


def test_without_a_client_or_with_judge_off_the_threshold_decides() -> None:
    for client, settings in ((None, SETTINGS), (fake_client([]), SETTINGS.model_copy(update={"judge": False}))):
        result = dedup_scenarios([A, B, D], _index(), settings, client=client)
        assert [s.name for s in result.kept] == ["Alpha", "Delta"] and result.judgements == ()
        assert "cosine 0.650 >= 0.6" in result.rejections[0].reason
        if client is not None:
            assert client.requests == []


def test_a_failed_judgement_falls_back_to_the_threshold_and_says_so() -> None:
    client = fake_client(["not json", "{}", "[]"], validation_retries=2)
    result = dedup_scenarios([A, B], _index(), SETTINGS, client=client)
    assert [s.name for s in result.kept] == ["Alpha"]  # 0.65 >= 0.60
    (j,) = result.judgements
    assert j["same_application"] is True and "no LLM judgement" in j["reason"] and "threshold 0.6" in j["reason"]


def test_several_in_band_candidates_are_judged_most_similar_first() -> None:
    vectors = {"Alpha": [1, 0, 0, 0], "Bravo": [0, 1, 0, 0], "Echo": [0.6, 0.55, math.sqrt(1 - 0.36 - 0.3025), 0]}
    client = fake_client([{"reason": "different records", "same_application": False},
                          {"reason": "same records and tasks", "same_application": True}])
    echo = scn("Echo")
    result = dedup_scenarios([A, B, echo], _index(vectors), SETTINGS, client=client)
    assert [s.name for s in result.kept] == ["Alpha", "Bravo"]
    assert [j["candidate"]["name"] for j in result.judgements] == ["Alpha", "Bravo"]
    assert result.rejections[0].evidence["duplicate_of"]["name"] == "Bravo"
    # with one candidate judged at most, only Alpha is asked about, and Echo is kept
    one = fake_client([{"reason": "different records", "same_application": False}])
    r1 = dedup_scenarios([A, B, echo], _index(vectors), SETTINGS.model_copy(update={"judge_candidates": 1}),
                         client=one)
    assert len(r1.kept) == 3 and len(one.requests) == 1


def test_by_default_a_pair_below_the_threshold_is_distinct_without_asking() -> None:
    """The embedded model calls nearly every in-band pair "the same application" (10 of 11 labelled distinct pairs
    of [0.50, 0.60)): by default it is asked only from the threshold up, so it can keep a pair, never drop one the
    threshold keeps (an outside build lost its fitness studio to a tutoring marketplace at cosine 0.534)."""
    client = fake_client([{"reason": "both book sessions", "same_application": True}])
    vectors = {"Alpha": [1, 0, 0, 0], "Bravo": _at(0.55, 1)}
    result = dedup_scenarios([A, B], _index(vectors), DedupSettings(max_per_seed=None), client=client)
    assert [s.name for s in result.kept] == ["Alpha", "Bravo"] and client.requests == []
    assert DedupSettings().judge_low == DedupSettings().threshold


def test_band_must_be_ordered() -> None:
    with pytest.raises(ValidationError, match="judge_low"):
        DedupSettings(judge_low=0.9, judge_high=0.7)
