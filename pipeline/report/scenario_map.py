"""The seed -> scenario map: where every scenario lies in the dedup embedding space.

Kept scenarios take their vectors from ``dedup/index.faiss`` (exactly what dedup compared against).
Scenarios that were rejected before reaching the index (unsuitable, duplicates, over the per-seed cap) are
embedded here with the index's own model and text mode (recorded in ``dedup/meta.json``), so they land
where dedup saw them. When that model cannot be loaded, or ``embed=False``, they are left off the map and
the note says how many.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.report.data import dedup_vectors
from pipeline.report.plots import pca_2d


def _embed(scenarios: list[dict[str, Any]], meta: dict[str, Any]) -> np.ndarray:
    from pipeline.embed import Embedder
    from pipeline.scenarios.dedup import scenario_text

    model = str(meta.get("model") or "") or None
    quantize = model is not None and model.endswith("+int8")
    if model is not None and quantize:
        model = model.removesuffix("+int8")
    embedder = Embedder(model, quantize=quantize, workers=1)
    texts = [scenario_text(s["name"], s["description"], meta.get("text") or "scenario", s["entities"], s["goals"])
             for s in scenarios]
    return embedder.encode(texts)


def map_points(data: dict[str, Any], catalog_dir: str | Path, *, embed: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Points for :func:`pipeline.report.plots.scenario_map` and a sentence about what is (not) shown."""
    entries = data["dedup"]["entries"]
    meta = data["dedup"]["meta"] or {}
    vectors = dedup_vectors(catalog_dir) if entries else None
    by_id = {s["scenario_id"]: s for s in data["scenarios"]}
    if vectors is None or len(vectors) != len(entries):
        return [], "no dedup index in this catalog (dedup/index.faiss), so there is no map"
    points: list[dict[str, Any]] = []
    pos: dict[str, int] = {}
    for e in entries:
        scn = by_id.get(str(e.get("id")), {})
        pos[str(e.get("id"))] = len(points)
        points.append({"id": e.get("id"), "name": str(e.get("name", "")), "seed": e.get("seed"),
                       "status": "kept" if scn.get("status", "kept") == "kept" else scn["status"], "match": None})
    rejected = [s for s in data["scenarios"] if s["status"] != "kept" and s["scenario_id"] not in pos]
    note = ""
    extra = np.zeros((0, vectors.shape[1]), dtype=np.float32)
    if rejected and embed:
        try:
            extra = _embed(rejected, meta)
        except Exception as e:  # noqa: BLE001 - the map is still drawn for the kept scenarios
            note = f"{len(rejected)} rejected scenarios are not placed: their embedding model could not be loaded ({e})"
            rejected = []
        if len(extra) and extra.shape[1] != vectors.shape[1]:
            note = (f"{len(rejected)} rejected scenarios are not placed: the model gives {extra.shape[1]}-d vectors, "
                    f"the index holds {vectors.shape[1]}-d ones")
            rejected, extra = [], extra[:0]
    elif rejected:
        note = f"{len(rejected)} rejected scenarios are not placed (embedding was turned off)"
        rejected = []
    for s in rejected:
        dup = s.get("duplicate_of") or {}
        points.append({"id": s["scenario_id"], "name": s["name"], "seed": s.get("seed"), "status": s["status"],
                       "match": pos.get(str(dup.get("id"))) if dup else None})
    xy = pca_2d(np.vstack([vectors, extra]) if len(extra) else vectors)
    for p, (x, y) in zip(points, xy, strict=True):
        p["x"], p["y"] = float(x), float(y)
    counts = {st: sum(p["status"] == st for p in points) for st in ("kept", "duplicate", "unsuitable", "cap")}
    shown = ", ".join(f"{n} {st}" for st, n in counts.items() if n)
    return points, f"{len(points)} scenarios on the map ({shown}). " + note
