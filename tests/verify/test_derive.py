"""Verifiers derived by code from the state diff of a reference replay."""

from __future__ import annotations

from pipeline.ir import ToolCall
from pipeline.runtime import EnvInstance
from pipeline.runtime.replay import fresh, play
from tests.fixtures.library import library_env
from tests.verify.envs import shop_env
from verify.derive import derive_verifier, extract_answer
from verify.evaluate import evaluate


def _holds(env, verifier, calls) -> bool:
    with fresh(env) as run:
        play(run, calls)
        return evaluate(verifier, run.inst.conn, initial=run.initial, answer=verifier.answer).passed


def test_insert_checks_values_exactly_and_ids_and_stamps_by_type() -> None:
    env = library_env()
    d = derive_verifier(env, [ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 2, "days": 7})])
    assert d.error is None and d.verifier is not None
    v = d.verifier
    assert v.mutable_tables == ["loans"] and v.answer is None
    first = v.assertions[0].sql
    assert '"member_id" = 4' in first and '"book_id" = 2' in first
    assert "\"due_date\" = '2026-01-22'" in first  # computed from the clock and `days`: exact
    assert "typeof(\"id\") = 'integer'" in first  # assigned by SQLite
    assert "typeof(\"borrowed_at\") = 'text'" in first  # the clock itself
    assert v.assertions[0].expect == 1
    counts = [a for a in [a for a in v.assertions if a.name == 'gate'] if a.sql == 'SELECT COUNT(*) FROM "loans"']
    assert counts and counts[0].expect == 5
    assert any("unchanged" in a.description for a in [a for a in v.assertions if a.name == 'gate'])
    # the reference passes; borrowing for the default 14 days does not
    assert _holds(env, v, list(d.calls))
    assert not _holds(env, v, [ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": 2})])


def test_update_of_a_stamp_checks_that_it_changed() -> None:
    env = library_env()
    d = derive_verifier(env, [ToolCall(tool="return_book", arguments={"book_id": 3})])
    assert d.verifier is not None
    sql = d.verifier.assertions[0].sql
    assert "typeof(\"returned_at\") = 'text'" in sql and '"id" = 2' in sql
    with EnvInstance(env) as inst:
        assert inst.query(sql) == 0  # fails on the initial state


def test_random_values_and_foreign_keys_to_new_rows() -> None:
    env = shop_env()
    calls = [ToolCall(tool="create_order", arguments={"customer": "Cy"}),
             ToolCall(tool="add_item", arguments={"order_id": "$1.id", "sku": "INK", "qty": 3})]
    d = derive_verifier(env, calls)
    assert d.error is None and d.verifier is not None
    assert d.calls[1].arguments["order_id"] == 3  # the reference holds the concrete value
    order_sql = next(a.sql for a in d.verifier.assertions if "FROM \"orders\" WHERE" in a.sql and "Cy" in a.sql)
    assert "typeof(\"code\") = 'text'" in order_sql  # random: differs between two replays
    assert "typeof(\"created_at\") = 'text'" in order_sql
    assert "\"status\" = 'open'" in order_sql  # a column default is predictable
    item_sql = next(a.sql for a in d.verifier.assertions if "FROM \"items\" WHERE" in a.sql)
    assert '"order_id" IN (SELECT "id" FROM "orders" WHERE' in item_sql
    assert d.verifier.mutable_tables == ["items", "orders"]
    assert _holds(env, d.verifier, list(d.calls))
    # the item on another order fails
    assert not _holds(env, d.verifier, [calls[0], ToolCall(tool="add_item", arguments={"order_id": 2, "sku": "INK", "qty": 3})])


def test_lookup_answers_come_from_the_result() -> None:
    env = library_env()
    d = derive_verifier(env, [ToolCall(tool="search_books", arguments={"query": "Austen"})], answer_field="title")
    assert d.verifier is not None and d.verifier.answer == "Emma; Persuasion"
    assert d.verifier.mutable_tables == [] and all(a.name == 'gate' for a in d.verifier.assertions) and d.verifier.assertions  # state must stay as it was (gates only)
    d = derive_verifier(env, [ToolCall(tool="get_book", arguments={"book_id": 3})], answer_field="on_loan")
    assert d.verifier is not None and d.verifier.answer == "yes"
    d = derive_verifier(env, [ToolCall(tool="get_book", arguments={"book_id": 2})], answer_field="replacement_cost")
    assert d.verifier is not None and d.verifier.answer == "18"


def test_errors_are_reported_not_raised() -> None:
    env = library_env()
    d = derive_verifier(env, [ToolCall(tool="return_book", arguments={"book_id": 2})])
    assert d.verifier is None and "book 2 is not on loan" in (d.error or "")
    d = derive_verifier(env, [ToolCall(tool="update_member_email", arguments={"member_id": 1, "email": "alice@example.org"})])
    assert d.verifier is None and "changed nothing" in (d.error or "")
    d = derive_verifier(env, [ToolCall(tool="search_books", arguments={"query": "zzz"})], answer_field="title")
    assert d.verifier is None and "no rows" in (d.error or "")
    d = derive_verifier(env, [ToolCall(tool="add_book", arguments={"title": "X", "author": "Y", "genre": "fiction", "year": 2000,
                                                                   "replacement_cost": 1.0}),
                              ToolCall(tool="borrow_book", arguments={"member_id": 4, "book_id": "$1.nope"})])
    assert d.verifier is None and "no field 'nope'" in (d.error or "")


def test_extract_answer_limits() -> None:
    assert extract_answer([{"a": i} for i in range(9)], "a")[1] is not None
    assert extract_answer({"a": None}, "a")[1] is not None
    assert extract_answer({"a": 1}, "b")[1] is not None
    assert extract_answer([{"a": 2.5}, {"a": 2.5}], "a") == ("2.5", None)


def test_derivation_is_deterministic() -> None:
    env = shop_env()
    calls = [ToolCall(tool="create_order", arguments={"customer": "Cy"})]
    a, b = derive_verifier(env, calls), derive_verifier(env, calls)
    assert a.verifier == b.verifier
