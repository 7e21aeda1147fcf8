"""Verified task banks: deterministic proofs, the tester/checker pair, difficulty, emission.

Public surface (see each module):

* ``derive_verifier`` — a verifier derived by code from replaying a reference solution;
* ``evaluate`` / ``answer_matches`` — does a final state (and answer) satisfy a verifier;
* ``prove`` — reference replay passes; initial / no-op / wrong-answer / destructive trajectories fail;
* ``run_attempt(s)`` (tester), ``review_attempt`` / ``rule_review`` (checker);
* ``build_verify_graph`` / ``verify_task`` — the LangGraph subgraph with the fix loop as edges;
* ``verify_env`` — generate + verify the tasks of one environment; ``write_env_results``,
  ``write_task_bank`` — emission; ``DifficultyPolicy`` / ``apply_policy`` / ``histogram``.
"""

from verify.checker import CheckerSettings, Fault, Review, review_attempt, rule_review
from verify.derive import Derivation, derive_verifier
from verify.difficulty import DifficultyPolicy, apply_policy, histogram
from verify.emit import read_task_bank, write_env_results, write_task_bank
from verify.evaluate import Evaluation, answer_matches, evaluate
from verify.graph import TaskOutcome, VerifyDeps, build_verify_graph, verify_task
from verify.proofs import ProofReport, ProofResult, prove
from verify.tester import Attempt, TesterSettings, run_attempt, run_attempts

_LAZY = {"EnvVerification", "VerifySettings", "verify_env"}  # verify.run imports the task stage, which imports verify


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from verify import run

        return getattr(run, name)
    raise AttributeError(f"module 'verify' has no attribute {name!r}")


__all__ = [
    "Attempt", "CheckerSettings", "Derivation", "DifficultyPolicy", "EnvVerification", "Evaluation", "Fault",
    "ProofReport", "ProofResult", "Review", "TaskOutcome", "TesterSettings", "VerifyDeps", "VerifySettings",
    "answer_matches", "apply_policy", "build_verify_graph", "derive_verifier", "evaluate", "histogram", "prove",
    "read_task_bank", "review_attempt", "rule_review", "run_attempt", "run_attempts", "verify_env", "verify_task",
    "write_env_results", "write_task_bank",
]
