"""The batch run's input handling: bad seeds, bad config, another config's output directory."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.catalog import Catalog, CatalogError
from pipeline.cli import main
from pipeline.config import Config, ConfigError, validate_config
from pipeline.run import plan_from_config


@pytest.mark.parametrize("content,expect", [
    (None, "not found"),
    ("", "no seeds"),
    ("# only a comment\n", "no seeds"),
])
def test_bad_seed_file_exit_2_and_nothing_written(tmp_path, content, expect):
    seeds = tmp_path / "seeds.txt"
    if content is not None:
        seeds.write_text(content)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["run", "--seeds", str(seeds), "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert expect in r.output and "seeds.txt" in r.output
    assert not out.exists()


def test_malformed_jsonl_seed_names_line(tmp_path):
    seeds = tmp_path / "s.jsonl"
    seeds.write_text('{"name": "hotel booking"}\n{"name": \n')
    r = CliRunner().invoke(main, ["run", "--seeds", str(seeds), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "s.jsonl" in r.output and "2" in r.output
    assert not (tmp_path / "out").exists()


def test_bad_stage_key_is_named(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[stages.build]\nmax_atempts = 3\n")
    seeds = tmp_path / "s.txt"
    seeds.write_text("hotel booking\n")
    r = CliRunner().invoke(main, ["run", "--seeds", str(seeds), "--out", str(tmp_path / "o"), "--config", str(cfg)])
    assert r.exit_code == 2 and "stages.build.max_atempts" in r.output
    assert not (tmp_path / "o").exists()


def test_unknown_stage_section_is_named():
    with pytest.raises(ConfigError, match="stages.biuld"):
        plan_from_config(validate_config({"stages": {"biuld": {}}}))


def test_fingerprint_ignores_concurrency_but_not_model():
    a = plan_from_config(Config(), {"run": {"concurrency": 1}})
    b = plan_from_config(Config(), {"run": {"concurrency": 4}})
    c = plan_from_config(validate_config({"llm": {"embedded_model": "qwen2.5-coder-0.5b"}}))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_other_config_directory_is_refused_unless_told(tmp_path):
    cat = Catalog(tmp_path)
    cat.claim("aaa", allow_other=False)
    cat.claim("aaa", allow_other=False)
    with pytest.raises(CatalogError, match="another configuration.*--continue-other-config"):
        cat.claim("bbb", allow_other=False)
    cat.claim("bbb", allow_other=True)
    assert cat.fingerprint() == "bbb"
