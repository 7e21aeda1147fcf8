"""The last stage of a verification: accepted tasks re-derived on the environment as it ended, then the
difficulty policy; what it drops is data with its stage."""

from __future__ import annotations

from pipeline.ir import Difficulty, Rejection
from pipeline.settings import DifficultyPolicy
from pipeline.stages.tasks.finish import finish_tasks, rederived
from tests.fixtures.library import library_env, library_tasks


def _without(name: str):
    env = library_env()
    return env.model_copy(update={"tools": [t for t in env.tools if t.name != name]})


def test_tasks_made_for_the_environment_are_kept_as_they_are() -> None:
    env = library_env()
    tasks = library_tasks(env)
    res = finish_tasks(env, tasks, DifficultyPolicy())
    assert [t.task_id for t in res.value or ()] == [t.task_id for t in tasks] and res.rejections == ()
    assert all("difficulty_tag" in t.metadata for t in res.value or ())  # tag mode annotates every task
    assert rederived(env, tasks[0]) is tasks[0]


def test_on_a_repaired_environment_a_task_is_derived_again_or_dropped_with_its_stage() -> None:
    borrow, return_and_email = library_tasks(library_env())
    repaired = _without("update_member_email")  # a repair that another id and one tool fewer stand in for
    res = finish_tasks(repaired, [borrow, return_and_email], DifficultyPolicy())
    kept = list(res.value or ())
    assert len(kept) == 1 and kept[0].env_id == repaired.env_id and kept[0].instruction == borrow.instruction
    assert kept[0].provenance.get("rederived") is True
    [dropped] = res.rejections
    assert dropped.stage == "verify" and dropped.item == return_and_email.task_id
    assert dropped.reason.startswith("does not hold on the repaired environment")
    assert isinstance(rederived(repaired, return_and_email), Rejection)


def test_the_band_policy_drops_after_rederivation_in_that_order() -> None:
    env = library_env()
    borrow, return_and_email = library_tasks(env)
    easy = borrow.model_copy(update={"difficulty": Difficulty(attempts=4, passes=4)})
    middling = return_and_email.model_copy(update={"difficulty": Difficulty(attempts=4, passes=2)})
    repaired = _without("update_member_email")
    res = finish_tasks(repaired, [easy, middling], DifficultyPolicy(mode="band", max_pass_rate=0.9))
    assert res.value == ()  # the kept list may be empty: the caller decides what that means
    assert [r.stage for r in res.rejections] == ["verify", "difficulty"]
