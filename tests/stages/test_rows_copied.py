"""Rows at scale, issue 40 on the outside blood bank (2026-11-29, run o14b): the example-rows request of
blood_request showed the donors a row may reference ("1 = Mckenzie Oliver; ... 15 = John Griffin; 16 = Melissa Li")
and the model wrote donors' names as hospital names ("John Griffin", "Melissa Li", "James Barnes", "Lori Collins",
none its own row's donor). Those examples were the column's specification: the generator check agreed that a
person-name generator's samples looked like them, and all 71 hospital names were person names.

Here, with a scripted model (MiniLM off: shapes only): a column whose examples are labels of another table's rows
the table references, not its own row's, has its example rows named again from their other values before they
seed anything, and its list is continued from those names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.llm import fake_client
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings

SCENARIO = ir.Scenario(name="Blood Bank Inventory Management",
                       description="Donors register and donate blood; hospitals request blood units by type.")
DONORS = ir.Table(name="blood_bank", natural_key=["name"], ddl=(
    "CREATE TABLE blood_bank (donor_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, age INTEGER CHECK "
    "(age >= 0)) STRICT"))
REQUESTS = ir.Table(name="blood_request", natural_key=[], ddl=(
    "CREATE TABLE blood_request (request_id INTEGER PRIMARY KEY, donor_id INTEGER NOT NULL REFERENCES "
    "blood_bank(donor_id), blood_type TEXT NOT NULL CHECK (blood_type IN ('O+', 'A-', 'B-', 'AB-')), hospital_name "
    "TEXT NOT NULL, quantity INTEGER CHECK (quantity >= 0)) STRICT"))
DONOR_ROWS = {"rows": [["Mckenzie Oliver", 34], ["Robert Dunn", 51], ["James Barnes", 28], ["Julie Hamilton", 45]]}
DONORS_GEN = {"locale": "en_US", "columns": {"name": {"kind": "person_name"},
                                             "age": {"kind": "integer", "min": 18, "max": 65}}}
COPIED = [3, 4, 1, 2]
"""What the model wrote (run o14b): as hospital names, the names of donors shown, none its own row's donor (row 1,
of donor 1, names donor 3)."""
REQUESTS_GEN = {"columns": {"blood_type": {"kind": "enum", "values": ["O+", "A-", "B-", "AB-"]},
                            "hospital_name": {"kind": "text_pool"}, "quantity": {"kind": "integer", "min": 1, "max": 9}}}
HOSPITALS = ["St. Mary's Medical Center", "Riverside General Hospital", "Lakeview Children's Hospital",
             "Mercy Regional Clinic"]
MORE = ["Northgate Community Hospital", "Cedar Valley Medical Center", "Harbor View Infirmary",
        "Summit Heart Institute", "Pinecrest Trauma Center", "Westbrook University Hospital"]


WRITTEN: dict[int, list[list[Any]]] = {}
"""The example rows each scripted client wrote for blood_request."""


def blood_client(names: list[list[str]]) -> Any:
    """A scripted model: rows and generator choices in order; each naming request answered by the next of
    ``names``; each continuation of a list with new values of its kind (blood types, hospitals)."""
    queue: list[Any] = [DONOR_ROWS, DONORS_GEN, None, REQUESTS_GEN]
    namings = list(names)
    donors: dict[int, str] = {}
    written: list[list[Any]] = []
    pools = {"blood_type": ["A+", "B+", "O-", "AB+"], "hospital_name": list(MORE)}

    def reply(messages: list[dict[str, Any]]) -> Any:
        first = messages[0]["content"]
        refs = re.search(r"^Values donor_id may take \(blood_bank\): (.*)$", first, re.M)
        if refs:  # the example rows: each names another row's donor as its hospital
            donors.update({int(k): v for k, v in re.findall(r"(\d+) = ([^;]+)", refs.group(1))})
            queue.pop(0)
            written[:] = [[i + 1, t, donors[d], q] for i, (t, d, q) in enumerate(
                zip(["O+", "A-", "B-", "AB-"], COPIED, [5, 3, 7, 2], strict=True))]
            return {"rows": written}
        m = re.search(r"Here are (\d+) of its rows, each with its (\w+) left as \?", first)
        if m:
            n = int(m.group(1))
            got = namings.pop(0) if namings else [donors[d] for d in COPIED]
            got = [donors[int(v[1:])] if v.startswith("#") else v for v in got]  # "#2": donor 2's name
            ages = re.findall(r"^\d+\. donor_id: \d+ \(age: (\d+)\)", first, re.M)
            got = [ages[(i + 1) % len(ages)] if v == "<age>" else v for i, v in enumerate(got)]  # a donor's age, shown
            return {"values": (got * n)[:n]}
        m = re.search(r"Write \d+ more values for (\w+)", first)
        if m:
            pool = pools.get(m.group(1), [])
            shown = set(re.findall(r"^- (.+)$", first, re.M))
            fresh = [v for v in pool if v not in shown][:12]
            for v in fresh:
                pool.remove(v)
            return {"values": fresh}
        return queue.pop(0)

    client = fake_client([reply] * 200)
    WRITTEN[id(client)] = written
    return client


@pytest.fixture(autouse=True)
def _no_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rowgen, "_vectors", lambda: None)


def _requests(client: Any) -> tuple[list[dict[str, Any]], Any]:
    res = generate_seed(SCENARIO, (DONORS, REQUESTS), client, gen_settings())
    assert res.value is not None
    donors = {r["name"] for r in next(s for s in res.value if s.table == "blood_bank").rows}
    rows = next(s for s in res.value if s.table == "blood_request").rows
    return rows, (res, donors)


def test_hospital_names_copied_from_the_donors_shown_are_named_again_and_seed_the_list() -> None:
    client = blood_client([HOSPITALS])
    rows, (res, donors) = _requests(client)
    names = [r["hospital_name"] for r in rows]
    copied = [r[2] for r in _example_rows(client)]
    assert set(copied) <= donors  # the scripted model copied donors' names, as the real one did
    assert names[:4] == HOSPITALS  # the example rows named again in place, their donors kept
    assert [r["donor_id"] for r in rows[:4]] == [1, 2, 3, 4]
    assert not set(names) & donors  # no donor's name is a hospital's
    asks = [m[0]["content"] for m in client.requests if "left as ?" in m[0]["content"]]
    assert len(asks) == 1 and "hospital_name: ?" in asks[0]
    assert not [n for n in copied if n in asks[0]]  # the donors' names are not shown to be copied again
    cont = next(m[0]["content"] for m in client.requests if "more values for hospital_name" in m[0]["content"])
    assert "- Riverside General Hospital" in cont and not [n for n in copied if f"- {n}" in cont]
    rej = [r for r in res.rejections if r.item == "blood_request.hospital_name"]
    assert len(rej) == 1 and rej[0].evidence["kind"] == "copied_examples" and rej[0].evidence["parent"] == "blood_bank"
    assert f"{copied[0]!r}" in rej[0].reason


def test_a_donor_s_name_or_what_the_request_showed_of_the_donor_names_no_row() -> None:
    # first request: two hospitals, another row's donor's name and the next row's donor's age (the real model wrote
    # the customers' towns shown as German workshop names, each another row's); the second names those two
    client = blood_client([[HOSPITALS[0], "#1", HOSPITALS[2], "<age>"],
                           [HOSPITALS[1], HOSPITALS[3]]])
    rows, (_, donors) = _requests(client)
    names = [r["hospital_name"] for r in rows]
    assert names[:4] == [HOSPITALS[0], HOSPITALS[1], HOSPITALS[2], HOSPITALS[3]]
    assert not set(names) & donors


def test_one_hospital_may_name_several_requests() -> None:
    # the column is in no UNIQUE set: several requests from one hospital are real, not one value for all rows
    client = blood_client([[HOSPITALS[1]] * 4])
    rows, (_, donors) = _requests(client)
    assert [r["hospital_name"] for r in rows[:4]] == [HOSPITALS[1]] * 4
    assert len([m for m in client.requests if "left as ?" in m[0]["content"]]) == 1


def _example_rows(client: Any) -> list[list[Any]]:
    """The example rows the scripted model wrote for blood_request."""
    return WRITTEN[id(client)]


REQUEST_ROWS: list[tuple[Any, ...]] = [(1, "O+", "James Barnes", 5), (2, "A-", "Julie Hamilton", 3), (3, "B-", "Mckenzie Oliver", 7),
                (4, "AB-", "Robert Dunn", 2)]


def _conn(rows: list[tuple[Any, ...]]) -> Any:
    conn = scratch_db((DONORS, REQUESTS))
    for r in DONOR_ROWS["rows"]:
        conn.execute("INSERT INTO blood_bank (name, age) VALUES (?, ?)", r)
    for req in rows:
        conn.execute("INSERT INTO blood_request (donor_id, blood_type, hospital_name, quantity) VALUES (?, ?, ?, ?)",
                     req)
    return conn


def _found(rows: list[tuple[Any, ...]]) -> dict[str, tuple[str, frozenset[str]]]:
    conn = _conn(rows)
    cols = table_columns(conn, REQUESTS)
    examples = rowgen._table_values(conn, REQUESTS, cols)
    return rowgen.copied_columns(conn, REQUESTS.name, cols, examples)


def test_copied_columns_are_found_by_equal_values_alone() -> None:
    found = _found(REQUEST_ROWS)
    assert list(found) == ["hospital_name"] and found["hospital_name"][0] == "blood_bank"
    # each row's own donor written again: a copy the examples agree on, not another column's values
    own = [(i + 1, t, n, q) for i, (t, n, q) in enumerate([("O+", "Mckenzie Oliver", 5), ("A-", "Robert Dunn", 3),
                                                           ("B-", "James Barnes", 7), ("AB-", "Julie Hamilton", 2)])]
    assert _found(own) == {}
    # one example that is no donor's name: the column's own values
    mixed = list(REQUEST_ROWS)
    mixed[2] = (3, "B-", "Riverside General Hospital", 7)
    assert _found(mixed) == {}
    # real hospital names
    assert _found([(i + 1, "O+", h, 2) for i, h in enumerate(HOSPITALS)]) == {}


def test_a_table_that_references_itself_keeps_its_own_label_column() -> None:
    staff = ir.Table(name="staff", ddl="CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                                       "manager_id INTEGER REFERENCES staff(staff_id), mentor TEXT) STRICT")
    conn = scratch_db((staff,))
    for r in [("Ann Lee", None, "Cy Ode"), ("Bo Chan", 1, "Ann Lee"), ("Cy Ode", 1, "Bo Chan")]:
        conn.execute("INSERT INTO staff (name, manager_id, mentor) VALUES (?, ?, ?)", r)
    cols = table_columns(conn, staff)
    found = rowgen.copied_columns(conn, staff.name, cols, rowgen._table_values(conn, staff, cols))
    assert list(found) == ["mentor"]  # another text column of the staff's names: values alone do not tell it from a copy
