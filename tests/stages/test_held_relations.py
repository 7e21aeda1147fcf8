"""Planned tasks keep the relations between tables that every seeded row holds (issue 40; the tenth session's
reader's audit of the example library: T3 added a second renewal to a loan when every seeded loan had at most one,
T8 dictated "change the renewal count to 4" against the loan's one renewal, T7 fined a loan that was never overdue).

Inferred from the rows, never from names or words: a made-up domain ('kegs' with 'marks' and 'dues', states 'ab'
and 'cd') where each keg has at most one mark, a keg's 'tally' is its number of marks, and dues sit only on kegs
whose 'due_on' is past the clock (or, in the second environment, only on kegs in state 'cd')."""

from __future__ import annotations

import random
import sqlite3
from typing import Any

from pipeline import ir
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import candidates, held, make_planner

KEGS_DDL = ("CREATE TABLE kegs (id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE, due_on TEXT NOT NULL, "
            "phase TEXT NOT NULL CHECK (phase IN ('ab', 'cd')), tally INTEGER NOT NULL DEFAULT 0) STRICT")
MARKS_DDL = ("CREATE TABLE marks (id INTEGER PRIMARY KEY, keg_id INTEGER NOT NULL REFERENCES kegs(id), "
             "noted_on TEXT NOT NULL) STRICT")
DUES_DDL = ("CREATE TABLE dues (id INTEGER PRIMARY KEY, keg_id INTEGER NOT NULL REFERENCES kegs(id), "
            "amount REAL NOT NULL) STRICT")
N = 24


def _kegs() -> list[dict[str, Any]]:
    rng = random.Random(7)
    out = []
    for i in range(N):
        past = i % 2 == 0  # half the kegs are due before the clock (2026-01-15), half after
        day = f"2025-{rng.randint(6, 12):02d}-{rng.randint(1, 28):02d}" if past else \
            f"2026-{rng.randint(2, 5):02d}-{rng.randint(1, 28):02d}"
        out.append({"id": i + 1, "code": f"K-{100 + i}", "due_on": day, "phase": "ab" if i % 3 else "cd",
                    "tally": 0})
    return out


def keg_env(dues_on: str = "clock", shown: int | None = None) -> ir.Environment:
    kegs = _kegs()
    marked = [k["id"] for k in kegs[:10]]
    for k in kegs:
        k["tally"] = int(k["id"] in marked)
    marks = [{"id": j + 1, "keg_id": kid, "noted_on": "2026-01-10"} for j, kid in enumerate(marked)]
    if dues_on == "clock":
        owed = [k["id"] for k in kegs if k["due_on"] < "2026-01-15"][:8]
    elif dues_on == "few":
        owed = [k["id"] for k in kegs if k["due_on"] < "2026-01-15"][2:6]
    elif dues_on == "phase":
        owed = [k["id"] for k in kegs if k["phase"] == "cd"][:7]
    else:  # on kegs of either side and phase: no relation
        owed = [k["id"] for k in kegs][:8]
    dues = [{"id": j + 1, "keg_id": kid, "amount": 2.5 + j} for j, kid in enumerate(owed)]
    keg_id = ir.Param(name="keg_id", type="integer", description="The keg (kegs.id)", minimum=1)
    tools = [
        ir.Tool(name="find_keg", description="Find a keg by its code.", kind="read",
                params=[ir.Param(name="code", type="string", description="The keg's code (kegs.code)")],
                returns=ir.Returns(sql="SELECT id, code, due_on, phase, tally FROM kegs WHERE code = :code",
                                   mode="one")),
        ir.Tool(name="add_mark", description="Note a mark on a keg.", kind="write",
                params=[keg_id, ir.Param(name="noted_on", type="string", description="When (marks.noted_on)")],
                steps=[ir.Step(kind="write", sql="INSERT INTO marks (keg_id, noted_on) VALUES (:keg_id, :noted_on)"),
                       ir.Step(kind="write", sql="UPDATE kegs SET tally = tally + 1 WHERE id = :keg_id")],
                returns=ir.Returns(sql="SELECT * FROM marks WHERE id = :last_id", mode="one")),
        ir.Tool(name="set_tally", description="Set a keg's tally.", kind="write",
                params=[keg_id, ir.Param(name="tally", type="integer", description="The tally (kegs.tally)",
                                         minimum=0)],
                steps=[ir.Step(kind="write", sql="UPDATE kegs SET tally = :tally WHERE id = :keg_id")],
                returns=ir.Returns(sql="SELECT * FROM kegs WHERE id = :keg_id", mode="one")),
        ir.Tool(name="add_due", description="Record a due on a keg.", kind="write",
                params=[keg_id, ir.Param(name="amount", type="number", description="The amount (dues.amount)")],
                steps=[ir.Step(kind="write", sql="INSERT INTO dues (keg_id, amount) VALUES (:keg_id, :amount)")],
                returns=ir.Returns(sql="SELECT * FROM dues WHERE id = :last_id", mode="one")),
    ]
    return ir.Environment(
        scenario=ir.Scenario(name="Kegs", description="Kegs get marks and dues.", seed="kegs",
                             entities=["keg", "mark", "due"], goals=["mark kegs", "record dues"]),
        tables=[ir.Table(name="kegs", ddl=KEGS_DDL), ir.Table(name="marks", ddl=MARKS_DDL),
                ir.Table(name="dues", ddl=DUES_DDL)],
        seed=[ir.SeedRows(table="kegs", rows=kegs), ir.SeedRows(table="marks", rows=marks),
              ir.SeedRows(table="dues", rows=dues, plan=None if shown is None else ir.RowPlan(
                  locale="en_US", seed=3, examples=shown, generators=[]))],
        tools=tools)


