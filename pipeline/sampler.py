"""Tasks on demand: fresh proved tasks from an environment's real rows, by seed and level, with no LLM.

:func:`sample` (``envfoundry sample``) plans chains with the build's planner
(:func:`pipeline.stages.tasks.planner.candidates`, ``spread``; ``rules`` when the environment has rules), words each one
and proves it exactly as the build does (:func:`pipeline.stages.tasks.bank.build_and_prove`: the reference replays and
passes; the initial state, doing nothing and destructive trajectories fail; for a rule-bound task the ``overreach``
and ``blind`` adversaries fail). No LLM client is made. Words: the LLM's template of the chain's kind, written at
build time (``templates.json``, :mod:`pipeline.stages.tasks.templates`), filled with the chain's values when the lint
(:func:`pipeline.stages.tasks.bank.lint_request`) takes the result (``metadata.worded_by`` ``llm_template``); else the
code templates (:func:`pipeline.stages.tasks.code_wording.request_from_plan`, linted as the build's template fallback is;
``template``).

Reaching other rows: the planner takes the first rows of a table from a seed-dependent order. The sampler plans in
rounds; round ``r`` of seed ``S`` hands the planner every row of each table in an order shuffled by ``(S, r,
table)`` and the planner seed ``3r`` (its shapes rotate rows and columns by it), so successive rounds reach rows
and columns the bank's plan never looked at. The chains of a round are tried shape by shape in turn, each shape's
chains and the shapes' order shuffled by ``(S, r)`` (:func:`interleaved`: a shape found once a round, an exception,
is tried as early as one found a hundred times). The model's example rows (the first rows of a table, often
placeholders) come after every other row in each round's order, as in the build's plan.
Same environment, seed and options: the same tasks, byte for byte.

Never a repeat: a task whose reference calls, or whose effect (the same end state, or the same answer read by the
same last call), equal those of a task of the environment's bank (``tasks.jsonl``), of an ``exclude`` file or of
an earlier sampled task is skipped (the keys of :mod:`pipeline.stages.tasks.bank`). Sampling stops after ``n`` tasks,
or when :data:`STALE_ROUNDS` rounds in a row found nothing new (the environment holds no more at that level, as
far as the planner reaches), or after :data:`MAX_ROUNDS` rounds.

The difficulty ladder (``metadata.level``): a task's structure gives its level, 1 to 4, from the top:

===== ======================== ======================================================================== ===========
level name                     what the task asks                                                       distractors
===== ======================== ======================================================================== ===========
4     two goals or implicit    two or more writes (a compound request, a parent then its child), or the 8
                               row written described, not named (``decide_write``: "the one with the
                               latest due date": implicit intent)
3     deep or computed         four or more calls (a write behind three or more reads of evidence), or  4
                               an answer computed over a listing (a count, a sum)
2     short chain              two or three calls: an id read before the call that needs it             2
1     one call                 one call, every value stated                                             0
===== ======================== ======================================================================== ===========

and the environment's rules add to it: a task whose writes a rule governs (the agent must judge each against the
policy, reading the evidence a condition names) is one level up; a request that also asks for a write the rules
forbid (``compound_rule``: the agent does the allowed part and refuses the other; ``exception``: the agent refuses
it and does the alternative its rule names) is level 5, as is a level-4
structure under a rule. Level 5 offers every tool of the environment. So an environment without rules has no level
5, and levels 2 to 4 of one with rules hold some rule-bound tasks of a simpler structure.

The axes, recorded per task in ``metadata.axes``: ``calls``, ``writes``, ``evidence`` (read calls per write;
null for a question), ``rule_bound``, ``refuses``, ``implicit``, ``structure`` (the level without the rules) and
``distractors``. Distractors are tools of the environment
the task does not need: a task's ``tools`` holds the tools of its reference (and the tools of the writes its rules
judge) plus ``k`` others drawn deterministically from its id and the seed, listed in the environment's order so
their place tells nothing. Implicit intent is only the decision shape: the row a write changes is picked by a
property among a listing. Values described relative to the user ("my most recent order") need a user identity
the environments do not model; they are not sampled.

Fresh states (``perturb_dir``, ``--perturb``): each round plans, words and proves its tasks on its own copy of
``initial.db`` whose code-made rows have their non-identifying values drawn again from the environment's row
generators (:mod:`pipeline.perturb`, key ``"<seed>:<round>"``): the same rows are named the same way, but a status,
a date, an amount or a count differs, so the same request has another answer. Such a task records its database in
``metadata.perturb`` (``method``, ``key``, ``db``: the file written beside the sample, ``sha256``); anyone with the
environment derives it again, byte for byte, with :func:`pipeline.perturb.perturbed_db`. Its reference calls repeat
nothing on the same state; its effect (the same end state, or the same answer by the same last call) repeats
nothing anywhere, so a variant where a memorised answer still holds gives no task for it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline.catalog import load_env_dir, read_tasks
from pipeline.catalog.env_dir import TEMPLATES
from pipeline.dbmodel.keys import surrogates
from pipeline.ir import Environment, Task, TaskMetadata
from pipeline.perturb import METHOD, perturbed_db, sha256
from pipeline.runtime.database import EnvDirError
from pipeline.runtime.replay import fresh, play
from pipeline.runtime.schemas import described_tools
from pipeline.runtime.state import Change
from pipeline.stages.tasks.bank import _call_key, _effect_key, build_and_prove, lint_request
from pipeline.stages.tasks.code_wording import request_from_plan, state_columns
from pipeline.stages.tasks.planner import Chain, ShuffledPlanner, refusing, round_chains, shuffled_planner
from pipeline.stages.tasks.templates import Template, fill, read_templates, says_changes, template_key

STAGE = "sample"
SAMPLER_VERSION = 1
"""Bumped when the same seed would give other tasks (recorded in each task's provenance)."""
STALE_ROUNDS = 4
"""Rounds in a row without a new task after which the environment is taken to hold no more."""
MAX_ROUNDS = 400
LEVELS = (1, 2, 3, 4, 5)
DISTRACTORS = {1: 0, 2: 2, 3: 4, 4: 8, 5: None}
"""Tools offered beyond those a task needs, per level (None: every tool of the environment)."""
LEVEL_NAMES = {1: "one call", 2: "short chain", 3: "deep or computed", 4: "two goals or implicit",
               5: "refuse part, or two goals under a rule"}


@dataclass(frozen=True)
class Axes:
    """What makes a chain hard, along the axes of the ladder."""

    calls: int
    writes: int
    evidence: float | None
    """Read calls per write (None for a question)."""
    rule_bound: bool
    """A rule governs a write the request asks for."""
    refuses: bool
    """The request also asks for a write the rules forbid (the agent must refuse it)."""
    implicit: bool
    """The row written is described by a property, not named (``decide_write``)."""
    computed: bool
    """The answer is computed over a listing (``aggregate``)."""

    @property
    def structure(self) -> int:
        """The level of the task's structure alone, 1 to 4."""
        if self.writes >= 2 or self.implicit:
            return 4
        if self.calls >= 4 or self.computed:
            return 3
        return 2 if self.calls >= 2 else 1

    @property
    def level(self) -> int:
        return 5 if self.refuses else min(5, self.structure + self.rule_bound)

    def to_json(self, distractors: int) -> dict[str, Any]:
        return {"calls": self.calls, "writes": self.writes, "evidence": self.evidence, "rule_bound": self.rule_bound,
                "refuses": self.refuses, "implicit": self.implicit, "structure": self.structure,
                "distractors": distractors}


def axes_of(env: Environment, chain: Chain) -> Axes:
    writes = sum(1 for c in chain.calls if env.tool(c.tool).kind == "write")
    reads = len(chain.calls) - writes
    return Axes(calls=len(chain.calls), writes=writes, evidence=round(reads / writes, 2) if writes else None,
                rule_bound=bool(chain.rules), refuses=any(r["verdict"] == "forbids" for r in chain.rules),
                implicit=chain.shape == "decide_write",
                computed=chain.shape == "aggregate")


@dataclass(frozen=True)
class Want:
    """Which tasks a sample takes: a level, or a tier (``metadata.tier``), and a number of writes (None: any)."""

    level: int | None = None
    tier: int | None = None
    writes: int | None = None

    def __post_init__(self) -> None:
        if self.level is not None and self.tier is not None:
            raise ValueError("give a level or a tier, not both")
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"level must be one of {list(LEVELS)}, not {self.level}")
        if self.tier is not None and self.tier not in (1, 2, 3):
            raise ValueError(f"tier must be 1, 2 or 3, not {self.tier}")
        if self.writes is not None and self.writes < 0:
            raise ValueError(f"writes must be 0 or more, not {self.writes}")

    def takes(self, chain: Chain, axes: Axes) -> bool:
        return ((self.level is None or axes.level == self.level) and (self.tier is None or chain.tier == self.tier)
                and (self.writes is None or axes.writes == self.writes))

    def describe(self) -> str:
        parts = ([f"level {self.level} ({LEVEL_NAMES[self.level]})"] if self.level is not None else []) + \
                ([f"tier {self.tier}"] if self.tier is not None else []) + \
                ([f"{self.writes} write(s)"] if self.writes is not None else [])
        return ", ".join(parts) or "any level"


