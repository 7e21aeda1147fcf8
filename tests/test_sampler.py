"""``envfoundry sample`` (``pipeline.sampler``): fresh tasks from an environment's rows with no LLM, on the committed
example's environments and the hand-written fixtures (the brewery and the permit office also with their rules):
every sampled task proves, the same seed gives the same bytes, nothing repeats the bank or an excluded file, no LLM
client is made, and the levels ask for different things."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline import ir
from pipeline.catalog import jsonl_text, load_env_dir
from pipeline.cli import main as cli
from pipeline.llm import fake_client
from pipeline.runtime.replay import fresh
from pipeline.sampler import DISTRACTORS, Want, sample, sample_env_dir, task_keys
from pipeline.settings import BuildSettings
from pipeline.stages.policy.house_rules import make_policy
from tests.fixtures.brewery import brewery_env
from tests.fixtures.library import library_env, library_tasks
from tests.fixtures.permits import permit_env
from tests.fixtures.server import free_port
from verify.proofs import prove

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = sorted(p.parent for p in (ROOT / "generated" / "quickstart" / "envs").glob("*/env.json"))


def ruled(make) -> ir.Environment:
    """A fixture with the rules code proposes on its rows (the LLM's pick answered by a fake: code picks)."""
    return make_policy(make(), fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value


FIXTURES = {"library": (library_env, library_tasks), "brewery": (brewery_env, None),
            "brewery_rules": (lambda: ruled(brewery_env), None), "permits_rules": (lambda: ruled(permit_env), None)}


def fixture(name: str) -> tuple[ir.Environment, list[ir.Task]]:
    make, bank = FIXTURES[name]
    env = make()
    return env, (bank(env) if bank else [])


def assert_sampled(env: ir.Environment, tasks: list[ir.Task], initial_db: Path | None, bank: list[ir.Task]) -> None:
    assert tasks
    keys = task_keys(bank)
    for t in tasks:
        report = prove(env, t, initial_db=initial_db)
        assert report.ok, (t.instruction, report.reason())
        names = {r.name for r in report.results}
        if t.metadata.get("rules"):  # a rule-bound task met the rules' adversaries
            assert "overreach" in names, names
        m = t.metadata
        assert m["worded_by"] in ("template", "llm_template") and m["level"] in (1, 2, 3, 4, 5)
        assert t.provenance["stage"] == "sample"
        needed = {c.tool for c in t.reference_solution} | {r["tool"] for r in m.get("rules", [])}
        offered = [s["function"]["name"] if "function" in s else s["name"] for s in t.tools]
        assert needed <= set(offered) and set(m["distractors"]) == set(offered) - needed
        k = DISTRACTORS[m["level"]]
        assert len(m["distractors"]) == (len(env.tools) - len(needed) if k is None else
                                         min(k, len(env.tools) - len(needed)))
        assert not task_keys([t]) & keys, t.instruction  # not a task of the bank
    assert len(task_keys(tasks)) == 2 * len(tasks)  # no two sampled tasks share their calls or their effect


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_samples_prove_and_repeat_nothing(name: str) -> None:
    env, bank = fixture(name)
    got = sample(env, 12, seed=1, bank=bank)
    assert_sampled(env, got.tasks, None, bank)
    if env.rules:
        assert any(t.metadata["level"] == 5 for t in got.tasks)


@pytest.mark.parametrize("env_dir", QUICKSTART, ids=[p.name[:20] for p in QUICKSTART])
def test_example_samples_prove_and_repeat_nothing(env_dir: Path) -> None:
    env, bank, _ = load_env_dir(env_dir)
    got = sample_env_dir(env_dir, 10, seed=1)
    assert len(got.tasks) == 10
    assert_sampled(env, got.tasks, env_dir / "initial.db", bank)


def test_example_catalog_is_there() -> None:
    assert len(QUICKSTART) >= 2


def test_same_seed_same_bytes_other_seed_other_tasks() -> None:
    env, bank = fixture("brewery_rules")
    a = jsonl_text(sample(env, 8, seed=7, bank=bank).tasks)
    b = jsonl_text(sample(env, 8, seed=7, bank=bank).tasks)
    c = jsonl_text(sample(env, 8, seed=8, bank=bank).tasks)
    assert a == b and a != c


def test_excluded_tasks_are_never_repeated() -> None:
    env, bank = fixture("library")
    first = sample(env, 10, seed=3, bank=bank).tasks
    again = sample(env, 10, seed=3, bank=bank, exclude=first).tasks
    assert again and not task_keys(again) & (task_keys(first) | task_keys(bank))


@pytest.mark.parametrize("name", ["brewery_rules", "library"])
def test_levels_ask_for_different_things(name: str) -> None:
    env, bank = fixture(name)
    by_level = {lvl: sample(env, 6, seed=2, want=Want(level=lvl), bank=bank).tasks for lvl in (1, 2, 3, 4, 5)}
    for lvl, tasks in by_level.items():
        for t in tasks:
            ax, shape = t.metadata["axes"], t.metadata["shape"]
            assert t.metadata["level"] == lvl
            s = ax["structure"]
            if s == 1:
                assert ax["calls"] == 1
            elif s == 2:
                assert 2 <= ax["calls"] <= 3 and ax["writes"] <= 1
            elif s == 3:
                assert (ax["calls"] >= 4 or shape == "aggregate") and ax["writes"] <= 1 and not ax["implicit"]
            else:
                assert s == 4 and (ax["writes"] >= 2 or ax["implicit"])
            assert ax["rule_bound"] == bool(t.metadata.get("rules"))
            assert ax["refuses"] == any(r["verdict"] == "forbids" for r in t.metadata.get("rules", []))
            # a rule over a write adds a level; a request to refuse in part is level 5
            assert lvl == (5 if ax["refuses"] else min(5, s + ax["rule_bound"]))
            assert ax["distractors"] == len(t.metadata["distractors"])
    present = [lvl for lvl, ts in by_level.items() if ts]
    assert len(present) >= 4, {lvl: len(ts) for lvl, ts in by_level.items()}
    # deeper levels need more calls and offer more tools the task does not need
    mean = {lvl: sum(t.metadata["steps"] for t in ts) / len(ts) for lvl, ts in by_level.items() if ts}
    assert mean[1] == 1 and mean[2] > mean[1] and max(mean.values()) >= 3
    distract = {lvl: max(len(t.metadata["distractors"]) for t in ts) for lvl, ts in by_level.items() if ts}
    assert sorted(distract.values()) == [distract[lvl] for lvl in sorted(distract)]
    if env.rules:
        assert any(t.metadata["axes"]["refuses"] for t in by_level[5])
    else:
        assert not by_level[5]


def test_tier_and_writes_filters() -> None:
    env, bank = fixture("library")
    tier2 = sample(env, 5, seed=1, want=Want(tier=2), bank=bank).tasks
    assert tier2 and all(t.metadata["tier"] == 2 for t in tier2)
    two = sample(env, 5, seed=1, want=Want(writes=2), bank=bank).tasks
    assert two and all(t.metadata["axes"]["writes"] == 2 for t in two)
    with pytest.raises(ValueError, match="level or a tier"):
        Want(level=1, tier=1)


def test_a_small_environment_says_how_many_it_holds() -> None:
    env, bank = fixture("library")
    got = sample(env, 500, seed=1, want=Want(level=3), bank=bank)
    assert got.exhausted and len(got.tasks) < 500
    assert f"holds only {len(got.tasks)}" in got.summary()
    assert "no rules" in sample(env, 5, want=Want(level=5)).summary()


# ---------------------------------------------------------------- the command


def _env_dir(tmp_path: Path) -> Path:
    from pipeline.catalog import write_env_dir

    env = library_env()
    return write_env_dir(env, tmp_path / "library", library_tasks(env))


def test_cli_fills_the_environment_s_templates_without_any_llm(tmp_path: Path, no_llm: None) -> None:
    """``templates.json`` beside the environment: a chain of a templated kind is worded by filling its template
    (``llm_template``), the others by code; still no LLM."""
    from pipeline.catalog.env_dir import TEMPLATES
    from pipeline.stages.tasks import templates as ph
    from pipeline.stages.tasks.planner import shuffled_planner

    d = _env_dir(tmp_path)
    env = library_env()
    with fresh(env, d / "initial.db") as run:
        groups = ph.kinds(env, shuffled_planner(env, run), d / "initial.db")
    made = [t for g in groups if (t := ph.slotted(g[0])) is not None]
    (d / TEMPLATES).write_text(json.dumps(ph.to_json([ph.Template(t.key, "Hello, " + t.text, t.slots)
                                                      for t in made])))
    out = tmp_path / "s.jsonl"
    r = CliRunner().invoke(cli, ["sample", str(d), "--n", "6", "--seed", "4", "--out", str(out)])
    assert r.exit_code == 0, r.output
    tasks = [json.loads(x) for x in out.read_text().splitlines()]
    filled = [t for t in tasks if t["metadata"]["worded_by"] == "llm_template"]
    assert filled and all(t["instruction"].startswith("Hello, ") for t in filled)
    assert all(not t["instruction"].startswith("Hello, ") for t in tasks if t not in filled)
    (d / TEMPLATES).write_text("{not json")
    bad = CliRunner().invoke(cli, ["sample", str(d), "--n", "1", "--seed", "4"])
    assert bad.exit_code == 2 and "templates.json: not a templates file" in bad.output


@pytest.fixture
def no_llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An unreachable endpoint configured, and any LLM client or OpenAI client made fails the test."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("ENVFOUNDRY_HOME", str(tmp_path / "no-models"))

    def refuse(*a, **k):
        raise AssertionError("the sampler made an LLM client")

    import openai

    import pipeline.llm.client

    monkeypatch.setattr(pipeline.llm.client.LLMClient, "__init__", refuse)
    monkeypatch.setattr(openai.OpenAI, "__init__", refuse)


def test_cli_writes_records_and_a_closing_line_without_any_llm(tmp_path: Path, no_llm: None) -> None:
    d = _env_dir(tmp_path)
    out = tmp_path / "s.jsonl"
    r = CliRunner().invoke(cli, ["sample", str(d), "--n", "6", "--seed", "4", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "6 distinct proved task(s) sampled" in r.output
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(x)["metadata"]["worded_by"] == "template" for x in lines)
    r2 = CliRunner().invoke(cli, ["sample", str(d), "--n", "6", "--seed", "4"])
    assert r2.exit_code == 0 and r2.stdout == out.read_text()  # stdout: the same bytes; the closing line on stderr
    more = tmp_path / "more.jsonl"
    r3 = CliRunner().invoke(cli, ["sample", str(d), "--n", "6", "--seed", "4", "--exclude", str(out), "--out",
                                  str(more), "--json"])
    assert r3.exit_code == 0, r3.output
    assert json.loads(r3.stdout)["found"] == len(more.read_text().splitlines())
    firsts = {json.dumps(json.loads(x)["reference_solution"]) for x in lines}
    assert not firsts & {json.dumps(json.loads(x)["reference_solution"]) for x in more.read_text().splitlines()}


def test_cli_at_a_level_the_environment_lacks_says_so(tmp_path: Path, no_llm: None) -> None:
    r = CliRunner().invoke(cli, ["sample", str(_env_dir(tmp_path)), "--n", "3", "--level", "5"])
    assert r.exit_code == 0 and "0 distinct proved task(s)" in r.output and "holds only 0" in r.output


def test_cli_errors_name_the_problem_and_exit_2(tmp_path: Path) -> None:
    d = _env_dir(tmp_path)
    r = CliRunner().invoke(cli, ["sample", str(tmp_path), "--n", "1"])
    assert r.exit_code == 2 and "no env.json" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(library_tasks()[0].model_dump_json() + "\n" + '{"task_id": "x"}\n')
    r = CliRunner().invoke(cli, ["sample", str(d), "--n", "1", "--exclude", str(bad)])
    assert r.exit_code == 2 and f"{bad}:2:" in r.output and "env_id" in r.output
    r = CliRunner().invoke(cli, ["sample", str(d), "--level", "2", "--tier", "2"])
    assert r.exit_code == 2 and "not both" in r.output
    r = CliRunner().invoke(cli, ["sample", str(d), "--exclude", str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2 and "missing.jsonl" in r.output
    assert CliRunner().invoke(cli, ["sample", "--help"]).exit_code == 0


def test_the_installed_command_reaches_no_endpoint(tmp_path: Path) -> None:
    """The real command in its own process, with an unreachable endpoint and no embedded model: it never asks."""
    d = _env_dir(tmp_path)
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1",
           "ENVFOUNDRY_HOME": str(tmp_path / "no-models")}
    p = subprocess.run([sys.executable, "-m", "pipeline.cli", "sample", str(d), "--n", "4", "--seed", "9"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 4 and "4 distinct proved task(s)" in p.stderr


# ---------------------------------------------------------------- fresh states (--perturb)


def test_perturbed_samples_prove_on_their_own_database_and_change_answers(tmp_path: Path) -> None:
    from pipeline.perturb import perturbed_db, sha256

    same_text_other_answer = 0
    for env_dir in QUICKSTART:
        env, bank, _ = load_env_dir(env_dir)
        dbs = tmp_path / env_dir.name
        dbs.mkdir()
        got = sample_env_dir(env_dir, 20, seed=1, perturb_dir=dbs)
        assert len(got.tasks) == 20
        for t in got.tasks:
            state = t.metadata["perturb"]
            db = dbs / state["db"]
            assert sha256(db) == state["sha256"] != sha256(env_dir / "initial.db")
            again = perturbed_db(env, env_dir / "initial.db", state["key"], tmp_path / "again.db")
            assert sha256(again) == state["sha256"]  # the key alone derives the task's database
            report = prove(env, t, initial_db=db)
            assert report.ok, (t.instruction, report.reason())
        assert not task_keys(got.tasks) & {k for k in task_keys(bank) if k.startswith("answer:") or
                                           k.startswith("state:")}
        # 20, not 8: the planner draws its rows through the whole table (a38e3df), so the fresh state and the
        # initial one share fewer requests (1 and 0 of 8 on the example's two environments, 3 and 5 of 20)
        plain = {t.instruction: t for t in sample_env_dir(env_dir, 20, seed=1).tasks}
        same_text_other_answer += sum(1 for t in got.tasks if t.instruction in plain and
                                      t.verifier != plain[t.instruction].verifier)
        assert sorted(p.name for p in dbs.iterdir()) == sorted({t.metadata["perturb"]["db"] for t in got.tasks})
    assert same_text_other_answer >= 1  # the same request, another answer on the fresh state


def test_a_second_sample_into_the_same_folder_keeps_the_first_one_s_databases(tmp_path: Path) -> None:
    from pipeline.perturb import sha256

    env_dir = QUICKSTART[-1]
    first = sample_env_dir(env_dir, 3, seed=1, want=Want(level=1), perturb_dir=tmp_path)
    used = {t.metadata["perturb"]["db"]: t.metadata["perturb"]["sha256"] for t in first.tasks}
    second = sample_env_dir(env_dir, 3, seed=1, want=Want(writes=99), perturb_dir=tmp_path, max_rounds=2)
    assert not second.tasks
    for name, digest in used.items():  # the rounds that found nothing leave the first sample's files alone
        assert (tmp_path / name).is_file() and sha256(tmp_path / name) == digest, name
    assert {p.name for p in tmp_path.iterdir()} == set(used) | {t.metadata["perturb"]["db"] for t in second.tasks}


def test_cli_perturb_writes_the_databases_beside_the_tasks(tmp_path: Path, no_llm: None) -> None:
    if not QUICKSTART:
        pytest.fail("the committed example catalog generated/quickstart has no environment")
    out = tmp_path / "s.jsonl"
    r = CliRunner().invoke(cli, ["sample", str(QUICKSTART[0]), "--n", "3", "--seed", "2", "--perturb", "--out",
                                 str(out)])
    assert r.exit_code == 0, r.output
    names = {json.loads(x)["metadata"]["perturb"]["db"] for x in out.read_text().splitlines()}
    assert names and all((tmp_path / "s.dbs" / n).is_file() for n in names)
    r = CliRunner().invoke(cli, ["sample", str(QUICKSTART[0]), "--n", "3", "--perturb"])
    assert r.exit_code == 2 and "--out" in r.output


def test_the_independent_checker_passes_sampled_tasks(tmp_path: Path) -> None:
    """../shared/tools/check_envs.py on an example environment whose tasks.jsonl holds sampled tasks of every level
    it has: each reference replays over HTTP against server.py alone and passes, the initial state fails."""
    import shutil

    from tests.test_server_check_envs import CHECKER

    if not QUICKSTART:
        pytest.fail("the committed example catalog generated/quickstart has no environment")
    d = tmp_path / QUICKSTART[0].name
    shutil.copytree(QUICKSTART[0], d)
    tasks = [t for lvl in (1, 2, 3, 4, 5) for t in sample_env_dir(d, 3, seed=11, want=Want(level=lvl)).tasks]
    (d / "tasks.jsonl").write_text(jsonl_text(tasks))
    env_vars = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(CHECKER), sys.executable, str(d)], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path, env=env_vars)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["problems"] == [] and summary["tasks"] == len(tasks) >= 9
    assert summary["ref_pass"] == summary["neg_ok"] == len(tasks) and summary["server_errors"] == 0
