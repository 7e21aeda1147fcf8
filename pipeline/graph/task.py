"""The per-task verification subgraph (LangGraph): proofs, tester, checker, and the fix loop as edges.

::

    START -> prove --ok--> test -> check --environment fault, rounds left, a fixer--> fix -> prove ...
               |  \\--a proof fails, or the reference uses a broken tool--> fix      \\--else--> finish
               \\--no fixer or no rounds left--> finish

Nodes are thin adapters over pure functions (``verify.proofs.prove``, ``verify.tester.run_attempts``,
``verify.call_review.review_attempt``, and the fixers passed in ``VerifyDeps``); the loop is bounded by
``fix_rounds``. ``verify_task`` runs the compiled graph for one task and returns a
:class:`TaskOutcome`; the scenario graph (:mod:`pipeline.graph.scenario`) runs it once per task, one
checkpointed step each.

Fixers: ``fix_task(env, task, problem)`` rewords a task (default: the task agent's ``revise_task``);
``fix_tool(env, fault)`` and ``fix_data(env, fault)`` return a repaired environment (owned by the
tool and data stages; when absent, the fault is reported and the task judged without repair);
``rederive(env, task)`` derives the task's verifier again on a repaired environment.

Rewording is only for a task whose proofs fail or whose wording the checker blames (a ``task`` fault).
A task proved solvable that no tester attempt solved is not reworded toward an easier one: it is
accepted and flagged ``metadata["hard_pool"] = True`` (every tested task carries the flag).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict, Field

from pipeline.ir import Difficulty, Environment, Task, TaskMetadata
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.prompts import fill_section
from verify.call_review import CheckerSettings, Fault, Review, review_attempt, rule_review
from verify.conversation import UserSettings
from verify.proofs import ProofReport, prove
from verify.tester import Attempt, TesterSettings, conversation_difficulty, run_attempts, run_conversations

TaskFixer = Callable[[Environment, Task, str], "tuple[Task | None, str | None]"]
EnvFixer = Callable[[Environment, Fault], "Environment | None"]
Rederive = Callable[[Environment, Task], "tuple[Task | None, str | None]"]


@dataclass(frozen=True)
class VerifyDeps:
    """What the subgraph needs besides the task: the LLM client, settings and the fixers."""

    client: LLMClientProtocol
    tester: TesterSettings = field(default_factory=TesterSettings)
    checker: CheckerSettings = field(default_factory=CheckerSettings)
    fix_rounds: int = 2
    fix_task: TaskFixer | None = None
    fix_tool: EnvFixer | None = None
    fix_data: EnvFixer | None = None
    rederive: Rederive | None = None
    user: UserSettings = field(default_factory=UserSettings)
    """The simulated user of the tester's conversational attempts (``tester.conversations``)."""


class VerifyState(TypedDict, total=False):
    env: Environment
    task: Task
    initial_db: str | None
    round: int
    proofs: ProofReport
    reference_faults: list[Fault]
    attempts: list[Attempt]
    talks: list[Attempt]
    reviews: list[Review]
    fault: Fault | None
    history: list[dict[str, Any]]
    fixed: bool
    env_changed: bool


