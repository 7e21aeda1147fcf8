"""Placeholders made of a stem and a counter, and phone numbers a number plan allows (issue 40), from the outside
bike sharing and parking builds of 2026-11-30 (/work/out/o17b): every example bike was brand "Bike1".."Bike5",
model "ModelA".."ModelE" (a word of the table's or the column's own name with a counter glued on), which no
placeholder check saw, and a task added "Bike6"; and 27% of the parking users' phone numbers ("027-803-5128",
"011-049-4958") had area codes no number plan has, digits drawn one by one into the examples' "###-###-####".

Here, with a scripted model: counted example values are named again before they seed anything (as "Project A"
is), codes that count are left alone; a phone column takes the locale's numbers poured into the examples' shape."""

from __future__ import annotations

import re
from typing import Any

import pytest
from faker import Faker

from pipeline import ir
from pipeline.dbmodel.columns import Column
from pipeline.dbmodel.draws import faker_value, phone_mask
from pipeline.llm import fake_client
from pipeline.meaning import vocab
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings, scripted
from tests.stages.test_rowgen_people import CUSTOMER_GENERATORS, CUSTOMER_ROWS, CUSTOMERS
from tests.stages.test_rowgen_people import SCENARIO as PRINT_SHOP

# ------------------------------------------------------------------ counted placeholders


def test_a_word_of_the_column_s_context_with_a_counter_is_a_placeholder() -> None:
    bikes = vocab.words_of(["bikes", "brand"])
    assert vocab.counters(["Bike1", "Bike2", "Bike3", "Bike4"], bikes) == {"Bike1", "Bike2", "Bike3", "Bike4"}
    models = vocab.words_of(["bikes", "model"])
    assert vocab.counters(["ModelA", "ModelB", "ModelC"], models) == {"ModelA", "ModelB", "ModelC"}
    assert vocab.counters(["Model-A", "Model-B"], models) == {"Model-A", "Model-B"}
    assert vocab.counters(["Bike 12", "Bike 13"], bikes) == {"Bike 12", "Bike 13"}
    # any script: the table's own word with a counter
    assert vocab.counters(["自転車1", "自転車2"], vocab.words_of(["自転車"])) == {"自転車1", "自転車2"}
    assert vocab.placeholder_examples(["Bike1", "Bike2", "Bike3"], bikes)
    assert vocab.numbered(["Bike1", "Bike2", "Trek"], bikes) == {"Bike1", "Bike2"}


def test_a_code_that_counts_is_no_placeholder() -> None:
    assert not vocab.counters(["SKU-001", "SKU-002", "SKU-003"], vocab.words_of(["products", "sku"]))  # zeros
    assert not vocab.counters(["Room 101", "Room 102"], vocab.words_of(["rooms", "room"]))  # three digits
    assert not vocab.counters(["AB1234", "AB1235"], vocab.words_of(["licences", "ab", "number"]))
    # a stem that is no word of the context: real model names that count
    assert not vocab.counters(["Trek FX 2", "Trek FX 3"], vocab.words_of(["bikes", "model"]))
    assert not vocab.counters(["Bike1", "Bike2"], vocab.words_of(["vehicles", "brand", "Trek"]))
    assert not vocab.counters(["BMW", "BMX"], vocab.words_of(["bm", "brand"]))  # capitals, no counter
    assert not vocab.counters(["Bike1", "Bike1"], vocab.words_of(["bikes"]))  # one counter: no sequence
    assert not vocab.counters(["Vitamin B12", "Vitamin B6"], vocab.words_of(["vitamin"]))
    assert not vocab.counters(["Bike1", "Bike2"], ())  # no context: nothing counted
    assert not vocab.placeholder_examples(["Bike1", "Bike2", "Bike3"])


def _col(name: str) -> Column:
    return Column(name=name, type="TEXT", notnull=True, pk=0, has_default=False, enum=None, ref=None)


def test_placeholder_columns_count_a_word_of_the_table_s_name() -> None:
    examples = {"brand": ["Bike1", "Bike2", "Bike3", "Bike4"], "model": ["ModelA", "ModelB", "ModelC", "ModelD"],
                "color": ["red", "blue", "green", "red"], "sku": ["SKU-001", "SKU-002", "SKU-003", "SKU-004"],
                "room": ["Room 101", "Room 102", "Room 103", "Room 104"]}
    cols = [_col(n) for n in examples]
    assert [c.name for c in rowgen.placeholder_columns(cols, examples, "bikes")] == ["brand", "model"]
    assert [c.name for c in rowgen.placeholder_columns(cols, examples, "shipments")] == ["model"]  # its own name


SCENARIO = ir.Scenario(name="City Bike Share", description="Riders rent bikes from docks and return them.")
BIKES = ir.Table(name="bikes", natural_key=["brand"], ddl=(
    "CREATE TABLE bikes (bike_id INTEGER PRIMARY KEY, brand TEXT NOT NULL UNIQUE, model TEXT NOT NULL, "
    "added_on TEXT NOT NULL) STRICT"))
BIKE_ROWS = {"rows": [["Bike1", "ModelA", "2025-10-01"], ["Bike2", "ModelB", "2025-11-01"],
                      ["Bike3", "ModelC", "2025-12-01"], ["Bike4", "ModelD", "2026-01-05"]]}
BIKES_GEN = {"locale": "en_US", "columns": {"brand": {"kind": "text_pool"}, "model": {"kind": "text_pool"},
                                            "added_on": {"kind": "date", "start": "2025-06-01", "end": "2026-01-15"}}}
