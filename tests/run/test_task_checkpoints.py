"""Verification is checkpointed per task: an endpoint that dies while task 3 of 4 is tested loses nothing of
tasks 1-2. The rerun asks the LLM nothing about them (no wording, no tester, no checker request) and ends
with the same files as a run that was never interrupted. Both entries: ``envfoundry verify`` and
``envfoundry run`` (the same graph); the LLM is a scripted policy answering by the kind of request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import httpx
import pytest
from click.testing import CliRunner

from pipeline.config import Config
from pipeline.envdir import write_env_dir
from pipeline.llm import fake_client
from pipeline.run import plan_from_config, run_catalog
from tests.fixtures.library import library_env
from tests.stages import library_replies as lib

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
RESULTS = ("env.json", "tasks.jsonl", "report.json", "trajectories.jsonl")
SCENARIO = {"name": lib.SCENARIO.name, "description": lib.SCENARIO.description, "entities": ["member", "book"],
            "goals": ["lend a book", "return a book"], "simulation": "tables and tools", "suitable": True}


class Policy:
    """Answers each request by its kind; with ``die_at`` the endpoint fails (HTTP 503) on the tester's first
    request for that task (counted in the order tasks are tested)."""

    def __init__(self, die_at: int | None = None) -> None:
        self.die_at = die_at
        self.build = list(lib.all_replies())
        self.tested: list[str] = []  # task instructions, in the order the tester first saw them
        self.kinds: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> Any:
        first, last = messages[0]["content"], messages[-1]["content"]
        if "Domain seed:" in last:
            return self._kind("expand", SCENARIO)
        if "Values the message must state exactly as written" in last:
            must = re.search(r"Values the message must state exactly as written: (.*)", last).group(1)  # type: ignore[union-attr]
            values = [] if must.strip() == "(none)" else [v.strip().strip("'") for v in must.split(", ")]
            nth = ORDINALS[self.kinds.count("words") % len(ORDINALS)]  # every request worded apart
            return self._kind("words", {"user_request": f"My {nth} request, please: " + "; ".join(values) + "."})
        if first.startswith("You review how a database application"):
            return self._kind("checker", {"calls": [], "blame": "agent", "fault": "none", "target": "",
                                          "reason": "the assistant gave up"})
        if messages[0]["role"] == "system" and len(messages) > 1 and "tools" in first:  # the tester
            instruction = messages[1]["content"]
            if instruction not in self.tested:
                self.tested.append(instruction)
                if self.die_at == len(self.tested):
                    return httpx.Response(503, json={"error": {"message": "endpoint died"}})
            return self._kind("tester", {"thought": "no idea", "action": {"final_answer": "I could not do it."}})
        return self._kind("build", self.build.pop(0))

    def _kind(self, kind: str, reply: Any) -> Any:
        self.kinds.append(kind)
        return reply


def _client(policy: Policy) -> Any:
    return fake_client([policy] * 400, max_retries=0)


def _files(d: Path) -> dict[str, bytes]:
    return {name: (d / name).read_bytes() for name in RESULTS}


def _verify(env_dir: Path, policy: Policy, monkeypatch: pytest.MonkeyPatch) -> Any:
    from pipeline.cli import verify as cli

    monkeypatch.setattr(cli, "client_from_config", lambda config: _client(policy))
    group = click.Group()
    cli.register(group)
    return CliRunner().invoke(group, ["verify", str(env_dir), "--tasks", "4", "--attempts", "2", "--json"])


def test_verify_killed_after_two_tasks_resumes_without_asking_again(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    whole = write_env_dir(library_env(), tmp_path / "whole")
    straight = Policy()
    res = _verify(whole, straight, monkeypatch)
    assert res.exit_code == 0, res.output
    assert len(straight.tested) == 4 and json.loads(res.output)["tested"] == 4

    env_dir = write_env_dir(library_env(), tmp_path / "lib")
    dying = Policy(die_at=3)
    res = _verify(env_dir, dying, monkeypatch)
    assert res.exit_code != 0 and "endpoint died" in str(res.exception)
    assert dying.tested == straight.tested[:3]
    assert (env_dir / ".verify-checkpoints.sqlite").is_file()

    again = Policy()
    res = _verify(env_dir, again, monkeypatch)
    assert res.exit_code == 0, res.output
    assert again.tested == straight.tested[2:]  # tasks 1-2 are not asked again, nor worded again
    assert "words" not in again.kinds
    assert again.kinds.count("checker") == straight.kinds.count("checker") // 2
    assert _files(env_dir) == _files(whole)
    assert not (env_dir / ".verify-checkpoints.sqlite").exists()  # removed once verification finished


def test_run_killed_during_verification_resumes_from_the_next_task(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("public library lending\n")
    plan = plan_from_config(Config(), {"expand": {"scenarios_per_seed": 1}, "tester": {"attempts": 1},
                                       "run": {"tasks_per_env": 4}})
    plan.build = lib.small_settings(row_generators=False)  # the scripted build answers no generator choice

    straight = Policy()
    whole = run_catalog(seeds, tmp_path / "whole", plan, client_factory=lambda s: _client(straight))
    assert whole.counts["environments_verified"] == 1 and len(straight.tested) == 4

    dying = Policy(die_at=3)
    out = tmp_path / "cat"
    first = run_catalog(seeds, out, plan, client_factory=lambda s: _client(dying))
    assert first.counts["environments_failed"] == 1 and "endpoint died" in first.failed[0]["reason"]
    again = Policy()
    again.build = []  # the environment was built and checkpointed: no build stage may ask again
    second = run_catalog(seeds, out, plan, client_factory=lambda s: _client(again))
    assert second.counts["environments_verified"] == 1 and second.failed == []
    assert again.tested == straight.tested[2:]
    assert set(again.kinds) <= {"expand", "tester", "checker"}
    (env_id,) = [e["env_id"] for e in second.environments]
    assert _files(out / "envs" / env_id) == _files(tmp_path / "whole" / "envs" / env_id)
    assert (out / "task_bank.jsonl").read_bytes() == (tmp_path / "whole" / "task_bank.jsonl").read_bytes()
