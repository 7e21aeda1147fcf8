from __future__ import annotations

import pytest

from pipeline.config import ConfigError, load_config


def test_bad_key_is_named(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[llm]\ntemprature = 0.5\n")
    with pytest.raises(ConfigError, match=r"c.toml: unknown key 'llm.temprature'"):
        load_config(p)


def test_bad_value_is_named(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[llm]\ntemperature = 9\n")
    with pytest.raises(ConfigError, match=r"'llm.temperature'"):
        load_config(p)


def test_invalid_toml_names_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[llm\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(p)


def test_precedence_file_env_flags(tmp_path, monkeypatch):
    p = tmp_path / "c.toml"
    p.write_text('[llm]\nbase_url = "http://file/v1"\nmodel = "m-file"\n')
    monkeypatch.setenv("ENVFOUNDRY_MODEL", "m-env")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    cfg = load_config(p)
    assert cfg.llm.model == "m-file" and cfg.llm.api_key == "sk-secret"  # the file beats the environment
    cfg = load_config(p, {"llm": {"model": "m-flag", "seed": None}})
    assert cfg.llm.model == "m-flag" and cfg.llm.seed == 0
    assert "sk-secret" not in cfg.model_dump_json()


def test_endpoint_without_model_is_refused(monkeypatch):
    monkeypatch.delenv("ENVFOUNDRY_MODEL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match="llm.model"):
        load_config()
