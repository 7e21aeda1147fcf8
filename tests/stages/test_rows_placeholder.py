"""Rows at scale, issue 40 on a domain outside the project (project billing, 2026-11-28 build u1): the model's
example rows named its projects "Project A".."Project D" and continued the list with "Project E".."Project K";
the column got no generator and no rejection, the table kept its 4 placeholder rows and 8 of 10 tasks named them.

Here, with a scripted model: the placeholder rows are named again from their other values before they seed
anything (or dropped, with a rejection naming the column), and a NOT NULL column left without a generator is named
in a rejection."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings

SCENARIO = ir.Scenario(name="Project Billing",
                       description="Consultants log hours against projects and clients are invoiced.")
CLIENTS = ir.Table(name="clients", ddl="CREATE TABLE clients (client_id INTEGER PRIMARY KEY, client_name TEXT NOT NULL "
                   "UNIQUE) STRICT", natural_key=["client_name"])
PROJECTS_DDL = ("CREATE TABLE projects (project_id INTEGER PRIMARY KEY, project_name TEXT {null} UNIQUE, client_id "
                "INTEGER NOT NULL REFERENCES clients(client_id), start_date TEXT NOT NULL, end_date TEXT NOT NULL "
                "CHECK (end_date >= start_date)) STRICT")


def projects(nullable: bool = False) -> ir.Table:
    return ir.Table(name="projects", ddl=PROJECTS_DDL.format(null="" if nullable else "NOT NULL"),
                    natural_key=["project_name"])


CLIENT_ROWS = {"rows": [["Northwind Traders"], ["Harbor Dental Group"], ["Blue Ridge Logistics"], ["Maple Street Bakery"]]}
CLIENTS_GEN = {"locale": "en_US", "columns": {"client_name": {"kind": "company"}}}
PROJECT_ROWS = {"rows": [["Project A", 1, "2025-10-01", "2025-12-31"], ["Project B", 2, "2025-11-01", "2026-01-31"],
                         ["Project C", 3, "2025-12-01", "2026-02-28"], ["Project D", 4, "2026-01-05", "2026-03-31"]]}
PROJECTS_GEN = {"columns": {
    "project_name": {"kind": "text_pool"},
    "start_date": {"kind": "date", "start": "2025-06-01", "end": "2026-01-15"},
    "end_date": {"kind": "date_after", "after": "start_date", "min": 30, "max": 120}}}
NAMED = ["Northwind ERP Migration", "Clinic Scheduling Portal", "Fleet Tracking Dashboard", "Bakery Online Shop"]
MORE = [f"{a} {b}" for a in ("Warehouse", "Payroll", "Customer", "Inventory", "Billing", "Supplier", "Website",
                             "Mobile", "Data", "Security")
        for b in ("Audit", "Redesign", "Integration", "Rollout", "Upgrade", "Review", "Automation", "Migration")]
PLACEHOLDERS = [f"Project {c}" for c in "ABCDEFGHIJK"]


def billing_client(names: list[list[str]], more: list[str] | None = None) -> Any:
    """A scripted model: rows and generator choices in order; each naming request answered by the next of
    ``names`` (the model's names for the rows shown, in their order); each continuation from ``more``."""
    queue = [CLIENT_ROWS, CLIENTS_GEN, PROJECT_ROWS, PROJECTS_GEN]
    namings = list(names)
    pool = list(MORE if more is None else more)

    def reply(messages: list[dict[str, Any]]) -> Any:
        first = messages[0]["content"]
        m = re.search(r"Here are (\d+) of its rows, each with its (\w+) left as \?", first)
        if m:
            n = int(m.group(1))
            got = namings.pop(0) if namings else PLACEHOLDERS
            labels = re.findall(r"^\d+\. client_id: \d+ \(([^)]*)\)", first, re.M)
            got = [labels[i] if v == "<client>" else v for i, v in enumerate(got)]  # the row's own client
            return {"values": (got * n)[:n]}
        if re.search(r"Write \d+ more values for (\w+)", first):
            shown = set(re.findall(r"^- (.+)$", first, re.M))
            fresh = [v for v in pool if v not in shown][:12]
            for v in fresh:
                pool.remove(v)
            return {"values": fresh or PLACEHOLDERS}
        return queue.pop(0)

    return fake_client([reply] * 200)


@pytest.fixture(autouse=True)
def _no_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shapes only (the MiniLM comparisons are tested elsewhere): fast and independent of the model files."""
    monkeypatch.setattr(rowgen, "_vectors", lambda: None)


def _seed(client: Any, table: ir.Table | None = None) -> Any:
    return generate_seed(SCENARIO, (CLIENTS, table or projects()), client, gen_settings())


def _naming_prompts(client: Any) -> list[str]:
    return [m[0]["content"] for m in client.requests if "left as ?" in m[0]["content"]]


def test_placeholder_examples_are_named_from_their_rows_before_they_seed_anything() -> None:
    client = billing_client([NAMED])
    res = _seed(client)
    assert res.value is not None
    rows = next(s for s in res.value if s.table == "projects").rows
    names = [r["project_name"] for r in rows]
    assert names[:4] == NAMED  # the example rows renamed in place, their ids and links kept
    assert [r["client_id"] for r in rows[:4]] == [1, 2, 3, 4]
    assert not [n for n in names if re.fullmatch(r"Project [A-Z]", n)]
    assert len(rows) > 20 and len(set(names)) == len(names)  # code rows from the list continued from real names
    asks = _naming_prompts(client)
    assert len(asks) == 1
    # the request shows each row without the column, with its parent's label, and no placeholder to copy
    assert "client_id: 1 (" in asks[0] and "Project A" not in asks[0] and '"2025-10-01"' in asks[0]
    # the continuation starts from the real names
    cont = next(m[0]["content"] for m in client.requests if "more values for project_name" in m[0]["content"])
    assert "- Northwind ERP Migration" in cont and "none yet" not in cont
    assert not [r for r in res.rejections if r.item.startswith("projects.project_name")]


def test_the_same_inputs_give_the_same_rows() -> None:
    a, b = _seed(billing_client([NAMED])), _seed(billing_client([NAMED]))
    assert a.value == b.value


def test_rows_the_model_does_not_name_are_dropped_with_a_rejection_naming_the_column() -> None:
    # first request: two real names, a placeholder and the row's own client; second (sampled): one real name and a
    # placeholder
    client = billing_client([["Clinic Scheduling Portal", "Project Z", "<client>", "Bakery Online Shop"],
                             ["Fleet Tracking Dashboard", "Project Q"]])
    res = _seed(client)
    assert res.value is not None
    rows = next(s for s in res.value if s.table == "projects").rows
    names = [r["project_name"] for r in rows]
    # rows 1 and 4 named by the first request, row 2 by the second, row 3 never: fewer rows rather than placeholders
    assert names[:3] == ["Clinic Scheduling Portal", "Fleet Tracking Dashboard", "Bakery Online Shop"]
    assert not [n for n in names if re.fullmatch(r"Project [A-Z]", n)]
    labels = re.findall(r"^\d+\. client_id: \d+ \(([^)]*)\)", _naming_prompts(client)[0], re.M)
    assert len(labels) == 4 and len(names) == len(set(names)) and not set(names) & set(labels)  # not its client
    asks = _naming_prompts(client)
    assert len(asks) == 2 and "Here are 2 of its rows" in asks[1]
    rej = [r for r in res.rejections if r.item == "projects.project_name"]
    assert len(rej) == 1 and "named 3 of 4 rows" in rej[0].reason and "1 example rows dropped" in rej[0].reason
    assert rej[0].evidence["kind"] == "placeholder_examples"


def test_the_scenario_s_own_text_and_a_value_given_for_several_rows_name_no_row() -> None:
    # what the real model answered on 2026-11-29 (build u4): the description for row 1 and the scenario's name for
    # rows 2-4; the second, sampled request names them
    client = billing_client([[SCENARIO.description, SCENARIO.name, SCENARIO.name, SCENARIO.name.upper()], NAMED])
    res = _seed(client)
    assert res.value is not None
    names = [r["project_name"] for r in next(s for s in res.value if s.table == "projects").rows]
    assert names[:4] == NAMED
    assert SCENARIO.description not in names and SCENARIO.name not in names
    assert len(_naming_prompts(client)) == 2


def test_a_sentence_of_the_description_is_no_row_s_value_but_a_word_of_it_may_be() -> None:
    framing = rowgen._framing(SCENARIO)
    assert rowgen._copies_framing("Consultants log hours against projects", framing)
    assert rowgen._copies_framing("  project   billing ", framing)
    assert not rowgen._copies_framing("Invoiced", framing)  # one word of it: a value may be a word the text uses
    assert not rowgen._copies_framing("Northwind ERP Migration", framing)


def test_a_table_whose_rows_no_request_names_fails_the_stage_loudly() -> None:
    res = _seed(billing_client([PLACEHOLDERS, PLACEHOLDERS]))
    assert res.value is None
    items = [r.item for r in res.rejections]
    assert "projects.project_name" in items and "projects" in items
    assert any("placeholder" in r.reason for r in res.rejections if r.item == "projects")


def test_a_nullable_column_loses_its_placeholders_and_keeps_its_rows() -> None:
    res = _seed(billing_client([PLACEHOLDERS, PLACEHOLDERS], more=[]), projects(nullable=True))
    assert res.value is not None
    rows = next(s for s in res.value if s.table == "projects").rows
    assert len(rows) > 4 and {r["project_name"] for r in rows} == {None}  # no list either: empty, not placeholders
    rej = [r for r in res.rejections if r.item == "projects.project_name"]
    assert rej and "4 example rows left empty" in rej[0].reason


def test_a_not_null_column_left_without_a_generator_is_named_in_a_rejection(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    # the placeholders reach the generator choice (the naming step taken out) and every continuation repeats them
    monkeypatch.setattr(rowgen, "name_placeholders", lambda *a, **k: rowgen.Named())
    res = _seed(billing_client([], more=[]))
    assert res.value is not None
    rows = next(s for s in res.value if s.table == "projects").rows
    assert len(rows) == 4  # no code row is drawn that NOT NULL would refuse
    rej = [r for r in res.rejections if r.item == "projects.project_name" and r.evidence.get("kind") == "no_generator"]
    assert len(rej) == 1
    assert "NOT NULL" in rej[0].reason and "placeholder" in rej[0].reason and "'Project A'" in rej[0].reason


def test_placeholder_columns_are_found_by_the_examples_shape_alone() -> None:
    from pipeline.dbmodel.columns import Column

    def col(name: str, typ: str = "TEXT") -> Column:
        return Column(name=name, type=typ, notnull=True, pk=0, has_default=False, enum=None, ref=None)

    examples = {"a": ["Project A", "Project B", "Project C"], "b": ["Room 101", "Room 102", "Room 205"],
                "c": ["Depot 1", "Depot 2", "Main hall"], "d": ["2026-01-10T10:00:00", "2026-01-11T10:00:00"],
                "e": ["Aspirin", "Ibuprofen"], "f": ["Lager 1", "Stout"], "g": ["Projekt A", "Projekt B"],
                "h": ["200mg", "400mg", "100mg", "5ml"], "i": ["Vitamin B12", "Vitamin B6"], "j": ["Item-1", "Item-2"]}
    found = [c.name for c in rowgen.placeholder_columns([col(n) for n in examples], examples)]
    assert found == ["a", "c", "g", "j"]  # a dose or a vitamin's number is part of the value, not a count


def test_one_word_and_a_count_is_no_name_for_a_placeholder_row() -> None:
    assert rowgen.counted("Dish 9") and rowgen.counted("Show E") and not rowgen.counted("Catch-22")
    assert rowgen.counted("Projekt 12") and rowgen.counted("Salle B")
    assert not rowgen.counted("Fahrenheit 451") and not rowgen.counted("Vitamin B12")
    assert not rowgen.counted("Catch Me If You Can") and not rowgen.counted("Beef Pho") and not rowgen.counted("Dune")


BIKES = ir.Table(name="bikes", natural_key=["brand", "model"], ddl=(
    "CREATE TABLE bikes (bike_id INTEGER PRIMARY KEY, brand TEXT NOT NULL UNIQUE, model TEXT NOT NULL, color TEXT NOT "
    "NULL CHECK (color IN ('red', 'blue', 'green')), price REAL NOT NULL CHECK (price > 0)) STRICT"))
BIKE_ROWS = [("Bike1", "ModelA", "red", 25.99), ("Bike2", "ModelB", "blue", 30.49), ("Bike3", "ModelC", "green", 28.79),
             ("Bike4", "ModelD", "red", 26.99)]
BRANDS = ["Trek", "Giant", "Cannondale", "Specialized"]


def test_a_value_another_column_holds_names_no_row() -> None:
    """The bike sharing build of 2026-11-30 (n18): asked for the brand of rows shown as 'color: "red", price: 25.99,
    brand: ?', the real model answered the colours ["green", "blue", "red", "green"] (its own row's colour refused,
    row 3 took "red"), then ["green", "red", "blue"] for the three rows left, and the bikes' brands became colours.
    A value some other column holds in the rows is refused; the rows are named by the next answer."""
    from pipeline.dbmodel.columns import table_columns
    from pipeline.dbmodel.ddl import scratch_db
    from pipeline.settings import BuildSettings

    conn = scratch_db([BIKES])
    conn.executemany("INSERT INTO bikes (brand, model, color, price) VALUES (?, ?, ?, ?)", BIKE_ROWS)
    brand_answers = [["green", "blue", "red", "green"], BRANDS]

    def reply(messages: list[dict[str, Any]]) -> Any:
        m = re.search(r"Here are (\d+) of its rows, each with its (\w+) left as \?", messages[0]["content"])
        assert m, messages[0]["content"]
        n = int(m.group(1))
        got = brand_answers.pop(0) if m.group(2) == "brand" else ["Marlin", "Talon", "Rockhopper", "Defy"]
        return {"values": got[:n]}

    client = fake_client([reply] * 10)
    named = rowgen.name_placeholders(SCENARIO, BIKES, conn, table_columns(conn, BIKES), client,  # type: ignore[arg-type]
                                     BuildSettings())
    rows = conn.execute("SELECT brand, color FROM bikes ORDER BY rowid").fetchall()
    brands = [b for b, _ in rows]
    assert not {b.casefold() for b in brands} & {"red", "blue", "green"}, brands
    assert brands == BRANDS  # the first request named no row, the second (sampled) all four
    assert [c for _, c in rows] == ["red", "blue", "green", "red"]
    assert not [r for r in named.rejections if r.item == "bikes.brand"]
