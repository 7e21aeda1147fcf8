"""A column the tools stage adds is returned by the finders that return every other column of its table by an
explicit list (``amend_schema.shown``). Issue 40: the regenerated pharmacy's ``find_medications_by_name`` (written
before ``medications.stock`` was added) never showed the stock its fills are refused on."""

from __future__ import annotations

from pipeline import ir
from pipeline.stages.tools import amend_schema as amend

COLUMNS = {"drugs": ("drug_id", "name", "pack", "stock"), "notes": ("note_id", "drug_id", "text")}
FINDER = ("SELECT COUNT(*) OVER () AS total_matched, drug_id, name AS drug_name, pack FROM drugs "
          "WHERE name = :name LIMIT COALESCE(:limit, 20)")


def _read(name: str, sql: str) -> ir.Tool:
    return ir.Tool(name=name, description=name, kind="read", params=[ir.Param(name="name", type="string")],
                   returns=ir.Returns(sql=sql))


def test_a_finder_returning_every_other_column_returns_the_added_one() -> None:
    (tool,), (note,) = amend.shown([_read("find", FINDER)], COLUMNS, [("drugs", "stock")])
    assert tool.returns is not None and tool.returns.sql == (
        'SELECT COUNT(*) OVER () AS total_matched, drug_id, name AS drug_name, pack, "stock" FROM drugs '
        "WHERE name = :name LIMIT COALESCE(:limit, 20)")
    assert note.item == "find" and note.evidence["columns"] == ["stock"]


def test_finders_choosing_columns_reading_everything_or_joining_are_left_alone() -> None:
    tools = [_read("some", "SELECT drug_id, name FROM drugs WHERE name = :name"),  # a choice of columns
             _read("every", "SELECT * FROM drugs WHERE name = :name"),  # stock already in
             _read("shown", FINDER.replace("pack FROM", "pack, stock FROM")),
             _read("joined", "SELECT d.drug_id, d.name, d.pack, n.text FROM drugs d JOIN notes n "
                             "ON n.drug_id = d.drug_id WHERE d.name = :name"),
             _read("other", "SELECT note_id, drug_id, text FROM notes WHERE text = :name")]
    assert amend.shown(tools, COLUMNS, [("drugs", "stock")]) == (tools, [])
