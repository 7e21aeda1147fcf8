"""An OR in a WHERE that escapes its sibling's parameter filter is found (``sqlshape.escaping_disjuncts``) and
reported by the static tool check, naming the step and the escaping branch."""

from __future__ import annotations

import pytest

from pipeline.runtime import engine, static_checks
from pipeline.runtime.sqlshape import escaping_disjuncts

# the reserve_game guard of o14b game_library_management_c647c94639: AND binds tighter than OR
UNBRACKETED = ("SELECT 1 FROM reservations r WHERE r.game_id = :game_id AND (r.start_date <= :start_date AND "
               "r.end_date >= :end_date) OR (r.start_date <= :end_date AND r.end_date > :end_date)")
BRACKETED = ("SELECT 1 FROM reservations r WHERE r.game_id = :game_id AND ((r.start_date <= :start_date AND "
             "r.end_date >= :end_date) OR (r.start_date <= :end_date AND r.end_date > :end_date))")
ESCAPING = "r.start_date <= :end_date AND r.end_date > :end_date"

EXEMPT = {
    "bracketed": BRACKETED,
    "both_filtered": "SELECT * FROM reservations WHERE id = :start_date OR game_id = :game_id",
    "optional_filter": "SELECT * FROM reservations WHERE game_id = :game_id OR :game_id IS NULL",
    "optional_filter_gated": "SELECT * FROM reservations WHERE game_id = :game_id OR (:game_id IS NULL AND id > 0)",
    "no_filtered_branch": "SELECT * FROM reservations WHERE status = 'a' OR status = 'b'",
    "and_at_the_root": "SELECT * FROM reservations WHERE game_id = :game_id AND (status = 'a' OR id > 3)",
    "in_a_filtered_subquery": "SELECT * FROM reservations WHERE id = :game_id OR game_id IN "
                              "(SELECT game_id FROM reservations WHERE start_date = :start_date)",
    "no_where": "SELECT * FROM reservations",
    "unparsable": "SELECT FROM WHERE OR OR",
}


def test_the_unbracketed_guard_reports_its_escaping_branch():
    assert escaping_disjuncts(UNBRACKETED) == [
        (ESCAPING, "r.game_id = :game_id AND (r.start_date <= :start_date AND r.end_date >= :end_date)")]


@pytest.mark.parametrize("sql", EXEMPT.values(), ids=EXEMPT.keys())
def test_exempt_shapes_are_not_reported(sql):
    assert escaping_disjuncts(sql) == []


@pytest.mark.parametrize(("sql", "branch"), [
    ("UPDATE reservations SET status = 'x' WHERE id = :id OR status = 'a'", "status = 'a'"),
    ("SELECT * FROM reservations WHERE :id = id OR status = 'a'", "status = 'a'"),
    ("SELECT * FROM reservations WHERE game_id IN (:a, :b) OR id > 3", "id > 3"),
    ("SELECT * FROM games WHERE id IN (SELECT game_id FROM reservations WHERE game_id = :g AND id > 1 OR id < 0)",
     "id < 0"),
])
def test_other_escaping_shapes_are_reported(sql, branch):
    assert [b for b, _ in escaping_disjuncts(sql)] == [branch]


@pytest.fixture
def conn():
    c = engine.connect(":memory:")
    c.execute("CREATE TABLE reservations (id INTEGER PRIMARY KEY, game_id INTEGER NOT NULL, start_date TEXT NOT NULL, "
              "end_date TEXT NOT NULL, status TEXT NOT NULL)")
    yield c
    c.close()


def reserve_game(guard_sql):
    params = [{"name": n, "type": t} for n, t in (("game_id", "integer"), ("start_date", "string"),
                                                  ("end_date", "string"))]
    return {"name": "reserve_game", "description": "x", "kind": "write", "params": params,
            "steps": [{"kind": "guard", "sql": "SELECT 1 FROM reservations WHERE id = 0", "must": "not_exist",
                       "error": "x"},
                      {"kind": "guard", "sql": "SELECT 1 FROM reservations WHERE id = 1", "must": "not_exist",
                       "error": "x"},
                      {"kind": "guard", "sql": guard_sql, "must": "not_exist", "error": "Game {game_id} is taken"},
                      {"kind": "write", "sql": "INSERT INTO reservations (game_id, start_date, end_date, status) "
                                               "VALUES (:game_id, :start_date, :end_date, 'open')"}],
            "returns": None}


def test_check_tool_names_the_step_and_the_escaping_branch(conn):
    (problem,) = static_checks.check_tool(conn, reserve_game(UNBRACKETED))
    assert problem.startswith("tool 'reserve_game' step 3 (guard): ")
    assert f'"{ESCAPING}"' in problem and "r.game_id = :game_id" in problem and "(x OR y)" in problem


@pytest.mark.parametrize("sql", [s for k, s in EXEMPT.items() if k != "unparsable"],
                         ids=[k for k in EXEMPT if k != "unparsable"])
def test_check_tool_accepts_the_exempt_shapes(conn, sql):
    assert static_checks.check_tool(conn, reserve_game(sql)) == []


def test_check_tool_reports_an_escaping_write_and_returns(conn):
    tool = reserve_game(BRACKETED)
    tool["steps"][3] = {"kind": "write", "sql": "UPDATE reservations SET status = 'x' WHERE id = :game_id OR status = 'a'"}
    tool["returns"] = {"sql": "SELECT id FROM reservations WHERE id = :last_id OR id > 5", "mode": "all"}
    problems = static_checks.check_tool(conn, tool)
    assert [p.split(":")[0] for p in problems] == ["tool 'reserve_game' step 4 (write)", "tool 'reserve_game' returns"]
    assert '"status = \'a\'"' in problems[0] and '"id > 5"' in problems[1]
