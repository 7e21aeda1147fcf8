"""Refusals said (issue 41): a rule-bound task whose request the policy refuses in part ends its reference
transcript, plain and conversational, with a reply that says what was done (the reference's writes) and what was
refused, each refused write with its rule's own message, never "Done: the request has been carried out."; the
simulated user's checks (pipeline/runtime/usercheck.py) accept ending the conversation on it; the rule ids travel with the
task in every format (the SFT record's and task_info's ``refusals``).

The catalog: banks planned by code with rule-bound tasks on the brewery and the permit office, with their code-picked
rules (as ``tests/eval/test_eval_rules.py`` makes them). Until 2026-11-30 it was the committed example; its
regeneration of that day has no policy in either environment (the library's one rule was lost: see the CHANGELOG),
so it holds no refusal to check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.envdir import write_env_dir
from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import FINAL_REPLY, final_reply, refusals
from pipeline.ir import Difficulty
from pipeline.llm import fake_client
from pipeline.runtime import usercheck
from pipeline.settings import BuildSettings, TaskSettings
from pipeline.stages.policy.house_rules import make_policy
from pipeline.stages.tasks.bank import generate_tasks
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env
from verify.conversation import script_of


@pytest.fixture(scope="module")
def ruled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog of rule-bound banks: the brewery and the permit office, their rules picked by code, their tasks
    planned with ``rule_tasks`` and worded by code."""
    root = tmp_path_factory.mktemp("ruled")
    for make in (brewery_env, permit_env):
        env = make_policy(make(), fake_client([{"rules": []}] * 9), BuildSettings(policy=True)).value
        settings = TaskSettings(n_tasks=12, rule_tasks=True, max_attempts=1, template_fallback=True)
        tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
        tasks = [t.model_copy(update={"difficulty": Difficulty(attempts=2, passes=1)}) for t in tasks]
        write_env_dir(env, root / "envs" / env.env_id, tasks=tasks, report={"source": "tests/export/test_refusals"})
    return root


def forbidden(task) -> list[dict]:
    return [r for r in task.metadata.get("rules") or [] if r.get("verdict") == "forbids"]


def test_every_refusing_transcript_says_what_was_done_and_what_was_refused(tmp_path, ruled):
    cat = load_catalog(ruled)
    (sft,) = export_catalog(cat, "jsonl", tmp_path).paths
    plain = {r["task_id"]: r for r in map(json.loads, sft.read_text().splitlines())}
    talk = {r["task_id"]: r for r in map(json.loads, (tmp_path / "sft_conversation.jsonl").read_text().splitlines())}
    envs = {t.task_id: ce for ce in cat.envs.values() for t in ce.tasks}
    refusing = [t for t in cat.tasks if forbidden(t)]
    assert refusing
    for task in cat.tasks:
        ce = envs[task.task_id]
        rules = {r.id: r for r in ce.env.rules}
        for record in (plain[task.task_id], talk[task.task_id]):
            final = record["messages"][-1]
            assert final["role"] == "assistant"
            if not forbidden(task):
                assert "refusals" not in record
                continue
            text = final["content"]
            assert text != FINAL_REPLY and "carried out" not in text
            # each refused write: its rule's own message (the environment's words), its rule id with the task
            assert [r["rule"] for r in record["refusals"]] == [r["id"] for r in forbidden(task)]
            for r in record["refusals"]:
                assert r["message"] == rules[r["rule"]].message and r["message"] in text
                assert r["tool"] in text
            # what was done: every write of the reference, by its call
            kinds = {t.name: t.kind for t in ce.env.tools}
            for call in task.reference_solution:
                if kinds[call.tool] == "write":
                    assert call.tool in text.split("\n")[0]
            # the refused writes were not made
            made = [(c["function"]["name"], c["function"]["arguments"]) for m in record["messages"]
                    for c in m.get("tool_calls") or []]
            assert not [r for r in record["refusals"] if (r["tool"], r["arguments"]) in made]
        # the user may end the conversation on that reply: the code's checks of a user's turn find nothing
        script = script_of(ce.env, task)
        agent = [m["content"] for m in talk[task.task_id]["messages"][2:] if m["role"] == "assistant" and m.get("content")]
        user = [m["content"] for m in talk[task.task_id]["messages"][1:] if m["role"] == "user"]
        assert usercheck.check_turn(script.facts, script.hidden, [t.name for t in ce.env.tools], agent, user, "",
                                    True, len(user)) == []


def test_the_rule_ids_travel_with_the_task_in_every_format(tmp_path, ruled):
    cat = load_catalog(ruled)
    envs = {t.task_id: ce for ce in cat.envs.values() for t in ce.tasks}
    want = {t.task_id: refusals(envs[t.task_id], t) for t in cat.tasks if forbidden(t)}
    assert want
    for fmt in ("verifiers", "openenv", "verl"):
        export_catalog(cat, fmt, tmp_path / fmt)
        infos = {k: v for p in (tmp_path / fmt).rglob("task_info.json") for k, v in json.loads(p.read_text()).items()}
        got = {k: v["refusals"] for k, v in infos.items() if "refusals" in v}
        assert got == want, fmt
        for task_id in want:
            assert infos[task_id]["final_reply"] == final_reply(envs[task_id], cat.tasks[[t.task_id for t in
                                                                                             cat.tasks].index(task_id)])