class TaskOutcome(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    status: Literal["accepted", "rejected"]
    reason: str
    task: Task
    env: Environment
    env_changed: bool = False
    proofs: ProofReport | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    talks: list[Attempt] = Field(default_factory=list)
    """The tester's conversational attempts (``tester.conversations``)."""
    reviews: list[Review] = Field(default_factory=list)
    unresolved: Fault | None = None
    history: list[dict[str, Any]] = Field(default_factory=list)


# ---------------------------------------------------------------- nodes


def _prove(state: VerifyState) -> VerifyState:
    env, task, db = state["env"], state["task"], state.get("initial_db")
    report = prove(env, task, initial_db=db)
    if not report.ok:  # back to the task agent with the evidence
        fault = Fault(kind="task", target="verifier", reason="the task fails its proofs: " + report.reason(), source="rule")
        return {"proofs": report, "reference_faults": [], "fault": fault, "attempts": [], "reviews": []}
    _, faults = rule_review(env, list(task.reference_solution), initial_db=db)
    return {"proofs": report, "reference_faults": faults, "fault": faults[0] if faults else None,
            "attempts": [], "reviews": []}


def _test(deps: VerifyDeps) -> Callable[[VerifyState], VerifyState]:
    def node(state: VerifyState) -> VerifyState:
        env, task, db = state["env"], state["task"], state.get("initial_db")
        out: VerifyState = {"attempts": run_attempts(deps.client, env, task, initial_db=db, settings=deps.tester)}
        if deps.tester.conversations:
            out["talks"] = run_conversations(deps.client, env, task, initial_db=db, settings=deps.tester,
                                             user=deps.user)
        return out
    return node


def _check(deps: VerifyDeps) -> Callable[[VerifyState], VerifyState]:
    def node(state: VerifyState) -> VerifyState:
        reviews = [review_attempt(deps.client, state["env"], state["task"], a, initial_db=state.get("initial_db"),
                                  settings=deps.checker) for a in state.get("attempts", [])]
        faults = [r.fault for r in reviews if r.fault is not None]
        faults.sort(key=lambda f: f.source != "rule")  # facts before opinions
        first = state.get("reference_faults") or faults
        return {"reviews": reviews, "fault": first[0] if first else None}
    return node


def _fixer_for(deps: VerifyDeps, fault: Fault | None) -> str | None:
    if fault is None:
        return None
    if fault.kind == "tool" and deps.fix_tool is not None and deps.rederive is not None:
        return "tool"
    if fault.kind == "data" and deps.fix_data is not None and deps.rederive is not None:
        return "data"
    if fault.kind == "task" and deps.fix_task is not None:  # the wording (or a failed proof): never a fallback
        return "task"
    return None


def _fix(deps: VerifyDeps) -> Callable[[VerifyState], VerifyState]:
    def node(state: VerifyState) -> VerifyState:
        env, task, fault = state["env"], state["task"], state.get("fault")
        assert fault is not None
        how = _fixer_for(deps, fault)
        entry = _round_entry(state) | {"fix": how}
        update: VerifyState = {"round": state.get("round", 0) + 1, "fixed": False}
        new_env: Environment | None = env
        if how in ("tool", "data"):
            fixer = deps.fix_tool if how == "tool" else deps.fix_data
            assert fixer is not None and deps.rederive is not None
            new_env = fixer(env, fault)
            if new_env is None:  # not reworded instead: a solvable task nobody solved goes to the hard pool
                entry["fix_result"] = f"the {how} fixer could not repair {fault.target}"
            else:
                if how == "data":
                    update["initial_db"] = None  # the seed changed: build the initial state from the IR
                new_task, err = deps.rederive(new_env, task)
                if new_task is None:
                    entry["fix_result"] = f"repaired environment, but the task no longer holds: {err}"
                else:
                    update |= {"env": new_env, "task": new_task, "fixed": True, "env_changed": True}
                    entry["fix_result"] = f"{how} repaired; verifier derived again"
        if how == "task" and fault.target == "verifier" and deps.rederive is not None \
                and (rederived := deps.rederive(env, task))[0] is not None:
            update |= {"task": rederived[0], "fixed": True}  # the verifier derived again from the reference
            entry["fix_result"] = "verifier derived again from the reference solution"
        elif how == "task":
            assert deps.fix_task is not None
            problem = fill_section("checker", "problem", kind=fault.kind, target=fault.target, reason=fault.reason)
            new_task, err = deps.fix_task(env, task, problem)
            if new_task is None:
                entry["fix_result"] = f"rewording failed: {err}"
            else:
                update |= {"task": new_task, "fixed": True}
                entry["fix_result"] = "task reworded"
        update["history"] = [*state.get("history", []), entry]
        return update
    return node


def _round_entry(state: VerifyState) -> dict[str, Any]:
    attempts = state.get("attempts", [])
    fault = state.get("fault")
    return {
        "round": state.get("round", 0),
        "task_id": state["task"].task_id,
        "proofs_ok": state["proofs"].ok if "proofs" in state else None,
        "attempts": len(attempts),
        "passes": sum(a.passed for a in attempts),
        "fault": fault.model_dump() if fault else None,
    }


# ---------------------------------------------------------------- edges


def _after_prove(deps: VerifyDeps) -> Callable[[VerifyState], str]:
    def route(state: VerifyState) -> str:
        can_fix = state.get("round", 0) < deps.fix_rounds and _fixer_for(deps, state.get("fault")) is not None
        if not state["proofs"].ok:
            return "fix" if can_fix else "finish"
        if state.get("reference_faults") and can_fix:
            return "fix"
        return "test"
    return route


def _after_check(deps: VerifyDeps) -> Callable[[VerifyState], str]:
    def route(state: VerifyState) -> str:
        if state.get("fault") and state.get("round", 0) < deps.fix_rounds and _fixer_for(deps, state.get("fault")):
            return "fix"
        return "finish"
    return route


def _after_fix(state: VerifyState) -> str:
    return "prove" if state.get("fixed") else "finish"


def build_verify_graph(deps: VerifyDeps, checkpointer: Any = None) -> Any:
    """The compiled subgraph (state: :class:`VerifyState`)."""
    g: Any = StateGraph(VerifyState)
    g.add_node("prove", _prove)
    g.add_node("test", _test(deps))
    g.add_node("check", _check(deps))
    g.add_node("fix", _fix(deps))
    g.add_edge(START, "prove")
    g.add_conditional_edges("prove", _after_prove(deps), {"test": "test", "fix": "fix", "finish": END})
    g.add_edge("test", "check")
    g.add_conditional_edges("check", _after_check(deps), {"fix": "fix", "finish": END})
    g.add_conditional_edges("fix", _after_fix, {"prove": "prove", "finish": END})
    return g.compile(checkpointer=checkpointer)


def outcome(state: VerifyState) -> TaskOutcome:
    """Judge the final state of the subgraph: accepted (with its difficulty) or rejected, and why."""
    task, env, proofs = state["task"], state["env"], state["proofs"]
    attempts, reviews = state.get("attempts", []), state.get("reviews", [])
    history = [*state.get("history", []), _round_entry(state) | {"fix": None}]
    fault = state.get("fault")

    def make(status: Literal["accepted", "rejected"], reason: str, task: Task) -> TaskOutcome:
        return TaskOutcome(status=status, reason=reason, task=task, env=env, env_changed=state.get("env_changed", False),
                           proofs=proofs, attempts=attempts, talks=state.get("talks") or [], reviews=reviews,
                           history=history, unresolved=fault)

    if not proofs.ok:
        return make("rejected", "proof failed: " + proofs.reason(), task)
    ref_tools = {c.tool for c in task.reference_solution}
    if fault is not None and fault.source == "rule" and (fault.kind != "tool" or fault.target in ref_tools):
        return make("rejected", f"unresolved environment fault ({fault.kind} {fault.target}): {fault.reason}", task)
    passes = sum(a.passed for a in attempts)
    meta = {**task.metadata, "hard_pool": bool(attempts) and passes == 0}
    talks = state.get("talks") or []
    if talks:
        meta["conversation_difficulty"] = conversation_difficulty(talks)
    task = task.model_copy(update={"difficulty": Difficulty(attempts=len(attempts), passes=passes), "metadata": TaskMetadata.model_validate(meta)})
    reason = "proofs hold" + (f"; checker flag left: {fault.kind} {fault.target}: {fault.reason}" if fault else "")
    return make("accepted", reason, task)


def verify_task(
    env: Environment, task: Task, deps: VerifyDeps, *, initial_db: str | None = None, graph: Any = None,
    config: dict[str, Any] | None = None,
) -> TaskOutcome:
    """Run the subgraph for one task (a pure function of its inputs and the LLM's replies)."""
    graph = graph or build_verify_graph(deps)
    state: VerifyState = {"env": env, "task": task, "initial_db": initial_db, "round": 0, "history": [],
                          "env_changed": False}
    cfg = {"recursion_limit": 12 + 6 * deps.fix_rounds, **(config or {})}
    final = graph.invoke(state, cfg)
    return outcome(final)