@dataclass
class Sample:
    """What :func:`sample` found: the tasks, and why it stopped."""

    tasks: list[Task]
    n: int
    want: Want
    rounds: int
    exhausted: bool
    """True when it stopped because rounds stopped finding new tasks (the environment holds about ``len(tasks)``
    more at that level, beyond the bank and the excluded ones)."""
    tried: int = 0
    """Chains worded and proved."""
    refused: dict[str, int] = field(default_factory=dict)
    """Chains of the wanted kind left out, by reason: ``repeat``, ``replay``, ``wording``, ``lint``, ``proof``."""
    first_repeat: int | None = None
    """How many tasks had been sampled when a chain first repeated one (of the bank, the excluded or the sample)."""
    note: str = ""
    """Why nothing could be sampled at all (level 5 of an environment without rules)."""

    def summary(self) -> str:
        found = len(self.tasks)
        line = f"{found} distinct proved task(s) sampled ({self.want.describe()}, {self.rounds} round(s))"
        if found < self.n:
            why = "holds only" if self.exhausted else "gave only"
            line += (f"; the environment {why} {found} beyond its bank and the excluded tasks at "
                     f"{self.want.describe()}" + ("" if self.exhausted else f" within {self.rounds} rounds"))
            if self.note:
                line += f" ({self.note})"
        return line

    def to_json(self) -> dict[str, Any]:
        return {"found": len(self.tasks), "n": self.n, "level": self.want.level, "tier": self.want.tier,
                "writes": self.want.writes, "rounds": self.rounds, "exhausted": self.exhausted, "tried": self.tried,
                "first_repeat": self.first_repeat,
                "refused": dict(sorted(self.refused.items())),
                "levels": {str(k): v for k, v in sorted(Counter(t.metadata.get("level") for t in self.tasks).items())},
                "worded_by": dict(sorted(Counter(str(t.metadata.get("worded_by")) for t in self.tasks).items()))}


