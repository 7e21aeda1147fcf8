"""A UNIQUE column's list asked for as many values as its table needs (issue 40: the library's books, 2026-11-30).
The committed example's titles were continued in three of the twelve calls allowed: the second call wrote back the
rows it was shown, the third (sampled) added one, and two calls in a row that added fewer than three ended the list,
so the table was cut to 11 books beside 232 members. Now a call that adds a few keeps the list going (each later
call sampled), the list ends only after calls that add nothing, and a table without foreign keys cut short by its
list holds the other such tables to the spread ``entity_rows`` allows."""

from __future__ import annotations

import json
import re
from typing import Any

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.stages.rows import generators as rowgen
from tests.stages.test_rowgen import gen_settings, scripted, small_settings

SHOP = ir.Scenario(name="Vinyl record shop", description="A record shop sells albums to its regular customers.")
ALBUMS = ir.Table(name="albums", natural_key=["title"], ddl=(
    "CREATE TABLE albums (album_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, artist TEXT NOT NULL) STRICT"))
SEEDS = [("Abbey Road", "The Beatles"), ("Rumours", "Fleetwood Mac"), ("Thriller", "Michael Jackson"),
         ("Blue", "Joni Mitchell")]
NEW = [("Pet Sounds", "The Beach Boys"), ("Kind of Blue", "Miles Davis"), ("Nevermind", "Nirvana"),
       ("Purple Rain", "Prince"), ("Revolver", "The Beatles"), ("Tapestry", "Carole King"), ("Horses", "Patti Smith"),
       ("Graceland", "Paul Simon"), ("Hounds of Love", "Kate Bush"), ("Remain in Light", "Talking Heads"),
       ("London Calling", "The Clash"), ("Born to Run", "Bruce Springsteen"), ("Ok Computer", "Radiohead"),
       ("Led Zeppelin IV", "Led Zeppelin"), ("Exile on Main St.", "The Rolling Stones"), ("Songs in the Key of Life",
       "Stevie Wonder"), ("Innervisions", "Stevie Wonder"), ("Astral Weeks", "Van Morrison"), ("Ziggy Stardust",
       "David Bowie"), ("Bookends", "Simon & Garfunkel"), ("Aja", "Steely Dan"), ("Marquee Moon", "Television"),
       ("Unknown Pleasures", "Joy Division"), ("Closer", "Joy Division")]


def trickling(per_call: int, rounds_new: int | None = None) -> Any:
    """A fake model that writes back the rows it is shown (eight in all) with only ``per_call`` new ones each call
    (the library's model: its second call copied the eight rows shown), and none after ``rounds_new`` calls."""
    given: list[tuple[str, str]] = []
    calls = [0]

    def reply(messages: list[dict[str, Any]]) -> Any:
        calls[0] += 1
        shown = [json.loads(line) for line in re.findall(r"^(\{.+\})$", messages[0]["content"], re.M)]
        fresh = [] if rounds_new is not None and calls[0] > rounds_new else \
            [r for r in NEW if r not in given][:per_call]
        given.extend(fresh)
        rows = [{"title": t, "artist": a} for t, a in fresh] + shown
        return {"rows": rows[:rowgen.TUPLE_ASK]}

    return fake_client([reply] * 40)


def test_a_continuation_that_adds_a_few_rows_a_call_keeps_asking_until_the_table_has_enough() -> None:
    """Two new rows a call, the rest copies: the list grows by two each call until the rows the table needs (20),
    every call after the first low one sampled (a seed of its own). Before: two such calls ended it at 4 rows."""
    client = trickling(2)
    settings = small_settings(list_rounds_unique=12)
    got, calls = rowgen.continue_tuples(SHOP, ALBUMS, ["title", "artist"], SEEDS, 20, 12, client, settings,
                                        distinct=(0,))
    assert got == NEW[:20] and calls == 10
    temps = [b.get("temperature") for b in client.bodies]
    assert temps[0] == 0 and all(t == settings.retry_temperature for t in temps[1:]), temps
    seeds = [b.get("seed") for b in client.bodies[1:]]
    assert len(set(seeds)) == len(seeds), seeds


def test_the_calls_stay_within_the_rounds_given() -> None:
    got, calls = rowgen.continue_tuples(SHOP, ALBUMS, ["title", "artist"], SEEDS, 200, 6, trickling(2),
                                        small_settings(), distinct=(0,))
    assert calls == 6 and got == NEW[:12]


def test_a_model_that_repeats_itself_ends_the_list_after_calls_that_add_nothing() -> None:
    """The model adds three rows, then one, then only writes back what it is shown: the list ends after
    ``VOCAB_DRY`` calls that add nothing, far within the twelve rounds (before: after the call adding one)."""
    given = iter([NEW[:3], NEW[3:4]])

    def reply(messages: list[dict[str, Any]]) -> Any:
        shown = [json.loads(line) for line in re.findall(r"^(\{.+\})$", messages[0]["content"], re.M)]
        fresh = [{"title": t, "artist": a} for t, a in next(given, [])]
        return {"rows": (fresh + shown)[:rowgen.TUPLE_ASK]}

    got, calls = rowgen.continue_tuples(SHOP, ALBUMS, ["title", "artist"], SEEDS, 100, 12,
                                        fake_client([reply] * 40), small_settings(), distinct=(0,))
    assert got == NEW[:4] and calls == 2 + rowgen.VOCAB_DRY


