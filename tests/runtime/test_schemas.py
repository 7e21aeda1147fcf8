"""Served input schemas: string caps, nullable optional parameters and CHECK rules of the column a
parameter is bound to, derived deterministically; the engine (server.py and EnvInstance alike)
enforces exactly what the schemas say."""

from __future__ import annotations

import pytest

from pipeline.ir import Environment, Param, Returns, Scenario, Step, Table, Tool
from pipeline.runtime import EnvInstance, engine, sqlshape
from pipeline.runtime.schemas import result_schemas, tool_schemas

TICKETS = """CREATE TABLE tickets (
  id INTEGER PRIMARY KEY,
  code TEXT NOT NULL UNIQUE CHECK (length(code) <= 8),
  status TEXT NOT NULL CHECK (status IN ('open', 'closed', 'on hold')),
  priority INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 5),
  seats INTEGER NOT NULL,
  price REAL NOT NULL,
  CONSTRAINT positive CHECK (seats > 0 AND price >= 0.5),
  CHECK (seats < 100)
) STRICT"""


def tool(name, params, sql, kind="write", returns=None):
    steps = [Step(kind="write", sql=sql)] if kind == "write" else []
    return Tool(name=name, description=name, kind=kind, params=params, steps=steps,
                returns=returns or (Returns(sql=sql, mode="all") if kind == "read" else None))


ENV = Environment(
    scenario=Scenario(name="Help desk", description="tickets"),
    tables=[Table(name="tickets", ddl=TICKETS)],
    tools=[
        tool("open_ticket", [Param(name="code", type="string"), Param(name="status", type="string"),
                             Param(name="priority", type="integer"), Param(name="seats", type="integer"),
                             Param(name="price", type="number")],
             "INSERT INTO tickets (code, status, priority, seats, price) VALUES (:code, :status, :priority, :seats, :price)"),
        tool("set_status", [Param(name="ticket_id", type="integer"), Param(name="status", type="string", required=False)],
             "UPDATE tickets SET status = COALESCE(:status, status) WHERE id = :ticket_id"),
        tool("find", [Param(name="status", type="string", required=False), Param(name="q", type="string"),
                      Param(name="p", type="integer", minimum=2)],
             "SELECT t.id FROM tickets t WHERE (:status IS NULL OR t.status = :status) AND t.code LIKE '%' || :q || '%' "
             "AND t.priority IN (:p, 3)", kind="read"),
        tool("odd_use", [Param(name="status", type="string")],
             "SELECT id FROM tickets WHERE status = :status OR code = upper(:status)", kind="read"),
        tool("declared", [Param(name="status", type="string", enum=["open"], max_length=4)],
             "SELECT id FROM tickets WHERE status = :status", kind="read"),
    ],
)


def props(name):
    return tool_schemas(ENV)[name]["properties"]


