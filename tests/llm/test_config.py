"""Configuration layers (defaults < TOML < environment < flags), each beating the one below, and the one
formatter of validation errors (file or variable, dotted key, value)."""

from __future__ import annotations

import json
import os

import click
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from pipeline.cli import main
from pipeline.cli.common import llm_options
from pipeline.config import ConfigError, env_name, load_config, validate_config, with_flags
from pipeline.run import plan_from_config
from pipeline.settings import BuildSettings, LLMSettings, Stages, format_validation_error


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No configuration variable of the machine running the tests leaks into them."""
    for name in list(os.environ):
        if name.upper().startswith(("ENVFOUNDRY_", "OPENAI_")) and name.upper() != "ENVFOUNDRY_HOME":
            monkeypatch.delenv(name)


@pytest.fixture
def toml(tmp_path):
    def write(text: str):
        p = tmp_path / "c.toml"
        p.write_text(text)
        return p
    return write


# ---------------------------------------------------------------- each layer, and each beating the one below


def test_defaults():
    cfg = load_config()
    assert cfg.llm == LLMSettings() and cfg.stages == Stages() and cfg.stages.recorded() == {}
    assert cfg.llm.concurrency == 2 and cfg.llm.base_url is None


def test_toml_beats_defaults(toml):
    cfg = load_config(toml("[llm]\nconcurrency = 3\nseed = 5\n[stages.build]\nmax_attempts = 2\n"))
    assert cfg.llm.concurrency == 3 and cfg.llm.seed == 5 and cfg.llm.temperature == 0.0
    assert cfg.stages.build == BuildSettings(max_attempts=2) and cfg.stages.recorded() == {"build": {"max_attempts": 2}}


def test_environment_beats_toml(toml, monkeypatch):
    path = toml('[llm]\nconcurrency = 3\nseed = 5\nbase_url = "http://file/v1"\nmodel = "m-file"\n'
                '[stages.build]\nmax_attempts = 2\nrows_min = 4\n')
    monkeypatch.setenv("ENVFOUNDRY_LLM__CONCURRENCY", "7")
    monkeypatch.setenv("ENVFOUNDRY_MODEL", "m-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    monkeypatch.setenv("ENVFOUNDRY_STAGES__BUILD__MAX_ATTEMPTS", "5")
    cfg = load_config(path)
    assert cfg.llm.concurrency == 7 and cfg.llm.seed == 5  # a variable replaces one key, the file keeps the rest
    assert cfg.llm.model == "m-env" and cfg.llm.base_url == "http://env/v1"
    assert cfg.stages.build == BuildSettings(max_attempts=5, rows_min=4)


def test_environment_beats_defaults_without_a_file(monkeypatch):
    monkeypatch.setenv("ENVFOUNDRY_LLM__CACHE", "false")
    monkeypatch.setenv("ENVFOUNDRY_LLM__TEMPERATURE", "0.5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    cfg = load_config()
    assert cfg.llm.cache is False and cfg.llm.temperature == 0.5 and cfg.llm.api_key == "sk-secret"
    assert "sk-secret" not in cfg.model_dump_json() and "sk-secret" not in repr(cfg)


def test_long_variable_beats_short_one_and_empty_ones_are_ignored(toml, monkeypatch):
    monkeypatch.setenv("ENVFOUNDRY_MODEL", "m-short")
    monkeypatch.setenv("ENVFOUNDRY_LLM__MODEL", "m-long")
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    monkeypatch.setenv("ENVFOUNDRY_LLM__SEED", "")
    cfg = load_config(toml('[llm]\nbase_url = "http://file/v1"\nseed = 4\n'))
    assert cfg.llm.model == "m-long" and cfg.llm.base_url == "http://file/v1" and cfg.llm.seed == 4


def test_flags_beat_environment_and_none_means_not_given(toml, monkeypatch):
    path = toml('[llm]\nbase_url = "http://file/v1"\nmodel = "m-file"\nseed = 5\n')
    monkeypatch.setenv("ENVFOUNDRY_MODEL", "m-env")
    monkeypatch.setenv("ENVFOUNDRY_LLM__SEED", "6")
    cfg = load_config(path, {"llm": {"model": "m-flag", "seed": None, "temperature": None}})
    assert cfg.llm.model == "m-flag" and cfg.llm.seed == 6 and cfg.llm.temperature == 0.0
    cfg = load_config(path, {"llm": {"seed": 7}, "stages": {"build": {"max_attempts": 1}}})
    assert cfg.llm.seed == 7 and cfg.llm.model == "m-env" and cfg.stages.recorded() == {"build": {"max_attempts": 1}}


def test_command_line_flags_beat_environment(toml, monkeypatch):
    """The real path: click flags of ``llm_options`` over a variable over the file."""

    @click.command()
    @llm_options
    def show(config):
        click.echo(json.dumps(config.llm.model_dump(mode="json")))

    path = toml("[llm]\nseed = 1\ntemperature = 0.1\nconcurrency = 3\n")
    monkeypatch.setenv("ENVFOUNDRY_LLM__SEED", "2")
    monkeypatch.setenv("ENVFOUNDRY_LLM__TEMPERATURE", "0.2")
    out = CliRunner().invoke(show, ["--config", str(path), "--seed", "3"])
    assert out.exit_code == 0, out.output
    llm = json.loads(out.output)
    assert (llm["seed"], llm["temperature"], llm["concurrency"]) == (3, 0.2, 3)


def test_stage_flags_of_a_command_go_through_the_layers(toml, monkeypatch):
    """A command's own stage options (``llm_options(stages=...)``) beat the variable and the file, and are
    not passed to the command: it reads them from ``config.stages``."""

    @click.command()
    @click.option("--attempts", type=int, default=None)
    @llm_options(stages={"attempts": "tester.attempts"})
    def show(config):
        click.echo(json.dumps([config.stages.tester.attempts, config.stages.tester.max_turns]))

    path = toml("[stages.tester]\nattempts = 1\nmax_turns = 3\n")
    monkeypatch.setenv("ENVFOUNDRY_STAGES__TESTER__ATTEMPTS", "2")
    assert json.loads(CliRunner().invoke(show, ["--config", str(path)]).output) == [2, 3]
    assert json.loads(CliRunner().invoke(show, ["--config", str(path), "--attempts", "5"]).output) == [5, 3]


def test_env_name():
    assert env_name("llm.concurrency") == "ENVFOUNDRY_LLM__CONCURRENCY"
    assert env_name("stages.build.max_attempts") == "ENVFOUNDRY_STAGES__BUILD__MAX_ATTEMPTS"


# ---------------------------------------------------------------- errors name the layer, the key and the value


def test_bad_key_is_named(toml):
    with pytest.raises(ConfigError, match=r"c.toml: unknown key 'llm.temprature'$"):
        load_config(toml("[llm]\ntemprature = 0.5\n"))


def test_bad_value_is_named(toml):
    with pytest.raises(ConfigError) as e:
        load_config(toml("[llm]\ntemperature = 5\n"))
    assert str(e.value).endswith("c.toml: 'llm.temperature': Input should be less than or equal to 2 (got 5)")


def test_bad_stage_table_is_named_with_its_file(toml):
    with pytest.raises(ConfigError) as e:
        load_config(toml("[stages.build]\nmax_attempts = 99\n[stages.biuld]\nx = 1\n"))
    assert str(e.value).endswith("c.toml: 'stages.build.max_attempts': Input should be less than or equal "
                                 "to 10 (got 99); unknown key 'stages.biuld'")


def test_bad_environment_value_names_the_variable(toml, monkeypatch):
    monkeypatch.setenv("ENVFOUNDRY_LLM__TEMPERATURE", "5")
    monkeypatch.setenv("ENVFOUNDRY_LLM__TEMPRATURE", "0")
    with pytest.raises(ConfigError) as e:
        load_config(toml("[llm]\nseed = 'x'\n"))
    msg = str(e.value)
    assert "ENVFOUNDRY_LLM__TEMPERATURE: 'llm.temperature': Input should be less than or equal to 2 (got '5')" in msg
    assert "ENVFOUNDRY_LLM__TEMPRATURE: unknown key 'llm.temprature'" in msg
    assert "c.toml: 'llm.seed': Input should be a valid integer" in msg


def test_bad_table_variable_is_named(monkeypatch):
    monkeypatch.setenv("ENVFOUNDRY_LLM", "not json")
    with pytest.raises(ConfigError, match=r"^ENVFOUNDRY_LLM: not a JSON table"):
        load_config()


def test_bad_flag_is_named():
    with pytest.raises(ConfigError, match=r"^command line: 'llm.temperature': .* \(got 7.0\)$"):
        load_config(None, {"llm": {"temperature": 7.0}})


def test_invalid_toml_names_file(toml):
    with pytest.raises(ConfigError, match=r"c.toml: not valid TOML"):
        load_config(toml("[llm\n"))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"config file .*nope.toml not found"):
        load_config(tmp_path / "nope.toml")


def test_endpoint_without_model_is_refused(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"^OPENAI_BASE_URL: 'llm.model' is required"):
        load_config()


def test_validate_config_checks_stage_tables():
    with pytest.raises(ConfigError, match=r"^x.toml: unknown key 'stages.dedup.treshold'$"):
        validate_config({"stages": {"dedup": {"treshold": 0.6}}}, "x.toml")
    with pytest.raises(ConfigError, match=r"^config: 'stages.verify.fix_rounds': .* \(got -1\)$"):
        validate_config({"stages": {"verify": {"fix_rounds": -1}, "tester": {"attempts": 2}}})


def test_an_agent_has_one_table(toml):
    """``[stages.tester]`` is the tester's only table: the same keys under ``[stages.verify]`` are refused."""
    with pytest.raises(ConfigError, match=r"c.toml: unknown key 'stages.verify.tester'$"):
        load_config(toml("[stages.verify.tester]\nattempts = 2\n"))
    cfg = load_config(toml("[stages.verify]\nfix_rounds = 1\n[stages.tester]\nattempts = 3\n[stages.tasks]\n"
                           "n_tasks = 4\n"))
    v = cfg.stages.verification()
    assert (v.fix_rounds, v.tester.attempts, v.tasks.n_tasks, v.checker.use_llm) == (1, 3, 4, True)