def _chains(env: ir.Environment) -> list[Any]:
    with fresh(env) as run:
        p = make_planner(env, run)
        pools = candidates(p, 0, spread=True)
    return [c for s in sorted(pools) for c in pools[s]]


def _end(env: ir.Environment, chain: Any) -> dict[str, list[dict[str, Any]]]:
    with fresh(env) as run:
        play(run, chain.calls)
        assert run.error is None
        conn = run.inst.conn
        out = {}
        for t in ("kegs", "marks", "dues"):
            cur = conn.execute(f"SELECT * FROM {t}")
            names = [d[0] for d in cur.description]
            out[t] = [dict(zip(names, r, strict=True)) for r in cur]
        return out


def test_the_relations_are_read_from_the_rows() -> None:
    env = keg_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        got = held.infer(p)
        assert [(c.link.parent, c.column, c.link.child) for c in got.counts] == [("kegs", "tally", "marks")]
        assert sorted(s.link.child for s in got.singles) == ["dues", "marks"]
        clocks = [w for w in got.withins if w.link.child == "dues"]
        assert [(w.column, w.clock.side if w.clock else None) for w in clocks] == [("due_on", "past")]
        assert not [w for w in got.withins if w.link.child == "marks"]  # marks on kegs of both sides: none
        assert held.counted(p, "kegs", "tally") and not held.counted(p, "kegs", "phase")
        kegs = {r["id"]: r for r in p.rows("kegs", -1)}
        assert not held.room(p, "marks", "keg_id", kegs[1])  # it has its one mark
        assert held.room(p, "marks", "keg_id", kegs[12])
        assert not held.room(p, "dues", "keg_id", kegs[2])  # not yet due (and no due)
        assert held.room(p, "dues", "keg_id", kegs[19])  # past due, without a due
        assert not held.room(p, "dues", "keg_id", kegs[1])  # past due, with its due


def test_a_child_with_a_name_of_its_own_is_no_detail() -> None:
    """Marks with a UNIQUE label of their own are things a keg may own several of, though each keg has one so far."""
    env = keg_env()
    ddl = MARKS_DDL.replace("noted_on TEXT NOT NULL)", "noted_on TEXT NOT NULL, label TEXT NOT NULL UNIQUE)")
    seed = [s if s.table != "marks" else s.model_copy(update={"rows": [{**r, "label": f"M-{r['id']}"}
                                                                       for r in s.rows]}) for s in env.seed]
    tables = [t if t.name != "marks" else t.model_copy(update={"ddl": ddl}) for t in env.tables]
    env = env.model_copy(update={"seed": seed, "tables": tables})
    with fresh(env) as run:
        p = make_planner(env, run)
        assert sorted(s.link.child for s in held.infer(p).singles) == ["dues"]


