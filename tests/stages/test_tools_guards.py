"""A create tool's conflict guard is tried on the seeded rows before the environment ships, and a parameter whose
value reaches nothing is reported (``pipeline.stages.tools.guards``).

Seen on an outside build (reader audit 2026-11-30, seventeenth outside, parking garage): ``book_reservation`` had the
guard ``... WHERE garage_id = :garage_id AND (start_date <= :end_date OR end_date >= :start_date)``, an OR where AND
was meant: every garage with a reservation refused every booking, while the sampled calls on the garages without
one went through, so nothing caught it; and it took ``user_id`` only to check that the user exists, then left it
out of its INSERT. The replies below are those slips on the library fixture's schema (a member's loans for dates:
members 1-3 have loans, member 4 none)."""

from __future__ import annotations

from pipeline import ir
from pipeline.runtime import EnvInstance
from pipeline.stages.tools import guards
from pipeline.stages.tools.toolset import WriteToolReply, to_tool
from tests.stages.library_replies import FIND_MEMBER, LIST_LOANS, RETURN_BOOK, TOOL_PLAN
from tests.stages.test_tools import LEND, base_env, run, seed  # noqa: F401 (fixture)

OR_GUARD = ("SELECT 1 FROM loans WHERE member_id = :member_id AND (loan_date <= :due_date OR due_date >= :loan_date)")
AND_GUARD = ("SELECT 1 FROM loans WHERE member_id = :member_id AND loan_date <= :due_date AND due_date >= :loan_date")
AGAIN = "Lend a book to a member from one day to another."  # the next reply, as wrong (an identical one is not counted)


def lend(guard: str, *, email: bool = False, said: str = "Lend a book to a member for some days.") -> dict:
    params = [{"name": "member_id", "type": "integer", "description": "The member"},
              {"name": "book_id", "type": "integer", "description": "The book"},
              {"name": "loan_date", "type": "string", "description": "First day, YYYY-MM-DD"},
              {"name": "due_date", "type": "string", "description": "Last day, YYYY-MM-DD"}]
    checks = [{"sql": guard, "must": "not_exist", "error": "Member {member_id} already has a loan then"}]
    if email:  # taken, checked alone, never stored
        params.append({"name": "email", "type": "string", "description": "The clerk's email"})
        checks.append({"sql": "SELECT 1 FROM members WHERE email = :email", "must": "exist",
                       "error": "No member has email {email}"})
    return {"description": said, "params": params, "guards": checks,
            "writes": ["INSERT INTO loans (member_id, book_id, loan_date, due_date, status) "
                       "VALUES (:member_id, :book_id, :loan_date, :due_date, 'open')"],
            "returns": None}


def _lend_tool(env: ir.Environment) -> ir.Tool:
    return next(t for t in env.tools if t.name == "lend_book")


def test_an_or_where_and_was_meant_is_fed_back_and_the_fixed_guard_kept(seed) -> None:  # noqa: F811
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, lend(OR_GUARD), lend(AND_GUARD), RETURN_BOOK])
    assert res.ok and res.rejections == ()
    feedback = client.requests[4][-1]["content"]
    assert OR_GUARD in feedback and "'member_id': 1" in feedback  # the guard and the inputs it refused
    assert [s.sql for s in _lend_tool(res.value).steps if s.kind == "guard"] == [AND_GUARD]


def test_a_guard_still_wrong_after_the_feedback_is_dropped_with_a_note(seed) -> None:  # noqa: F811
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, lend(OR_GUARD), lend(OR_GUARD, said=AGAIN), RETURN_BOOK])
    assert res.ok and len(client.requests) == 6  # told once, not more
    tool = _lend_tool(res.value)
    assert [s.kind for s in tool.steps] == ["write"]  # never a tool that refuses every booking
    (note,) = res.rejections
    assert note.item == "lend_book" and note.reason.startswith("guard dropped")
    assert note.evidence["guard"] == OR_GUARD and note.evidence["finding"] == "refuses_all"
    tried = note.evidence["should_allow"]
    assert tried and all(a["member_id"] in (1, 2, 3) for a in tried)
    with EnvInstance(res.value) as inst:  # the dates it refused are free now
        assert inst.call("lend_book", {**tried[0], "book_id": 1})["ok"]


def test_a_conflict_guard_joined_by_and_passes_untouched(seed) -> None:  # noqa: F811
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, lend(AND_GUARD), RETURN_BOOK])
    assert res.ok and res.rejections == () and len(client.requests) == 5
    assert [s.sql for s in _lend_tool(res.value).steps if s.kind == "guard"] == [AND_GUARD]
    with EnvInstance(res.value) as inst:
        assert inst.call("lend_book", {"member_id": 1, "book_id": 1, "loan_date": "2026-01-03",
                                       "due_date": "2026-01-05"})["kind"] == "guard"  # a conflict is refused
        assert inst.call("lend_book", {"member_id": 1, "book_id": 1, "loan_date": "2026-03-03",
                                       "due_date": "2026-03-05"})["ok"]


def test_a_guard_that_lets_a_copy_of_an_existing_row_through_is_found(seed) -> None:  # noqa: F811
    inside = ("SELECT 1 FROM loans WHERE member_id = :member_id AND loan_date < :loan_date "
              "AND due_date > :due_date")  # strictly inside: the same dates again are let through
    tool = to_tool(LEND, WriteToolReply.model_validate(lend(inside)))
    with EnvInstance(base_env(seed)) as inst:
        (found,) = guards.wrong_guards(inst.conn, tool)
        assert found.why == "allows_all" and found.refused[0] == {"member_id": 1, "loan_date": "2026-01-02",
                                                                  "due_date": "2026-01-16"}
        assert guards.wrong_guards(inst.conn, to_tool(LEND, WriteToolReply.model_validate(lend(AND_GUARD)))) == []


def test_a_parameter_whose_value_reaches_nothing_is_reported(seed) -> None:  # noqa: F811
    res, client = run(seed, [TOOL_PLAN, FIND_MEMBER, LIST_LOANS, lend(AND_GUARD, email=True),
                             lend(AND_GUARD, email=True, said=AGAIN), RETURN_BOOK])
    assert res.ok and len(client.requests) == 6
    assert "['email']" in client.requests[4][-1]["content"]
    (note,) = res.rejections
    assert note.item == "lend_book" and note.evidence["params"] == ["email"]
    assert [p.name for p in _lend_tool(res.value).params] == ["member_id", "book_id", "loan_date", "due_date", "email"]