def test_bad_stage_variable_and_flag_are_named(toml, monkeypatch):
    monkeypatch.setenv("ENVFOUNDRY_STAGES__TESTER__ATTEMPTS", "0")
    with pytest.raises(ConfigError, match=r"^ENVFOUNDRY_STAGES__TESTER__ATTEMPTS: 'stages.tester.attempts': "):
        load_config(toml("[stages.tester]\nmax_turns = 3\n"))
    monkeypatch.delenv("ENVFOUNDRY_STAGES__TESTER__ATTEMPTS")
    cfg = load_config(toml("[stages.difficulty]\nmin_pass_rate = 0.5\n"))
    with pytest.raises(ConfigError, match=r"^command line: 'stages.difficulty': .*min_pass_rate 0.5 is above "):
        with_flags(cfg, {"stages": {"difficulty": {"max_pass_rate": 0.2, "mode": None}}})
    assert with_flags(cfg, {"stages": {"difficulty": {"max_pass_rate": 0.7}}}).stages.difficulty.min_pass_rate == 0.5


def test_recorded_stages_are_what_was_set_without_secrets(toml):
    """What a run records of its stage settings (``runs.config``): the tables as set by the file and the
    flags, never a default, never an API key; a plan's overrides are part of it."""
    cfg = load_config(toml('[stages.tester]\nattempts = 2\nmodel = "t"\nbase_url = "http://t/v1"\n'
                           'api_key = "sk-secret"\n[stages.build]\nrows_per_table = 10\n'))
    assert (cfg.stages.tester.attempts, cfg.stages.tester.api_key) == (2, "sk-secret")
    plan = plan_from_config(cfg, {"run": {"concurrency": 3, "max_scenarios": None}})
    assert plan.config.stages.recorded() == {"build": {"rows_per_table": 10}, "run": {"concurrency": 3},
                                             "tester": {"attempts": 2, "base_url": "http://t/v1", "model": "t"}}
    assert plan.config.stages.tester.api_key == "sk-secret" and plan.run.concurrency == 3