BRANDS = ["Trek", "Giant", "Specialized", "Cannondale"]
MODELS = ["Verve Comfort", "Escape City", "Sirrus Sport", "Domane Road"]
MORE = {"brand": ["Bianchi", "Brompton", "Cervelo", "Raleigh", "Schwinn", "Kona", "Marin", "Scott", "Orbea", "Canyon",
                  "Cube", "Merida", "Pinarello", "Colnago", "Fuji", "Diamondback", "Jamis", "Felt", "Ghost", "Focus"],
        "model": ["Roam Disc", "Topstone", "Allez", "Dew Plus", "Fairfax", "Contend AR", "Marlin", "Crossway"]}


def bike_client(counted_more: bool = False) -> Any:
    """A scripted model: the example rows, the generator choices, a naming request answered with real names; a
    continuation answered with its next values (``counted_more``: the counter continued, "Bike6".., first)."""
    queue: list[Any] = [BIKE_ROWS, BIKES_GEN]
    pools = {k: list(v) for k, v in MORE.items()}

    def reply(messages: list[dict[str, Any]]) -> Any:
        first = messages[0]["content"]
        m = re.search(r"Here are (\d+) of its rows, each with its (\w+) left as \?", first)
        if m:
            n, col = int(m.group(1)), m.group(2)
            return {"values": (BRANDS if col == "brand" else MODELS)[:n]}
        m = re.search(r"Write \d+ more values for (\w+)", first)
        if m:
            pool = pools[m.group(1)]
            counted = [f"Bike{i}" for i in range(6, 12)] if counted_more and m.group(1) == "brand" else []
            fresh, pool[:] = pool[:12], pool[12:]
            return {"values": counted + fresh}
        if "rows" in first and "more" in first and "{" in first and not queue:  # a tuple continuation
            return {"rows": []}
        return queue.pop(0)

    return fake_client([reply] * 200)


@pytest.fixture()
def _no_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rowgen, "_vectors", lambda: None)


@pytest.mark.usefixtures("_no_minilm")
def test_counted_example_bikes_are_named_again_and_the_counter_is_not_continued() -> None:
    client = bike_client(counted_more=True)
    res = generate_seed(SCENARIO, (BIKES,), client, gen_settings(entity_rows=(20, 20)))
    assert res.value is not None, res.rejections
    rows = res.value[0].rows
    brands, models = [r["brand"] for r in rows], [r["model"] for r in rows]
    assert brands[:4] == BRANDS and models[:4] == MODELS  # the example rows named again in place
    assert not [b for b in brands if re.fullmatch(r"Bike\d+", b)], brands
    assert not [m for m in models if re.fullmatch(r"Model[A-Z]", m)], models
    asks = [m[0]["content"] for m in client.requests if "left as ?" in m[0]["content"]]
    assert asks and "Bike1" not in asks[0]


# ------------------------------------------------------------------ phone numbers


def test_a_phone_column_s_shape_is_found_from_the_examples_and_the_locale() -> None:
    assert phone_mask(["123-456-7890", "987-654-3210", "555-123-4567"], "en_US") == "###-###-####"
    assert phone_mask(["(555) 123-4567", "(555) 987-6543"], "en_US") == "(###) ###-####"
    assert phone_mask(["+1 555 123 4567", "+1 555 987 6543"], "en_US") == "+# ### ### ####"
    assert phone_mask(["090-1234-5678", "080-9876-5432"], "ja_JP") == "###-####-####"
    assert phone_mask(["01 23 45 67 89", "06 12 34 56 78"], "fr_FR") == "## ## ## ## ##"
    # no phone: an ISBN, a code with letters, a short code, shapes that differ, one example
    assert phone_mask(["978-0-306-40615-7", "978-1-861-97271-2"], "en_US") is None
    assert phone_mask(["SKU-0012-3456", "SKU-0013-3456"], "en_US") is None
    assert phone_mask(["12-34", "56-78"], "en_US") is None
    assert phone_mask(["123-456-7890", "(555) 123-4567"], "en_US") is None
    assert phone_mask(["123-456-7890"], "en_US") is None


@pytest.mark.parametrize("mask", ["###-###-####", "(###) ###-####", "###.###.####", "##########"])
def test_an_en_us_number_in_the_examples_shape_has_a_real_area_code(mask: str) -> None:
    fake = Faker("en_US")
    fake.seed_instance(7)
    for _ in range(300):
        v = faker_value(fake, "phone", mask)
        assert re.sub(r"\d", "#", v) == mask, v  # the examples' separators kept
        digits = re.sub(r"\D", "", v)
        assert digits[0] not in "01" and digits[3] not in "01", v  # area code and exchange a plan allows


def test_a_number_of_another_locale_keeps_its_own_plan() -> None:
    fake = Faker("ja_JP")
    fake.seed_instance(3)
    values = [faker_value(fake, "phone", "###-####-####") for _ in range(50)]
    assert all(re.fullmatch(r"0[5-9]0-\d{4}-\d{4}", v) for v in values), values  # mobile prefixes, not 123-


@pytest.mark.usefixtures("_no_minilm")
def test_print_shop_phones_are_the_locale_s_numbers_in_the_examples_shape() -> None:
    res = generate_seed(PRINT_SHOP, (CUSTOMERS,), scripted([CUSTOMER_ROWS, CUSTOMER_GENERATORS], {}),
                        gen_settings(entity_rows=(108, 108)))
    assert res.ok, res.rejections
    seed = res.value[0]
    assert seed.plan is not None
    g = next(g for g in seed.plan.generators if g.column == "phone_number")
    assert (g.kind, g.pattern) == ("phone", "###-###-####")
    phones = [r["phone_number"] for r in seed.rows if r["phone_number"]]
    assert len(phones) >= 50
    for p in phones:
        assert re.fullmatch(r"[2-9]\d\d-[2-9]\d\d-\d{4}", p), p