def task_keys(tasks: Iterable[Task]) -> set[str]:
    """The repeat keys of ``tasks``: their reference calls and their effect."""
    out: set[str] = set()
    for t in tasks:
        out |= {_call_key(t.reference_solution), _effect_key(t.verifier, t.reference_solution)}
    return out


def read_excluded(paths: Sequence[str | Path], env_id: str) -> list[Task]:
    """The tasks of ``env_id`` in each task file (a sample, a catalog's ``task_bank.jsonl``); a bad line raises,
    naming the file and line."""
    out: list[Task] = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise EnvDirError(f"{path}: no such task file")
        out += [t for t in read_tasks(path, error=EnvDirError) if t.env_id == env_id]
    return out


def distractors(env: Environment, needed: set[str], k: int | None, key: str) -> list[str]:
    """``k`` tools of ``env`` outside ``needed`` (None: all of them), drawn by ``key``."""
    others = [t.name for t in env.tools if t.name not in needed]
    if k is None or k >= len(others):
        return others
    return sorted(random.Random(key).sample(others, k), key=[t.name for t in env.tools].index)


def sample(env: Environment, n: int, *, seed: int = 0, initial_db: str | Path | None = None, want: Want | None = None,
           bank: Iterable[Task] = (), exclude: Iterable[Task] = (), language: str = "en",
           max_rounds: int = MAX_ROUNDS, perturb_dir: str | Path | None = None,
           templates: Mapping[str, Template] = MappingProxyType({})) -> Sample:
    """Up to ``n`` fresh proved tasks of ``env`` (see the module docstring), deterministic for ``seed``.

    ``templates``: the LLM's request templates by kind (``templates.json``, :mod:`pipeline.stages.tasks.templates`);
    a chain of a kind with one is worded by filling it when the lint takes the result, else by code.

    ``perturb_dir`` (``--perturb``; needs ``initial_db``): each round plans, words and proves its tasks on a
    perturbed copy of ``initial_db`` (:mod:`pipeline.perturb`, key ``"<seed>:<round>"``) written there as
    ``perturb-<seed>-<round>.db``; a task records it in ``metadata.perturb`` (files this call wrote and no task of
    it uses are removed; one an earlier sample into the same folder wrote is kept)."""
    want = want or Want()
    if n < 0:
        raise ValueError(f"n must be 0 or more, not {n}")
    if perturb_dir is not None and initial_db is None:
        raise ValueError("perturbing needs the environment's initial.db")
    keys = _Keys()
    keys.add(bank)
    keys.add(exclude)
    rules = bool(env.rules)
    out = Sample([], n, want, 0, False)
    if want.level == 5 and not rules:  # rule-bound tasks need the environment's rules
        out.exhausted, out.note = True, "it has no rules"
        return out
    stale = 0
    with fresh(env, initial_db) as run:
        planner = shuffled_planner(env, run)
        ids = surrogates(run.infos)
        keep = {t: set(k.columns) for t, k in planner.keys.items()}
        for rnd in range(max_rounds):
            if len(out.tasks) >= n:
                break
            out.rounds = rnd + 1
            db, state = initial_db, None
            if perturb_dir is not None:
                assert initial_db is not None
                key = f"{seed}:{rnd}"
                path = Path(perturb_dir) / f"perturb-{seed}-{rnd}.db"
                existed = path.is_file()  # an earlier sample into this folder (another level) may use it
                db = perturbed_db(env, initial_db, key, path, keep)
                state = {"method": METHOD, "key": key, "db": db.name, "sha256": sha256(db)}
                with fresh(env, db) as prun:
                    before = len(out.tasks)
                    _round(env, shuffled_planner(env, prun), out, keys, ids, db, seed, rnd, rules, language, state,
                           templates)
                if len(out.tasks) == before and not existed:
                    db.unlink()
            else:
                before = len(out.tasks)
                _round(env, planner, out, keys, ids, db, seed, rnd, rules, language, None, templates)
            stale = stale + 1 if len(out.tasks) == before else 0
            if stale >= STALE_ROUNDS:
                out.exhausted = True
                break
    return out


