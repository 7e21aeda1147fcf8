"""A rule the planner's own writes never meet on a call that works is asked for through its recorded calls
(``ir.Rule.forbidden``, ``allowed``: ``pipeline.stages.tasks.planner.shapes.recorded_writes``).

The committed example of session nineteen (``tests/fixtures/pharmacy_linked_rule.json``: its pharmacy's env.json)
has one rule, of the ``linked`` kind: "Fill a prescription: not allowed when the patient already has allergies for
the medication." The write shapes draw (patient, medication) pairs from the rows; of the seven fills drawn one met an
allergy, and it asked for more than the stock (it fails whatever the rules say), so no refusal, compound or exception
was planned and no task of the bank was bound to the rule. The rule's recorded forbidden calls (each worked on the
seeded rows and the rule's check forbade it) are now drawn as writes: two compounds of the bank ask for one."""

from __future__ import annotations

from pathlib import Path

from pipeline import ir
from pipeline.llm import fake_client
from pipeline.runtime import EnvInstance, reward
from pipeline.runtime.replay import fresh, play
from pipeline.settings import TaskSettings
from pipeline.stages.tasks.bank import generate_tasks
from pipeline.stages.tasks.planner import make_planner, plan_chains
from pipeline.stages.tasks.planner import rules as R
from pipeline.stages.tasks.planner import shapes as S
from pipeline.stages.tasks.planner.chains import Chain

FIXTURES = Path(__file__).parent.parent / "fixtures"
TIERS = {1: 0.3, 2: 0.4, 3: 0.3}


def committed() -> ir.Environment:
    return ir.Environment.model_validate_json((FIXTURES / "pharmacy_linked_rule.json").read_text(encoding="utf-8"))


def forbidden_in(chains: list[Chain]) -> list[tuple[Chain, dict]]:
    return [(c, r) for c in chains for r in c.rules if r["verdict"] == "forbids"]


def test_the_pharmacy_s_allergy_rule_is_asked_for_by_its_recorded_forbidden_calls() -> None:
    env = committed()
    (rule,) = env.rules
    recorded = [c.arguments for c in rule.forbidden]
    with fresh(env) as run:
        chains = plan_chains(env, run, 30, TIERS, spread=True, rules=True)
        again = plan_chains(env, run, 30, TIERS, spread=True, rules=True)
        allergic = {(r[0], r[1]) for r in run.inst.conn.execute("SELECT patient_id, medication_id FROM allergies")}
        names = dict(run.inst.conn.execute("SELECT patient_id, name FROM patients").fetchall())
    assert [c.signature() for c in chains] == [c.signature() for c in again]  # same rows, same plan
    found = forbidden_in(chains)
    assert {c.shape for c, _ in found} == {"compound_rule", "refuse_rule"}, [c.shape for c, _ in found]
    # each forbidden write is a recorded call, a pair the allergies link; both recorded calls are asked for
    assert all(r["id"] == rule.id and r["arguments"] in recorded for _, r in found)
    assert {tuple(sorted(r["arguments"].items())) for _, r in found} == {tuple(sorted(a.items())) for a in recorded}
    assert all((r["arguments"]["patient_id"], r["arguments"]["medication_id"]) in allergic for _, r in found)
    for ch, r in found:
        # the request names the patient by name, and the reference looks the patient up (its evidence)
        assert names[r["arguments"]["patient_id"]] in ch.must_state
        assert ir.ToolCall(tool="find_patient_by_name",
                           arguments={"patient_name": names[r["arguments"]["patient_id"]]}) in ch.calls
        forbidden = ir.ToolCall(tool=r["tool"], arguments=r["arguments"])
        with fresh(env) as run:  # after the reference the fill works but for the rule, and adds a prescription
            play(run, [*ch.calls, forbidden])
            assert run.error is None and run.records[-1].changes
        with EnvInstance(env, enforce_policy=True) as inst:  # the reference breaks no rule; the fill is refused
            results = [inst.call(c.tool, c.arguments) for c in ch.calls]
            assert all(res["ok"] for res in results)
            # and it reads the allergy that forbids the fill (before 2026-11-30: only the patient and the medication)
            pair = (r["arguments"]["patient_id"], r["arguments"]["medication_id"])
            assert any(isinstance(res["result"], list) and any(
                (row.get("patient_id"), row.get("medication_id")) == pair for row in res["result"]) for res in results)
            out = inst.call(forbidden.tool, forbidden.arguments)
            assert out["kind"] == "guard" and out["error"] == rule.message