def test_a_state_relation_and_none_by_chance() -> None:
    env = keg_env("phase")
    with fresh(env) as run:
        p = make_planner(env, run)
        ws = [w for w in held.infer(p).withins if w.link.child == "dues"]
        assert [(w.column, w.states) for w in ws] == [("phase", ("cd",))]
    env = keg_env("any")  # dues on the first kegs, of both sides and phases: no relation to hold
    with fresh(env) as run:
        p = make_planner(env, run)
        assert not [w for w in held.infer(p).withins if w.link.child == "dues"]


def test_few_children_need_the_examples() -> None:
    """Four dues on past-due kegs among kegs half past due: chance puts them there one time in sixteen, so the
    seeded rows alone are no evidence; three of them written by the model as its examples (and held by the rows
    stage) are."""
    with fresh(env := keg_env("few")) as run:
        assert not [w for w in held.infer(make_planner(env, run)).withins if w.link.child == "dues"]
    with fresh(env := keg_env("few", shown=3)) as run:
        p = make_planner(env, run)
        dues = [(w.column, w.clock.side) for w in held.infer(p).withins if w.link.child == "dues" and w.clock]
        assert ("due_on", "past") in dues, dues


def test_broken_names_what_an_end_state_breaks() -> None:
    env = keg_env()
    with fresh(env) as run:
        p = make_planner(env, run)
        assert held.broken(p, run.inst.conn) == []  # the seeded rows hold every relation
        conn: sqlite3.Connection = run.inst.conn
        conn.execute("UPDATE kegs SET tally = 4 WHERE id = 3")
        conn.execute("INSERT INTO marks (keg_id, noted_on) VALUES (1, '2026-01-15')")
        conn.execute("INSERT INTO dues (keg_id, amount) VALUES (2, 3.0)")
        found = held.broken(p, conn)
    assert any("kegs.tally 4 of 3" in f for f in found), found
    assert any(f.startswith("2 marks of one kegs 1") for f in found), found
    assert any(f.startswith("dues on kegs 2 whose due_on") for f in found), found
    assert any("kegs.tally 1 of 1 against 2" in f for f in found), found  # the mark added without its count


def test_planned_tasks_keep_the_relations() -> None:
    """No task dictates a tally, adds a second mark to a keg or a due to a keg not yet due; the tasks still add
    marks (through the tool that counts them) and dues."""
    env = keg_env()
    chains = _chains(env)
    tools = [c.tool for ch in chains for c in ch.calls]
    assert "set_tally" not in tools
    assert "add_mark" in tools and "add_due" in tools
    for ch in chains:
        if not {"add_mark", "add_due"} & {c.tool for c in ch.calls}:
            continue
        end = _end(env, ch)
        kegs = {k["id"]: k for k in end["kegs"]}
        per = [m["keg_id"] for m in end["marks"]]
        assert len(per) == len(set(per)), ch.facts
        assert all(kegs[k]["tally"] == per.count(k) for k in kegs), ch.facts
        owed = [d["keg_id"] for d in end["dues"]]
        assert len(owed) == len(set(owed)), ch.facts
        assert all(kegs[k]["due_on"] < "2026-01-15" for k in owed), ch.facts


def test_without_the_relations_the_old_plans_stand() -> None:
    """With dues on kegs of both sides of the clock, a planned due may name a keg not yet due: the relation is
    inferred, not imposed."""
    env = keg_env("any")
    chains = _chains(env)
    with fresh(env) as run:
        kegs = {r[0]: r[1] for r in run.inst.conn.execute("SELECT id, due_on FROM kegs")}
    named = [c.arguments["keg_id"] for ch in chains for c in ch.calls if c.tool == "add_due"]
    assert named
    assert any(kegs[k] > "2026-01-15" for k in named), named
