"""Export a catalog's task bank to RL trainers: verifiers, OpenEnv, veRL and JSONL for SFT.

    from pipeline.export import export_catalog
    export_catalog("generated/example", "verifiers", "out/verifiers")

Every format is written from the one task bank (``load_catalog``), so task ids, instructions and
verifiers are identical across formats. Exported artefacts are self-contained: they carry
byte-for-byte copies of the stdlib tool engine, the one reward implementation (``verify/reward.py``)
and the task runtime (``templates/taskrt.py``), and run without envfoundry installed. Every export
carries each task's split (train/val), tier and pass rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.catalog import Catalog, CatalogEnv, CatalogError, load_catalog
from pipeline.export import openenv_fmt, sft_fmt, verifiers_fmt, verl_fmt
from pipeline.export.common import ExportError, ExportOptions

FORMATS = {
    "verifiers": verifiers_fmt.export,
    "openenv": openenv_fmt.export,
    "verl": verl_fmt.export,
    "jsonl": sft_fmt.export,
}


@dataclass(frozen=True)
class ExportResult:
    format: str
    out: Path
    paths: tuple[Path, ...]
    envs: int
    tasks: int
    skipped_envs: tuple[str, ...]
    """Environments with no task in the bank (nothing to export for them)."""


def export_catalog(
    catalog: str | Path | Catalog,
    fmt: str,
    out: str | Path,
    *,
    val_fraction: float = 0.1,
    sft_arguments: str = "object",
) -> ExportResult:
    """Export ``catalog`` in format ``fmt`` (one of ``FORMATS``) under ``out``; ``val_fraction`` of
    each environment's tasks form the validation split; ``sft_arguments`` is the form of the SFT
    transcripts' tool-call arguments (``object``, ``string`` or ``both``)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    if not cat.tasks:
        raise ExportError(f"{cat.root}: the task bank ({cat.bank_source}) has no tasks")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = FORMATS[fmt](cat, out, ExportOptions(val_fraction=val_fraction, sft_arguments=sft_arguments))
    exported = [e for e in cat.envs.values() if e.tasks]
    return ExportResult(
        format=fmt,
        out=out,
        paths=tuple(paths),
        envs=len(exported),
        tasks=sum(len(e.tasks) for e in exported),
        skipped_envs=tuple(e.env_id for e in cat.envs.values() if not e.tasks),
    )


__all__ = [
    "FORMATS",
    "Catalog",
    "CatalogEnv",
    "CatalogError",
    "ExportError",
    "ExportOptions",
    "ExportResult",
    "export_catalog",
    "load_catalog",
]