def interleaved(chains: Sequence[Chain], rng: random.Random) -> list[Chain]:
    """``chains`` one shape after another in turn, each shape's chains and the shapes' order shuffled by ``rng``: a
    shape the planner finds once a round (an exception) is tried as early as one it finds a hundred times (a plain
    shuffle of all of them left it after the first ``n`` draws most rounds)."""
    by_shape: dict[str, list[Chain]] = {}
    for ch in chains:
        by_shape.setdefault(ch.shape, []).append(ch)
    shapes = sorted(by_shape)
    for shape in shapes:
        rng.shuffle(by_shape[shape])
    rng.shuffle(shapes)
    out: list[Chain] = []
    for k in range(max((len(v) for v in by_shape.values()), default=0)):
        out += [by_shape[s][k] for s in shapes if k < len(by_shape[s])]
    return out


class _Keys:
    """What a new task must not repeat: effects anywhere; calls and planned chains on the same initial state."""

    def __init__(self) -> None:
        self.effects: set[str] = set()
        self.calls: dict[str | None, set[str]] = {}
        self.chains: set[str] = set()

    def add(self, tasks: Iterable[Task]) -> None:
        for t in tasks:
            state = (t.metadata.get("perturb") or {}).get("key")
            self.calls.setdefault(state, set()).add(_call_key(t.reference_solution))
            self.effects.add(_effect_key(t.verifier, t.reference_solution))

    def seen(self, state: str | None) -> set[str]:
        return self.effects | self.calls.get(state, set())


def _round(env: Environment, planner: ShuffledPlanner, out: Sample, keys: _Keys, ids: set[tuple[str, str]],
           db: str | Path | None, seed: int, rnd: int, rules: bool, language: str,
           state: dict[str, Any] | None, templates: Mapping[str, Template]) -> None:
    """One round: the planner's chains over rows in this round's order, tried shape by shape in turn
    (:func:`interleaved`). No refusal (a forbidden write asked for alone: its gold is the initial state, which doing
    nothing reaches): a bank takes one only paired with an allowed decide task, and a sample is drawn task by task."""
    chains = interleaved([ch for ch in round_chains(planner, seed, rnd, db, rules) if not refusing(ch)],
                         random.Random(f"{seed}:{rnd}"))
    skey = state["key"] if state is not None else None
    seen = keys.seen(skey)
    for chain in chains:
        if len(out.tasks) >= out.n:
            break
        sig = f"{skey}|{chain.signature()}"
        if sig in keys.chains:
            continue
        keys.chains.add(sig)
        axes = axes_of(env, chain)
        if not out.want.takes(chain, axes):
            continue
        task, why = _instantiate(env, chain, axes, seen, ids, db, seed, rnd, language, state, templates)
        if why != "repeat":
            out.tried += 1
        if task is None:
            out.refused[why] = out.refused.get(why, 0) + 1
            if why == "repeat" and out.first_repeat is None:
                out.first_repeat = len(out.tasks)
            continue
        seen |= task_keys([task])
        keys.add([task])
        out.tasks.append(task)


