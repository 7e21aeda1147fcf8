"""The task-generation agent: code plans compositional tasks, the LLM words the request.

The planner (:mod:`pipeline.stages.tasks.planner`) builds chains of real tool calls over the tool-dependency
graph: rows, arguments and the order of calls chosen by code from the initial database, every argument
either stated in the request (natural-key values, new values) or read by an earlier call. The LLM is asked
only for the user's words, given the chain's facts; code lints the words (every value the chain needs is
stated, no surrogate id, not the answer), replays the calls, derives the verifier from the state diff
(``verify.derive``) and runs the proofs (``verify.proofs``). A wording problem goes back to the LLM with the
evidence, a bounded number of times; then the chain is rejected with the reason.

Entry points: :func:`generate_tasks` (an environment -> tasks + rejections), :func:`revise_task`
(a task the tester/checker found badly worded -> a reworded task) and :func:`rederive_task` (a task
on a repaired environment -> its verifier derived again).
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.dbmodel import lifecycle
from pipeline.dbmodel.keynames import singular
from pipeline.dbmodel.keys import surrogates
from pipeline.hashing import canonical_json
from pipeline.ir import Environment, Rejection, Task, TaskMetadata, ToolCall
from pipeline.llm.protocol import LLMClientProtocol
from pipeline.llm.sampling import Escalating
from pipeline.meaning.vocab import foreign_letters
from pipeline.prompts import prompt_hashes, sections
from pipeline.runtime import reward
from pipeline.runtime.replay import describe_call, fresh
from pipeline.runtime.schemas import described_tools
from pipeline.settings import TaskSettings as TaskSettings
from pipeline.stages.base import StageResult
from pipeline.stages.feedback import ask_with_feedback, copied_words, render_section
from pipeline.stages.tasks.code_wording import (
    Event,
    EventKey,
    copied_clause,
    needs_quotes,
    number_words,
    quoted_listed,
    quoted_value,
    request_from_plan,
    speaks_about_itself,
    state_columns,
    stated,
    unquoted,
    without,
)
from pipeline.stages.tasks.conversation import conversation_form, own_personas
from pipeline.stages.tasks.events import ask_events, spoken
from pipeline.stages.tasks.naming import by_parents
from pipeline.stages.tasks.planner import (
    Chain,
    make_planner,
    next_chain,
    plan_chains,
    single,
    tool_op,
    unpaired,
)
from verify.derive import Derivation, derive_verifier, forbidden_calls
from verify.policy import policy_text
from verify.proofs import prove

STAGE = "tasks"
Kind = Literal["lookup", "create", "update", "delete", "multi_step"]
__all__ = ["TaskSettings", "generate_tasks", "rederive_task", "revise_task", "tool_op"]


# ---------------------------------------------------------------- wording


def _stated(text: str, value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return any(abs(n - value) < 1e-9 for n, _ in reward.numbers_in(text))
    v = str(value)
    if reward.dates_in(v) and reward.dates_in(v)[0] in reward.dates_in(text):
        return True
    return reward.mentions(text, v)


_QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?""")
_PUNCT = re.compile(r"[;:,.()\n]")


def _template_chunks(facts: list[str], descriptions: Sequence[str] = (), min_words: int = 4) -> list[str]:
    """The planner's own connecting words in the facts (values and the tools' descriptions taken out), in runs of
    ``min_words`` words or more: a request containing one copied the plan instead of wording it ("create a new
    loans row")."""
    out: list[str] = []
    for f in facts:
        for d in descriptions:
            f = f.replace(d.strip().rstrip("."), " | ")
        for part in _PUNCT.split(_QUOTED.sub(" | ", f)):
            for piece in part.split("|"):
                norm = reward.normalize_text(piece)
                if len(norm.split()) >= min_words and norm not in out:
                    out.append(norm)
    return out


def database_words(env: Environment, language: str = "en") -> set[str]:
    """The words of the database's own trade (``prompts/tasks.md`` ``database_words``, a section per language)
    that a request may not use: a customer speaks of books and orders, not of rows and tables. A word the schema
    itself names a table or a column by ("a medical record") is the domain's, and stays allowed."""
    keys = set(sections("tasks"))
    key = f"database_words_{language}" if f"database_words_{language}" in keys else "database_words"
    said = {w.strip().casefold() for w in render_section("tasks", key).replace("\n", ",").split(",") if w.strip()}
    return said - _schema_words(tuple(t.ddl for t in env.tables))


