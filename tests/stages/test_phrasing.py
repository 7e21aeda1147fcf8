"""Request templates for the sampler (``pipeline.stages.tasks.templates``): kinds and slots computed by code, the checks a
template must pass (filled with real rows and linted), the feedback loop with a scripted model, ``templates.json``,
and the sampler wording tasks of a templated kind by filling its template."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from pipeline.dbmodel.keys import surrogates
from pipeline.llm import fake_client
from pipeline.runtime.replay import fresh
from pipeline.sampler import Want, sample
from pipeline.stages.tasks import templates as ph
from pipeline.stages.tasks.bank import lint_request
from pipeline.stages.tasks.code_wording import state_columns
from pipeline.stages.tasks.planner import shuffled_planner
from tests.fixtures.brewery import brewery_env
from tests.fixtures.permits import permit_env


def _kinds(env):
    with fresh(env, None) as run:
        planner = shuffled_planner(env, run)
        ids = surrogates(run.infos)
        return ph.kinds(env, planner, None, rules=bool(env.rules)), ids


@pytest.fixture(scope="module")
def brewery():
    env = brewery_env()
    groups, ids = _kinds(env)
    return env, groups, ids


def _program(messages) -> str:
    return re.search(r"^The program: (.*)$", messages[-1]["content"] if "The program" in messages[-1]["content"]
                     else messages[1]["content"], re.M).group(1)


def polite(messages) -> dict:
    """A user's rewording: the program's words after a greeting (every slot kept)."""
    text = _program(messages)
    return {"template": "Hi there, " + text[0].lower() + text[1:]}


def _group(groups, text_has: str):
    for g in groups:
        t = ph.slotted(g[0])
        if t is not None and text_has in t.text:
            return g, t
    raise AssertionError(f"no kind whose request has {text_has!r}")


def test_slots_are_named_for_their_columns_and_fill_with_other_rows(brewery) -> None:
    env, groups, ids = brewery
    assert len(groups) >= 10 and all(ph.template_key(c) == ph.template_key(g[0]) for g in groups for c in g)
    g, t = _group(groups, "Please add a new keg for the batch")
    assert set(t.slots) == {"batch_code", "keg_code", "keg_size_liters", "keg_location"}, t.slots
    assert "'" not in t.text and not re.search(r"\d", re.sub(r"\{\w+\}", "", t.text)), t.text
    assert len(g) >= 2
    for chain in g:
        text = ph.fill(t, chain)
        assert text is not None and "{" not in text
        for place, v in ph.places(chain).items():
            assert str(v) in text, (place, v, text)
        assert lint_request(env, chain, text, plain=True) is None, text
    other = next(c for gg in groups if gg is not g for c in gg)
    assert ph.fill(t, other) is None  # another kind


def test_a_slot_held_twice_fills_only_when_both_places_agree() -> None:
    env = permit_env()
    groups, _ = _kinds(env)
    g, t = next((g, t) for g in groups if (t := ph.slotted(g[0])) is not None
                and any(len(where) > 1 for where in t.slots.values()))
    name, where = next((n, w) for n, w in t.slots.items() if len(w) > 1)
    chain = g[0]
    assert ph.fill(t, chain) is not None
    # the second place names another row: the template would say one value for two
    i, field, ref = where[1].split(".", 2)
    goals = list(chain.goals)
    goal = goals[int(i)]
    assert field == "named", where
    goals[int(i)] = dataclasses.replace(goal, named=tuple((r, f"{v}-X" if r == ref else v) for r, v in goal.named))
    assert ph.fill(t, dataclasses.replace(chain, goals=goals)) is None


@pytest.mark.parametrize(("template", "says"), [
    ("Could I add a keg of {batch_code} labelled {keg_code} at {keg_location}?", "leaves out {keg_size_liters}"),
    ("Add keg {keg_code} ({keg_size_liters} l) of {batch_code} at {keg_location}, for {customer}.", "braces"),
    ("Add keg {keg_code} ({keg_size_liters} l, 2 of them) of {batch_code} at {keg_location}.", "number or date"),
    ("Add a keg {keg_code} of {batch_code}, {keg_size_liters} l, at {keg_location}; every placeholder is kept.",
     "placeholders"),
    ("Please fill_keg {keg_code} of {batch_code}, {keg_size_liters} l, at {keg_location}.", "names the tool"),
])
def test_a_template_that_fails_its_checks_says_why(brewery, template: str, says: str) -> None:
    env, groups, _ = brewery
    g, base = _group(groups, "Please add a new keg for the batch")
    t = ph.Template(base.key, template, base.slots)
    assert says in (ph.problem(env, t, g[:4], same=base.text) or ""), ph.problem(env, t, g[:4], same=base.text)
    assert "program's own words" in ph.problem(env, base, g[:4], same=base.text)
    good = ph.Template(base.key, "I'd like a keg {keg_code} of batch {batch_code} filled: {keg_size_liters} l, "
                                 "kept at {keg_location}.", base.slots)
    assert ph.problem(env, good, g[:4], same=base.text) is None


def test_a_value_the_model_was_shown_written_out_is_refused(brewery) -> None:
    env, groups, _ = brewery
    g, base = _group(groups, "Please add a new keg for the batch")
    location = ph.places(g[0])[base.slots["keg_location"][0]]
    t = ph.Template(base.key, f"Keg {{keg_code}} of {{batch_code}}, {{keg_size_liters}} l, at {{keg_location}}, "
                              f"not at {location}.", base.slots)
    assert f"'{location}' itself" in ph.problem(env, t, g[:4])


def test_the_model_is_told_what_failed_and_a_kind_it_never_gets_right_is_left_to_code(brewery) -> None:
    env, groups, ids = brewery

    def drops_a_slot(messages) -> dict:
        return {"template": re.sub(r"\{batch_code\}", "the batch", polite(messages)["template"])}

    first = [drops_a_slot, polite]  # the first kind: wrong, then right
    second = [lambda m: {"template": _program(m)}] * 4  # the second: the program's words, every time
    client = fake_client(first + second)
    groups2 = [g for g in groups if (t := ph.slotted(g[0], skip=ids)) and "batch_code" in t.slots][:2]
    kept, failed = ph.write_templates(env, client, groups2, limit=2, skip=ids)
    assert len(kept) == 1 and kept[0].text.startswith("Hi there, ")
    assert len(failed) == 1 and "program's own words" in failed[0]
    feedback = client.requests[1][-1]["content"]
    assert "leaves out {batch_code}" in feedback
    assert ph.problem(env, kept[0], groups2[0][:4]) is None


def test_templates_file_round_trip_and_errors(tmp_path, brewery) -> None:
    _env, groups, ids = brewery
    t = ph.slotted(groups[0][0], skip=ids)
    path = tmp_path / "templates.json"
    path.write_text(json.dumps(ph.to_json([t])))
    assert ph.read_templates(path) == {t.key: t}
    assert ph.read_templates(tmp_path / "none.json") == {}
    path.write_text(json.dumps({**ph.to_json([t]), "version": ph.VERSION + 1}))
    assert ph.read_templates(path) == {}  # another version's kinds: code words every task
    path.write_text('{"version": 1, "templates": [{"key": "k"}]}')
    with pytest.raises(ValueError, match="templates.json: not a templates file"):
        ph.read_templates(path)


def test_the_sampler_fills_a_kind_s_template_and_proves_the_task(brewery) -> None:
    env, groups, ids = brewery
    client = fake_client([polite] * 40)
    kept, failed = ph.write_templates(env, client, groups, limit=40, skip=ids)
    assert kept and not failed
    templates = {t.key: t for t in kept}
    want = Want(level=2)
    a = sample(env, 12, seed=3, want=want, templates=templates)
    b = sample(env, 12, seed=3, want=want, templates=templates)
    assert [t.model_dump() for t in a.tasks] == [t.model_dump() for t in b.tasks]
    by = {t.metadata["worded_by"] for t in a.tasks}
    assert "llm_template" in by, by
    for t in a.tasks:
        if t.metadata["worded_by"] == "llm_template":
            assert t.instruction.startswith("Hi there, "), t.instruction
    plain = sample(env, 12, seed=3, want=want)
    assert {t.metadata["worded_by"] for t in plain.tasks} == {"template"}
    # the same chains, proved the same way: only the words differ
    assert [t.reference_solution for t in plain.tasks] == [t.reference_solution for t in a.tasks]


def test_a_state_fills_as_a_word_and_a_template_may_not_quote_it(brewery) -> None:
    """A value of a fixed list (a batch's status) is a slot code fills as a word; the model's template that puts it
    in quotes ("status '{new_batch_status}'") writes it as the database holds it, and is refused."""
    env, groups, _ids = brewery
    fixed = state_columns(env)
    g, t = next((g, t) for g in groups if len(g[0].goals) == 1 and (t := ph.slotted(g[0], states=fixed)) is not None
                and t.text.startswith("Please mark the batch "))
    assert t.states and t.text.endswith(" as {" + t.states[0] + "}."), t
    assert ph.Template.from_json(json.loads(json.dumps(t.to_json()))) == t
    assert ph.problem(env, t, g, same=t.text) is not None  # the program's own words
    mine = ph.Template(t.key, t.text.replace("Please mark", "Could you set").replace(" as {", " to {"), t.slots,
                       t.states)
    assert ph.problem(env, mine, g) is None
    quoted = dataclasses.replace(mine, text=mine.text.replace("{" + t.states[0] + "}", "'{" + t.states[0] + "}'"))
    assert "in quotes" in (ph.problem(env, quoted, g) or "")
    # without the state list (a file written before) the slot fills as the database holds it, as before
    assert "states" not in ph.Template(t.key, t.text, t.slots).to_json()


def test_a_value_that_is_also_one_of_the_requests_words_gets_no_slot(brewery) -> None:
    """A value the code's words hold more often than the chain does ("new" in "a new order") would fill the
    template's own word too: no template for that chain, code words it."""
    _env, groups, _ids = brewery
    chain = next(g[0] for g in groups if (t := ph.slotted(g[0])) is not None and "Please add a new keg" in t.text)
    place = next(p for p, v in ph.places(chain).items() if isinstance(v, str) and p.split(".")[1] == "values")
    col = place.split(".", 2)[2]
    goal = chain.goals[int(place.split(".")[0])]
    old = dict(goal.values)[col]

    def holding(value: str):
        g2 = dataclasses.replace(goal, values=tuple((c, value if c == col else v) for c, v in goal.values))
        return dataclasses.replace(chain, goals=[g2 if x is goal else x for x in chain.goals],
                                   must_state=[value if v == old else v for v in chain.must_state])

    assert ph.slotted(holding("Cellar Z")) is not None
    assert ph.slotted(holding("new")) is None
