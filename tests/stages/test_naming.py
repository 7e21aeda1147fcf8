"""Names that say what they hold: foreign-key columns renamed for the key they hold in the schema stage, and tool
parameters renamed for the column they meet (real SQLite; an art gallery and a permit office, not the library)."""

from __future__ import annotations

import pytest

from pipeline import ir
from pipeline.dbmodel.columns import table_columns
from pipeline.dbmodel.ddl import scratch_db
from pipeline.dbmodel.keynames import fix_key_names, key_column_name, key_name_ok, rewrite_ddl
from pipeline.ir import Intent
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance
from pipeline.runtime.state import table_infos
from pipeline.settings import BuildSettings
from pipeline.stages.schema.tables import check_tables, generate_schema
from pipeline.stages.tools.param_names import fix_param_names, misnamed, name_fits

GALLERY = ir.Scenario(name="Art gallery commissions", description="A gallery pays its artists commissions.")
ARTISTS_DDL = "CREATE TABLE artists (artist_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, city TEXT) STRICT"
# the key column says it holds a name; the table constraint and a CHECK name it too
COMMISSIONS_DDL = ('CREATE TABLE commission_records (record_id INTEGER PRIMARY KEY, "artist_name" INTEGER NOT NULL '
                   "REFERENCES artists(artist_id), payment_date TEXT NOT NULL, amount REAL NOT NULL "
                   "CHECK (amount > 0 AND artist_name > 0), UNIQUE (artist_name, payment_date)) STRICT")
PERMIT_DDLS = [
    "CREATE TABLE applicants (applicant_no TEXT PRIMARY KEY, full_name TEXT NOT NULL) STRICT",
    # 'holder' holds an applicant_no; 'zone' holds zones.code; 'inspector_id' holds staff.staff_id (an id: fine)
    "CREATE TABLE zones (code TEXT PRIMARY KEY, label TEXT NOT NULL) STRICT",
    "CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT",
    "CREATE TABLE permits (permit_id INTEGER PRIMARY KEY, holder TEXT NOT NULL REFERENCES applicants, "
    "zone TEXT REFERENCES zones(code), inspector_id INTEGER REFERENCES staff(staff_id), "
    "issued_on TEXT NOT NULL, FOREIGN KEY (holder) REFERENCES applicants(applicant_no)) STRICT",
]


@pytest.mark.parametrize(("column", "key", "ok", "renamed"), [
    ("artist_name", "artist_id", False, "artist_id"),
    ("borrower_name", "member_id", False, "borrower_member_id"),
    ("author", "id", False, "author_id"),
    ("author_id", "id", True, "author_id"),
    ("borrower_member_id", "member_id", True, "borrower_member_id"),
    ("supervisor_id", "employee_id", True, None),  # holds the kind of value the key is (an id)
    ("origin_code", "airport_code", True, None),
    ("lieferant", "lieferant_nr", False, "lieferant_nr"),  # segments, not words of one language
    ("kundeName", "kundeNr", False, "kunde_nr"),  # camelCase segments
    ("lead_artist_name", "artist_id", False, "lead_artist_id"),  # overlapping where they meet
])
def test_the_key_name_rule_reads_segments(column: str, key: str, ok: bool, renamed: str | None) -> None:
    assert key_name_ok(column, key) is ok
    if renamed is not None:
        assert key_column_name(column, key, set()) == renamed


def test_a_taken_name_gets_a_numbered_variant_that_still_ends_with_the_key() -> None:
    assert key_column_name("artist_name", "artist_id", {"artist_id"}) == "artist_2_id"
    assert key_column_name("zone", "code", {"zone_code", "zone_2_code"}) == "zone_3_code"


def test_the_ddl_rewrite_renames_columns_not_tables_strings_or_constraint_names() -> None:
    ddl = ("CREATE TABLE artist (code TEXT PRIMARY KEY, artist TEXT REFERENCES artist(code) CHECK (artist <> 'artist'),"
           " CONSTRAINT artist CHECK (length(artist) > 0)) STRICT")
    out = rewrite_ddl(ddl, {"artist": "mentor_code"}, {"artist": {"code": "code"}})
    assert out == ("CREATE TABLE artist (code TEXT PRIMARY KEY, mentor_code TEXT REFERENCES artist(code) CHECK "
                   "(mentor_code <> 'artist'), CONSTRAINT artist CHECK (length(mentor_code) > 0)) STRICT")


