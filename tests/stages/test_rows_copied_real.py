"""Example values copied from the parent rows a request showed, named again by the real embedded model (issue 40;
the outside blood bank of 2026-11-29 wrote donors' names as hospital names). Two domains that appear nowhere in the
example catalog: a veterinary practice's visits whose clinic names are the pet owners' names, and a German car
workshop's orders whose workshop names are the customers' names. What must hold whatever the small model writes: the
column is found, at most ``NAME_TRIES`` calls, no row keeps a parent's label (each named with a value that is none
of the parent's labels, nor what the request showed of its parent, no placeholder, or dropped), and a rejection
names the column. How many rows the model names is printed, not asserted: on 2026-11-30 (qwen2.5-coder-1.5b) it
named none in either domain, two requests each (the vet practice's four visits all "Riverside Veterinary Practice",
the scenario's own name, refused; the workshops the customers' towns shown, "Köln", "Bonn", "Düsseldorf", refused):
the example rows are dropped and the table fails loudly, as with placeholders the model does not replace."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import vocab
from pipeline.settings import BuildSettings
from pipeline.stages.rows import generators as rowgen

VET = (ir.Scenario(name="Riverside veterinary practice", description="Pet owners book visits for their pets at the "
                                                                    "practice's clinics; each visit has a reason."),
       (ir.Table(name="owners", natural_key=["name"], ddl=(
           "CREATE TABLE owners (owner_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, phone TEXT) STRICT")),
        ir.Table(name="visits", natural_key=[], ddl=(
            "CREATE TABLE visits (visit_id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES "
            "owners(owner_id), clinic_name TEXT NOT NULL, reason TEXT NOT NULL, visit_date TEXT NOT NULL) STRICT"))),
       {"owners": [("Megan Ortiz", "555-0101"), ("Paul Whitaker", "555-0102"), ("Grace Liu", "555-0103"),
                   ("Samuel Reyes", "555-0104")],
        "visits": [(1, "Grace Liu", "annual vaccination", "2026-01-05"),
                   (2, "Samuel Reyes", "limping front leg", "2026-01-07"),
                   (3, "Megan Ortiz", "dental cleaning", "2026-01-09"),
                   (4, "Paul Whitaker", "skin rash", "2026-01-12")]},
       "visits", "clinic_name")
WORKSHOP = (ir.Scenario(name="Autowerkstatt Becker", description="Kunden bringen ihre Autos in eine der Werkstätten "
                                                                "zur Reparatur; jeder Auftrag hat eine Beschreibung."),
            (ir.Table(name="kunden", natural_key=["name"], ddl=(
                "CREATE TABLE kunden (kunden_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, ort TEXT) STRICT")),
             ir.Table(name="auftraege", natural_key=[], ddl=(
                 "CREATE TABLE auftraege (auftrag_id INTEGER PRIMARY KEY, kunden_id INTEGER NOT NULL REFERENCES "
                 "kunden(kunden_id), werkstatt TEXT NOT NULL, beschreibung TEXT NOT NULL) STRICT"))),
            {"kunden": [("Jonas Weber", "Köln"), ("Lena Fischer", "Bonn"), ("Tobias Wagner", "Köln"),
                        ("Anna Schulz", "Düsseldorf")],
             "auftraege": [(1, "Tobias Wagner", "Bremsbeläge wechseln"), (2, "Anna Schulz", "Ölwechsel"),
                           (3, "Jonas Weber", "Reifenwechsel"), (4, "Lena Fischer", "Inspektion")]},
            "auftraege", "werkstatt")


def _db(tables: tuple[ir.Table, ...], rows: dict[str, list[tuple[object, ...]]]) -> sqlite3.Connection:
    conn = scratch_db(tables)
    for t in tables:
        names = [c.name for c in table_columns(conn, t) if not c.auto_id]
        for r in rows.get(t.name, []):
            conn.execute(f'INSERT INTO "{t.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in r)})', r)
    return conn


@pytest.mark.real_llm
@pytest.mark.parametrize("domain", [VET, WORKSHOP], ids=["vet", "werkstatt"])
def test_the_real_model_names_rows_whose_examples_were_the_parents_labels(real_llm: object, domain: tuple) -> None:
    scenario, tables, rows, table_name, column = domain
    conn = _db(tables, rows)
    table = next(t for t in tables if t.name == table_name)
    cols = table_columns(conn, table)
    parent = tables[0].name
    assert list(rowgen.copied_columns(conn, table_name, cols, rowgen._table_values(conn, table, cols))) == [column]
    labels = {vocab.norm(r[0]) for r in rows[parent]}
    before = len(rows[table_name])
    named = rowgen.name_placeholders(scenario, table, conn, cols, real_llm,  # type: ignore[arg-type]
                                     BuildSettings())
    assert 1 <= named.calls <= rowgen.NAME_TRIES
    values = [r[0] for r in conn.execute(f'SELECT "{column}" FROM "{table_name}" ORDER BY rowid')]
    print(f"\n{table_name}.{column}: {len(values)} of {before} rows named: {values}")
    assert not {vocab.norm(v) for v in values} & labels, values  # no parent's label is left
    assert not vocab.numbered(values), values
    assert [r.item for r in named.rejections] == [f"{table_name}.{column}"]
    assert named.rejections[0].evidence["kind"] == "copied_examples"
