"""A column added for a tool whose SQL names no value gets the values the tool's own parameter description quotes
(issue 40: the library's books.status, added for change_book_status, whose new_status is described as "The new
status ('pending' or 'returned')", stayed NULL in all 11 seeded rows). Only a parameter the SQL writes into the
column or compares it with counts, read by its quote characters (no word list), and only when nothing else names
a value. Real SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from pipeline import ir
from pipeline.stages.tools import added_values

TABLE = ir.Table(name="parcels", ddl="CREATE TABLE parcels (parcel_id INTEGER PRIMARY KEY, code TEXT NOT NULL, "
                                     "state TEXT, priority INTEGER) STRICT")


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:")
    c.execute(TABLE.ddl)
    c.executemany("INSERT INTO parcels (code) VALUES (?)", [(f"P{i}",) for i in range(8)])
    yield c
    c.close()


def set_state(state_doc: str, code_doc: str = "The new code ('X1')", sql: str = "") -> ir.Tool:
    return ir.Tool(name="set_state", description="Change a parcel's state.", kind="write", params=[
        ir.Param(name="parcel_id", type="integer", description="The parcel's id ('id' of parcels)"),
        ir.Param(name="state", type="string", description=state_doc),
        ir.Param(name="code", type="string", description=code_doc)],
        steps=[ir.Step(kind="write", sql=sql or "UPDATE parcels SET state = :state, code = COALESCE(:code, code) "
                                               "WHERE parcel_id = :parcel_id")])


def states(conn: sqlite3.Connection, column: str = "state") -> list[object]:
    return [r[0] for r in conn.execute(f"SELECT {column} FROM parcels ORDER BY parcel_id")]


def test_the_values_a_bound_parameters_description_quotes_fill_the_rows(conn: sqlite3.Connection) -> None:
    tool = set_state("The parcel's new state ('sorted' or 'shipped')")
    ev = added_values.evidence([tool], TABLE, "state", conn)
    assert ev.known == ["sorted", "shipped"]  # not 'X1' (another column's parameter) nor "s new state ("
    notes = added_values.fill(conn, [TABLE], [("parcels", "state")], [tool])
    got = states(conn)
    assert None not in got and set(got) == {"sorted", "shipped"}
    assert "8 seeded rows filled" in notes[0].reason


def test_quotes_of_any_language_and_none_where_the_sql_names_a_value(conn: sqlite3.Connection) -> None:
    assert added_values.quoted("Nuevo estado («clasificado» o «enviado»)") == ["clasificado", "enviado"]
    assert added_values.quoted("Neuer Status („sortiert“ oder „versandt“)") == ["sortiert", "versandt"]
    assert added_values.quoted("the parcel's state (parcels.state)") == []
    written = set_state("The new state ('sorted' or 'shipped')",
                        sql="UPDATE parcels SET state = 'lost' WHERE parcel_id = :parcel_id AND state = :state")
    ev = added_values.evidence([written], TABLE, "state", conn)
    assert ev.known == ["lost"]  # the SQL's own value: the description is not read
    assert "sorted" not in ev.vocabulary()


def test_a_quoted_text_is_no_value_of_an_integer_column(conn: sqlite3.Connection) -> None:
    tool = set_state("The priority ('high' or 'low')",
                     sql="UPDATE parcels SET priority = :state WHERE parcel_id = :parcel_id")
    notes = added_values.fill(conn, [TABLE], [("parcels", "priority")], [tool])
    assert states(conn, "priority") == [None] * 8
    assert "stay NULL" in notes[0].reason
