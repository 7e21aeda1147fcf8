"""The run's summary counts what stopped each environment from its ``stopped_by`` column (data written by the
run), never from the wording of its reason; a catalog made before the column existed gets it once, when a run
opens it."""

from __future__ import annotations

from pathlib import Path

from pipeline.catalog import Catalog
from pipeline.run import RunResult, summary_dict


def _legacy_catalog(root: Path) -> None:
    """A catalog as runs wrote it before ``environments.stopped_by`` existed."""
    cat = Catalog(root)
    cat.set_environment("s1", name="a", status="verified", reason="")
    cat.set_environment("s2", name="b", status="rejected", reason="schema: no usable schema reply: x: y")
    cat.set_environment("s3", name="c", status="failed", reason="RuntimeError: boom")
    cat.set_environment("s4", name="d", status="rejected", reason="no colon")
    cat.db.table("environments").transform(drop={"stopped_by"})
    assert "stopped_by" not in cat.db.table("environments").columns_dict
    cat.close()


def test_legacy_rows_get_what_stopped_them_and_the_summary_counts_the_column(tmp_path: Path) -> None:
    _legacy_catalog(tmp_path)
    cat = Catalog(tmp_path)  # what a run opens
    assert {e["scenario_id"]: e["stopped_by"] for e in cat.environments()} == {
        "s1": None, "s2": "schema", "s3": "RuntimeError", "s4": "no colon"}

    # written by a run: the column is the record, whatever the reason says
    cat.set_environment("s2", name="b", status="rejected", reason="tools: gave up", stopped_by="seed_data")
    cat.close()
    cat = Catalog(tmp_path)  # once only: nothing is derived again
    envs = cat.environments()
    cat.close()
    summary = summary_dict(RunResult(tmp_path, {}, envs, [], {}, 0.0))
    assert summary["rejections_by_stage"] == {"rejected:seed_data": 1, "failed:RuntimeError": 1, "rejected:no colon": 1}


def test_a_new_catalog_has_the_column_from_the_start(tmp_path: Path) -> None:
    cat = Catalog(tmp_path)
    assert "stopped_by" in cat.db.table("environments").columns_dict
    cat.set_environment("s1", name="a", status="rejected", reason="schema: x")  # no stopped_by given: none made up
    assert cat.environments()[0]["stopped_by"] is None
    cat.close()
    cat = Catalog(tmp_path)
    assert cat.environments()[0]["stopped_by"] is None
    cat.close()


def test_the_printed_summary_gives_tokens_and_seconds_per_stage(tmp_path: Path) -> None:
    """Issue 42: where a run's tokens and time went, per stage, the most tokens first."""
    from rich.console import Console

    from pipeline.cli.run import print_summary, stage_lines

    usage = {"tester": {"calls": 62, "cached": 2, "prompt_tokens": 141786, "completion_tokens": 4369, "seconds": 900.5},
             "phrasing": {"calls": 28, "cached": 0, "prompt_tokens": 11307, "completion_tokens": 1021,
                          "seconds": 1452.331},
             "expand": {"calls": 2, "cached": 2, "prompt_tokens": 499, "completion_tokens": 240, "seconds": 0.0}}
    lines = stage_lines(usage)
    assert [s for s, _ in lines] == ["tester", "phrasing", "expand"]
    assert lines[0][1] == "62 calls (2 from cache), 141,786 prompt + 4,369 completion tokens, 900 s"
    assert lines[1][1].endswith("1,021 completion tokens, 1452 s")
    summary = summary_dict(RunResult(tmp_path, {}, [], [], usage, 12.0))
    console = Console(record=True, width=200)
    print_summary(console, summary)
    text = console.export_text()
    assert "153,592 prompt + 5,630 completion tokens" in text  # the total, then each stage
    for stage, line in lines:
        assert f"  {stage}" in text and line in text
