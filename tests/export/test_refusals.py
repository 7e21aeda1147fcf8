"""Refusals said (issue 41): a rule-bound task whose request the policy refuses in part ends its reference
transcript, plain and conversational, with a reply that says what was done (the reference's writes) and what was
refused, each refused write with its rule's own message, never "Done: the request has been carried out."; the
simulated user's checks (pipeline/runtime/usercheck.py) accept ending the conversation on it; the rule ids travel with the
task in every format (the SFT record's and task_info's ``refusals``)."""

from __future__ import annotations

import json

from pipeline.export import export_catalog, load_catalog
from pipeline.export.common import FINAL_REPLY, final_reply, refusals
from pipeline.runtime import usercheck
from tests.export.conftest import EXAMPLE
from verify.conversation import script_of


def forbidden(task) -> list[dict]:
    return [r for r in task.metadata.get("rules") or [] if r.get("verdict") == "forbids"]


def test_every_refusing_transcript_says_what_was_done_and_what_was_refused(tmp_path):
    cat = load_catalog(EXAMPLE)
    (sft,) = export_catalog(cat, "jsonl", tmp_path).paths
    plain = {r["task_id"]: r for r in map(json.loads, sft.read_text().splitlines())}
    talk = {r["task_id"]: r for r in map(json.loads, (tmp_path / "sft_conversation.jsonl").read_text().splitlines())}
    envs = {t.task_id: ce for ce in cat.envs.values() for t in ce.tasks}
    refusing = [t for t in cat.tasks if forbidden(t)]
    # the example of 2026-11-28 (fourth) has one, the pharmacy's: its library planned no rule-bound task (README)
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


def test_the_rule_ids_travel_with_the_task_in_every_format(tmp_path):
    cat = load_catalog(EXAMPLE)
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
