"""Rows at scale, issue 40: a column whose example values are made of another column's value in the same row (an
e-mail of the member's name, a login of their initial and surname) is made so in every generated row, its example
rows too when their source is drawn again; where the examples show no such relation, nothing is derived."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.meaning import relations
from pipeline.stages.rows import generators as rowgen
from pipeline.stages.rows.populate import generate_seed
from tests.stages.test_rowgen import gen_settings

SCENARIO = ir.Scenario(name="Climbing gym", description="Members book climbing sessions at a bouldering gym.")
MEMBERS = ir.Table(name="members", ddl="CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                   "email TEXT NOT NULL UNIQUE, login TEXT NOT NULL, level TEXT NOT NULL CHECK (level IN "
                   "('beginner', 'advanced'))) STRICT", natural_key=["email"])
ROWS = {"rows": [["John Smith", "john.smith@example.com", "jsmith", "beginner"],
                 ["Maria García", "maria.garcia@example.com", "mgarcia", "advanced"],
                 ["Lena Vogel", "lena.vogel@example.com", "lvogel", "beginner"],
                 ["Tom Reed", "tom.reed@example.com", "treed", "advanced"]]}
GEN = {"locale": "en_US", "columns": {"name": {"kind": "person_name"}, "email": {"kind": "email"},
                                      "login": {"kind": "text_pool"},
                                      "level": {"kind": "enum", "values": ["beginner", "advanced"]}}}
APART = {"rows": [["John Smith", "knox77@gmail.com", "rockfan", "beginner"],
                  ["Maria García", "rebecca.k@yahoo.com", "cragrat", "advanced"],
                  ["Lena Vogel", "vogel.fan@gmx.de", "ledgewalker", "beginner"],
                  ["Tom Reed", "tr@outlook.com", "chalkbag", "advanced"]]}
LOGINS = ["boulderbee", "crimper", "slabmaster", "dynoking", "heelhook", "jugjunkie", "sloperider", "toprope",
          "flashpoint", "overhang", "pinchgrip", "smearer"]


@pytest.fixture(autouse=True)
def _no_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rowgen, "_vectors", lambda: None)


def _members(rows: dict[str, Any]) -> tuple[Any, Any]:
    queue = [rows, GEN]

    def reply(messages: list[dict[str, Any]]) -> Any:  # a list of logins continued once, then nothing new
        if "more values for login" in messages[0]["content"]:
            return {"values": LOGINS if "- boulderbee" not in messages[0]["content"] else LOGINS[:1]}
        return queue.pop(0)

    client = fake_client([reply] * 20)
    res = generate_seed(SCENARIO, (MEMBERS,), client, gen_settings())
    assert res.value is not None
    return res, res.value[0]


def _slug(name: str) -> list[str]:
    return relations.words_of(name)


def test_an_email_and_a_login_are_made_of_the_name_in_every_row() -> None:
    res, seeded = _members(ROWS)
    rows = seeded.rows
    assert len(rows) > 30
    for r in rows:
        words = _slug(r["name"])
        local, domain = r["email"].split("@")
        assert local.rstrip("0123456789") == f"{words[0]}.{words[-1]}", r
        assert r["login"] == words[0][0] + words[-1], r
        assert not relations.reserved_domain("@" + domain)  # "@example.com" is a stand-in: a real provider's
    plan = {g.column: g for g in seeded.plan.generators}
    assert plan["email"].kind == "derived" and plan["email"].after == "name" and plan["email"].pattern == "{0}.{-1}"
    assert plan["login"].kind == "derived" and plan["login"].pattern == "{0:1}{-1}"
    assert plan["name"].kind == "person_name"
    # the example rows' people were drawn again (placeholders), and what is made of them with them
    assert rows[0]["name"] != "John Smith" and rows[0]["login"] == _slug(rows[0]["name"])[0][0] + \
        _slug(rows[0]["name"])[-1]
    assert len({r["email"] for r in rows}) == len(rows)


def test_the_same_inputs_give_the_same_rows() -> None:
    assert _members(ROWS)[1] == _members(ROWS)[1]


def test_nothing_is_derived_where_the_examples_show_no_relation() -> None:
    _, seeded = _members(APART)
    plan = {g.column: g for g in seeded.plan.generators}
    assert plan["email"].kind == "email" and plan["login"].kind == "text_pool"
    assert {r["login"] for r in seeded.rows} <= {r[2] for r in APART["rows"]} | set(LOGINS)


def test_perturbed_rows_keep_a_derived_value_made_of_their_own_source() -> None:
    from pipeline.dbmodel.columns import table_columns
    from pipeline.dbmodel.ddl import scratch_db
    from pipeline.stages.rows.maker import ValueMaker

    _, seeded = _members(ROWS)
    conn = scratch_db((MEMBERS,))
    cols = table_columns(conn, MEMBERS)
    maker = ValueMaker("en_US", 5, seeded.plan.generators, cols, {})
    row = maker.row({"name": "Ana Lopez", "level": "beginner"}, {})  # the name kept, the rest drawn again
    assert row["login"] == "alopez" and row["email"].startswith("ana.lopez")


def test_a_new_value_for_a_task_is_made_the_same_way() -> None:
    from pipeline.dbmodel.draws import drawn

    g = ir.ColumnGenerator(column="email", kind="derived", after="name", pattern="{0}.{-1}", pool=["@example.com"])
    got = drawn(g, "en_US", 7, 5)
    assert got == drawn(g, "en_US", 7, 5) and len(set(got)) == 5
    assert all(re.fullmatch(r"[a-z]+\.[a-z]+@[a-z.]+", v) and not relations.reserved_domain(v[v.index("@"):])
               for v in got)
