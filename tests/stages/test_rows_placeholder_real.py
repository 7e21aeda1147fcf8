"""Placeholder example rows named again by the real embedded model (issue 40), on two domains that appear nowhere
in the example catalog: a community theatre's productions ("Show A".."Show D") and a food-truck caterer's dishes
("Dish 1".."Dish 4", each of a named truck). What must hold whatever the small model writes: at most
``NAME_TRIES`` calls, no placeholder left among the rows (each row named with a value that is no placeholder and
not its own row's value, or dropped with a rejection naming the column), and at least half the rows named (the
capability under test: naming rows from their other values, which the model does well). Not run by the helper that
wrote it (no model time then)."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.meaning import vocab
from pipeline.settings import BuildSettings
from pipeline.stages.rows import generators as rowgen

THEATRE = (ir.Scenario(name="Community theatre", description="A community theatre stages productions and sells "
                                                             "tickets for their performances."),
           (ir.Table(name="productions", natural_key=["title"], ddl=(
               "CREATE TABLE productions (production_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, director "
               "TEXT NOT NULL, opening_night TEXT NOT NULL, genre TEXT NOT NULL CHECK (genre IN ('comedy', 'drama', "
               "'musical'))) STRICT")),),
           {"productions": [("Show A", "Helen Marsh", "2026-02-06", "comedy"), ("Show B", "Omar Haddad", "2026-03-13",
                                                                                "musical"),
                            ("Show C", "Ruth Okafor", "2026-04-17", "drama"), ("Show D", "Liam Byrne", "2026-05-22",
                                                                               "musical")]},
           "productions", "title")
TRUCKS = (ir.Scenario(name="Food truck catering", description="A food truck collective caters events; each truck "
                                                              "sells its own dishes."),
          (ir.Table(name="trucks", natural_key=["truck_name"], ddl=(
              "CREATE TABLE trucks (truck_id INTEGER PRIMARY KEY, truck_name TEXT NOT NULL UNIQUE, cuisine TEXT NOT "
              "NULL) STRICT")),
           ir.Table(name="dishes", natural_key=["dish_name"], ddl=(
               "CREATE TABLE dishes (dish_id INTEGER PRIMARY KEY, truck_id INTEGER NOT NULL REFERENCES "
               "trucks(truck_id), dish_name TEXT NOT NULL UNIQUE, price REAL NOT NULL CHECK (price > 0)) STRICT"))),
          {"trucks": [("Taco Libre", "Mexican"), ("Pho Real", "Vietnamese"), ("Seoul Food", "Korean")],
           "dishes": [(1, "Dish 1", 9.5), (2, "Dish 2", 12.0), (3, "Dish 3", 11.0), (1, "Dish 4", 8.5)]},
          "dishes", "dish_name")


def _db(tables: tuple[ir.Table, ...], rows: dict[str, list[tuple[object, ...]]]) -> sqlite3.Connection:
    conn = scratch_db(tables)
    for t in tables:
        names = [c.name for c in table_columns(conn, t) if not c.auto_id]
        for r in rows.get(t.name, []):
            conn.execute(f'INSERT INTO "{t.name}" ({", ".join(names)}) VALUES ({", ".join("?" for _ in r)})', r)
    return conn


@pytest.mark.real_llm
@pytest.mark.parametrize("domain", [THEATRE, TRUCKS], ids=["theatre", "food_trucks"])
def test_the_real_model_names_placeholder_rows_from_their_other_values(real_llm: object, domain: tuple) -> None:
    scenario, tables, rows, table_name, column = domain
    conn = _db(tables, rows)
    table = next(t for t in tables if t.name == table_name)
    before = len(rows[table_name])
    named = rowgen.name_placeholders(scenario, table, conn, table_columns(conn, table), real_llm,  # type: ignore[arg-type]
                                     BuildSettings())
    assert 1 <= named.calls <= rowgen.NAME_TRIES
    values = [r[0] for r in conn.execute(f'SELECT "{column}" FROM "{table_name}" ORDER BY rowid')]
    assert len(values) >= before / 2, (values, named.rejections)  # at least half the rows named
    assert not vocab.numbered([*(r[1] if table_name == "dishes" else r[0] for r in rows[table_name]), *values]) \
        & set(values), values
    assert len({vocab.norm(v) for v in values}) == len(values)
    if len(values) < before:
        assert [r.item for r in named.rejections] == [f"{table_name}.{column}"]
    print(f"\n{table_name}.{column}: {values}")
