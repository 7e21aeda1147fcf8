"""The stdlib evaluator shipped in exported artefacts agrees with verify.evaluate."""

from __future__ import annotations

import pytest

from pipeline.export import taskrt
from pipeline.ir import Assertion, Verifier
from pipeline.runtime import EnvInstance
from tests.fixtures.library import library_env
from verify.evaluate import answer_matches, evaluate
from verify.state import snapshot, table_infos

TRAJECTORIES = {
    "noop": [],
    "borrow": [("borrow_book", {"member_id": 4, "book_id": 2, "days": 7})],
    "return_and_email": [
        ("return_book", {"book_id": 3}),
        ("update_member_email", {"member_id": 1, "email": "a@x.org"}),
    ],
    "collateral": [
        ("borrow_book", {"member_id": 4, "book_id": 2, "days": 7}),
        (
            "add_book",
            {"title": "T", "author": "A", "genre": "fiction", "year": 2001, "replacement_cost": 9.5},
        ),
    ],
    "failed_call": [("borrow_book", {"member_id": 99, "book_id": 2})],
}

VERIFIERS = [
    Verifier(assertions=[Assertion(sql="SELECT COUNT(*) FROM loans", expect=5)], mutable_tables=["loans"]),
    Verifier(
        assertions=[Assertion(sql="SELECT due_date FROM loans WHERE member_id = 4", expect="2026-01-22")],
        mutable_tables=["loans"],
    ),
    Verifier(
        assertions=[
            Assertion(
                sql="SELECT id, title FROM books WHERE id <= 2 ORDER BY id", expect=[[1, "Dune"], [2, "x"]]
            )
        ]
    ),
    Verifier(
        assertions=[
            Assertion(sql="SELECT email FROM members WHERE id = 1", expect="a@x.org"),
            Assertion(sql="SELECT nope FROM members", expect=1),
        ],
        mutable_tables=["members"],
    ),
    Verifier(
        assertions=[Assertion(sql="SELECT COUNT(*) FROM loans WHERE returned_at IS NULL", expect=3.0)],
        mutable_tables=[],
    ),
    Verifier(
        assertions=[Assertion(sql="SELECT COUNT(*) FROM members", expect=4)],
        mutable_tables=["loans", "members", "books"],
    ),
    Verifier(assertions=[Assertion(sql="SELECT 1", expect=True)], answer="2; yes"),
]
ANSWERS = [None, "", "2", "Carla has 2 books, yes", "two, no", "2.0 — Yes!"]


@pytest.mark.parametrize("name", sorted(TRAJECTORIES))
def test_evaluator_agrees_with_verify(name):
    env = library_env()
    inst = EnvInstance(env)
    infos = table_infos(inst.conn)
    initial = snapshot(inst.conn, infos)
    rt_initial = taskrt.snapshot(inst.conn)
    for tool, args in TRAJECTORIES[name]:
        inst.call(tool, args)
    for verifier in VERIFIERS:
        for answer in ANSWERS:
            ours = taskrt.evaluate(
                verifier.model_dump(mode="json"), inst.conn, initial=rt_initial, answer=answer
            )
            theirs = evaluate(verifier, inst.conn, initial=initial, answer=answer, infos=infos)
            assert ours["passed"] == theirs.passed, (name, verifier, answer, ours, theirs)
            assert tuple(ours["assertions"]) == theirs.assertions
    inst.close()


@pytest.mark.parametrize("expected", ["2", "yes", "no", "Dune; 12.50", "alice@example.org"])
@pytest.mark.parametrize(
    "given", [None, "", "2", "Yes.", "no", "It's Dune at 12.5", "ALICE@example.org", "12,50 dune"]
)
def test_answer_matching_agrees_with_verify(expected, given):
    assert taskrt.answer_matches(expected, given) == answer_matches(expected, given)


def test_partial_credit_is_the_share_of_checks():
    ev = {"passed": False, "checks": [True, False, True, True]}
    assert taskrt.reward(ev) == 0.0
    assert taskrt.reward(ev, partial=True) == 0.75
    assert taskrt.reward({"passed": True, "checks": [True]}, partial=True) == 1.0


def test_dump_and_load_round_trip_the_database(catalog_dir):
    bundle = taskrt.Bundle(next((catalog_dir / "envs").iterdir()))
    conn = bundle.fresh_db()
    out = bundle.call(conn, "borrow_book", {"member_id": 4, "book_id": 2, "days": 7})
    assert out["ok"], out
    copy = taskrt.load_db(taskrt.dump_db(conn))
    assert taskrt.snapshot(copy) == taskrt.snapshot(conn)
    assert copy.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert taskrt.snapshot(bundle.fresh_db()) == bundle.initial_snapshot()  # every rollout starts fresh
    assert bundle.call(conn, "nope", {})["kind"] == "not_found"