# ---------------------------------------------------------------- every command reports a bad stage table alike


def _commands(tmp_path) -> dict[str, list[str]]:
    seeds = tmp_path / "s.txt"
    seeds.write_text("hotel booking\n")
    env = tmp_path / "env"
    env.mkdir()
    return {"run": ["run", "--seeds", str(seeds), "--out", str(tmp_path / "out")],
            "verify": ["verify", str(env)],
            "eval": ["eval", str(env), "--out", str(tmp_path / "eval")],
            "build": ["build", "--scenario", "a hotel", "--out", str(tmp_path / "built")],
            "expand": ["expand", "--seeds", str(seeds), "--out", str(tmp_path / "x.jsonl")]}


@pytest.mark.parametrize("text,message", [
    ("[stages.tester]\natempts = 2\n", "unknown key 'stages.tester.atempts'"),
    ("[stages.biuld]\nx = 1\n", "unknown key 'stages.biuld'"),
    ("[stages.eval]\nattempts = 0\n", "'stages.eval.attempts': Input should be greater than or equal to 1 (got 0)"),
])
def test_every_command_names_a_bad_stage_key_the_same_way(tmp_path, toml, text, message):
    path = toml(text)
    seen = {name: CliRunner().invoke(main, [*args, "--config", str(path)]) for name, args in _commands(tmp_path).items()}
    assert {name: (r.exit_code, r.output) for name, r in seen.items()} == {
        name: (2, f"Error: {path}: {message}\n") for name in seen}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "env", "s.txt"]  # nothing written


