"""Precision and recall of duplicate detection on the labelled pairs, at the default threshold.

``tests/data/dedup_pairs.jsonl``: paraphrases that must collapse (``duplicate: true``) and
different-but-related scenarios that must both survive. Each pair goes through the real stage with
a fresh index; the second scenario being rejected is a positive.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.embed import get_embedder
from pipeline.ir import Scenario
from pipeline.scenarios.dedup import DedupIndex, DedupSettings, dedup_scenarios

PAIRS = Path(__file__).resolve().parents[1] / "data" / "dedup_pairs.jsonl"


def load_pairs() -> list[tuple[Scenario, Scenario, bool]]:
    out = []
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        out.append((Scenario(**p["a"]), Scenario(**p["b"]), bool(p["duplicate"])))
    return out


def test_the_labelled_set_is_big_and_balanced_enough() -> None:
    pairs = load_pairs()
    assert len(pairs) >= 60
    positives = sum(d for _, _, d in pairs)
    assert 25 <= positives <= len(pairs) - 25


@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "int8"])
def test_precision_and_recall_at_the_default_threshold(quantize: bool) -> None:
    settings = DedupSettings(quantize=quantize)
    embedder = get_embedder(settings.model, settings.quantize)
    tp = fp = fn = tn = 0
    misses = []
    for a, b, duplicate in load_pairs():
        result = dedup_scenarios([a, b], DedupIndex(embedder, settings.text), settings)
        flagged = bool(result.rejections)
        if flagged:
            assert result.rejections[0].evidence["duplicate_of"]["id"] == a.scenario_id
        tp += flagged and duplicate
        fp += flagged and not duplicate
        fn += (not flagged) and duplicate
        tn += (not flagged) and not duplicate
        if flagged != duplicate:
            sim = result.rejections[0].evidence["similarity"] if flagged else None
            misses.append(f"{'FP' if flagged else 'FN'} {a.name!r} ~ {b.name!r} ({sim})")
    precision = tp / (tp + fp)
    recall = tp / (tp + fn)
    print(f"\n{embedder.label}, threshold {settings.threshold} on {settings.text}: precision {precision:.3f} recall {recall:.3f} "
          f"(tp {tp} fp {fp} fn {fn} tn {tn})", *misses, sep="\n  ")
    assert precision >= 0.9, misses
    assert recall >= 0.9, misses
