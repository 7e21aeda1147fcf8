"""The real embedded model expands the quickstart seed into two distinct, suitable scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.scenarios.expand import ExpandSettings, expand_seed
from pipeline.seeds import load_seeds, normalise

QUICKSTART = Path(__file__).resolve().parents[2] / "seeds" / "quickstart.txt"


@pytest.mark.real_llm
def test_real_model_expands_one_seed_into_two_scenarios(real_llm: object) -> None:
    seed = load_seeds(QUICKSTART)[0]
    result = expand_seed(seed, real_llm, ExpandSettings(scenarios_per_seed=2, extra_attempts=2))
    for r in result.rejections:
        print("rejected:", r.reason)
    scenarios = result.value or ()
    for s in scenarios:
        print("accepted:", s.model_dump_json())
    assert len(scenarios) == 2, [r.reason for r in result.rejections]
    assert normalise(scenarios[0].name) != normalise(scenarios[1].name)
    for s in scenarios:
        assert s.seed == seed.name and len(s.description) >= 20
        assert 2 <= len(s.entities) <= 6 and 2 <= len(s.goals) <= 5
    assert result.attempts <= 4
