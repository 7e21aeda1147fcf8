"""Seed-data stage: typed row models, insertion through sqlite-utils, SQLite errors fed back, rejections."""

from __future__ import annotations

import sqlite3

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.dbmodel.keys import settle_natural_keys
from pipeline.envdir import build_database
from pipeline.llm import fake_client
from pipeline.runtime import engine
from pipeline.stages.rows.populate import generate_seed, rows_model
from tests.stages.library_replies import (
    BOOK_ROWS,
    BOOKS_DDL,
    LOAN_ROWS,
    LOANS_DDL,
    MEMBER_ROWS,
    MEMBERS_DDL,
    SCENARIO,
    small_settings,
)

TABLES = (ir.Table(name="members", ddl=MEMBERS_DDL), ir.Table(name="books", ddl=BOOKS_DDL),
          ir.Table(name="loans", ddl=LOANS_DDL))
# Rows by the LLM only: these tests are about its rows and the feedback on them (rowgen has tests of its own)
LLM_ROWS = {"row_generators": False}
NEGATIVE = {"rows": [["Emma", "Jane Austen", -1], ["Cosmos", "Carl Sagan", -2], ["Matilda", "Roald Dahl", -1],
                     ["Persuasion", "Jane Austen", 3]]}


def check_error() -> str:
    conn = sqlite3.connect(":memory:")
    conn.execute(BOOKS_DDL)
    try:
        conn.execute("INSERT INTO books (title, author, copies_available) VALUES ('x', 'y', -1)")
    except sqlite3.IntegrityError as e:
        return str(e)
    raise AssertionError("the CHECK constraint did not fire")


def test_row_model_types_positions_and_constrains_keys() -> None:
    conn = scratch_db(TABLES)
    cols = [c for c in table_columns(conn, TABLES[2]) if not c.auto_id]
    model = rows_model("loans", cols, {"member_id": (1, 2, 3), "status": ("open", "returned")}, 5)
    rows = model.model_json_schema()["properties"]["rows"]
    assert rows["minItems"] == rows["maxItems"] == 5
    items = rows["items"]["prefixItems"]
    assert [i.get("enum") for i in items] == [[1, 2, 3], None, None, None, ["open", "returned"]]
    assert items[1]["type"] == "integer" and items[2]["type"] == "string"


def test_rows_are_inserted_parents_first_with_keys_filled_in() -> None:
    client = fake_client([MEMBER_ROWS, BOOK_ROWS, LOAN_ROWS])
    res = generate_seed(SCENARIO, TABLES, client, small_settings(**LLM_ROWS))
    assert res.ok and res.rejections == () and res.attempts == 3
    seed = {s.table: s.rows for s in res.value}
    assert seed["members"][0] == {"member_id": 1, "name": "Alice Park", "email": "alice@example.org",
                                  "status": "active"}
    assert [r["loan_id"] for r in seed["loans"]] == [1, 2, 3, 4]
    loans_prompt = client.requests[2][0]["content"]
    assert "1 = Alice Park active" in loans_prompt and "2 = Cosmos" in loans_prompt
    assert "[member_id, book_id, loan_date, due_date, status]" in loans_prompt
    # the rows rebuild the same database through the runtime's loader (foreign keys on)
    env = ir.Environment(scenario=SCENARIO, tables=list(TABLES), seed=list(res.value))
    conn = engine.connect()
    build_database(env, conn)
    assert conn.execute("SELECT COUNT(*) FROM loans").fetchone()[0] == 4


def test_refused_rows_roll_back_and_the_sqlite_error_is_fed_back() -> None:
    client = fake_client([MEMBER_ROWS, NEGATIVE, BOOK_ROWS, LOAN_ROWS])
    res = generate_seed(SCENARIO, TABLES, client, small_settings(**LLM_ROWS))
    assert res.ok and res.rejections == ()
    books = next(s.rows for s in res.value if s.table == "books")
    assert [b["copies_available"] for b in books] == [2, 0, 1, 3]  # nothing of the refused call was kept
    retry = client.requests[2]
    assert retry[-2]["role"] == "assistant"
    assert check_error() in retry[-1]["content"]  # 'CHECK constraint failed: copies_available >= 0'
    assert "SQLite refused 3 of those 4 rows" in retry[-1]["content"]


