"""A planned task's new row states values a domain expert accepts (issue 40): a column the rows stage makes of
another column of the same row (an e-mail address of the person's name) is made so of the new row's stated name, and
a row's own value (an e-mail address, a phone number) is one no existing row holds, UNIQUE or not. Seen in the
library of 2026-11-29: "add Angel Morgan as a new member with email christopher.brewer@yahoo.com and phone number
484-035-5273" (an address drawn for another name, the phone of the template row's member); the board game cafe's
"Jessica Smith, sarah.poole@hotmail.com" with another customer's phone."""

from __future__ import annotations

from typing import Any

from pipeline import ir
from pipeline.dbmodel.draws import slug
from pipeline.meaning import relations
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner.values import made_in_row

NAMES = ["Oskar Lind", "Mira Vos", "Tomas Berg", "Ines Roa", "Pavel Dunn", "Lena Ruiz", "Ana Lopez", "Rui Sato",
         "Eva Holm", "Jan Kral", "Noor Haddad", "Ivo Petrov", "Lia Moretti", "Sven Aal", "Zoe Brandt", "Omar Said"]
DOMAINS = ["gmail.com", "yahoo.com", "hotmail.com"]


def members_ddl(email: str) -> str:
    return ("CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
            f"email {email}, phone TEXT) STRICT")


def member_rows(made: str) -> list[dict[str, Any]]:
    """Members whose address is made of their name (``made``: 'derived' the examples' "first.last", 'email' the row
    maker's own), each with a phone of their own."""
    out = []
    for i, n in enumerate(NAMES):
        local = relations.derive("{0}.{-1}", n) if made == "derived" else slug(n)
        out.append({"id": i + 1, "name": n, "email": f"{local}@{DOMAINS[i % 3]}",
                    "phone": f"{200 + i:03d}-{310 + 7 * i:03d}-{4000 + 13 * i:04d}"})
    return out


def gens(made: str) -> list[ir.ColumnGenerator]:
    email = ir.ColumnGenerator(column="email", kind="derived", after="name", pattern="{0}.{-1}",
                               pool=["@example.com"]) if made == "derived" else \
        ir.ColumnGenerator(column="email", kind="email")
    return [ir.ColumnGenerator(column="name", kind="person_name"), email,
            ir.ColumnGenerator(column="phone", kind="code", pattern="###-###-####")]


TOOLS = [
    ir.Tool(name="find_member", description="Find a member by name.", kind="read",
            params=[ir.Param(name="name", type="string", description="The member's name (members.name)")],
            returns=ir.Returns(sql="SELECT id, name, email, phone FROM members WHERE name = :name", mode="one")),
    ir.Tool(name="add_member", description="Register a new member.", kind="write",
            params=[ir.Param(name="name", type="string", description="Full name (members.name)"),
                    ir.Param(name="email", type="string", description="E-mail address (members.email)"),
                    ir.Param(name="phone", type="string", description="Phone number (members.phone)")],
            steps=[ir.Step(kind="write", sql="INSERT INTO members (name, email, phone) VALUES (:name, :email, :phone)")],
            returns=ir.Returns(sql="SELECT * FROM members WHERE id = :last_id", mode="one")),
]


SET_EMAIL = ir.Tool(name="set_member_email", description="Change a member's e-mail address.", kind="write",
                    params=[ir.Param(name="member_id", type="integer", description="Member id (members.id)", minimum=1),
                            ir.Param(name="email", type="string", description="New address (members.email)")],
                    steps=[ir.Step(kind="write", sql="UPDATE members SET email = :email WHERE id = :member_id")],
                    returns=ir.Returns(sql="SELECT * FROM members WHERE id = :member_id", mode="one"))


def members_env(made: str, email: str, tools: list[ir.Tool] = TOOLS) -> ir.Environment:
    plan = ir.RowPlan(locale="en_US", seed=11, examples=3, generators=gens(made))
    return ir.Environment(
        scenario=ir.Scenario(name="Club", description="A club registers its members.", seed="club",
                             entities=["member"], goals=["register members"]),
        tables=[ir.Table(name="members", ddl=members_ddl(email))],
        seed=[ir.SeedRows(table="members", rows=member_rows(made), plan=plan)],
        tools=tools)


def written(env: ir.Environment, op: str = "insert") -> list[dict[str, Any]]:
    """The members the planned tasks add (``op`` 'insert') or change ('update': each as it is after)."""
    out = []
    with fresh(env) as run:
        chains = plan_chains(env, run, 30, {1: 0.5, 2: 0.5}, spread=True)
    for ch in chains:
        with fresh(env) as r2:
            play(r2, ch.calls)
            out += [c.after for c in r2.changes() if c.table == "members" and c.op == op]
    return out


def test_a_new_members_address_is_made_of_the_stated_name_and_their_phone_is_their_own() -> None:
    """Before: the address was drawn for another name (the e-mail column UNIQUE) and the phone copied from the
    template row (not UNIQUE)."""
    rows = member_rows("derived")
    for email in ("TEXT NOT NULL UNIQUE", "TEXT NOT NULL"):  # a fresh address whether the schema asks or not
        new = written(members_env("derived", email))
        assert new, email
        for m in new:
            local, domain = m["email"].split("@")
            assert local == relations.derive("{0}.{-1}", m["name"]), m
            assert not relations.reserved_domain("@" + domain), m
            assert m["email"] not in {r["email"] for r in rows}, m
            assert m["phone"] not in {r["phone"] for r in rows}, m


def test_the_row_makers_own_address_is_made_of_the_stated_name_too() -> None:
    new = written(members_env("email", "TEXT NOT NULL UNIQUE"))
    assert new
    for m in new:
        assert m["email"].split("@")[0].rstrip("0123456789") == slug(m["name"]), m
        assert m["email"] not in {r["email"] for r in member_rows("email")}, m


def test_an_address_another_row_holds_is_drawn_again() -> None:
    """Two members named as the new one already hold the address at two providers: the third's, or digits."""
    env = members_env("derived", "TEXT NOT NULL")
    rows = member_rows("derived")
    rows[0] |= {"name": "Ana  Lopez", "email": "ana.lopez@gmail.com"}
    rows[1] |= {"name": "ANA LOPEZ", "email": "ana.lopez@yahoo.com"}
    env.seed[0].rows[:] = rows
    with fresh(env) as run:
        p = make_planner(env, run)
        cols = {"name", "email", "phone"}
        got = made_in_row(p, "members", {"name": "Ana Lopez", "email": "someone.else@gmail.com", "phone": "1"}, cols)
        assert set(got) == {"email"}
        assert got["email"] and got["email"].startswith("ana.lopez@"), got
        assert got["email"] not in {"ana.lopez@gmail.com", "ana.lopez@yahoo.com"}
        assert made_in_row(p, "members", {"name": "Ana Lopez", "email": "x@gmail.com"}, cols) == got  # deterministic
        assert made_in_row(p, "members", {"email": "x@gmail.com", "phone": "1"}, cols) == {}  # no name: left


def test_a_members_changed_address_is_still_made_of_their_name() -> None:
    """Before: "change Mira Vos's e-mail to lena.hart@..." (an address drawn for a stranger's name)."""
    rows = {r["id"]: r for r in member_rows("derived")}
    changed = written(members_env("derived", "TEXT NOT NULL UNIQUE", [*TOOLS, SET_EMAIL]), "update")
    assert changed
    for m in changed:
        assert m["email"].split("@")[0] == relations.derive("{0}.{-1}", m["name"]), m
        assert m["email"] not in {r["email"] for r in rows.values()}, m  # not even the member's own old one
