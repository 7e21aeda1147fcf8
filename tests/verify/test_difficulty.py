"""Difficulty: Wilson intervals, tags, the hard pool instead of rewording, the band policy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from pipeline.ir import Difficulty
from tests.fixtures.library import library_env, library_tasks
from verify.difficulty import (
    DifficultyPolicy,
    annotate,
    apply_policy,
    histogram,
    in_hard_pool,
    rewording_allowed,
    tag,
    wilson,
)


def _task(passes: int, attempts: int = 4):
    t = library_tasks(library_env())[0]
    return t.model_copy(update={"difficulty": Difficulty(attempts=attempts, passes=passes),
                                "task_id": f"{t.task_id}_{passes}_{attempts}"})


def test_wilson_interval_matches_the_formula() -> None:
    assert wilson(2, 4) == (0.15, 0.85)
    lo, hi = wilson(0, 4)
    assert lo == 0.0 and hi == pytest.approx(0.4899, abs=1e-4)
    lo, hi = wilson(4, 4)
    assert hi == 1.0 and lo == pytest.approx(0.5101, abs=1e-4)
    assert wilson(0, 0) is None
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    with pytest.raises(ValueError):
        wilson(5, 4)


def test_annotate_records_passes_rate_interval_and_the_hard_pool() -> None:
    t = library_tasks(library_env())[0]
    attempts = [SimpleNamespace(passed=p) for p in (True, False, False, False)]
    a = annotate(t, attempts)
    assert a.difficulty == Difficulty(attempts=4, passes=1)
    assert a.metadata["pass_rate"] == 0.25 and a.metadata["pass_rate_ci"] == list(wilson(1, 4))
    assert a.metadata["difficulty_tag"] == "hard" and a.metadata["hard_pool"] is False
    none = annotate(t, [SimpleNamespace(passed=False)] * 4)
    assert none.metadata["hard_pool"] is True and none.metadata["difficulty_tag"] == "hard_pool"
    assert in_hard_pool(none) and not in_hard_pool(annotate(t))  # untested is not the hard pool
    assert annotate(t).metadata["difficulty_tag"] == "untested" and annotate(t).metadata["pass_rate_ci"] is None
    assert [tag(r) for r in (None, 0.0, 0.25, 0.5, 1.0)] == ["untested", "hard_pool", "hard", "medium", "easy"]


def test_tag_mode_keeps_everything_and_band_mode_keeps_the_band_and_the_hard_pool() -> None:
    tasks = [_task(0), _task(1), _task(2), _task(4), _task(0, 0)]
    kept, dropped = apply_policy(tasks, DifficultyPolicy())
    assert len(kept) == 5 and not dropped
    assert all("pass_rate_ci" in t.metadata for t in kept)
    kept, dropped = apply_policy(tasks, DifficultyPolicy(mode="band"))  # default band 0.1-0.9
    assert [t.difficulty.passes for t in kept] == [0, 1, 2]  # 0/4 kept as the hard pool, flagged
    assert kept[0].metadata["hard_pool"] and not kept[1].metadata["hard_pool"]
    assert {d.item for d in dropped} == {tasks[3].task_id, tasks[4].task_id}
    assert "outside [0.1, 0.9]" in dropped[0].reason and dropped[0].evidence["pass_rate_ci"] == list(wilson(4, 4))
    kept, _ = apply_policy(tasks, DifficultyPolicy(mode="band", keep_hard_pool=False))
    assert [t.difficulty.passes for t in kept] == [1, 2]
    assert histogram(kept) == {"0": 0, "(0,0.25]": 1, "(0.25,0.5]": 1, "(0.5,0.75]": 0, "(0.75,1]": 0, "untested": 0}
    with pytest.raises(ValidationError, match="above"):
        DifficultyPolicy(min_pass_rate=0.8, max_pass_rate=0.2)


def test_a_proved_task_is_never_reworded() -> None:
    assert not rewording_allowed("task", "llm", proofs_ok=True)
    assert not rewording_allowed("data", "llm", proofs_ok=True)
    assert rewording_allowed("task", "rule", proofs_ok=False)