@functools.lru_cache(maxsize=64)
def _schema_words(ddls: tuple[str, ...]) -> frozenset[str]:
    """The words of the tables' and columns' names (split at underscores), as SQLite reads the DDL."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        out: set[str] = set()
        for ddl in ddls:
            try:
                conn.execute(ddl)
            except sqlite3.Error:
                continue
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")').fetchall()]
            out |= {w.casefold() for n in (name, *cols) for w in n.split("_") if w}
        return frozenset(out)
    finally:
        conn.close()


@functools.lru_cache(maxsize=64)
def _identifiers(ddls: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(``table`` or ``column``, name) of the schema's names a person would not write: each table and column whose
    name has an underscore (``loan_id``, ``due_date``) and an integer primary key whatever its name (``id``); longest
    first. A foreign key without an underscore is named for what it points at (``author``): a person says that."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    try:
        for ddl in ddls:
            try:
                conn.execute(ddl)
            except sqlite3.Error:
                continue
        out: dict[str, str] = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            if "_" in name:
                out.setdefault(name.casefold(), "table")
            cols = conn.execute(f'PRAGMA table_info("{name}")').fetchall()
            pk = [r for r in cols if r[5]]
            ids = {pk[0][1]} if len(pk) == 1 and str(pk[0][2]).upper() == "INTEGER" else set()
            for r in cols:
                if "_" in r[1] or r[1] in ids:
                    out.setdefault(r[1].casefold(), "column")
        return tuple(sorted(((k, n) for n, k in out.items()), key=lambda x: (-len(x[1]), x[1])))
    finally:
        conn.close()


def schema_identifier(env: Environment, text: str, values: Sequence[Any] = ()) -> tuple[str, str] | None:
    """(``table`` or ``column``, name) of the first schema name :func:`_identifiers` lists that ``text`` writes as the
    schema does (a whole word, any case; the ``values`` it states taken out first: an address may hold one), else
    None. Language-neutral: it reads the schema, not words of a language."""
    rest = text
    for v in sorted({str(v) for v in values if isinstance(v, str) and v}, key=len, reverse=True):
        rest = rest.replace(v, " ")
    for kind, name in _identifiers(tuple(t.ddl for t in env.tables)):
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", rest, re.IGNORECASE):
            return kind, name
    return None


def _code_words(chain: Chain) -> str:
    """The request code writes for ``chain`` (English, normalized; empty when it has none)."""
    return reward.normalize_text(request_from_plan(chain) or "")


def database_word(env: Environment, norm: str, language: str = "en") -> str | None:
    """The first of :func:`database_words` that the normalized request ``norm`` uses as a whole word, else None."""
    words = set(re.findall(r"\w+", norm))
    return next((w for w in sorted(database_words(env, language)) if w in words), None)


def copied_description(env: Environment, text: str, own: str = "", it: str = "the request") -> str | None:
    """Why ``text`` repeats a tool's description, or None: the whole description, a run of
    :data:`~pipeline.stages.feedback.COPIED_WORDS` of its words, or a whole clause of it, word for word or but for
    one word (:func:`~pipeline.stages.tasks.code_wording.copied_clause`), unless ``own`` (the request code writes,
    normalized) says that clause too. Every path a request takes checks this: the model's wording, code's, a
    template filled, a revision."""
    norm = reward.normalize_text(text)
    for t in env.tools:
        d = reward.normalize_text(t.description)
        if len(d) > 12 and (d in norm or norm in d):
            return f"{it} repeats the description of tool {t.name}; write what this user wants"
        if run := copied_words(text, t.description):  # a part of it: "set the status of a renewal; returns ..."
            return (f"{it} copies the words {run!r} of the description of tool {t.name}; write what this user "
                    "wants in their own words")
        # a whole clause of it, though shorter ("returns the order as changed"), unless code's own words say it
        if (run := copied_clause(text, t.description)) and run not in own:
            return (f"{it} copies the words {run!r} of the description of tool {t.name}; write what this user "
                    "wants in their own words")
    return None


def lint_request(env: Environment, chain: Chain, text: str, *, plain: bool = False) -> str | None:
    """Wording problems a request must not have: a tool's description repeated (or a run of
    :data:`~pipeline.stages.tasks.code_wording.COPIED_WORDS` of its words), a schema name as the schema writes it
    (:func:`schema_identifier`: ``due_date``, ``overdue_fines``, ``id``), a value of a fixed list in quotes as the
    database holds it ("status 'pending'": :func:`~pipeline.stages.tasks.code_wording.quoted_listed`), a value the
    chain needs left out, a surrogate id or the answer given away. Language-independent: values and the schema, not
    word lists.

    ``plain`` (``[stages.tasks] template_fallback``): values are read as :func:`pipeline.stages.tasks.code_wording.stated`
    reads them (equivalent written forms), text speaking about the request itself is refused, and the problems
    are named as notes about the reply's ``user_request`` field, which a model cannot copy into a request
    unnoticed (the lint refuses that word)."""
    norm = reward.normalize_text(text)
    it = "user_request" if plain else "the request"
    said = stated if plain else _stated
    if plain and (phrase := speaks_about_itself(text)):
        return f"{it} speaks about the request itself ({phrase!r}); keep only what the user says"
    if problem := copied_description(env, text, _code_words(chain), it):
        return problem
    sc = env.scenario
    if odd := foreign_letters(text, [sc.name, sc.description, *chain.facts, *chain.must_state]):
        return (f"{it} writes {odd!r}, letters of a writing system the application and the facts never use; "
                "write the whole message in the application's language")
    for t in env.tools:
        if "_" in t.name and t.name.lower() in text.lower():
            return f"{it} names the tool {t.name}; say what the user wants, not which tool to call"
    for table in env.tables:
        if "_" in table.name and table.name.lower() in text.lower():
            return f"{it} names the table {table.name}; say it as the user would"
    if ident := schema_identifier(env, text, chain.must_state):  # the schema's own names: "due_date", "loan_id"
        kind, name = ident
        return f"{it} names the {kind} {name} as the schema writes it; say it the way this user would"
    for table in env.tables:  # the planner's facts say "<table> row(s)"; users do not (nor "<singular> row")
        spaced = table.name.replace("_", " ")
        forms = [table.name] + ([spaced, " ".join(spaced.split()[:-1] + [singular(spaced.split()[-1])])]
                                if plain and spaced.strip() else [])
        if any(re.search(rf"\b{re.escape(reward.normalize_text(f))} rows?\b", norm) for f in forms):
            return (f"{it} speaks of {table.name} rows, the plan's wording; write it the way this user "
                    "would say it, in their own words")
    if said_db := database_word(env, norm):
        return (f"{it} speaks of {said_db!r}, the database's word; write it the way this user would say it, of "
                "the things themselves")
    for chunk in _template_chunks(chain.facts, [t.description for t in env.tools]):
        if chunk in norm and chunk not in _code_words(chain):  # words code itself says are a person's words
            return (f"{it} copies the plan's wording ({chunk!r}); write the message the way this user "
                    "would say it, in their own words")
    if (v := quoted_listed(chain, text, state_columns(env))) is not None:  # "status 'pending'": the database's form
        return f"{it} writes {v!r} in quotes, as the database holds it; say it as a plain word, the way this user would"
    if (v := quoted_value(text, chain.must_state)) is not None:  # "the medication 'Cetirizine'"
        return f"{it} writes {v!r} in quotes; a person writes names, dates and amounts without quotes"
    missing = [v for v in chain.must_state if not said(text, v)]
    if missing and plain:
        dated = any(isinstance(v, str) and reward.dates_in(v) for v in missing)
        return (f"{it} leaves out " + ", ".join(repr(v) for v in missing) + "; the user names each of them" +
                (" (a date with its year)" if dated else ""))
    if missing:
        return "the request must state " + ", ".join(repr(v) for v in missing) + " exactly as written"
    rest = without(text, chain.must_state) if plain else text
    offered = [v for r in chain.rules for v in ((r.get("instead") or {}).get("arguments") or {}).values()]
    for v in chain.hidden + chain.read_values():
        if v in chain.must_state or isinstance(v, bool):
            continue
        if said(rest, v):
            if chain.answer is not None and v == chain.answer.get("value"):
                return f"{it} gives its answer away ({v!r}); ask for it instead"
            if v in offered:  # an exception: the user asks for what the policy forbids, not for its alternative
                return f"{it} mentions {v!r}; the user asks only for the change itself, say nothing else it could become"
            return f"{it} mentions {v!r}, an internal id users do not know; name things by what they are"
    return None


def chain_messages(env: Environment, chain: Chain, said: str | None = None) -> list[dict[str, Any]]:
    """The phrasing request for ``chain``: what the user wants and the values to state, written without quotes (the
    model copies the quotes it is shown: "the medication 'Cetirizine'"), a value that needs them (a list) quoted.
    ``said``: the request code writes for it (:func:`plain_request`), shown instead of the planner's facts: the
    model rewords or copies what it is shown, and the facts read like a form ("For the loan of ..., change: status
    'returned'", "Create a new loan: ...; status 'pending'"), a copy of which the lint refuses or lets through as
    form words; code's request is in the scenario's language and already passes the lint."""
    facts = f"- {said}" if said else "\n".join(f"- {unquoted(f, chain.must_state)}" for f in chain.facts)
    user = render_section(
        "tasks", "phrase_chain",
        scenario=f"{env.scenario.name}: {env.scenario.description}",
        facts=facts,
        must="; ".join(repr(v) if isinstance(v, str) and needs_quotes(v) else
                       number_words(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)
                       for v in chain.must_state) or "(none)",
        question=render_section("tasks", "question") if chain.answer is not None else "",
    )
    return [{"role": "system", "content": render_section("tasks", "system")}, {"role": "user", "content": user}]


def plain_request(env: Environment, chain: Chain, changes: Sequence[Any], skip: Any, language: str,
                  events: Mapping[EventKey, Event] | None = None) -> str | None:
    """The request code writes for ``chain`` (:func:`~pipeline.stages.tasks.code_wording.request_from_plan`) when it
    passes the lint, else None; with ``events`` (what a person says for a write that ends in a state), those words
    first, then, when they fail the lint, the plain ones."""
    for ev in ([events, None] if events else [None]):
        text = request_from_plan(chain, changes, skip=skip, language=language, states=state_columns(env), events=ev)
        if text is not None and lint_request(env, chain, text, plain=True) is None:
            return text
    return None


def classify(env: Environment, calls: list[ToolCall], changes: tuple[Any, ...]) -> Kind:
    """What a task does: a question (``lookup``), or the kind of write when all its changes agree."""
    if not changes:
        return "lookup"
    ops = {c.op for c in changes}
    if len(ops) == 1:
        return {"insert": "create", "delete": "delete", "update": "update"}[ops.pop()]  # type: ignore[return-value]
    return "multi_step"


def make_task(env: Environment, d: Derivation, instruction: str, *, answer_field: str | None,
              provenance: dict[str, Any], chain: Chain | None = None, extra: dict[str, Any] | None = None) -> Task:
    assert d.verifier is not None
    calls = list(d.calls)
    tools_used = list(dict.fromkeys(c.tool for c in calls))
    metadata: dict[str, Any] = {"tools_used": tools_used, "steps": len(calls),
                                "tables_changed": d.verifier.mutable_tables, **(extra or {})}
    if chain is not None:
        metadata.update({"tier": chain.tier, "shape": chain.shape, "sources": chain.sources,
                         "data_dependent": chain.dependent})
        if chain.rules:  # rule-bound (``[stages.tasks] rule_tasks``): the rules it exercises and their verdicts
            metadata["rules"] = chain.rules
    metadata.setdefault("tier", 1 if len(calls) == 1 else 2 if len(calls) <= 3 else 3)
    policy = policy_text(env)
    if policy is not None:  # every task of an environment with rules carries the policy its agent is given
        metadata["policy"] = policy
    if answer_field:
        metadata["answer_field"] = answer_field
    if d.notes:
        metadata["derivation_notes"] = list(d.notes)
    env_id = env.env_id  # a hash of the whole IR: once
    return Task(
        task_id=Task.make_id(env_id, instruction, calls, d.verifier),
        env_id=env_id,
        instruction=instruction,
        tools=[t.openai_schema() for t in described_tools(env)],
        reference_solution=calls,
        verifier=d.verifier,
        kind=classify(env, calls, d.changes),
        metadata=TaskMetadata.model_validate(metadata),
        provenance=provenance,
    )


def _provenance(client: LLMClientProtocol, replies: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"stage": STAGE, "model": getattr(client, "model", "?"), "prompt_sha": prompt_hashes().get("tasks"),
            "llm_replies": replies, **(extra or {})}


def _call_key(calls: Any, verifier: Any = None) -> str:
    """The same calls; a refusal's (no table may change, no answer: its calls only read) with what its verifier
    pins, since a lookup may read the same rows."""
    key = "calls:" + canonical_json([c.model_dump(mode="json") for c in calls])
    if verifier is not None and not verifier.mutable_tables and verifier.answer is None:
        key += " refusal:" + canonical_json(verifier)
    return key


def _effect_key(verifier: Any, calls: Any) -> str:
    """Duplicates in effect: the same end state, or the same answer read by the same last call."""
    if verifier.answer is not None:
        return "answer:" + canonical_json([calls[-1].model_dump(mode="json"), verifier.answer])
    return "state:" + canonical_json(verifier)


def implied_args(sources: Sequence[dict[str, Any]] | None) -> list[tuple[int, str]]:
    """(call index, argument) of the arguments a request leaves implied (``sources`` ``"implied"``: a new row's state
    when it is the state new rows have), for :func:`verify.derive.derive_verifier`."""
    return [(i, arg) for i, src in enumerate(sources or []) for arg, how in dict(src).items() if how == "implied"]


def build_and_prove(env: Environment, calls: list[ToolCall], instruction: str, *, answer_field: str | None,
                    initial_db: str | Path | None, provenance: dict[str, Any], chain: Chain | None = None,
                    answer: dict[str, Any] | None = None, seen: set[str] | None = None,
                    extra: dict[str, Any] | None = None) -> tuple[Task | None, str | None]:
    """Replay, derive and prove one worded task: the task, or the problem to feed back."""
    rules = chain.rules if chain is not None else (extra or {}).get("rules") or []
    sources = chain.sources if chain is not None else (extra or {}).get("sources")
    d = derive_verifier(env, calls, initial_db=initial_db, answer_field=answer_field, answer=answer,
                        forbidden=forbidden_calls(rules), implied=implied_args(sources))
    if d.error or d.verifier is None:
        return None, f"replaying the calls failed: {d.error}"
    if seen is not None and (_call_key(d.calls, d.verifier) in seen or _effect_key(d.verifier, d.calls) in seen):
        return None, "another task already does exactly this"
    task = make_task(env, d, instruction, answer_field=answer_field, provenance=provenance, chain=chain, extra=extra)
    report = prove(env, task, initial_db=initial_db)
    if not report.ok:
        return None, "the task fails a check: " + report.reason()
    return task, None


class Revision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_request: str = Field(..., min_length=15, max_length=400)


# ---------------------------------------------------------------- entry points


def generate_tasks(
    env: Environment,
    client: LLMClientProtocol,
    *,
    n: int | None = None,
    initial_db: str | Path | None = None,
    settings: TaskSettings | None = None,
) -> StageResult[list[Task]]:
    """Plan chains for ``n`` tasks, ask the LLM to word each, keep those that lint, replay and prove.

    ``settings.template_fallback``: a chain whose wording still fails after the LLM's repairs is worded by code
    (:mod:`pipeline.stages.tasks.code_wording`); ``metadata.worded_by`` says which. ``settings.spread_bank``: the next chain
    asked about is the one that puts a write tool no task uses yet into the bank, else whose (shape, tool chain,
    asked column) the bank holds least (:func:`pipeline.stages.tasks.planner.next_chain`)."""
    settings = settings or TaskSettings()
    want = n or settings.n_tasks
    budget = max(want, round(want * settings.overplan))
    plain = settings.template_fallback
    with fresh(env, initial_db) as run:
        chains = plan_chains(env, run, budget, settings.tiers, initial_db=initial_db, spread=settings.spread_bank,
                             rules=settings.rule_tasks)
        ids = surrogates(run.infos)
        namer = make_planner(env, run)  # a row chosen by a date, named by its parents where they name it alone
        chains = [by_parents(namer.conn, namer.infos, namer.keys, ch) for ch in chains]
        # the state a new row takes: a write back to it is no event a person asks for (the model words it as the
        # row's making: "I'd like to borrow ..." for a returned loan set back to pending)
        first = {(t, c): v for t, c in sorted(state_columns(env).states)
                 if (v := lifecycle.initial_state(namer, t, c)) is not None}
    writes = {t.name for t in env.tools if t.kind == "write"} if settings.spread_bank else None
    rule_quota = math.ceil(settings.rule_share * want) if settings.rule_tasks and env.rules else 0
    tasks: list[Task] = []
    rejections: list[Rejection] = []
    seen: set[str] = set()
    replies = 0
    if not chains:
        return StageResult([], (Rejection(stage=STAGE, item=env.env_id,
                                          reason="no task can be planned over these tools and rows"),))
    events: dict[EventKey, Event] = {}
    if plain and settings.event_words:  # the scenario's words for the writes that end in a state (the model's)
        events, unsaid = ask_events(env, client, chains, language=settings.template_language,
                                    lint=lambda ch, text: lint_request(env, ch, text, plain=True), first=first)
        rejections += [Rejection(stage="events", item=line.partition(":")[0], reason=(
            "the model's words for the event failed; code says the write as before: " + line.partition(": ")[2]))
            for line in unsaid]
        chains = [spoken(ch, events, state_columns(env)) for ch in chains]  # the event says the state
    drys: dict[int, Derivation] = {}
    drys_lock = threading.Lock()

    def dry_run(i: int) -> Derivation:
        with drys_lock:
            if i not in drys:
                drys[i] = derive_verifier(env, chains[i - 1].calls, initial_db=initial_db, answer=chains[i - 1].answer,
                                          forbidden=forbidden_calls(chains[i - 1].rules),
                                          implied=implied_args(chains[i - 1].sources))
            return drys[i]

    def label_of(i: int) -> str:
        chain = chains[i - 1]
        return f"task {i} ({chain.shape}, tier {chain.tier}: {' -> '.join(c.tool for c in chain.calls)})"

    # What checking a reply found, by (chain, wording): a pure function of both, because a chain's own keys are
    # never in ``seen`` while it is asked about (the loop skips a chain whose keys are). Filled by the wording
    # sent ahead, read by the loop, so a reply is linted and proved once.
    checked: dict[tuple[int, str], tuple[Task | None, str | None]] = {}

    def word(i: int, ahead: bool) -> Any:
        """Ask for chain ``i``'s wording until it checks (the feedback loop); ``ahead``: sent ahead of the loop."""
        chain = chains[i - 1]
        prov = _provenance(client, 0, {"plan": label_of(i)})
        answer = dict(chain.answer) if chain.answer is not None else None
        extra = {"worded_by": "llm"} if plain else None

        def check(reply: Revision) -> tuple[Task | None, str | None]:
            key = (i, reply.user_request)
            with drys_lock:
                hit = checked.get(key)
            if hit is not None:
                return hit
            text = unquoted(reply.user_request, chain.must_state)  # "the medication 'Cetirizine'": no quotes
            problem = lint_request(env, chain, text, plain=plain)
            if problem:
                found: tuple[Task | None, str | None] = (None, problem)
            else:
                found = build_and_prove(env, chain.calls, text, answer_field=None,
                                        initial_db=initial_db, provenance=prov, chain=chain, answer=answer,
                                        seen=None if ahead else seen, extra=extra)
            if ahead:
                with drys_lock:
                    checked[key] = found
            return found

        said = plain_request(env, chain, dry_run(i).changes, ids, settings.template_language, events) if plain else None
        return ask_with_feedback(
            Escalating(client, settings.retry_temperature), Revision, chain_messages(env, chain, said), check, stage=STAGE,
            max_attempts=settings.max_attempts, max_tokens=settings.max_tokens, feedback=_feedback(plain),
        )

    def by_template(i: int, dry: Derivation, attempts: int) -> tuple[Task | None, str, str | None]:
        """Chain ``i`` worded by code: the task, or why not, and the request written."""
        chain = chains[i - 1]
        text = plain_request(env, chain, dry.changes, ids, settings.template_language, events) or request_from_plan(
            chain, dry.changes, skip=ids, language=settings.template_language, states=state_columns(env))
        if text is None:
            return None, "its facts have no plain wording", None
        problem = lint_request(env, chain, text, plain=True)
        if problem:
            return None, problem, text
        task, err = build_and_prove(env, chain.calls, text, answer_field=None, initial_db=initial_db,
                                    provenance=_provenance(client, attempts, {"plan": label_of(i)}), chain=chain,
                                    answer=dict(chain.answer) if chain.answer is not None else None, seen=seen,
                                    extra={"worded_by": "template"})
        return task, err or "", text

    sent: set[int] = set()
    tried: set[int] = set()
    bank: list[Chain] = []
    worded = 0

    def send_ahead(i0: int) -> None:
        """With a client that sends requests ahead: word, in the background, the chains the loop will ask about
        from ``i0`` on if every wording succeeds (those that replay and are not repeats, as many as tasks are
        still wanted); the loop then asks them in order as before and finds the replies (and their checks) done."""
        if not getattr(client, "prefetches", False):
            return
        need = want - len(tasks) if writes is None else min(want - len(tasks), budget - worded)
        keys = set(seen)
        will_try, will_bank = set(tried), list(bank)
        j: int | None = i0
        while j is not None and need > 0:
            will_try.add(j)
            d = dry_run(j)
            if not (d.error or d.verifier is None or _call_key(d.calls, d.verifier) in keys or
                    _effect_key(d.verifier, d.calls) in keys):
                keys |= {_call_key(d.calls, d.verifier), _effect_key(d.verifier, d.calls)}
                need -= 1
                will_bank.append(chains[j - 1])
                if j not in sent:
                    sent.add(j)
                    client.prefetch([functools.partial(word, j, True)])
            j = next_chain(chains, will_try, will_bank, writes, rule_quota)

    while True:
        while len(tasks) < want:
            i_next = next_chain(chains, tried, bank, writes, rule_quota)
            if i_next is None or (writes is not None and worded >= budget):
                break
            i = i_next
            chain = chains[i - 1]
            send_ahead(i)
            tried.add(i)
            label = label_of(i)
            dry = dry_run(i)
            if dry.error or dry.verifier is None:  # code finds this without asking the LLM for words
                rejections.append(Rejection(stage=STAGE, item=label, reason=f"the planned calls do not replay: {dry.error}",
                                            evidence={"calls": [describe_call(c) for c in chain.calls]}))
                continue
            if _call_key(dry.calls, dry.verifier) in seen or _effect_key(dry.verifier, dry.calls) in seen:
                continue
            worded += 1
            out = word(i, False)
            replies += out.attempts
            if out.value is not None:
                task: Task | None = out.value.model_copy(
                    update={"provenance": {**out.value.provenance, "llm_replies": out.attempts}})
            elif plain:  # the plan is proved: write its request from its facts
                task, why, text = by_template(i, dry, out.attempts)
                if task is None:
                    rejections.append(Rejection(
                        stage=STAGE, item=label, reason=f"{out.error or 'no task'}; written by code instead: {why}",
                        evidence={"replies": out.attempts, "last_reply": _last_reply(out.messages), "template": text,
                                  "calls": [describe_call(c) for c in chain.calls]}))
                    continue
            else:
                rejections.append(Rejection(stage=STAGE, item=label, reason=out.error or "no task",
                                            evidence={"replies": out.attempts, "last_reply": _last_reply(out.messages),
                                                      "calls": [describe_call(c) for c in chain.calls]}))
                continue
            assert task is not None
            seen |= {_call_key(task.reference_solution, task.verifier), _effect_key(task.verifier, task.reference_solution)}
            tasks.append(task)
            bank.append(chain)
        # a pair of single-write decide tasks whose second never became a task: its first goes, and no more are
        # taken (one kind alone would give the blind writer, or the agent that does nothing, its reward)
        drop = unpaired(bank)
        if not drop:
            break
        for j in drop:
            rejections.append(Rejection(stage=STAGE, item=f"task {tasks[j].task_id} ({bank[j].shape})", reason=(
                "a single-write decide task without its pair (no chain of the other verdict became a task): one kind "
                "alone gives the blind writer or the agent that does nothing its reward")))
            del tasks[j], bank[j]
        tried |= {k for k, ch in enumerate(chains, 1) if single(ch)}

    if settings.conversations:  # each task's conversational form, from its plan (the LLM writes the opening)
        forms = own_personas(env, [conversation_form(env, client, t, c, language=settings.template_language)
                                   for t, c in zip(tasks, bank, strict=True)])  # a person, not the application
        tasks = [t.model_copy(update={"metadata": t.metadata.with_values({"conversation": f})})
                 for t, f in zip(tasks, forms, strict=True)]
    return StageResult(tasks, tuple(rejections), attempts=replies)


def _feedback(plain: bool) -> Any:
    """What the model is told when its reply fails a check (``plain``: the wording prompt's section, which holds
    no sentence a request could copy)."""
    return lambda e: render_section("wording" if plain else "tasks", "feedback", error=e)


def _last_reply(messages: tuple[dict[str, Any], ...]) -> str:
    for m in reversed(messages):
        if m.get("role") == "assistant":
            return str(m.get("content"))[:1000]
    return ""


def revise_task(
    env: Environment,
    task: Task,
    problem: str,
    client: LLMClientProtocol,
    *,
    initial_db: str | Path | None = None,
    settings: TaskSettings | None = None,
) -> tuple[Task | None, str | None]:
    """Reword ``task`` after the checker blamed its wording (same calls; verifier derived again)."""
    settings = settings or TaskSettings()
    answer_field = task.metadata.get("answer_field")
    calls = "; ".join(describe_call(c) for c in task.reference_solution)
    messages = [
        {"role": "system", "content": render_section("tasks", "system")},
        {"role": "user", "content": render_section(
            "tasks", "revise", scenario=f"{env.scenario.name}: {env.scenario.description}",
            instruction=task.instruction, calls=calls, problem=problem)},
    ]

    plain = settings.template_fallback
    kept = _kept_metadata(task) | ({"worded_by": "llm"} if "worded_by" in task.metadata else {})

    values = stated_values(task)

    def check(reply: Revision) -> tuple[Task | None, str | None]:
        text = unquoted(reply.user_request, values)
        if text.strip() == task.instruction.strip():
            return None, "the request is unchanged; reword it"
        if plain and (phrase := speaks_about_itself(text)):
            return None, f"user_request speaks about the request itself ({phrase!r}); keep only what the user says"
        if why := copied_description(env, text, it="user_request" if plain else "the request"):
            return None, why
        prov = {**task.provenance, "revised": task.provenance.get("revised", 0) + 1, "revised_because": problem[:300]}
        return build_and_prove(env, list(task.reference_solution), text, answer_field=answer_field,
                               initial_db=initial_db, provenance=prov, answer=_typed(task), extra=kept)

    out = ask_with_feedback(Escalating(client, settings.retry_temperature), Revision, messages, check, stage=STAGE,
                            max_attempts=settings.max_attempts, max_tokens=settings.max_tokens,
                            feedback=_feedback(plain))
    if out.value is not None and "plan" in task.metadata:
        out_task = out.value.model_copy(update={"metadata": out.value.metadata.with_values({"plan": task.metadata["plan"]})})
        return out_task, None
    return out.value, out.error


def stated_values(task: Task) -> list[Any]:
    """The values ``task``'s request states: its arguments stated (``metadata.sources``), in call order, then the
    values its conversational form tells the user (``metadata.conversation``: a book that tells one of a member's
    loans from the others is no argument)."""
    sources = task.metadata.get("sources") or []
    out: list[Any] = []
    for call, src in zip(task.reference_solution, sources, strict=False):
        for arg, where in dict(src).items():
            v = call.arguments.get(arg)
            if where == "stated" and v is not None and v not in out:
                out.append(v)
    for fact in (task.metadata.get("conversation") or {}).get("facts") or []:
        v = fact.get("value") if isinstance(fact, dict) else None
        if v is not None and v not in out:
            out.append(v)
    return out


def rederive_task(env: Environment, task: Task, *, initial_db: str | Path | None = None) -> tuple[Task | None, str | None]:
    """The same request and calls on a changed environment: derive the verifier again and prove it."""
    task2, err = build_and_prove(env, list(task.reference_solution), task.instruction,
                                 answer_field=task.metadata.get("answer_field"), initial_db=initial_db,
                                 provenance={**task.provenance, "rederived": True}, answer=_typed(task),
                                 extra=_kept_metadata(task))
    if task2 is not None:
        task2 = task2.model_copy(update={"metadata": task.metadata.with_values(task2.metadata.as_dict()),
                                         "difficulty": task.difficulty})
    return task2, err


def _typed(task: Task) -> dict[str, Any] | None:
    a = task.verifier.answer
    return a if isinstance(a, dict) else None


_KEPT = ("tier", "shape", "sources", "data_dependent", "plan", "rules", "policy", "conversation")


def _kept_metadata(task: Task) -> dict[str, Any]:
    return {k: task.metadata[k] for k in _KEPT if k in task.metadata}
