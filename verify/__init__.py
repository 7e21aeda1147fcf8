"""Verified task banks, the deterministic part: proofs, the tester/checker pair, difficulty.

Public surface (see each module):

* ``derive_verifier`` — a verifier derived by code from replaying a reference solution;
* ``evaluate`` / ``answer_matches`` — does a final state (and answer) satisfy a verifier;
* ``prove`` — reference replay passes; initial / no-op / wrong-answer / destructive trajectories fail;
* ``run_attempt(s)`` (tester), ``review_attempt`` / ``rule_review`` (checker);
* ``DifficultyPolicy`` / ``apply_policy`` / ``histogram``. (Writing the results is :mod:`pipeline.catalog.emit`.)

The orchestration (the per-task subgraph with its fix loop, verifying a whole environment) is one layer up,
in :mod:`pipeline.graph`: nothing here imports the stages or the graph.
"""

from verify.call_review import CheckerSettings, Fault, Review, review_attempt, rule_review
from verify.derive import Derivation, derive_verifier
from verify.difficulty import DifficultyPolicy, apply_policy, histogram
from verify.evaluate import Evaluation, answer_matches, evaluate
from verify.proofs import ProofReport, ProofResult, prove
from verify.tester import Attempt, TesterSettings, run_attempt, run_attempts

__all__ = [
    "Attempt", "CheckerSettings", "Derivation", "DifficultyPolicy", "Evaluation", "Fault", "ProofReport",
    "ProofResult", "Review", "TesterSettings", "answer_matches", "apply_policy", "derive_verifier", "evaluate",
    "histogram", "prove", "review_attempt", "rule_review", "run_attempt", "run_attempts",
]
