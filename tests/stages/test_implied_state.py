"""A request leaves a new row's state out when it is the state new rows have (issue 40, the reader's audit of
2026-11-29, sections 1.4 and 2.4: "Please add a new pending loan ...", "a new prescription ... with quantity 6, status
open"): a clerk says "add a new loan", not "a new pending loan". The reference still sets it; the verifier takes the
value the tool gives the row without it too (NULL or the DEFAULT), and stays exact when the tool requires it.

The states are made-up words ('zul', 'mar', 'kip'; :mod:`tests.stages.test_task_states`): nothing here reads a
language. Scripted fake LLM, no real model."""

from __future__ import annotations

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime.replay import fresh, play
from pipeline.stages.tasks.bank import TaskSettings, generate_tasks, implied_args
from pipeline.stages.tasks.code_wording import request_from_plan, state_columns
from pipeline.stages.tasks.planner import plan_chains
from tests.stages.test_task_states import STATE, TOOLS, tabs_ddl, tabs_env
from verify.derive import derive_verifier
from verify.evaluate import evaluate

OPTIONAL = STATE.model_copy(update={"required": False})
NULLABLE = "state TEXT CHECK (state IN ('zul', 'mar', 'kip'))"


def optional_env() -> ir.Environment:
    """The tabs with a state the create tool may leave out (the column NULL then, no DEFAULT): the library's
    ``create_loans`` in the example."""
    tools = [t.model_copy(update={"params": [OPTIONAL if q.name == "state" else q for q in t.params]})
             if t.name == "open_tab" else t for t in TOOLS]
    return tabs_env(ddl=tabs_ddl(NULLABLE), tools=tools)


def _creates(env: ir.Environment) -> list:
    with fresh(env) as run:
        chains = plan_chains(env, run, 40, {1: 0.4, 2: 0.3, 3: 0.3}, spread=True)
    out = [c for c in chains if c.shape == "create" and c.calls[-1].tool == "open_tab"]
    assert out, "the planner creates tabs"
    return out


def _passes(env: ir.Environment, verifier: ir.Verifier, calls: list[ir.ToolCall]) -> bool:
    with fresh(env) as run:
        play(run, calls, stop_on_error=False)
        return evaluate(verifier, run.inst.conn).passed


def test_a_new_rows_initial_state_is_implied_not_stated() -> None:
    """Before: 'zul' was among the values the request must state ('status zul') and in the facts the model is given."""
    for env in (optional_env(),):
        for c in _creates(env):
            call = c.calls[-1]
            assert call.arguments["state"] == "zul"  # the reference still creates it in the initial state
            assert c.sources[-1]["state"] == "implied"
            assert "zul" not in c.must_state, c.must_state
            assert not any("zul" in f for f in c.facts), c.facts
            assert implied_args(c.sources) == [(len(c.calls) - 1, "state")]
            text = request_from_plan(c, states=state_columns(env))
            assert text is not None and "zul" not in text, text


def test_the_verifier_takes_the_rows_value_without_the_implied_argument() -> None:
    env = optional_env()
    c = _creates(env)[0]
    d = derive_verifier(env, c.calls, implied=implied_args(c.sources))
    assert d.verifier is not None and d.error is None
    left_out = [*c.calls[:-1], c.calls[-1].model_copy(update={"arguments": {
        k: v for k, v in c.calls[-1].arguments.items() if k != "state"}})]
    moved_on = [*c.calls[:-1], c.calls[-1].model_copy(update={"arguments": {**c.calls[-1].arguments, "state": "mar"}})]
    assert _passes(env, d.verifier, c.calls)  # the reference: 'zul'
    assert _passes(env, d.verifier, left_out)  # what the request says: no state (NULL, as the tool leaves it)
    assert not _passes(env, d.verifier, moved_on)  # another state than a new row's
    assert not _passes(env, d.verifier, [])  # doing nothing
    other = [*c.calls[:-1], c.calls[-1].model_copy(update={"arguments": {
        k: v for k, v in c.calls[-1].arguments.items() if k not in ("state", "opened_on")} | {"opened_on": "2020-01-01"}})]
    assert not _passes(env, d.verifier, other)  # the values the request states stay exact
    strict = derive_verifier(env, c.calls)  # without the implied argument: exact, as before
    assert strict.verifier is not None and not _passes(env, strict.verifier, left_out)


def _stated(env: ir.Environment) -> None:
    for c in _creates(env):
        assert c.calls[-1].arguments["state"] == "zul"
        assert c.sources[-1]["state"] == "stated", c.sources
        assert "zul" in c.must_state, c.must_state
        assert implied_args(c.sources) == []


def test_a_state_the_create_requires_is_stated() -> None:
    """The agent must give it, and the verifier wants it exactly: only the request can tell it. Before: implied,
    and the task solvable only by guessing (a blood bank's new donation, blood type 'O+' required, 2026-11-30)."""
    _stated(tabs_env())


def test_a_column_no_other_write_changes_is_no_state_and_is_stated() -> None:
    """The examples made at the clock mostly hold 'zul', but no update tool sets the column: a property a new row is
    given (a donation's blood type), not the state it starts in. Before: implied, though the create may leave it out."""
    env = optional_env()
    _stated(env.model_copy(update={"tools": [t for t in env.tools if t.name != "set_tab_state"]}))