# ---------------------------------------------------------------- the formatter itself


def _error(model, data) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        model.model_validate(data)
    return e.value


def test_formatter_names_source_key_and_value():
    err = _error(LLMSettings, {"temperature": 5, "temprature": 1, "seed": "x" * 200})
    msg = format_validation_error(err, "c.toml", prefix="llm")
    assert msg.startswith("c.toml: 'llm.temperature': Input should be less than or equal to 2 (got 5); ")
    assert "'llm.seed': Input should be a valid integer, unable to parse string as an integer (got 'xxx" in msg
    assert "...)" in msg and len(msg) < 400  # a long value is cut
    assert msg.endswith("; unknown key 'llm.temprature'")


def test_formatter_whole_model_check_shows_no_value():
    msg = format_validation_error(_error(BuildSettings, {"intents_min": 9}), prefix="stages.build")
    assert msg == "'stages.build': Value error, intents_min (9) is larger than intents_max (7)"


def test_formatter_origin_per_key():
    err = _error(LLMSettings, {"temperature": 5, "seed": "x"})
    msg = format_validation_error(err, "c.toml", prefix="llm",
                                  origin=lambda key: env_name(key) if key == "llm.seed" else None)
    assert msg == ("c.toml: 'llm.temperature': Input should be less than or equal to 2 (got 5); "
                   "ENVFOUNDRY_LLM__SEED: 'llm.seed': Input should be a valid integer, unable to parse string "
                   "as an integer (got 'x')")


def test_a_bad_stage_flag_is_named_like_a_bad_key_of_the_file(tmp_path, toml):
    env = tmp_path / "env"
    env.mkdir()
    flags = CliRunner().invoke(main, ["verify", str(env), "--min-pass-rate", "0.9", "--max-pass-rate", "0.1"])
    path = toml("[stages.difficulty]\nmin_pass_rate = 0.9\nmax_pass_rate = 0.1\n")
    file = CliRunner().invoke(main, ["verify", str(env), "--config", str(path)])
    problem = "'stages.difficulty': Value error, min_pass_rate 0.9 is above max_pass_rate 0.1\n"
    assert (flags.exit_code, flags.output) == (2, f"Error: command line: {problem}")
    assert (file.exit_code, file.output) == (2, f"Error: {path}: {problem}")