def _words(env: Environment, chain: Chain, ids: set[tuple[str, str]], initial_db: str | Path | None,
           language: str, templates: Mapping[str, Template]) -> tuple[str | None, str, str]:
    """The request for ``chain``: the LLM's template of its kind filled (``llm_template``) when there is one and
    the lint takes the result, else code's words (``template``); (text or None, who worded it, why not)."""
    key = template_key(chain)
    if key is not None and key in templates:
        text = fill(templates[key], chain)
        if text is not None and not lint_request(env, chain, text, plain=True):
            return text, "llm_template", ""
    changes: list[Change] = []
    if says_changes(chain):  # what the calls change, for a write that states no new value
        with fresh(env, initial_db) as run:
            play(run, chain.calls, changes=False)
            if run.error is not None:
                return None, "", "replay"
            changes = run.changes()
    text = request_from_plan(chain, changes, skip=ids, language=language, states=state_columns(env))
    if text is None:
        return None, "", "wording"
    if lint_request(env, chain, text, plain=True):
        return None, "", "lint"
    return text, "template", ""


def _instantiate(env: Environment, chain: Chain, axes: Axes, seen: set[str], ids: set[tuple[str, str]],
                 initial_db: str | Path | None, seed: int, rnd: int, language: str,
                 state: dict[str, Any] | None = None,
                 templates: Mapping[str, Template] = MappingProxyType({})) -> tuple[Task | None, str]:
    """One chain as a proved task, or why not (``repeat``, ``replay``, ``wording``, ``lint``, ``proof``)."""
    if _call_key(chain.calls) in seen:  # the planner's calls are concrete: the replay records the same
        return None, "repeat"
    text, worded_by, why = _words(env, chain, ids, initial_db, language, templates)
    if text is None:
        return None, why
    level = axes.level
    provenance = {"stage": STAGE, "sampler": SAMPLER_VERSION, "seed": seed, "round": rnd}
    task, err = build_and_prove(env, chain.calls, text, answer_field=None, initial_db=initial_db,
                                provenance=provenance, chain=chain,
                                answer=dict(chain.answer) if chain.answer is not None else None, seen=seen,
                                extra={"worded_by": worded_by, "level": level})
    if task is None:
        return None, "repeat" if err == "another task already does exactly this" else "proof"
    needed = {c.tool for c in task.reference_solution} | {r["tool"] for r in chain.rules}
    extra = distractors(env, needed, DISTRACTORS[level], f"{seed}:{task.task_id}")
    offered = [t.openai_schema() for t in described_tools(env) if t.name in needed or t.name in extra]
    metadata = {**task.metadata, "axes": axes.to_json(len(extra)), "distractors": extra}
    if state is not None:
        metadata["perturb"] = state
    return task.model_copy(update={"tools": offered, "metadata": TaskMetadata.model_validate(metadata)}), ""


def sample_env_dir(env_dir: str | Path, n: int, *, seed: int = 0, want: Want | None = None,
                   exclude: Sequence[str | Path] = (), max_rounds: int = MAX_ROUNDS,
                   perturb_dir: str | Path | None = None) -> Sample:
    """:func:`sample` on an environment directory (``env.json``, ``initial.db``, its bank ``tasks.jsonl``)."""
    d = Path(env_dir)
    env, bank, _report = load_env_dir(d)
    db = d / "initial.db"
    if not db.is_file():
        raise EnvDirError(f"{d}: no initial.db")
    try:
        templates = read_templates(d / TEMPLATES)
    except ValueError as e:
        raise EnvDirError(str(e)) from None
    return sample(env, n, seed=seed, initial_db=db, want=want, bank=bank, exclude=read_excluded(exclude, env.env_id),
                  max_rounds=max_rounds, perturb_dir=perturb_dir, templates=templates)