def score(env: ir.Environment, task: ir.Task, calls: list[ir.ToolCall]) -> float:
    with fresh(env) as run:
        play(run, calls)
        assert run.error is None, run.error
        return reward.score(task.verifier.model_dump(mode="json"), run.inst.conn, initial=run.initial).reward


def test_the_pharmacy_s_bank_holds_compounds_bound_to_the_allergy_rule() -> None:
    """The bank of ten the example asks for (rule_share 0.4: four rule-bound first; at most two of one rule's
    forbidden write): two compounds, each scoring 1 for its reference and 0 for doing nothing and for doing everything
    it asks (the fill the allergy forbids too)."""
    env = committed()
    settings = TaskSettings(n_tasks=10, rule_tasks=True, max_attempts=1, template_fallback=True)
    tasks = generate_tasks(env, fake_client([{"user_request": "no"}] * 400), settings=settings).value or []
    bound = [t for t in tasks if any(r["verdict"] == "forbids" for r in t.metadata.get("rules") or [])]
    assert [t.metadata["shape"] for t in bound] == ["compound_rule", "compound_rule"], \
        [t.metadata["shape"] for t in tasks]
    for t in bound:
        asked = [ir.ToolCall(tool=r["tool"], arguments=r["arguments"]) for r in t.metadata["rules"]
                 if r["verdict"] == "forbids"]
        assert score(env, t, list(t.reference_solution)) == 1.0
        assert score(env, t, []) == 0.0
        assert score(env, t, [*t.reference_solution, *asked]) == 0.0


def test_a_rule_no_drawn_write_meets_gets_its_recorded_calls_and_one_they_meet_does_not(monkeypatch) -> None:
    """The pharmacy of 2026-11-30 (``pharmacy_allergies.json``) with its linked candidate as the rule: the planner's
    own draws meet it (patient 3, medication 4), so its recorded calls are not drawn; with draws that never meet it
    (a seed whose pairs the allergies never link), the recorded forbidden calls are asked for: their pairs and
    quantities, each new prescription dated as the planner dates one (the check's probe date is no request's)."""
    from pipeline.stages.policy.candidates import check, propose

    env = ir.Environment.model_validate_json((FIXTURES / "pharmacy_allergies.json").read_text(encoding="utf-8"))
    with EnvInstance(env) as inst:
        cands = [c for c in propose(env, inst.conn) if c.key == "create_prescriptions_allergies_linked"]
    (c,), _ = check(env, cands)
    rule = ir.Rule(id=c.candidate.key, kind="precondition", tools=[c.candidate.tool], condition=c.candidate.condition,
                   message="Record a prescription: not allowed when the patient already has allergies for the "
                           "medication.",
                   allowed=[ir.ToolCall(tool=c.candidate.tool, arguments=a) for a in c.allowed],
                   forbidden=[ir.ToolCall(tool=c.candidate.tool, arguments=a) for a in c.forbidden])
    env = env.model_copy(update={"rules": [rule]})
    recorded = [f.arguments for f in rule.forbidden]
    with fresh(env) as run:
        met = forbidden_in(plan_chains(env, run, 30, TIERS, spread=True, rules=True))
    assert met and not any(r["arguments"] in recorded for _, r in met)  # the planner's own, none recorded

    def never(draw):  # the planner's draws, less those the rule forbids
        return lambda p, s: [ch for ch in draw(p, s) if not R.forbidding(p, ch.calls[-1])]

    monkeypatch.setattr(R, "writes", never(S.writes))
    monkeypatch.setattr(R, "example_writes", never(S.example_writes))
    monkeypatch.setattr(R, "refused_writes", never(S.refused_writes))
    with fresh(env) as run:
        p = make_planner(env, run)
        drawn = [ch.calls[-1].arguments for ch, f in R._governed_writes(p, 0) if f]
        found = forbidden_in(plan_chains(env, run, 30, TIERS, spread=True, rules=True))
    def pair(args: dict) -> tuple:  # what the condition reads; the probe's date becomes one the rows would hold
        return args["patient_id"], args["medication_id"]

    assert [pair(a) for a in drawn] == [pair(a) for a in recorded] and drawn != recorded
    assert {a["date"] for a in drawn} == {"2026-01-15"} and [a["quantity"] for a in drawn] == [
        a["quantity"] for a in recorded]
    assert found and {c.shape for c, _ in found} >= {"compound_rule"}
    assert {pair(r["arguments"]) for _, r in found} == {pair(a) for a in recorded}


