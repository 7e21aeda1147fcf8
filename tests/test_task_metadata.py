"""``Task.metadata`` is typed (:class:`pipeline.ir.TaskMetadata`) and writes exactly what the untyped dict wrote:
only the keys given, in the order given, a None given as null; other keys and values its types do not take are
kept as written, so every task file loads and writes back the same bytes."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from pipeline.hashing import canonical_json
from pipeline.ir import Task, TaskMetadata
from tests.fixtures.library import library_env

GIVEN = {"worded_by": "llm", "tier": 2, "pass_rate": None, "later_key": {"a": 1}, "tools_used": ["find_member"],
         "pass_rate_ci": [0.0, 0.5], "steps": 3}


def test_it_dumps_the_keys_given_in_their_order_and_nothing_else() -> None:
    meta = TaskMetadata.model_validate(GIVEN)
    assert json.dumps(meta.model_dump(mode="json")) == json.dumps(GIVEN)  # same keys, same order
    assert meta.tier == 2 and meta.pass_rate is None and meta.hard_pool is None  # typed; absent reads None
    assert "pass_rate" in meta and "hard_pool" not in meta and meta.get("later_key") == {"a": 1}
    assert meta == GIVEN and {**meta, "x": 1} == {**GIVEN, "x": 1}
    assert TaskMetadata().model_dump(mode="json") == {}


def test_a_change_keeps_the_places_of_the_keys_given() -> None:
    meta = TaskMetadata.model_validate(GIVEN).with_values({"hard_pool": True, "tier": 3})
    assert list(meta.keys()) == [*GIVEN, "hard_pool"] and meta.tier == 3 and meta.hard_pool is True


def test_a_value_of_another_type_is_kept_as_written() -> None:
    odd = {"tier": "medium", "pass_rate": "n/a", "steps": 1}
    meta = TaskMetadata.model_validate(odd)
    assert meta.tier is None and meta.get("tier") == "medium" and meta.steps == 1
    assert json.dumps(meta.model_dump(mode="json")) == json.dumps(odd)


def test_a_task_file_line_round_trips_byte_for_byte() -> None:
    env = library_env()
    task = Task(task_id="t_1", env_id=env.env_id, instruction="Lend Matilda to Alice.", tools=[],
                reference_solution=[], verifier={"assertions": [], "mutable_tables": ["loans"]}, metadata=GIVEN)
    line = canonical_json(task)
    assert isinstance(task.metadata, TaskMetadata) and canonical_json(Task.model_validate_json(line)) == line
    assert json.loads(line)["metadata"] == GIVEN


def test_what_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(ValidationError):
        TaskMetadata.model_validate(["tier", 2])
