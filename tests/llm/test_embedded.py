"""Embedded model assembly (integrity checks); the real model end to end: ``test_embedded_real.py``."""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.llm import embedded
from pipeline.llm.embedded import ModelError, ModelSpec, ensure_model


@pytest.fixture()
def tiny_model(tmp_path, monkeypatch):
    parts = [tmp_path / "p1.bin", tmp_path / "p2.bin"]
    parts[0].write_bytes(b"GGUF" + b"a" * 100)
    parts[1].write_bytes(b"b" * 50)
    digest = hashlib.sha256(parts[0].read_bytes() + parts[1].read_bytes()).hexdigest()
    spec = ModelSpec("tiny", "tiny.gguf", "tiny_part", 2, 154, digest)
    monkeypatch.setitem(embedded.MODELS, "tiny", spec)
    monkeypatch.setattr(embedded, "_part_paths", lambda s: parts)
    monkeypatch.setenv("ENVFOUNDRY_HOME", str(tmp_path / "home"))
    return spec, parts


def test_assembles_once_and_verifies(tiny_model):
    spec, parts = tiny_model
    path = ensure_model("tiny")
    assert path.read_bytes() == parts[0].read_bytes() + parts[1].read_bytes()
    mtime = path.stat().st_mtime_ns
    assert ensure_model("tiny").stat().st_mtime_ns == mtime  # second call: no re-assembly


def test_hash_mismatch_is_refused_and_leaves_no_file(tiny_model, monkeypatch):
    spec, parts = tiny_model
    monkeypatch.setitem(embedded.MODELS, "tiny", spec.__class__(**{**spec.__dict__, "sha256": "0" * 64}))
    with pytest.raises(ModelError, match="sha256 .* expected 0000.*run the set-up command"):
        ensure_model("tiny")
    assert not list((embedded.model_dir()).glob("tiny.gguf*"))


def test_damaged_cached_file_is_reassembled(tiny_model):
    path = ensure_model("tiny")
    path.write_bytes(b"corrupted")
    assert ensure_model("tiny").stat().st_size == 154


def test_unknown_model_is_named():
    with pytest.raises(ModelError, match="unknown embedded model 'nope'"):
        ensure_model("nope")


def test_cli_unreachable_endpoint_is_one_line_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[llm]\nmax_retries = 0\ncache_path = "{tmp_path / "c.sqlite"}"\n')
    r = CliRunner().invoke(main, ["llm", "check", "--config", str(cfg), "--base-url", "http://127.0.0.1:9/v1",
                                  "--model", "m"])
    assert r.exit_code == 1
    assert "error: cannot reach LLM endpoint http://127.0.0.1:9/v1" in r.output
    assert "Traceback" not in r.output
