"""``server.py --enforce-policy``: the rules become guards that refuse with their message, over HTTP exactly as in
process (``EnvInstance(enforce_policy=True)``); without the flag the served tools stay permissive; an environment
without rules renders the server it always did."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from pipeline.catalog.env_dir import write_env_dir
from pipeline.ir import Environment
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.server import check_server, render_server
from pipeline.settings import BuildSettings
from pipeline.stages.policy.house_rules import make_policy
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from tests.fixtures.server import http, running_server


def with_rules(env: Environment) -> Environment:
    ruled = make_policy(env, fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value
    assert len(ruled.rules) >= 3
    return ruled


def calls_of(env: Environment) -> list[tuple[str, dict[str, Any]]]:
    """Every rule's allowed and forbidden calls, and a call of a tool no rule governs."""
    out = [(c.tool, c.arguments) for r in env.rules for c in [*r.allowed, *r.forbidden]]
    free = next(t for t in env.tools if t.kind == "read")
    return out + [(free.name, {p.name: 1 if p.type == "integer" else "BP-2025-014" for p in free.params})]


@pytest.mark.parametrize("make", [brewery_env, permit_env], ids=["brewery", "permits"])
def test_enforce_policy_refuses_over_http_as_in_process(tmp_path, make) -> None:
    env = with_rules(make())
    env_dir = write_env_dir(env, tmp_path / "env")
    assert check_server(env_dir)
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    refused = {(c.tool, str(c.arguments)): r.message for r in env.rules for c in r.forbidden}
    for enforce in (True, False):
        kinds = set()
        with EnvInstance(env, env_dir / "initial.db", enforce_policy=enforce) as inst, \
                running_server(env_dir, db, args=("--enforce-policy",) if enforce else ()) as base:
            for i, (name, args) in enumerate(calls_of(env)):
                inst.reset()
                expected = inst.call(name, args)
                # a session of its own per call: each starts from the initial state, as the instance does
                status, body = http("POST", f"{base}/tools/{name}", args, headers={"X-Session-Id": f"s{i}-{enforce}"})
                assert body == expected, (enforce, name, args)
                assert status == (200 if expected["ok"] else 400)
                kinds.add(expected.get("kind", "ok"))
                if enforce and (name, str(args)) in refused and not expected["ok"]:
                    assert expected["kind"] == "guard"
        # enforced, every forbidden call is refused by some rule (its own or an earlier one); permissive, none is
        assert kinds == ({"ok", "guard"} if enforce else {"ok"})
        if enforce:
            with EnvInstance(env, enforce_policy=True) as inst:
                for r in env.rules:
                    first = r.forbidden[0]
                    inst.reset()
                    got = inst.call(first.tool, first.arguments)
                    assert got["kind"] == "guard" and got["error"] in [x.message for x in env.rules]
    with sqlite3.connect(db) as served, sqlite3.connect(env_dir / "initial.db") as initial:
        assert list(served.iterdump()) == list(initial.iterdump())  # every call ran in its own session


def test_a_forbidden_call_is_refused_with_the_rule_message(tmp_path) -> None:
    env = with_rules(permit_env())
    rule = env.rules[0]
    call = rule.forbidden[0]
    env_dir = write_env_dir(env.model_copy(update={"rules": [rule]}), tmp_path / "env")
    db = tmp_path / "live.db"
    shutil.copyfile(env_dir / "initial.db", db)
    with running_server(env_dir, db, args=("--enforce-policy",)) as base:
        status, body = http("POST", f"{base}/tools/{call.tool}", call.arguments)
    assert (status, body) == (400, {"ok": False, "error": rule.message, "parameter": None, "kind": "guard"})
    with running_server(env_dir, db) as base:
        status, body = http("POST", f"{base}/tools/{call.tool}", call.arguments)
    assert status == 200 and body["ok"]


def test_server_help_names_the_flag_and_a_server_without_rules_is_unchanged(tmp_path) -> None:
    env = with_rules(brewery_env())
    env_dir = write_env_dir(env, tmp_path / "env")
    out = subprocess.run([sys.executable, str(env_dir / "server.py"), "--help"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and "--db" in out.stdout and "--enforce-policy" in out.stdout
    assert f"policy ({len(env.rules)} rules, see policy.md)" in out.stdout
    plain = render_server(brewery_env())
    ruled = render_server(env)
    assert "main_with_policy" not in plain and "The policy as guards" not in plain
    assert plain.endswith("    raise SystemExit(main(ENV, TOOL_SCHEMAS, ENV_ID, results=RESULT_SCHEMAS))\n")
    # with rules: the same server plus the policy section, and ENV holding the rules
    head = plain.split("\n# The environment (the IR of env.json)")[0].rsplit("\n", 1)[0]
    assert ruled.startswith(head.replace(brewery_env().env_id, env.env_id))
    assert ruled.endswith("    raise SystemExit(main_with_policy(main, ENV, TOOL_SCHEMAS, ENV_ID, results=RESULT_SCHEMAS))\n")
