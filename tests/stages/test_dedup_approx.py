"""Dedup past ``APPROX_MIN`` indexed scenarios searches an IVF index: it still finds planted near duplicates,
and answers the same whether the index grew in this process or was saved and loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.ir import Scenario
from pipeline.scenarios.dedup import DedupIndex, DedupSettings, dedup_scenarios

DIM = 64


class Table:
    """An embedder stand-in: the vector of scenario ``s<i>`` is row i of a fixed table."""

    label = "table-test-vectors"
    dim = DIM

    def __init__(self, vectors: np.ndarray):
        self.vectors = vectors

    def encode(self, texts: list[str], **_: object) -> np.ndarray:
        return self.vectors[[int(t.split(":")[0][1:]) for t in texts]] if texts else np.zeros((0, DIM), np.float32)


def _vectors(n: int, dups: dict[int, int]) -> np.ndarray:
    rng = np.random.default_rng(7)
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    for i, j in dups.items():  # i is a near copy of j (cosine about 0.95)
        v[i] = v[j] + 0.3 * rng.standard_normal(DIM).astype(np.float32) * np.linalg.norm(v[j]) / np.sqrt(DIM)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _scenarios(idx: range) -> list[Scenario]:
    return [Scenario(name=f"s{i}", description=f"test scenario number {i}") for i in idx]


@pytest.fixture()
def small_ivf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DedupIndex, "APPROX_MIN", 200)
    monkeypatch.setattr(DedupIndex, "NLIST", 4)
    monkeypatch.setattr(DedupIndex, "NPROBE", 2)


def test_ivf_search_finds_planted_duplicates_and_is_the_same_after_a_reload(small_ivf: None, tmp_path: Path) -> None:
    dups = {300 + k: 10 * k for k in range(20)}  # late scenarios duplicating early ones
    table = Table(_vectors(340, dups))
    settings = DedupSettings(max_per_seed=None, threshold=0.8)
    grown = DedupIndex(table, "scenario", tmp_path / "dedup")  # type: ignore[arg-type]
    first = dedup_scenarios(_scenarios(range(300)), grown, settings)
    assert len(first.kept) == 300 and grown.approximate
    grown.save()
    loaded = DedupIndex.load(tmp_path / "dedup", table)  # type: ignore[arg-type]
    later = _scenarios(range(300, 340))
    a = dedup_scenarios(later, grown, settings)
    b = dedup_scenarios(later, loaded, settings)
    assert grown._ivf is not None and loaded._ivf is not None  # both searched the IVF index
    assert a.rejected_positions == b.rejected_positions
    assert [r.evidence["duplicate_of"]["name"] for r in a.rejections] == \
        [r.evidence["duplicate_of"]["name"] for r in b.rejections]
    found = {r.item: r.evidence["duplicate_of"]["name"] for r in a.rejections}
    planted = {Scenario(name=f"s{i}", description=f"test scenario number {i}").scenario_id: f"s{j}"
               for i, j in dups.items()}
    assert sum(found.get(k) == v for k, v in planted.items()) >= 18  # approximate: most, in practice all


def test_below_the_switch_the_search_is_exact(small_ivf: None) -> None:
    index = DedupIndex(Table(_vectors(150, {})), "scenario")  # type: ignore[arg-type]
    dedup_scenarios(_scenarios(range(150)), index, DedupSettings(max_per_seed=None))
    assert not index.approximate and index._ivf is None
