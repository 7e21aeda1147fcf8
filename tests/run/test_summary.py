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


def test_the_summary_gives_prompt_tokens_read_beside_prompt_tokens(tmp_path: Path) -> None:
    """Issue 42: where the endpoint says how much of each prompt its prefix cache served, the summary gives the tokens
    read beside the prompt tokens, per stage and in all, and per verified environment beside the counted figure
    (which the 30,000 target is stated in)."""
    from rich.console import Console

    from pipeline.cli.run import print_summary, stage_lines
    from pipeline.run import merge_usage

    usage = merge_usage([
        {"tester": {"calls": 3, "cached": 0, "prompt_tokens": 3000, "completion_tokens": 150, "seconds": 9.0,
                    "prompt_read": 700}},
        {"tester": {"calls": 1, "cached": 0, "prompt_tokens": 200, "completion_tokens": 50, "seconds": 1.0},
         "tools": {"calls": 1, "cached": 0, "prompt_tokens": 100, "completion_tokens": 10, "seconds": 1.0}}])
    assert usage["tester"]["prompt_read"] == 900 and usage["tools"]["prompt_read"] == 100  # not said: read whole
    assert stage_lines(usage)[0][1] == "4 calls (0 from cache), 3,200 prompt (900 read) + 200 completion tokens, 10 s"
    envs = [{"status": "verified", "prompt_tokens": 3300, "completion_tokens": 210, "seconds": 11.0}]
    summary = summary_dict(RunResult(tmp_path, {}, envs, [], usage, 12.0))
    assert summary["tokens_per_verified_env"] == 3510 and summary["tokens_read_per_verified_env"] == 900 + 100 + 210
    console = Console(record=True, width=200)
    print_summary(console, summary)
    text = console.export_text()
    assert "3,510 tokens (1,210 with prompt tokens read), 11.0 s" in text
    assert "3,300 prompt (1,000 read) + 210 completion tokens" in text
    plain = summary_dict(RunResult(tmp_path, {}, envs, [], merge_usage([{"tools": usage["tools"]}]) | {
        "tools": {k: v for k, v in usage["tools"].items() if k != "prompt_read"}}, 12.0))
    assert "tokens_read_per_verified_env" not in plain  # an endpoint that says nothing: the summary as before