def test_a_list_of_one_column_keeps_asking_while_each_call_adds_a_value() -> None:
    """The same for one column's list: one new title a call (before: ended after two such calls)."""
    titles = [t for t, _ in NEW]
    given: list[str] = []

    def reply(messages: list[dict[str, Any]]) -> Any:
        shown = re.findall(r"^- (.+)$", messages[0]["content"], re.M)
        fresh = [t for t in titles if t not in given][:1]
        given.extend(fresh)
        return {"values": fresh + shown}

    got, calls = rowgen.continue_list(SHOP, ALBUMS, "title", [t for t, _ in SEEDS], 8, 12,
                                      fake_client([reply] * 40), small_settings())
    assert got == titles[:8] and calls == 8


# ------------------------------------------------------------------ the other tables balanced against a short list


RECORDS = ir.Table(name="records", natural_key=["title"], ddl=(
    "CREATE TABLE records (record_id INTEGER PRIMARY KEY, title TEXT NOT NULL UNIQUE, copies INTEGER NOT NULL) "
    "STRICT"))
CUSTOMERS = ir.Table(name="customers", natural_key=["name"], ddl=(
    "CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE) STRICT"))
PURCHASES = ir.Table(name="purchases", ddl=(
    "CREATE TABLE purchases (purchase_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES "
    "customers(customer_id), quantity INTEGER NOT NULL) STRICT"))
RECORD_ROWS = {"rows": [[t, 2] for t, _ in SEEDS]}
RECORDS_GEN = {"locale": "en_GB", "columns": {"title": {"kind": "text_pool"},
                                              "copies": {"kind": "integer", "min": 1, "max": 5}}}
CUSTOMER_ROWS = {"rows": [["Ann Hale"], ["Bob Stone"], ["Cleo Marsh"], ["Dev Patel"]]}
CUSTOMERS_GEN = {"locale": "en_GB", "columns": {"name": {"kind": "person_name"}}}
PURCHASE_ROWS = {"rows": [[1, 1], [2, 3], [2, 1], [4, 2]]}
PURCHASES_GEN = {"locale": "en_GB", "columns": {"quantity": {"kind": "integer", "min": 1, "max": 4}}}
SHORT = {"title": [t for t, _ in NEW[:2]]}
"""The titles' list ends two values after the four examples: six records."""


def counted(seed: tuple[ir.SeedRows, ...]) -> dict[str, int]:
    return {s.table: len(s.rows) for s in seed}


def test_a_table_after_one_whose_list_ended_short_is_held_to_the_spread_entity_rows_allows() -> None:
    """Six records (the list ran dry): the customers, drawn in 20..60, are held to 6 x 60/20 = 18, and a
    ``balanced`` rejection says so (before: 20 to 60 customers beside 6 records)."""
    from pipeline.stages.rows.populate import generate_seed

    res = generate_seed(SHOP, (RECORDS, CUSTOMERS), scripted([RECORD_ROWS, RECORDS_GEN, CUSTOMER_ROWS, CUSTOMERS_GEN],
                                                               SHORT), gen_settings(entity_rows=(20, 60)))
    assert res.ok, res.rejections
    n = counted(res.value)
    assert n["records"] == 6 and n["customers"] == 18, n
    kinds = {(r.item, (r.evidence or {}).get("kind")) for r in res.rejections}
    assert {("records", "short_list"), ("customers", "balanced")} <= kinds, kinds


def test_a_table_before_one_whose_list_ended_short_loses_the_code_rows_nothing_names() -> None:
    """The customers are made first (20 of them) and a purchase names the last one; the records' list then ends at
    six (6 x 20/20 customers at most): the customers' code-made rows that no row names are deleted, the last first,
    so the four examples, the fifth and the named twentieth stay (before: all twenty)."""
    from pipeline.stages.rows.populate import generate_seed

    purchases = {"rows": [[1, 1], [2, 3], [20, 1], [4, 2]]}  # customer 20: a code-made one
    tables = (CUSTOMERS, PURCHASES, RECORDS)
    client = scripted([CUSTOMER_ROWS, CUSTOMERS_GEN, purchases, PURCHASES_GEN, RECORD_ROWS, RECORDS_GEN], SHORT)
    res = generate_seed(SHOP, tables, client, gen_settings(entity_rows=(20, 20), child_fanout=(0, 0)))
    assert res.ok, res.rejections
    seed = {s.table: s for s in res.value}
    assert len(seed["records"].rows) == 6
    ids = [r["customer_id"] for r in seed["customers"].rows]
    assert ids == [1, 2, 3, 4, 5, 20], ids  # the examples stay, and the customer a purchase names
    assert {r["customer_id"] for r in seed["purchases"].rows} <= set(ids)
    assert any(r.item == "customers" and (r.evidence or {}).get("kind") == "balanced" for r in res.rejections)
