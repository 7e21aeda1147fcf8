"""``envfoundry seeds check``, ``envfoundry expand`` and ``envfoundry dedup``: seeds -> unique scenarios."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import client_from_config, emit_json, json_option, llm_options
from pipeline.config import Config
from pipeline.hashing import canonical_json

SEED_NEAR_THRESHOLD = 0.75
SHOWN = 50  # groups of exact duplicates and near-duplicate pairs listed by `seeds check`


def rejected_path(out: Path) -> Path:
    """``OUT.jsonl`` -> ``OUT.rejected.jsonl`` (beside it)."""
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(stem + ".rejected.jsonl")


def write_jsonl(path: Path, records: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(canonical_json(r) + "\n" for r in records), encoding="utf-8")
    tmp.replace(path)


def read_records(path: Path) -> list[tuple[int, dict[str, Any], Any]]:
    """(line, original object, Scenario) for each record of a JSONL file with ``name`` and ``description``
    (optional ``seed``, ``entities``, ``goals``; other keys are carried through to the output)."""
    from pydantic import ValidationError

    from pipeline.ir import Scenario
    from pipeline.settings import format_validation_error

    if not path.is_file():
        raise click.UsageError(f"{path}: file not found")
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        nul_line = data.count(b"\n", 0, nul) + 1
        raise click.UsageError(f"{path}:{nul_line}: binary content (NUL byte)")
    out = []
    for lineno, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise click.UsageError(f"{path}:{lineno}: malformed JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise click.UsageError(f"{path}:{lineno}: expected a JSON object with 'name' and 'description'")
        fields = {k: obj[k] for k in ("name", "description", "seed", "entities", "goals") if k in obj}
        try:
            scenario = Scenario(**fields)
        except ValidationError as e:
            raise click.UsageError(format_validation_error(e, f"{path}:{lineno}")) from None
        out.append((lineno, obj, scenario))
    if not out:
        raise click.UsageError(f"{path}: no records")
    return out


def dedup_settings(config: Config | None = None, **flags: Any) -> Any:
    from pipeline.scenarios.expand import ScenarioSettings

    return ScenarioSettings.from_config(config or Config(), dedup=flags).dedup


def _open_index(index_dir: Path | None, settings: Any) -> Any:
    from pipeline.embed import get_embedder
    from pipeline.scenarios.dedup import DedupIndex

    if index_dir is not None:
        return DedupIndex.open(index_dir, settings)
    return DedupIndex(get_embedder(settings.model, settings.quantize), settings.text)


def _with_cap(settings: Any, max_per_seed: int | None) -> Any:
    """``--max-per-seed``: None keeps the configured cap, 0 removes it."""
    if max_per_seed is None:
        return settings
    return settings.model_copy(update={"max_per_seed": max_per_seed or None})


def register(main: click.Group) -> None:
    @main.group()
    def seeds() -> None:
        """Domain seed files: one seed per line ("name: description") or JSONL."""

    @seeds.command("check")
    @click.argument("file", type=click.Path(path_type=Path))
    @click.option("--threshold", type=click.FloatRange(0, 1), default=SEED_NEAR_THRESHOLD, show_default=True,
                  help="Cosine similarity at which two seeds are reported as near duplicates (1 disables).")
    @click.option("--embedding-model", default=None, help="Sentence-transformers model (default all-MiniLM-L6-v2).")
    @click.option("--limit", type=click.IntRange(1), default=SHOWN, show_default=True,
                  help="Groups of exact duplicates and near-duplicate pairs listed (the rest are counted).")
    @json_option
    def check(file: Path, threshold: float, embedding_model: str | None, limit: int, as_json: bool) -> None:
        """Validate a seed file and report exact and near duplicates inside it.

        Each repeated name is reported once with the lines it repeats on; near duplicates are listed most
        similar first, at most --limit of each (all are counted).
        Exit 0: clean; 1: duplicates found; 2: the file cannot be used (the error names file and line).
        """
        from pipeline.seeds import LINES_SHOWN, NearDuplicates, SeedFileError, duplicate_groups, load_seeds

        try:
            found = load_seeds(file)
        except SeedFileError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        groups = duplicate_groups(found)
        repeats = sum(len(g.repeats) for g in groups)
        near = NearDuplicates((), 0)
        if threshold < 1 and len(found) - repeats > 1:  # two different names at least: worth the embedder
            from pipeline.embed import get_embedder
            from pipeline.seeds import near_duplicates

            near = near_duplicates(found, get_embedder(embedding_model), threshold, limit)
        if as_json:
            emit_json({
                "file": str(file), "seeds": len(found), "threshold": threshold,
                "exact": {"groups": len(groups), "repeats": repeats, "listed": [
                    {"name": g.first.name, "first_line": g.first.line, "repeats": len(g.repeats),
                     "lines": [s.line for s in g.repeats[:LINES_SHOWN]]} for g in groups[:limit]]},
                "near": {"pairs": near.total, "listed": [
                    {"line": d.second.line, "name": d.second.name, "first_line": d.first.line,
                     "first_name": d.first.name, "similarity": d.similarity} for d in near.pairs]},
            })
        else:
            for g in groups[:limit]:
                click.echo(g.describe())
            if len(groups) > limit:
                click.echo(f"{file}: ... and {len(groups) - limit:,} more repeated names (--limit to list more)")
            for d in near.pairs:
                click.echo(d.describe())
            if near.total > len(near.pairs):
                click.echo(f"{file}: ... and {near.total - len(near.pairs):,} more near-duplicate pairs "
                           "(the most similar are listed; --limit to list more)")
            click.echo(f"{file}: {len(found)} seeds, {repeats} exact and {near.total} near duplicates "
                       f"(cosine >= {threshold})")
        sys.exit(1 if repeats or near.total else 0)

    @main.command()
    @click.argument("in_file", metavar="IN.jsonl", type=click.Path(path_type=Path))
    @click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
                  help="Kept records (JSONL); rejections go to OUT.rejected.jsonl beside it.")
    @click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=None,
                  help="Cosine similarity at which a record is a duplicate (default 0.60, measured for MiniLM).")
    @click.option("--model", "embedding_model", default=None,
                  help="Sentence-transformers model: all-MiniLM-L6-v2 (default, packaged) or a local directory.")
    @click.option("--index", "index_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Persistent dedup index directory: compared against, and kept records are added to it.")
    @click.option("--text", type=click.Choice(["scenario", "description", "name_description"]), default=None,
                  help="What is embedded (default: the whole record: name, description, entities, goals).")
    @click.option("--max-per-seed", type=click.IntRange(0), default=None,
                  help="Cap of records per 'seed' value (default 25; 0: no cap).")
    @click.option("--quantize/--no-quantize", default=None,
                  help="int8 embedding (about 2.5x less CPU; its own index, not mixed with fp32 vectors).")
    @json_option
    def dedup(in_file: Path, out: Path, threshold: float | None, embedding_model: str | None,
              index_dir: Path | None, text: str | None, max_per_seed: int | None, quantize: bool | None,
              as_json: bool) -> None:
        """Run the dedup stage alone on JSONL records with 'name' and 'description'.

        Records are compared in file order against the index (if any) and the records kept before them.
        """
        from pipeline.scenarios.dedup import dedup_scenarios

        records = read_records(in_file)
        settings = _with_cap(dedup_settings(threshold=threshold, model=embedding_model, text=text,
                                            quantize=quantize), max_per_seed)
        index = _open_index(index_dir, settings)
        before = len(index)
        result = dedup_scenarios([r[2] for r in records], index, settings)
        write_jsonl(out, [records[i][1] for i in result.kept_positions])
        rejected = [
            r.model_copy(update={"evidence": {**r.evidence, "line": records[i][0]}})
            for r, i in zip(result.rejections, result.rejected_positions, strict=True)
        ]
        write_jsonl(rejected_path(out), rejected)
        if index_dir is not None:
            index.save()
        summary = {**result.counts, "threshold": settings.threshold, "model": index.embedder.label,
                   "out": str(out), "rejected_out": str(rejected_path(out)),
                   "index": str(index_dir) if index_dir else None, "index_size": [before, len(index)]}
        if as_json:
            emit_json(summary)
        else:
            c = result.counts
            already = f" ({c['already_indexed']} already in the index)" if c["already_indexed"] else ""
            click.echo(f"{c['input']} records: kept {c['kept']}{already}, duplicates {c['duplicates']}, "
                       f"capped {c['capped']} (cosine >= {settings.threshold}, {index.embedder.label})")
            click.echo(f"wrote {out} and {rejected_path(out)}")
            if index_dir is not None:
                click.echo(f"index {index_dir}: {before} -> {len(index)} scenarios")

    @main.command()
    @click.option("--seeds", "seed_files", required=True, multiple=True, type=click.Path(path_type=Path),
                  help="Seed file (text or JSONL); repeat for several.")
    @click.option("--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
                  help="Kept scenarios (JSONL of Scenario records); rejections go to OUT.rejected.jsonl.")
    @click.option("-n", "--scenarios-per-seed", "n", type=click.IntRange(1, 100), default=None,
                  help="Scenarios to accept per seed (default 3).")
    @click.option("--index", "index_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Persistent dedup index directory (e.g. <catalog>/dedup); default: this batch only.")
    @click.option("--threshold", type=click.FloatRange(0, 1, min_open=True), default=None,
                  help="Dedup cosine threshold (default 0.60).")
    @click.option("--embedding-model", default=None, help="Sentence-transformers model for dedup.")
    @click.option("--max-per-seed", type=click.IntRange(0), default=None,
                  help="Cap of scenarios per seed in the index (default 25; 0: no cap).")
    @llm_options(stages={"n": "expand.scenarios_per_seed", "threshold": "dedup.threshold",
                         "embedding_model": "dedup.model"})
    @json_option
    def expand(seed_files: tuple[Path, ...], out: Path, index_dir: Path | None, max_per_seed: int | None,
               config: Config, as_json: bool) -> None:
        """Expand seeds into concrete scenarios, judge suitability, drop near duplicates.

        Prints how many scenarios were generated, rejected as unsuitable, rejected as duplicates, and kept.
        """
        from pipeline.scenarios.expand import expand_and_dedup
        from pipeline.seeds import SeedFileError, load_many

        try:
            seed_list = load_many(seed_files)
        except SeedFileError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        settings = config.stages.scenarios()
        settings = settings.model_copy(update={"dedup": _with_cap(settings.dedup, max_per_seed)})
        index = _open_index(index_dir, settings.dedup)
        client = client_from_config(config)
        if not as_json:
            click.echo(f"expanding {len(seed_list)} seeds x {settings.expand.scenarios_per_seed} with "
                       f"{client.describe()}", err=True)

        def progress(p: Any) -> None:
            if not as_json:
                r = p.result
                click.echo(f"[{p.index}/{p.total}] {p.seed.name}: {len(r.value or ())} accepted, "
                           f"{len(r.rejections)} rejected", err=True)

        kept, rejections, counts = expand_and_dedup(seed_list, client, settings, index, on_seed=progress)
        write_jsonl(out, kept)
        write_jsonl(rejected_path(out), rejections)
        if as_json:
            emit_json({"counts": counts, "out": str(out), "rejected_out": str(rejected_path(out)),
                       "usage": client.usage.total()})
            return
        click.echo(f"seeds:                  {counts['seeds']}")
        click.echo(f"generated:              {counts['generated']}")
        click.echo(f"rejected as unsuitable: {counts['unsuitable']}")
        click.echo(f"rejected as duplicates: {counts['duplicates']}")
        if counts["capped"]:
            click.echo(f"over the per-seed cap:  {counts['capped']}")
        if counts["failed"]:
            click.echo(f"LLM failures:           {counts['failed']}")
        already = f" ({counts['already_indexed']} already in the index)" if counts["already_indexed"] else ""
        click.echo(f"kept:                   {counts['kept']}{already}")
        click.echo(f"wrote {out} and {rejected_path(out)}")