def test_the_schema_stage_renames_a_key_column_named_for_something_else() -> None:
    reply = {"tables": [{"name": "artists", "ddl": ARTISTS_DDL, "natural_key": ["name"]},
                        {"name": "shows", "ddl": "CREATE TABLE shows (show_id INTEGER PRIMARY KEY, title TEXT NOT "
                                                 "NULL UNIQUE, opens_on TEXT NOT NULL, artist_id INTEGER REFERENCES "
                                                 "artists(artist_id)) STRICT", "natural_key": ["title"]},
                        {"name": "commission_records", "ddl": COMMISSIONS_DDL,
                         "natural_key": ["artist_name", "payment_date"]}]}
    intents = (Intent(goal="Record a commission payment", kind="write"),)
    res = generate_schema(GALLERY, intents, fake_client([reply]), BuildSettings(tables_min=2, tables_max=4))
    assert res.ok
    records = next(t for t in res.value if t.name == "commission_records")
    conn = scratch_db(list(res.value))
    cols = {c.name: c for c in table_columns(conn, records)}
    assert "artist_name" not in cols and cols["artist_id"].ref == ("artists", "artist_id")
    assert "CHECK (amount > 0 AND artist_id > 0), UNIQUE (artist_id, payment_date)" in records.ddl
    assert records.natural_key == ["artist_id", "payment_date"]  # the declared key follows the rename
    notes = [r for r in res.rejections if r.stage == "schema" and "renamed" in r.reason]
    assert [n.evidence for n in notes] == [{"table": "commission_records", "column": "artist_name",
                                            "renamed": "artist_id", "references": "artists.artist_id"}]
    # on by default; off, the schema is the reply's
    off = generate_schema(GALLERY, intents, fake_client([reply]),
                          BuildSettings(tables_min=2, tables_max=4, fix_key_names=False))
    assert next(t for t in off.value if t.name == "commission_records").ddl == COMMISSIONS_DDL


def test_a_permit_office_keeps_well_named_keys_and_renames_the_others() -> None:
    tables = [ir.Table(name=d.split()[2], ddl=d) for d in PERMIT_DDLS]
    out, keys, notes = fix_key_names(tables, {"permits": ["holder", "issued_on"]}, check_tables)
    assert all(e is None for e in check_tables([(t.name, t.ddl) for t in out]).values())
    conn = scratch_db(out)
    refs = {c.name: c.ref for c in table_columns(conn, out[-1]) if c.ref}
    assert refs == {"holder_applicant_no": ("applicants", "applicant_no"), "zone_code": ("zones", "code"),
                    "inspector_id": ("staff", "staff_id")}
    assert keys == {"permits": ["holder_applicant_no", "issued_on"]}
    assert sorted(n.item for n in notes) == ["permits.holder", "permits.zone"]  # once each, two FK clauses or not
    assert fix_key_names(out, keys, check_tables) == (out, keys, [])  # nothing left to rename


# ------------------------------------------------------------------ tool parameters

FIND_RECORD = ir.Tool(
    name="find_commission_record_by_artist_name_and_payment_date", kind="read",
    description="Find a commission by artist_name and payment date.",
    params=[ir.Param(name="artist_name", type="integer", description="The artist's name"),
            ir.Param(name="payment_date", type="string", description="The payment date")],
    steps=[ir.Step(kind="guard", sql="SELECT 1 FROM artists WHERE artist_id = :artist_name", must="exist",
                   error="No artist {artist_name} (':artist_name' is not a placeholder here)")],
    returns=ir.Returns(sql="SELECT * FROM commission_records WHERE artist_id = :artist_name AND payment_date = "
                           ":payment_date", mode="one"))
PAYMENTS_SINCE = ir.Tool(
    name="payments_since", kind="read", description="Payments of an artist since a date.",
    params=[ir.Param(name="artist", type="integer", description="Whose payments"),
            ir.Param(name="start", type="string", description="The first day"),
            ir.Param(name="artist_id", type="string", description="unused filter on the name",
                     required=False)],
    returns=ir.Returns(sql="SELECT r.* FROM commission_records r JOIN artists a ON a.artist_id = r.artist_id WHERE "
                           "r.artist_id = :artist AND r.payment_date >= :start AND (:artist_id IS NULL OR a.name = "
                           ":artist_id) ORDER BY r.payment_date", mode="all"))
RAISE = ir.Tool(
    name="set_amount", kind="write", description="Change the amount of a commission.",
    params=[ir.Param(name="record", type="integer", description="The commission"),
            ir.Param(name="value", type="number", description="The new amount")],
    steps=[ir.Step(kind="write", sql="UPDATE commission_records SET amount = :value WHERE record_id = :record")],
    returns=ir.Returns(sql="SELECT amount FROM commission_records WHERE record_id = :record", mode="one"))