def test_a_few_refused_rows_are_dropped_and_recorded() -> None:
    one_bad = {"rows": [*BOOK_ROWS["rows"][:3], ["Dune", "Frank Herbert", -5]]}
    loans = {"rows": [r for r in LOAN_ROWS["rows"] if r[1] != 4] + [[4, 1, "2026-01-03", "2026-01-17", "open"]]}
    client = fake_client([MEMBER_ROWS, one_bad, loans])
    res = generate_seed(SCENARIO, TABLES, client, small_settings(**LLM_ROWS))
    assert res.ok
    (rej,) = res.rejections
    assert rej.stage == "seed_data" and rej.item == "books"
    assert rej.evidence["rows"] == [{"row": ["Dune", "Frank Herbert", -5], "error": check_error()}]
    assert len(next(s.rows for s in res.value if s.table == "books")) == 3
    # book 4 was never created, so the loans' book_id enum offered only 1..3
    schema = client.bodies[2]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["rows"]["items"]["prefixItems"][1]["enum"] == [1, 2, 3]


def test_duplicates_are_dropped() -> None:
    dup = {"rows": [*MEMBER_ROWS["rows"][:3], MEMBER_ROWS["rows"][0]]}
    client = fake_client([dup, BOOK_ROWS, LOAN_ROWS])
    res = generate_seed(SCENARIO, TABLES, client, small_settings(**LLM_ROWS))
    assert res.ok
    assert res.rejections[0].evidence["rows"][0]["error"] == "exact duplicate of another row"


def test_a_table_that_stays_broken_rejects_the_stage() -> None:
    client = fake_client([MEMBER_ROWS, NEGATIVE, NEGATIVE, NEGATIVE])  # the repeat is asked again, not counted
    res = generate_seed(SCENARIO, TABLES, client, small_settings(max_attempts=2, **LLM_ROWS))
    assert not res.ok
    assert res.rejections[-1].reason == "table books has 1 valid rows, at least 3 needed"
    assert any(check_error() in str(r.evidence) for r in res.rejections)


def test_rows_come_in_several_calls_and_later_calls_see_earlier_rows() -> None:
    more = {"rows": [["Eve Moss", "eve@example.org", "active"], ["Finn Lund", "finn@example.org", "active"]]}
    client = fake_client([MEMBER_ROWS, more, BOOK_ROWS, LOAN_ROWS])
    settings = small_settings(rows_per_table=6, rows_per_call=4, **LLM_ROWS)
    res = generate_seed(SCENARIO, TABLES[:1], client, settings)
    assert res.ok and len(res.value[0].rows) == 6
    second = client.requests[1][0]["content"]
    assert "Write 2 rows" in second and "Alice Park; Bob Stone" in second


PEOPLE_DDL = ("CREATE TABLE people (person_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL, phone TEXT NOT NULL "
              "UNIQUE, email TEXT UNIQUE, badge INTEGER NOT NULL UNIQUE, kind TEXT NOT NULL CHECK "
              "(kind IN ('resident', 'visitor'))) STRICT")


def test_colliding_values_of_unique_columns_are_made_unique_by_code() -> None:
    """Seen on a permit office: seeded phone numbers collided on a UNIQUE column. Only the collision is wrong:
    code picks the nearest unused value (same shape) instead of dropping the row or asking again."""
    rows = {"rows": [["Ana Costa", "+386 41 555 010", "ana@example.si", 7, "resident"],
                     ["Luka Horvat", "+386 41 555 010", "ana@example.si", 7, "visitor"],
                     ["Mia Novak", "+386 41 555 011", "mia@example.si", 8, "resident"],
                     ["Jan Kos", "+386 41 555 012", None, 9, "visitor"]]}
    table = ir.Table(name="people", ddl=PEOPLE_DDL)
    res = generate_seed(SCENARIO, (table,), fake_client([rows]), small_settings(**LLM_ROWS))
    assert res.ok and len(client_rows := res.value[0].rows) == 4
    luka = client_rows[1]
    assert (luka["phone"], luka["email"], luka["badge"]) == ("+386 41 555 013", "ana2@example.si", 10)
    (rec,) = res.rejections
    assert rec.reason == "1 generated rows repeated a value of a UNIQUE column: made unique by code"


def test_declared_natural_keys_the_rows_do_not_make_unique_are_cleared_with_the_reason() -> None:
    members = ir.Table(name="members", ddl=MEMBERS_DDL, natural_key=["name"])
    books = ir.Table(name="books", ddl=BOOKS_DDL, natural_key=["author"])
    seed = generate_seed(SCENARIO, (members, books), fake_client([MEMBER_ROWS, BOOK_ROWS]), small_settings(**LLM_ROWS)).value
    tables, rejections = settle_natural_keys((members, books), seed)
    assert [t.natural_key for t in tables] == [["name"], []]
    (rej,) = rejections
    assert rej.item == "books" and rej.reason == ("natural key ['author'] cleared: 1 value(s) of (author) name more "
                                                  "than one row, e.g. ['Jane Austen']")
    prompt = fake_client([MEMBER_ROWS])
    generate_seed(SCENARIO, (members,), prompt, small_settings(**LLM_ROWS))
    assert "People name each row by (name): no two rows may have the same values there." in \
        prompt.requests[0][0]["content"]
