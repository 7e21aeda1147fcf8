"""Dedup with the real MiniLM model: batch and catalog duplicates, evidence, caps, persistence across runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.embed import DEFAULT_MODEL, Embedder, get_embedder, packaged_model_dir
from pipeline.ir import Scenario
from pipeline.scenarios.dedup import DedupError, DedupIndex, DedupSettings, dedup_scenarios

LIBRARY = Scenario(name="Public library book lending", seed="Library",
                   description="Members borrow books, renew loans and return them; overdue items accrue fines.")
LIBRARY_PARAPHRASE = Scenario(name="City library loan desk", seed="Library",
                              description="Patrons check out books, extend their loans and bring them back; "
                                          "late returns are fined.")
HOTEL = Scenario(name="Hotel room reservations", seed="Hotel",
                 description="Guests search available rooms for their dates, book a room, change or cancel it.")
HOUSEKEEPING = Scenario(name="Hotel housekeeping scheduling", seed="Hotel",
                        description="Supervisors assign rooms to be cleaned to housekeepers each shift and "
                                    "inspect them before release.")
PAYROLL = Scenario(name="Payroll processing", seed="HR",
                   description="Payroll staff run monthly payroll for employees, applying tax deductions and "
                               "issuing payslips.")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return get_embedder(DEFAULT_MODEL)


def fresh(embedder: Embedder, path: Path | None = None) -> DedupIndex:
    return DedupIndex(embedder, "scenario", path)


def test_batch_duplicates_are_rejected_with_what_they_duplicate(embedder: Embedder) -> None:
    index = fresh(embedder)
    result = dedup_scenarios([LIBRARY, HOTEL, LIBRARY_PARAPHRASE, HOUSEKEEPING, PAYROLL], index)
    assert [s.name for s in result.kept] == [LIBRARY.name, HOTEL.name, HOUSEKEEPING.name, PAYROLL.name]
    assert result.kept_positions == (0, 1, 3, 4) and result.rejected_positions == (2,)
    assert result.counts == {"input": 5, "kept": 4, "duplicates": 1, "capped": 0, "already_indexed": 0}
    (rej,) = result.rejections
    assert rej.stage == "dedup" and rej.item == LIBRARY_PARAPHRASE.scenario_id
    ev = rej.evidence
    assert ev["kind"] == "duplicate" and ev["duplicate_of"]["id"] == LIBRARY.scenario_id
    assert ev["duplicate_of"]["in"] == "batch" and ev["scenario"]["name"] == LIBRARY_PARAPHRASE.name
    assert 0.60 <= ev["similarity"] <= 1.0 and ev["threshold"] == 0.60 and ev["model"] == DEFAULT_MODEL
    assert "Public library book lending" in rej.reason
    assert len(index) == 4


def test_exact_repeat_in_a_batch_is_a_duplicate(embedder: Embedder) -> None:
    result = dedup_scenarios([HOTEL, HOTEL], fresh(embedder))
    assert len(result.kept) == 1 and result.rejections[0].evidence["similarity"] == 1.0


def test_threshold_decides(embedder: Embedder) -> None:
    strict = dedup_scenarios([LIBRARY, LIBRARY_PARAPHRASE], fresh(embedder), DedupSettings(threshold=0.99))
    assert len(strict.kept) == 2
    loose = dedup_scenarios([HOTEL, HOUSEKEEPING], fresh(embedder), DedupSettings(threshold=0.2))
    assert len(loose.kept) == 1


def test_cap_per_seed_counts_the_catalog_too(embedder: Embedder) -> None:
    index = fresh(embedder)
    settings = DedupSettings(max_per_seed=1)
    first = dedup_scenarios([HOTEL, HOUSEKEEPING, PAYROLL], index, settings)
    assert [s.name for s in first.kept] == [HOTEL.name, PAYROLL.name]
    (rej,) = first.rejections
    assert rej.evidence["kind"] == "cap" and rej.evidence["seed"] == "Hotel" and first.counts["capped"] == 1
    other = Scenario(name="Hotel minibar billing", seed="Hotel",
                     description="Minibar consumption is charged to the guest's folio at checkout.")
    second = dedup_scenarios([other], index, settings)
    assert second.kept == () and second.counts["capped"] == 1
    uncapped = dedup_scenarios([other], index, DedupSettings(max_per_seed=None))
    assert len(uncapped.kept) == 1


def test_index_persists_across_runs_and_reruns_are_idempotent(embedder: Embedder, tmp_path: Path) -> None:
    d = tmp_path / "catalog" / "dedup"
    run1 = DedupIndex.open(d, DedupSettings(), embedder)
    assert len(run1) == 0
    r1 = dedup_scenarios([LIBRARY, HOTEL], run1)
    run1.save()
    assert sorted(p.name for p in d.iterdir()) == ["entries.jsonl", "index.faiss", "meta.json"]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["model"] == DEFAULT_MODEL and meta["count"] == 2 and meta["dim"] == 384
    assert len(r1.kept) == 2

    # a later run (new process state: loaded from disk) with a paraphrase and a new scenario
    run2 = DedupIndex.open(d, DedupSettings(), embedder)
    assert len(run2) == 2 and LIBRARY.scenario_id in run2
    r2 = dedup_scenarios([LIBRARY_PARAPHRASE, PAYROLL], run2)
    assert [s.name for s in r2.kept] == [PAYROLL.name]
    ev = r2.rejections[0].evidence
    assert ev["duplicate_of"]["in"] == "catalog" and ev["duplicate_of"]["name"] == LIBRARY.name
    run2.save()

    # rerunning the first input keeps the same scenarios without adding them again
    run3 = DedupIndex.open(d, DedupSettings(), embedder)
    r3 = dedup_scenarios([LIBRARY, HOTEL], run3)
    assert r3.kept == r1.kept and r3.counts["already_indexed"] == 2 and len(run3) == 3

    # deterministic bytes: saving the same index again changes nothing
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    run3.save(tmp_path / "copy")
    assert {p.name: p.read_bytes() for p in (tmp_path / "copy").iterdir()} == before


def test_index_built_with_another_model_is_refused(embedder: Embedder, tmp_path: Path) -> None:
    d = tmp_path / "dedup"
    index = fresh(embedder, d)
    dedup_scenarios([HOTEL], index)
    index.save()
    other = Embedder(str(packaged_model_dir()))  # same weights, but named by path: a different label
    with pytest.raises(DedupError, match="was built with model 'all-MiniLM-L6-v2'"):
        DedupIndex.load(d, other)
    with pytest.raises(DedupError, match=r"not 'all-MiniLM-L6-v2\+int8'"):
        DedupIndex.open(d, DedupSettings(quantize=True))
    with pytest.raises(DedupError, match="embeds .scenario. texts"):
        DedupIndex.load(d, embedder, "name_description")


def test_damaged_index_is_reported_by_file(embedder: Embedder, tmp_path: Path) -> None:
    d = tmp_path / "dedup"
    index = fresh(embedder, d)
    dedup_scenarios([HOTEL, PAYROLL], index)
    index.save()
    entries = (d / "entries.jsonl").read_text().splitlines()
    (d / "entries.jsonl").write_text(entries[0] + "\n")
    with pytest.raises(DedupError, match="inconsistent"):
        DedupIndex.load(d, embedder)
    (d / "entries.jsonl").write_text(entries[0] + "\n{not json\n")
    with pytest.raises(DedupError, match=r"entries.jsonl:2: bad entry"):
        DedupIndex.load(d, embedder)
    (d / "index.faiss").unlink()
    with pytest.raises(DedupError, match="missing \\['index.faiss'\\]"):
        DedupIndex.load(d, embedder)


def test_save_without_a_directory_is_an_error(embedder: Embedder) -> None:
    with pytest.raises(DedupError, match="no directory"):
        fresh(embedder).save()


def test_chunks_see_each_other(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Duplicates across internal chunk boundaries are found as within one chunk."""
    import pipeline.scenarios.dedup as mod

    batch = [LIBRARY, HOTEL, PAYROLL, LIBRARY_PARAPHRASE, HOUSEKEEPING, HOTEL]
    whole = dedup_scenarios(batch, fresh(embedder))
    monkeypatch.setattr(mod, "_CHUNK", 2)
    chunked = dedup_scenarios(batch, fresh(embedder))
    assert chunked.kept == whole.kept and chunked.rejected_positions == whole.rejected_positions == (3, 5)
    assert [r.evidence["duplicate_of"]["in"] for r in chunked.rejections] == ["batch", "batch"]