def gallery_env() -> ir.Environment:
    tables = [ir.Table(name="artists", ddl=ARTISTS_DDL),
              ir.Table(name="commission_records", ddl=COMMISSIONS_DDL.replace("artist_name", "artist_id"))]
    seed = [ir.SeedRows(table="artists", rows=[{"artist_id": 1, "name": "Ines Okafor", "city": "Lagos"},
                                               {"artist_id": 2, "name": "Tomas Berg", "city": "Oslo"}]),
            ir.SeedRows(table="commission_records", rows=[
                {"record_id": 1, "artist_id": 1, "payment_date": "2026-01-03", "amount": 1200.0},
                {"record_id": 2, "artist_id": 2, "payment_date": "2026-01-05", "amount": 800.0},
                {"record_id": 3, "artist_id": 1, "payment_date": "2026-01-09", "amount": 450.0}])]
    return ir.Environment(scenario=GALLERY, tables=tables, seed=seed, tools=[FIND_RECORD, PAYMENTS_SINCE, RAISE])


def test_name_fits_compares_segment_runs() -> None:
    assert name_fits("id", "artist_id") and name_fits("new_status", "status") and name_fits("artist", "artist_id")
    assert not name_fits("artist_name", "artist_id") and not name_fits("value", "amount")


def test_parameters_are_renamed_for_the_columns_they_meet_and_calls_work_the_same() -> None:
    env = gallery_env()
    conn = scratch_db(env.tables)
    infos = table_infos(conn)
    assert misnamed(env.tools, env, conn, infos) == [
        f"{FIND_RECORD.name}(artist_name) meets artists.artist_id",
        "payments_since(start) meets commission_records.payment_date",
        "payments_since(artist_id) meets artists.name",
        "set_amount(value) meets commission_records.amount"]
    tools, notes = fix_param_names(env, conn, infos)
    find, since, raise_ = tools
    assert find.name == "find_commission_record_by_artist_id_and_payment_date"
    assert [p.name for p in find.params] == ["artist_id", "payment_date"]
    assert find.params[0].description == "the artist_id of the artists row (artists.artist_id)"
    assert find.description == "Find a commission by artist_id and payment date."
    assert find.steps[0].sql == "SELECT 1 FROM artists WHERE artist_id = :artist_id"
    assert find.steps[0].error == "No artist {artist_id} (':artist_name' is not a placeholder here)"
    # a range bound keeps its own word after the column's; a taken name gets a number; a fitting one stays
    assert [p.name for p in since.params] == ["artist", "payment_date_start", "name"]
    assert since.params[0].description == "Whose payments (artists.artist_id)"  # says which record it names
    assert [p.name for p in raise_.params] == ["record", "amount"]  # 'record' is a run of record_id: it fits
    assert raise_.params[0].description == "The commission (commission_records.record_id)"
    assert raise_.steps[0].sql == "UPDATE commission_records SET amount = :amount WHERE record_id = :record"
    assert misnamed(tools, env, conn, infos) == []
    assert {n.item for n in notes} == {FIND_RECORD.name, "payments_since", "set_amount"}
    # the renamed tools do what the originals did, on real rows
    old, new = EnvInstance(env), EnvInstance(env.model_copy(update={"tools": tools}))
    try:
        for (a, args_a), (b, args_b) in [
            ((FIND_RECORD.name, {"artist_name": 1, "payment_date": "2026-01-09"}),
             (find.name, {"artist_id": 1, "payment_date": "2026-01-09"})),
            ((FIND_RECORD.name, {"artist_name": 9, "payment_date": "2026-01-09"}),
             (find.name, {"artist_id": 9, "payment_date": "2026-01-09"})),
            (("payments_since", {"artist": 1, "start": "2026-01-04"}),
             ("payments_since", {"artist": 1, "payment_date_start": "2026-01-04"})),
            (("set_amount", {"record": 2, "value": 900.0}), ("set_amount", {"record": 2, "amount": 900.0})),
        ]:
            got_a, got_b = old.call(a, args_a), new.call(b, args_b)
            assert got_a.get("result") == got_b.get("result") and got_a["ok"] == got_b["ok"]
            if not got_a["ok"]:
                assert got_b["error"] == got_a["error"].replace("{artist_name}", "{artist_id}")
    finally:
        old.close()
        new.close()
