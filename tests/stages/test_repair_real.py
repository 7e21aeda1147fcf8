"""The verify loop's two environment fixers with the real embedded model (library environment).

What must hold whatever the small model writes: a repaired environment keeps every other tool and table as it
was, the rewritten tool passes the same checks as a newly built one, and the rewritten rows load into the
schema with foreign keys on. That the model does produce a repair is the capability under test."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.build import BuildSettings
from pipeline.dbmodel.arguments import Sampler
from pipeline.runtime import EnvInstance
from pipeline.stages.rows.repair import repair_data
from pipeline.stages.tools.repair import repair_tool
from pipeline.stages.tools.toolset import exercise
from tests.fixtures.library import library_env

SETTINGS = BuildSettings(max_attempts=2, rows_per_call=6, rows_min=3, sample_calls=3)


@pytest.mark.real_llm
def test_real_model_rewrites_a_blamed_tool(real_llm) -> None:
    env = library_env()
    fault = SimpleNamespace(kind="tool", target="update_member_email",
                            reason="the agent asked to change the email but the tool gave no clear result")
    new = repair_tool(env, fault, real_llm, SETTINGS)
    assert new is not None
    tool = new.tool("update_member_email")
    assert tool != env.tool("update_member_email") and tool.kind == "write"
    assert [t for t in new.tools if t.name != tool.name] == [t for t in env.tools if t.name != tool.name]
    assert new.seed == env.seed
    with EnvInstance(new) as seeded:
        sampler = Sampler(seeded.conn, tuple(new.tables), new.clock)
        _, error = exercise(new, tool, sampler.arguments(tool, SETTINGS.sample_calls), sampler.grounded(tool))
    assert error is None, error


@pytest.mark.real_llm
def test_real_model_rewrites_the_rows_of_a_blamed_table(real_llm) -> None:
    env = library_env()
    fault = SimpleNamespace(kind="data", target="loans",
                            reason="every loan was already returned, so no task can return or renew one")
    new = repair_data(env, fault, real_llm, SETTINGS)
    assert new is not None
    loans = next(s for s in new.seed if s.table == "loans")
    assert len(loans.rows) >= SETTINGS.rows_min
    assert [s for s in new.seed if s.table != "loans"] == [s for s in env.seed if s.table != "loans"]
    assert new.tools == env.tools
    with EnvInstance(new) as inst:  # foreign keys on: every loan names an existing member and book
        assert inst.conn.execute("SELECT COUNT(*) FROM loans").fetchone()[0] == len(loans.rows)
        assert inst.conn.execute("PRAGMA foreign_key_check").fetchall() == []