def test_check_rules_reach_parameters_bound_to_the_column():
    p = props("open_ticket")
    assert p["code"] == {"type": "string", "maxLength": 8}
    assert p["status"] == {"type": "string", "enum": ["open", "closed", "on hold"], "maxLength": engine.MAX_STRING_LENGTH}
    assert p["priority"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert p["seats"] == {"type": "integer", "minimum": 1, "maximum": 99}  # > 0 and < 100 on an integer
    assert props("set_status")["ticket_id"] == {"type": "integer", "minimum": engine.INT64_MIN, "maximum": engine.INT64_MAX}
    assert p["price"] == {"type": "number", "minimum": 0.5}


def test_coalesce_and_optional_parameters_are_nullable():
    p = props("set_status")
    assert p["status"] == {"type": ["string", "null"], "enum": ["open", "closed", "on hold", None],
                           "maxLength": engine.MAX_STRING_LENGTH}


def test_parameters_used_in_other_ways_or_declared_keep_their_own_rules():
    p = props("find")
    assert p["status"]["enum"][:3] == ["open", "closed", "on hold"]  # ":status IS NULL" is not another use
    assert p["q"] == {"type": "string", "maxLength": engine.MAX_STRING_LENGTH}  # LIKE: no column rule
    assert p["p"] == {"type": "integer", "minimum": 2, "maximum": 5}  # the declared minimum wins
    assert "enum" not in props("odd_use")["status"]  # also compared with upper(...): not only the column
    assert props("declared")["status"] == {"type": "string", "enum": ["open"], "maxLength": 4}


def test_schemas_are_deterministic_and_describe_results():
    assert tool_schemas(ENV) == tool_schemas(ENV.model_copy(deep=True))
    results = result_schemas(ENV)
    assert results["open_ticket"]["required"] == ["changes", "last_id"]
    assert results["find"] == {"type": "array", "maxItems": engine.MAX_ROWS, "items": {
        "type": "object", "properties": {"id": {"type": ["string", "integer", "number", "null"]}}, "required": ["id"],
        "additionalProperties": False}}


@pytest.mark.parametrize(("args", "parameter", "fragment"), [
    ({"code": "ABCDEFGHI", "status": "open", "priority": 1, "seats": 1, "price": 1}, "code", "too long: 9"),
    ({"code": "A", "status": "pending", "priority": 1, "seats": 1, "price": 1}, "status", 'must be one of "open"'),
    ({"code": "A", "status": "open", "priority": 9, "seats": 1, "price": 1}, "priority", "must be <= 5"),
    ({"code": "A", "status": "open", "priority": 1, "seats": 0, "price": 1}, "seats", "must be >= 1"),
])
def test_the_in_process_runtime_enforces_the_served_rules(args, parameter, fragment):
    with EnvInstance(ENV) as inst:
        out = inst.call("open_ticket", args)
        assert (out["ok"], out["kind"], out["parameter"]) == (False, "validation", parameter)
        assert fragment in out["error"]
        ok = inst.call("open_ticket", {"code": "A", "status": "on hold", "priority": 5, "seats": 99, "price": 0.5})
        assert ok == {"ok": True, "result": {"changes": 1, "last_id": 1}}
        assert inst.call("find", {"q": "x" * (engine.MAX_STRING_LENGTH + 1), "p": 3})["parameter"] == "q"


def test_sqlshape_reads_checks_and_bindings():
    assert sqlshape.column_rules("CREATE TABLE t (a TEXT CHECK (a IS NULL OR a IN ('x', 'y')), b INTEGER CHECK (-5 <= b))") == {
        "a": {"enum": ["x", "y"]}, "b": {"minimum": -5}}
    assert sqlshape.column_rules("not sql at all (") == {}
    bindings, others = sqlshape.param_columns(
        "INSERT INTO tickets (code, status) SELECT :c, :s", {"tickets": ["id", "code", "status"]})
    assert bindings == {"c": {("tickets", "code")}, "s": {("tickets", "status")}} and others == set()


def test_a_parameter_bound_to_a_date_column_says_its_format_and_is_checked():
    """Issue 40/42: "January 15, 2026" for a column of ISO dates was accepted (and matched nothing)."""
    from tests.fixtures.visits import visits_env

    env = visits_env()
    schemas = tool_schemas(env)
    on = schemas["find_visits_on"]["properties"]["visit_date"]
    assert on["format"] == "date" and on["description"] == "The day of the visit (a date written YYYY-MM-DD, e.g. 2026-01-15)"
    assert schemas["book_visit"]["properties"]["visit_date"]["description"] == "a date written YYYY-MM-DD, e.g. 2026-01-15"
    listed = schemas["list_visits"]["properties"]
    assert listed["date_from"] == {"type": ["string", "null"], "description": "On or after this day, YYYY-MM-DD",
                                   "maxLength": engine.MAX_STRING_LENGTH, "format": "date"}  # the form said once
    assert listed["date_to"]["format"] == "date"
    assert {p["format"] for p in schemas["visits_between"]["properties"].values()} == {"date"}
    since = schemas["checked_in_since"]["properties"]["since"]
    assert since["pattern"] == engine.DATETIME_PATTERN and "format" not in since
    assert since["description"].endswith("(a date and time written YYYY-MM-DD HH:MM:SS, e.g. 2026-01-15 10:05:00)")
    for name, param in (("visits_in_week", "start"), ("visits_with_note", "note"), ("book_visit", "guest")):
        prop = schemas[name]["properties"][param]
        assert "format" not in prop and "pattern" not in prop, (name, param)  # date arithmetic; other text

    inst = EnvInstance(env)
    out = inst.call("find_visits_on", {"visit_date": "January 15, 2026"})
    assert (out["ok"], out["kind"], out["parameter"]) == (False, "validation", "visit_date")
    assert out["error"] == ("argument 'visit_date' of tool 'find_visits_on': expected a date written YYYY-MM-DD, "
                            'got "January 15, 2026"')
    assert "not a calendar date" in inst.call("find_visits_on", {"visit_date": "2026-02-30"})["error"]
    for bad in ("2026-1-15", "2026-01-15T00:00:00", " 2026-01-15", "2026-01-15\n", "２０２６-01-15", "banana"):
        assert inst.call("book_visit", {"guest": "Dee", "visit_date": bad})["parameter"] == "visit_date", bad
    assert [r["id"] for r in inst.call("find_visits_on", {"visit_date": "2026-01-15"})["result"]] == [1]
    assert [r["id"] for r in inst.call("list_visits", {"date_from": "2026-01-13"})["result"]] == [1, 3]
    assert inst.call("list_visits", {"date_to": "15/01/2026"})["parameter"] == "date_to"
    assert inst.call("book_visit", {"guest": "Dee", "visit_date": "2026-01-16"})["ok"]
    assert inst.call("checked_in_since", {"since": "2026-01-13T00:00"})["result"][0]["id"] == 1
    assert inst.call("checked_in_since", {"since": "2026-01-13"})["parameter"] == "since"
    assert inst.call("visits_with_note", {"note": "January 12"})["ok"]  # not every value of `note` is a date


def test_sqlshape_binds_compared_parameters_only_when_asked():
    sql = "SELECT * FROM t WHERE (:a IS NULL OR d >= :a) AND d BETWEEN :b AND :c AND d < date(:e, '+1 day')"
    assert sqlshape.param_columns(sql, {"t": ["d"]}) == ({}, {"a", "b", "c", "e"})
    bindings, others = sqlshape.param_columns(sql, {"t": ["d"]}, compared=True)
    assert bindings == {n: {("t", "d")} for n in "abc"} and others == {"e"}
