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