def test_a_required_state_stays_exact() -> None:
    """The tool requires the state: leaving it out fails the call, so the row must hold the initial state itself."""
    env = tabs_env()
    c = _creates(env)[0]
    d = derive_verifier(env, c.calls, implied=implied_args(c.sources))
    assert d.verifier is not None
    moved_on = [*c.calls[:-1], c.calls[-1].model_copy(update={"arguments": {**c.calls[-1].arguments, "state": "mar"}})]
    assert _passes(env, d.verifier, c.calls)
    assert not _passes(env, d.verifier, moved_on)
    assert all("IS NULL" not in a.sql for a in d.verifier.assertions if a.name != "gate")


def test_generated_tasks_leave_the_state_out_and_prove() -> None:
    """Through the stage: the model's reply states every value it is told to (none is the state), the task proves,
    and its metadata keeps the implied argument for a verifier derived again (``rederive_task``)."""
    env = optional_env()

    def reply(messages):
        user = messages[-1]["content"]
        must = user.split("exactly as written:")[1].splitlines()[0].strip()
        return {"user_request": f"Please open a tab: {must}."}

    res = generate_tasks(env, fake_client([reply] * 200), n=12,
                         settings=TaskSettings(max_attempts=1, template_fallback=True))
    made = [t for t in res.value if t.reference_solution[-1].tool == "open_tab" and t.metadata.get("shape") == "create"]
    assert made, [r.reason for r in res.rejections]
    for t in made:
        assert "zul" not in t.instruction, t.instruction
        assert t.metadata["sources"][-1]["state"] == "implied"
        goal = next(a for a in t.verifier.assertions if a.name != "gate" and "INSERT" not in a.sql and "tabs" in a.sql)
        assert "IS NULL" in goal.sql, goal.sql


# ---------------------------------------------------------------- the model is shown a person's words


def test_a_new_row_is_said_by_its_name() -> None:
    """Before: "Please add a new member with name Angel Morgan, email ... and phone number ..." (a form)."""
    from pipeline.stages.tasks.code_wording import Fixed
    from pipeline.stages.tasks.planner.chains import Chain, Goal

    goal = Goal("create", "members", values=(("name", "Angel Morgan"), ("email", "am@example.org")))
    chain = Chain("create", [], ["Create a new member: ..."], must_state=["Angel Morgan", "am@example.org"], goals=[goal])
    names = Fixed(names=frozenset({("members", "name")}))
    text = request_from_plan(chain, states=names)
    assert text is not None and text.index("Angel Morgan") < text.index("member"), text
    assert "name Angel Morgan" not in text, text
    assert request_from_plan(chain, states=Fixed()) != text  # without the names: the plain form, as before
    # a language without its own section keeps the plain form rather than English word order
    assert request_from_plan(chain, states=names, language="xx") == request_from_plan(chain, states=Fixed(), language="xx")
    # the names are read from the schema: a one-column natural key, else the first UNIQUE text column
    env = tabs_env()
    assert ("tabs", "label") in state_columns(env).names and ("clients", "name") in state_columns(env).names


def test_the_model_is_shown_codes_request_not_the_planners_form() -> None:
    """Before: the model was given "For the tab 'T-...', change: state 'mar'." and copied it ("change: status
    returned" in the example)."""
    env = tabs_env()
    client = fake_client([lambda m: {"user_request": m[-1]["content"].split("\n- ", 1)[1].split("\n")[0]}] * 200)
    res = generate_tasks(env, client, n=8, settings=TaskSettings(max_attempts=1, template_fallback=True))
    assert res.value
    with fresh(env) as run:
        chains = {c.signature(): c for c in plan_chains(env, run, 40, {1: 0.4, 2: 0.3, 3: 0.3}, spread=True)}
    shown = [m[-1]["content"] for m in client.requests]
    for t in res.value:
        assert t.metadata["worded_by"] == "llm"  # code's words, copied by the model, pass the lint
        assert any(t.instruction in s for s in shown)
    for s in shown:
        assert not any(f in s for c in chains.values() for f in c.facts), s


def test_a_row_written_on_just_before_is_not_named_again() -> None:
    """Before: "For the order of the patient William White, with order date October 2, 2025, please change the
    quantity to 10. Please mark the order of the patient William White, with order date October 2, 2025 as closed."."""
    from pipeline.stages.tasks.code_wording import Fixed
    from pipeline.stages.tasks.planner.chains import Chain, Goal

    named = (("patients.name", "William White"), ("order_date", "2025-10-02"))
    first = Goal("update", "orders", named, values=(("quantity", 10),))
    second = Goal("update", "orders", named, values=(("status", "closed"),))
    chain = Chain("compound", [], [], must_state=["William White", "2025-10-02", 10, "closed"], goals=[first, second])
    states = Fixed(frozenset({("orders", "status")}), frozenset({("orders", "status")}))
    text = request_from_plan(chain, states=states)
    assert text is not None and text.count("William White") == 1, text
    assert "closed" in text and "10" in text, text
    other = Goal("update", "orders", (("patients.name", "Ana Costa"), ("order_date", "2025-10-02")),
                 values=(("status", "closed"),))
    text2 = request_from_plan(Chain("compound", [], [], must_state=[], goals=[first, other]), states=states)
    assert text2 is not None and "Ana Costa" in text2 and "William White" in text2, text2
