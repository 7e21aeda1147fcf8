"""Requests a person would say (issue 40's reader audit, 2026-11-29): a write that ends in a state said as the
model's words for the event (``pipeline.stages.tasks.events``, with a scripted model), a row chosen by a date named
by its parents (``pipeline.stages.tasks.naming``), a compound's halves about one person where the data allows
(``planner.rules.same_party``), and a request template that says one slot for two facts refused."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pipeline import ir
from pipeline.dbmodel.columns import check_enums
from pipeline.llm import fake_client
from pipeline.runtime.replay import fresh
from pipeline.settings import TaskSettings
from pipeline.stages.tasks import templates as ph
from pipeline.stages.tasks.bank import generate_tasks, lint_request
from pipeline.stages.tasks.code_wording import Event, event_key, event_slots, request_from_plan, state_columns
from pipeline.stages.tasks.events import (
    ask_events,
    nearer_other,
    needed,
    problem,
    sentence_nearer_other,
    sentences,
    spoken,
    unquoted,
)
from pipeline.stages.tasks.naming import by_parents, parents_naming, parents_too
from pipeline.stages.tasks.planner import make_planner, plan_chains, shuffled_planner
from pipeline.stages.tasks.planner.chains import Chain, Goal
from pipeline.stages.tasks.planner.rules import parents, same_party
from tests.fixtures.permits import permit_env

LIBRARY = Path(__file__).parent.parent / "fixtures" / "book_lending.json"


@pytest.fixture(scope="module")
def permits():
    env = permit_env()
    with fresh(env, None) as run:
        chains = plan_chains(env, run, 40, {1: 1.0, 2: 1.0, 3: 1.0}, spread=True)
    return env, chains


def _lint(env):
    return lambda ch, text: lint_request(env, ch, text, plain=True)


def _slots(messages) -> list[str]:
    return re.findall(r"^\{(\w+)\}: for example", messages[1]["content"], re.M)


def test_a_state_write_is_said_as_the_event_the_model_words(permits) -> None:
    env, chains = permits
    fixed = state_columns(env)
    need = needed(chains, fixed)
    assert need, "the permit office plans no write that moves a permit to a state"
    key, users = next(iter(need.items()))
    seen: list = []

    def bad_then_good(messages):
        seen.append(messages)
        slots = _slots(messages)
        if len(seen) == 1:
            return {"template": "Please handle this one for me."}  # no slot: refused, with the slots named
        return {"template": "Hello, about permit " + " and ".join("{" + s + "}" for s in slots) +
                ": we need that sorted out today."}

    kept, failed = ask_events(env, fake_client([bad_then_good] * 2 + [
        lambda m: {"template": "Hi, for permit " + " ".join("{" + s + "}" for s in _slots(m)) + ", go ahead."}] * 20),
        chains, lint=_lint(env), limit=1, encode=None)  # MiniLM's check: its own test below
    assert list(kept) == [key] and not failed
    first = seen[0][1]["content"]
    assert key[2].replace("_", " ") in first and env.scenario.name in first  # the state asked for, in the scenario
    assert "{" + _slots(seen[0])[0] + "}" in seen[1][-1]["content"]  # the feedback names the missing slot
    chain = spoken(next(c for c in users if len(c.goals) == 1), kept, fixed)
    assert key[2] not in chain.must_state  # the event says the state: the word itself is not asked for
    text = request_from_plan(chain, (), states=fixed, events=kept)
    plain = request_from_plan(chain, (), states=fixed)
    assert text is not None and text.startswith("Hello, about permit") and "mark" not in text, text
    assert plain is not None and plain != text
    goal = next(g for g in chain.goals if event_key(g, fixed) == key)
    assert all(str(v) in text for _, v in goal.named)
    assert lint_request(env, chain, text, plain=True) is None


def test_an_event_with_values_or_digits_of_its_own_is_refused_and_code_words_as_before(permits) -> None:
    env, chains = permits
    fixed = state_columns(env)
    key, users = next(iter(needed(chains, fixed).items()))
    goal = next(g for g in users[0].goals if event_key(g, fixed) == key)
    own = str(goal.named[0][1])

    def replies():
        yield lambda m: {"template": f"Permit {own} " + " ".join("{" + s + "}" for s in _slots(m))}  # a value
        yield lambda m: {"template": "Permit " + " ".join("{" + s + "}" for s in _slots(m)) + " by 5 pm please"}
        yield lambda m: {"template": "{" + _slots(m)[0] + "} and {" + _slots(m)[0] + "} again"}  # twice

    client = fake_client(list(replies()) * 8)
    kept, failed = ask_events(env, client, chains, lint=_lint(env), limit=1, max_attempts=3)
    assert not kept and len(failed) == 1 and failed[0].startswith(f"{key[0]}.{key[1]} -> {key[2]}")
    asked = client.requests[-1]  # the feedback for each: the value written out, a digit, a slot said twice
    said = " ".join(m["content"] for m in asked if m["role"] == "user")
    assert said.count("number or date") == 2  # a permit number written out has digits, as has "5 pm"
    assert "more than once" in failed[0]  # the last reply's problem
    text = request_from_plan(users[0], (), states=fixed, events=kept)
    assert text == request_from_plan(users[0], (), states=fixed)  # code's wording, as before


def _library():
    return ir.Environment.model_validate_json(LIBRARY.read_text(encoding="utf-8"))


def test_a_row_chosen_by_a_date_is_named_by_its_parents_when_they_name_it_alone() -> None:
    env = _library()
    with fresh(env, None) as run:
        p = make_planner(env, run)
        conn = p.conn
        pairs = conn.execute("SELECT book_id, member_id, COUNT(*) n, MIN(loan_id) FROM loans "
                             "GROUP BY book_id, member_id ORDER BY n, book_id, member_id").fetchall()
        alone = next(r for r in pairs if r[2] == 1)
        key = (alone[3],)
        named = parents_naming(conn, p.infos, p.keys, "loans", key)
        title = conn.execute("SELECT title FROM books WHERE book_id = ?", (alone[0],)).fetchone()[0]
        name = conn.execute("SELECT name FROM members WHERE member_id = ?", (alone[1],)).fetchone()[0]
        assert named is not None and {v for _, v in named} == {title, name}, named
        latest = Goal("decide_update", "loans", (("books.title", title),), owner="books", asked="loan_date",
                      values=(("due_date", "2026-03-01"),), items="loans", which="latest", key=key)
        chain = Chain("decide_write", [], [], [title, "2026-03-01"], goals=[latest])
        out = by_parents(conn, p.infos, p.keys, chain)
        assert out.goals[0].kind == "update" and out.goals[0].table == "loans" and out.goals[0].key == key
        assert name in out.must_state and title in out.must_state
        text = request_from_plan(out, ())
        assert text is not None and name in text and title in text and "latest" not in text, text
        # a choice by an amount is one people make: it stays; and two loans of one book to one member name neither
        highest = replace(chain, goals=[replace(latest, which="highest")])
        assert by_parents(conn, p.infos, p.keys, highest) is highest
        conn.execute("INSERT INTO loans (book_id, member_id, loan_date, due_date) VALUES (?, ?, ?, ?)",
                     (alone[0], alone[1], "2026-01-01", "2026-02-01"))
        assert parents_naming(conn, p.infos, p.keys, "loans", key) is None
        assert by_parents(conn, p.infos, p.keys, chain) is chain


def test_same_party_is_the_row_of_the_largest_parent_table() -> None:
    env = _library()
    with fresh(env, None) as run:
        p = make_planner(env, run)

        def loan(title: str, name: str) -> Chain:
            return Chain("update", [], [], [], goals=[Goal("update", "loans", (("books.title", title),
                                                                                ("members.name", name)))])

        def new_loan(title: str, name: str) -> Chain:
            return Chain("create", [], [], [], goals=[Goal("create", "loans", refs=(
                ("book_id", "books", (("books.title", title),)), ("member_id", "members", (("members.name", name),))))])

        b = parents(loan("Emma", "Ann Lee"))
        assert b == {"books": (("books.title", "Emma"),), "members": (("members.name", "Ann Lee"),)}
        assert same_party(p, b, parents(new_loan("Dune", "Ann Lee")))  # members outnumber books: the member
        assert not same_party(p, b, parents(loan("Emma", "Bo Kim")))  # one book, two strangers
        assert not same_party(p, {}, parents(loan("Emma", "Ann Lee")))


def test_a_template_that_says_one_slot_for_two_facts_is_refused(permits) -> None:
    env, _ = permits
    with fresh(env, None) as run:
        groups = ph.kinds(env, shuffled_planner(env, run), None)
    base = next(t for g in groups if (t := ph.slotted(g[0])) is not None and len(t.slots) >= 2)
    group = next(g for g in groups if ph.template_key(g[0]) == base.key)
    first = next(iter(base.slots))
    doubled = ph.Template(base.key, base.text + " Again: {" + first + "}.", base.slots, base.states)
    why = ph.problem(env, doubled, group, same=base.text)
    assert why is not None and "{" + first + "}" in why and "more than once" in why
    reworded = ph.Template(base.key, "Hi! " + base.text, base.slots, base.states)
    assert "more than once" not in (ph.problem(env, reworded, group, same=base.text) or "")  # each slot once: kept


def test_the_bank_asks_each_event_once_and_words_its_writes_with_it(permits) -> None:
    env, _ = permits
    asked: list[str] = []

    def model(messages):
        if "dictate a record's state" in messages[0]["content"]:
            asked.append(messages[1]["content"])
            return {"template": "Our office needs permit " + " ".join("{" + s + "}" for s in _slots(messages)) +
                    " to go through now."}
        return {"user_request": "no"}  # the wording fails: code writes the request

    settings = TaskSettings(n_tasks=8, event_words=True)
    res = generate_tasks(env, fake_client([model] * 400), settings=settings)
    said = [t for t in res.value if "Our office needs permit" in t.instruction]
    assert asked and len(asked) == len(set(asked)) <= 6  # once per event
    assert said and all(t.metadata["worded_by"] == "template" for t in said), [t.instruction for t in res.value]
    assert not any("Please mark" in t.instruction for t in said)
    off = generate_tasks(env, fake_client([model] * 400), settings=TaskSettings(n_tasks=8))
    assert not any("Our office needs permit" in t.instruction for t in off.value)  # off: as before


def test_an_event_nearer_another_state_is_refused_and_quotes_around_a_slot_dropped() -> None:
    """MiniLM (the real model): the library's "I'm bringing back {book_title} for {member_name}." said for a loan
    becoming "pending" reads as "returned" (seen in the regeneration of 2026-11-29) and is refused, with a sentence
    added that leans to "pending" too (the model's answer to that refusal); the same words for "returned" are kept, and so is a right event only a little nearer another value (a dental clinic's
    cancellation, a hair nearer "scheduled"). Quotes around a slot are dropped, as a person writes a title."""
    from pipeline.meaning.goals import default_encode
    back = "I'm bringing back {book_title} for {member_name}."
    assert nearer_other(back, "pending", ["pending", "returned"], default_encode) == "returned"
    assert nearer_other(back, "returned", ["pending", "returned"], default_encode) is None
    added = back + " Please place the book in the library's collection."  # the model's answer to the refusal
    assert sentence_nearer_other(added, "pending", ["pending", "returned"], default_encode) == (back, "returned")
    card = "I'm bringing back {book_title}. It's on the card of {member_name}."  # "card" 0.11 nearer "pending"
    assert sentence_nearer_other(card, "returned", ["pending", "returned"], default_encode) is None
    cancel = "{patient_name} can't make it to the appointment on {appointment_date}, please cancel it."
    visit = ["scheduled", "cancelled", "completed"]
    assert nearer_other(cancel, "cancelled", visit, default_encode) is None
    # sentences that say no state lean by chance: "{patient_name} can't make it to the appointment on
    # {appointment_date}." 0.19 nearer "scheduled", "Thanks so much." 0.11; weaker than "Please cancel it."
    sorry = cancel.replace(", please", ". Please") + " Thanks so much."
    assert sentence_nearer_other(sorry, "cancelled", visit, default_encode) is None
    assert unquoted("I want to return '{book_title}' now, \u201c{member_name}\u201d") == \
        "I want to return {book_title} now, {member_name}"
    assert unquoted("it's {book_title}") == "it's {book_title}"  # an apostrophe is no quote around a slot


def test_sentences_split_at_any_scripts_stops_and_keep_short_pieces_with_a_neighbour() -> None:
    said = "I'm bringing back {book_title} for {member_name}. Please place the book in the library's collection."
    assert sentences(said) == ["I'm bringing back {book_title} for {member_name}.",
                               "Please place the book in the library's collection."]
    assert sentences("Mr. {name} can't come on {day}, please cancel it!") == \
        ["Mr. {name} can't come on {day}, please cancel it!"]  # "Mr." is no sentence of its own
    assert sentences("Hi! Could you cancel {x}?\" Thanks.") == ["Hi! Could you cancel {x}?\" Thanks."]
    assert sentences("\u6211\u8981\u8fd8\u4e66{book_title}\u3002\u8bf7\u5e2e\u6211\u767b\u8bb0{member_name}\u3002") == \
        ["\u6211\u8981\u8fd8\u4e66{book_title}\u3002", "\u8bf7\u5e2e\u6211\u767b\u8bb0{member_name}\u3002"]  # no spaces
    hindi = "\u0915\u0943\u092a\u092f\u093e {book_title} \u0935\u093e\u092a\u0938 \u0932\u0947\u0902\u0964 " \
            "\u0927\u0928\u094d\u092f\u0935\u093e\u0926 \u0938\u0926\u0938\u094d\u092f {member_name}\u0964"
    assert len(sentences(hindi)) == 2  # the danda, vowel signs counted as letters
    assert sentences("no stop at all {x}") == ["no stop at all {x}"]


def _encoder(words: dict[str, tuple[float, float, float]]):
    """A fake MiniLM in three dimensions: a text is the sum of the vectors of the words of ``words`` it holds (the
    column's values among them), a text with none of them points nowhere near (the third axis alone)."""
    def encode(texts):
        out = []
        for t in texts:
            v = sum((np.array(x) for w, x in words.items() if w in t), np.zeros(3))
            v = v if v.any() else np.array([0.0, 0.0, 1.0])
            out.append(v / np.linalg.norm(v))
        return np.array(out)
    return encode


def test_a_sentence_that_reads_as_another_state_is_refused_though_the_whole_passes() -> None:
    """The library (2026-11-29): "I'm bringing back {book_title} for {member_name}." was refused for a loan becoming
    "pending"; the model added "Please place the book in the library's collection." and the whole passed. A sentence
    that leans by chance, weaker than the one that says the state, is no reason to refuse."""
    back = "I'm bringing back {book_title} for {member_name}."
    said = back + " Please place the book in the library's collection."
    values = ["pending", "returned"]
    encode = _encoder({"pending": (1, 0, 0), "returned": (0, 1, 0), "bringing back": (0, 1, 0),
                       "collection": (1, 0, 0.3), "card": (0.4, 0.2, 0.9)})
    assert nearer_other(said, "pending", values, encode) is None  # the whole: about halfway
    assert sentence_nearer_other(said, "pending", values, encode) == (back, "returned")
    assert sentence_nearer_other("Please place {book_title} in the library's collection.", "pending", values,
                                 encode) is None
    card = "I'm bringing back {book_title}. It's on the card of {member_name}."
    assert sentence_nearer_other(card, "returned", values, encode) is None  # "card" leans, weaker than the event
    assert sentence_nearer_other(said, "returned", ["returned"], encode) is None  # no other value


def test_the_feedback_names_the_sentence_that_reads_as_another_state(permits) -> None:
    env, chains = permits
    fixed = state_columns(env)
    key, users = next(iter(needed(chains, fixed).items()))
    ddl = next(t.ddl for t in env.tables if t.name == key[0])
    values = list(check_enums(ddl)[key[1]])
    other = str(next(v for v in values if v != key[2]))
    slots = " and ".join("{" + s + "}" for s, _ in event_slots(key))
    wrong = "Please undo all of it."
    text = f"Hello, about permit {slots}: we need that sorted out today. {wrong}"
    ev = Event(text, event_slots(key))
    encode = _encoder({key[2].replace("_", " "): (1, 0, 0), "sorted out": (1, 0, 0),
                       other.replace("_", " "): (0, 1, 0), "undo": (0, 1, 0)})
    why = problem(key, ev, users[:3], fixed, "en", _lint(env), values, encode)
    assert why is not None and wrong in why and other.replace("_", " ") in why, why
    whole = Event(f"Hello, about permit {slots}: please undo it.", event_slots(key))
    why = problem(key, whole, users[:3], fixed, "en", _lint(env), values, encode)
    assert why is not None and "its sentence" not in why and other.replace("_", " ") in why, why
    fine = Event(f"Hello, about permit {slots}: we need that sorted out today.", event_slots(key))
    assert problem(key, fine, users[:3], fixed, "en", _lint(env), values, encode) is None


def test_a_write_on_a_row_its_date_alone_names_is_asked_with_its_parents_names_too() -> None:
    """The library (2026-11-29): a renewal named by its date alone was asked as "I'm bringing back the book on October
    19, 2025 to return it."; with the loan's book and member named too, the request says whose renewal it is."""
    env = _library()
    with fresh(env, None) as run:
        p = make_planner(env, run)
        conn = p.conn
        rid, loan_id, day = conn.execute("SELECT renewal_id, loan_id, renewal_date FROM renewals "
                                         "ORDER BY renewal_id").fetchone()
        title, name = conn.execute("SELECT b.title, m.name FROM loans l JOIN books b USING (book_id) "
                                   "JOIN members m USING (member_id) WHERE l.loan_id = ?", (loan_id,)).fetchone()
        dated = (("renewals.renewal_date", day),)
        named = parents_too(conn, p.infos, p.keys, "renewals", (rid,), dated)
        assert named is not None and named[-1] == dated[0] and {v for _, v in named[:-1]} == {title, name}, named
        assert parents_too(conn, p.infos, p.keys, "books", (1,), (("books.title", "Emma"),)) is None  # a name
        goal = Goal("update", "renewals", dated, values=(("renewal_date", "2026-03-01"),), key=(rid,))
        chain = Chain("update", [], [], ["2026-03-01"], goals=[goal])
        out = by_parents(conn, p.infos, p.keys, chain)
        assert out.goals[0].named == named and out.goals[0].key == (rid,) and out.goals[0].kind == "update"
        assert title in out.must_state and name in out.must_state
        text = request_from_plan(out, ())
        assert text is not None and title in text and name in text, text
        # a second renewal of the same loan on the same day: the names and the date no longer name one row
        conn.execute("INSERT INTO renewals (loan_id, renewal_date) VALUES (?, ?)", (loan_id, day))
        assert parents_too(conn, p.infos, p.keys, "renewals", (rid,), dated) is None
        assert by_parents(conn, p.infos, p.keys, chain) is chain


def test_a_write_back_to_the_state_new_rows_take_needs_no_event(permits) -> None:
    """What makes a row hold its first state is its making: asked for it, the model words a creation ("I'm
    requesting to borrow ..." for a loan becoming pending), which, said for a refused write back to that state,
    scores the clerk who lends the book as wrong. ``needed`` asks no event for such a write; the bank passes the
    planner's first state of each state column."""
    env, chains = permits
    fixed = state_columns(env)
    need = needed(chains, fixed)
    assert need
    key = next(iter(need))
    fewer = needed(chains, fixed, {(key[0], key[1]): key[2]})
    assert key not in fewer
    assert all(k[2] != key[2] for k in fewer if (k[0], k[1]) == (key[0], key[1]))
    assert set(fewer) == {k for k in need if (k[0], k[1], k[2]) != key[:3]}
    asked: list[str] = []

    def model(messages):
        asked.append(messages[1]["content"])
        return {"template": "Hi, about permit " + " ".join("{" + s + "}" for s in _slots(messages)) + ", go ahead."}

    said = f'"{key[2]}" (the event'
    ask_events(env, fake_client([model] * 40), chains, lint=_lint(env), limit=len(need), encode=None)
    assert any(said in a for a in asked), asked  # without it, the model is asked for the first state
    asked.clear()
    kept, _ = ask_events(env, fake_client([model] * 40), chains, lint=_lint(env), limit=len(need), encode=None,
                         first={(key[0], key[1]): key[2]})
    assert key not in kept and not any(said in a for a in asked), asked


def test_a_slot_glued_on_after_the_scenarios_own_words_is_refused_and_asked_again(permits) -> None:
    """The example library (2026-11-30): the model's words for a loan becoming "returned" were "I want to return the
    book '{book_title}' that I borrowed from the library by {member_name}.", and every such request read "... from the
    library by Jennifer Contreras" ("from a library" is the scenario's own phrase: the name, glued on, reads as the
    library's). Code refuses such words, says where the slot went wrong, and keeps the model's next ones. Here the
    permit office ("A city office issues ... permits"), the same fault."""
    env, chains = permits
    fixed = state_columns(env)
    key = next(iter(needed(chains, fixed)))
    assert [s for s, _ in event_slots(key)] == ["permit_no"]
    glued = "Please withdraw the application I sent to the city office by {permit_no}."
    # the library model's answer to the refusal: the slot moved to the front, its word left behind
    left = "{permit_no}: please withdraw the application I sent to the city office by."
    good = "Please withdraw permit {permit_no}, we no longer need it."
    seen: list = []

    def model(messages):
        seen.append(messages)
        return {"template": [glued, left, good][min(len(seen), 3) - 1]}

    kept, failed = ask_events(env, fake_client([model] * 4), chains, lint=_lint(env), limit=1, encode=None)
    assert list(kept) == [key] and kept[key].text == good and not failed, (kept, failed)
    assert len(seen) == 3 and "the city office by" in seen[1][-1]["content"], seen[1][-1]
    assert "{permit_no}" in seen[1][-1]["content"] and "breaks off" in seen[2][-1]["content"], seen[2][-1]
    # the slot where it says which permit, or none after the scenario's words: kept at once
    for fine in (good, "I sent permit {permit_no} to the city office by mistake, please withdraw it.",
                 "Please withdraw my application at the city office for permit {permit_no}."):
        seen.clear()
        kept, _ = ask_events(env, fake_client([lambda m, fine=fine: {"template": fine}] * 2), chains,
                             lint=_lint(env), limit=1, encode=None)
        assert kept[key].text == fine
