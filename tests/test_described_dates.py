"""Every place that describes a tool to a model or a trainer says what the server says about a date parameter
(issues 40/42, the seventeenth reader audit's check 4): the tasks' ``tools`` (tasks.jsonl), the tester's compact
tool list and its JSON-action grammar, and the exported bundle's ``env.json`` (the verifiers and OpenEnv listings,
the vendored engine). All read ``pipeline.runtime.schemas.described_tools``, which reads the served schemas."""

from __future__ import annotations

import json

from pipeline.envdir import write_env_dir
from pipeline.export import common
from pipeline.export.catalog import CatalogEnv
from pipeline.ir import DATETIME_PATTERN, Environment, Task, ToolCall, Verifier
from pipeline.llm.replies import schema_of
from pipeline.runtime import engine
from pipeline.runtime.schemas import described_tools, tool_schemas
from pipeline.stages.tasks.bank import build_and_prove
from tests.fixtures.visits import visits_env
from verify.agent import View, compact_signature, json_system, tool_specs, turn_model

NOTE = "a date written YYYY-MM-DD, e.g. 2026-01-15"


def _props(spec: dict) -> dict:
    return spec["function"]["parameters"]["properties"]


def test_a_task_carries_the_served_format_and_description_of_its_date_parameters():
    env = visits_env()
    task, err = build_and_prove(env, [ToolCall(tool="book_visit", arguments={"guest": "Dee", "visit_date": "2026-01-20"})],
                                "Please book a museum visit for Dee on 20 January 2026.", answer_field=None,
                                initial_db=None, provenance={"source": "tests/test_described_dates.py"})
    assert task is not None, err
    specs = {s["function"]["name"]: _props(s) for s in task.tools}
    served = tool_schemas(env)
    assert specs["book_visit"]["visit_date"] == {"type": "string", "format": "date", "description": NOTE}
    assert specs["find_visits_on"]["visit_date"]["description"] == f"The day of the visit ({NOTE})"
    for name, props in specs.items():  # format and description as served, nothing else changed
        for pname, prop in props.items():
            sp = served[name]["properties"][pname]
            assert (prop.get("format"), prop.get("pattern")) == (sp.get("format"), sp.get("pattern")), (name, pname)
            assert prop.get("description") == sp.get("description"), (name, pname)
    assert specs["checked_in_since"]["since"]["pattern"] == DATETIME_PATTERN == engine.DATETIME_PATTERN
    assert "format" not in specs["visits_in_week"]["start"] and "format" not in specs["visits_with_note"]["note"]
    # the IR itself is untouched: env.json keeps its bytes and its id
    assert all("format" not in p for t in env.model_dump(mode="json")["tools"] for p in t["params"])
    assert env.tools[1].params[1].format is None


def test_the_tester_sees_the_form_in_its_tool_list_its_grammar_and_its_native_specs():
    env = visits_env()
    tools = {t.name: t for t in described_tools(env)}
    assert compact_signature(tools["book_visit"]) == ("book_visit(guest: string (Who visits), visit_date: string "
                                                      "YYYY-MM-DD): Book a visit.")
    assert "since: string YYYY-MM-DD HH:MM[:SS]" in compact_signature(tools["checked_in_since"])
    assert "- book_visit(guest: string (Who visits), visit_date: string YYYY-MM-DD)" in json_system(env, View(), 8)
    grammar = json.dumps(schema_of(turn_model(env, view=View(names=["book_visit", "list_visits"]))))
    assert '"format": "date"' in grammar  # llama.cpp's json-schema grammar writes "date" as [0-9]{4}-MM-DD
    turn = schema_of(turn_model(env, view=View(names=["list_visits"])))
    optional = json.dumps(turn)
    assert optional.count('"format": "date"') == 2  # inside each optional parameter's string branch
    native = {s["function"]["name"]: _props(s) for s in tool_specs(env, _no_tools_task(env))}
    assert native["book_visit"]["visit_date"]["format"] == "date"


def _no_tools_task(env: Environment) -> Task:
    return Task(task_id="t", env_id=env.env_id, instruction="x", tools=[], reference_solution=[],
                verifier=Verifier(assertions=[], mutable_tables=[]), kind="lookup")


def test_the_exported_bundle_describes_and_enforces_the_form(tmp_path):
    env = visits_env()
    env_dir = write_env_dir(env, tmp_path / "visits")
    ce = CatalogEnv(env=env, path=env_dir)
    out = common.write_bundle(ce, tmp_path / "bundle", {})
    shipped = json.loads((out / "env.json").read_text())
    book = next(t for t in shipped["tools"] if t["name"] == "book_visit")
    assert book["params"][1] == {"name": "visit_date", "type": "string", "description": NOTE, "required": True,
                                 "enum": None, "minimum": None, "maximum": None, "max_length": None, "format": "date"}
    outcome = engine.validate_arguments(book, {"guest": "Dee", "visit_date": "January 15, 2026"})
    assert outcome[1] is not None and "YYYY-MM-DD" in outcome[1]["error"]