def test_a_recorded_update_names_its_row() -> None:
    """A recorded call of an update names its row through the filter parameters (``shapes._pinned_rows``): the
    chain's write is the call itself, reached by the lookups of the row's words."""
    env = committed()
    call = ir.ToolCall(tool="update_medications_quantity", arguments={"medication_id": 18, "quantity": 9.0})
    with fresh(env) as run:
        p = make_planner(env, run)
        (ch,) = list(S.recorded_writes(p, 0, [(call, {"medication_id"})]))
        name = run.inst.conn.execute("SELECT name FROM medications WHERE medication_id = 18").fetchone()[0]
    assert ch.shape == "update" and ch.calls[-1] == call and ch.calls[:-1] == [
        ir.ToolCall(tool="find_medications_by_name", arguments={"medication_name": name})]
    assert p.pinned is None


def test_an_allowed_fill_reads_the_allergies_the_rule_would_read_before_it() -> None:
    """An allowed write a linking rule governs reads the link table too (``rules._with_link`` with an allowed write,
    ``rules._links(allowed=True)``): a pharmacist reads the patient's allergies before every fill, not only before the
    ones the allergy forbids. Before 2026-11-30 the compound's allowed half filled Paul Smith's Naproxen after only
    finding the patient and the medication; each allowed fill of the plan (a compound's, a decide task's: a single
    fill, and one of a compound of plain writes) now reads the allergies of a row it names (the narrowest read: the
    patient's, or the medication's where those are fewer) before the fill."""
    env = committed()
    with fresh(env) as run:
        chains = plan_chains(env, run, 30, TIERS, spread=True, rules=True)
        decides = list(R.decide_rules(make_planner(env, run), 0))
    allowed = [(c, r) for c in chains for r in c.rules if r["verdict"] == "allows" and r["tool"] == "fill_prescription"]
    def works(ch: Chain) -> bool:  # a decide_rule draw may ask for more than the stock (the planner keeps none)
        with fresh(env) as run:
            play(run, ch.calls)
            return run.error is None

    allowed += [(d, r) for d in decides if works(d) for r in d.rules if r["tool"] == "fill_prescription"]
    assert {c.shape for c, _ in allowed} == {"compound_rule", "compound", "create"} and any(map(works, decides))
    paul = next(c for c, r in allowed if c.shape == "compound_rule" and r["arguments"]["patient_id"] == 106)
    assert paul.calls[:4] == [
        ir.ToolCall(tool="find_patient_by_name", arguments={"patient_name": "Paul Smith"}),
        ir.ToolCall(tool="find_medications_by_name", arguments={"medication_name": "Naproxen"}),
        ir.ToolCall(tool="find_allergies_by_patient_id", arguments={"patient_id": 106}),
        ir.ToolCall(tool="fill_prescription", arguments={"patient_id": 106, "medication_id": 18, "quantity": 1.0})]
    for ch, r in allowed:
        write = ir.ToolCall(tool=r["tool"], arguments=r["arguments"])
        before = ch.calls[:ch.calls.index(write)]
        with EnvInstance(env, enforce_policy=True) as inst:  # the reads work, and the fill is allowed after them
            assert all(inst.call(c.tool, c.arguments)["ok"] for c in before)
            assert inst.call(write.tool, write.arguments)["ok"]
        reads = [c for c in before if "allerg" in c.tool and any(
            c.arguments.get(k) == write.arguments[k] for k in ("patient_id", "medication_id"))]
        assert reads, (ch.shape, ch.calls)
