"""Export a catalog's task bank to RL trainers: verifiers, OpenEnv, veRL and JSONL for SFT.

    from pipeline.export import export_catalog
    export_catalog("generated/example", "verifiers", "out/verifiers")

Every format is written from the one task bank (``load_catalog``), so task ids, instructions and
verifiers are identical across formats. Exported artefacts are self-contained: they carry
byte-for-byte copies of the stdlib tool engine, the one reward implementation (``pipeline/runtime/reward.py``)
and the task runtime (``templates/taskrt.py``), and run without envfoundry installed. Every export
carries each task's split (train/val), tier and pass rate.

With ``sample_per_level=N`` (``envfoundry export --sample-per-level N``) each environment's export also carries
up to N tasks per difficulty level sampled at export time (:mod:`pipeline.export.pools`): OpenEnv serves them
by ``reset(seed=..., level=...)`` and an adaptive level, verifiers by ``load_environment(n=..., level=...)``,
veRL as ``train_level<L>.parquet``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.catalog import Catalog, CatalogEnv, CatalogError, load_catalog
from pipeline.export import openenv_fmt, sft_fmt, verifiers_fmt, verl_fmt
from pipeline.export.audit import AuditError, audit_catalog, enforce
from pipeline.export.common import ExportError, ExportOptions
from pipeline.export.pools import EnvPools, sample_pools

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
    pools: tuple[str, ...] = ()
    """Per environment with sampled pools: how many distinct tasks each level holds (one line each); always empty
    for ``jsonl``, which ships no pool."""


def export_catalog(
    catalog: str | Path | Catalog,
    fmt: str,
    out: str | Path,
    *,
    val_fraction: float = 0.1,
    sft_arguments: str = "object",
    sample_per_level: int = 0,
    sample_seed: int = 0,
    pools: Mapping[str, EnvPools] | None = None,
    perturb: bool = False,
    audit: bool = True,
    allow_failing: bool = False,
) -> ExportResult:
    """Export ``catalog`` in format ``fmt`` (one of ``FORMATS``) under ``out``; ``val_fraction`` of
    each environment's tasks form the validation split; ``sft_arguments`` is the form of the SFT
    transcripts' tool-call arguments (``object``, ``string`` or ``both``). ``sample_per_level`` > 0: each
    environment also carries up to that many sampled tasks per level (seed ``sample_seed``; ``perturb``: each task
    on its own perturbed state, shipped in ``states/``); ``pools``: pools
    already sampled (:func:`pipeline.export.pools.sample_pools`, e.g. once for several formats). Every bundle carries
    the integrity audit (:mod:`pipeline.export.audit`; ``audit=False``: none); a task that fails it stops the export
    (``AuditError``) unless ``allow_failing``."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    if not cat.tasks:
        raise ExportError(f"{cat.root}: the task bank ({cat.bank_source}) has no tasks")
    if sample_per_level < 0:
        raise ExportError(f"sample_per_level must be 0 or more, not {sample_per_level}")
    if pools is None and sample_per_level > 0 and fmt != "jsonl":  # the SFT transcripts carry the bank only
        pools = sample_pools(cat, sample_per_level, sample_seed, perturb)
    if fmt == "jsonl":  # the SFT transcripts carry the bank only: pools given for several formats are not its own
        pools = None
    audits = audit_catalog(cat, pools) if audit else None
    if audits is not None:
        enforce(audits, allow_failing)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = FORMATS[fmt](cat, out, ExportOptions(val_fraction=val_fraction, sft_arguments=sft_arguments, pools=pools,
                                                 audits=audits, allow_failing=allow_failing))
    exported = [e for e in cat.envs.values() if e.tasks]
    return ExportResult(
        format=fmt,
        out=out,
        paths=tuple(paths),
        envs=len(exported),
        tasks=sum(len(e.tasks) for e in exported),
        skipped_envs=tuple(e.env_id for e in cat.envs.values() if not e.tasks),
        pools=tuple(p.describe() for p in pools.values()) if pools else (),
    )


__all__ = [
    "FORMATS",
    "AuditError",
    "Catalog",
    "CatalogEnv",
    "CatalogError",
    "ExportError",
    "ExportOptions",
    "ExportResult",
    "sample_pools",
    "export_catalog",
    "load_catalog",
]
