"""The typed environment IR and the task record: frozen pydantic models, ids are content hashes.

An environment is a scenario, SQLite tables (DDL), seed rows and tools. A tool's implementation is
a *declarative SQL program* run in one transaction (see ``pipeline.runtime.engine``):

* ``query``  — ``SELECT`` whose first row is bound: each column ``c`` becomes the SQL parameter
  ``:<bind>_<c>`` for later steps (and ``{<bind>_<c>}`` in error messages);
* ``guard``  — ``SELECT``; with ``must="exist"`` the tool fails unless it returns a row, with
  ``must="not_exist"`` unless it returns none; the agent sees ``error`` (``{param}`` placeholders);
* ``write``  — ``INSERT``/``UPDATE``/``DELETE``; afterwards ``:last_id`` and ``:changes`` are bound.

Built-in parameters: ``:now`` (the environment's simulated clock, ISO-8601) and ``:today``.
``returns`` is a ``SELECT`` (``mode`` one/all) or, when absent, ``{"changes": n, "last_id": id}``.
No LLM-written Python runs anywhere in this path.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import KeysView
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from pipeline.hashing import canonical_json, content_hash

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
RESERVED_PARAMS = {"now", "today", "last_id", "changes"}

DATETIME_PATTERN = ("^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[T ]([01][0-9]|2[0-3]):[0-5][0-9]"
                    "(:[0-5][0-9])?$")
"""The JSON schema ``pattern`` of a ``date-time`` parameter (``Param.format``): ISO date and time, a space or T
between them, seconds optional. ``pipeline/runtime/engine.py`` holds the same text (it is embedded in every
``server.py`` and imports no project file; a test holds them equal)."""


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _ident(value: str, what: str) -> str:
    if not IDENT.match(value):
        raise ValueError(f"{what} {value!r} is not an identifier (letters, digits, underscore)")
    return value


class Scenario(Frozen):
    """One concrete application to simulate."""

    name: str = Field(min_length=1, max_length=120)
    description: str = Field(min_length=1)
    seed: str | None = None
    entities: list[str] = Field(default_factory=list)
    goals: list[str] = Field(default_factory=list)

    @property
    def scenario_id(self) -> str:
        return content_hash({"name": self.name, "description": self.description})


class Table(Frozen):
    name: str
    ddl: str = Field(description="CREATE TABLE ... STRICT statement")
    description: str = ""
    natural_key: list[str] = Field(default_factory=list)
    """The columns a user names a row by (a code, a plate, a name, or name + date); empty: found by code."""
    personal: list[str] = Field(default_factory=list)
    """Columns that record a personal characteristic of someone (gender, ethnicity, religion, nationality, marital
    status, disability, pregnancy), as the LLM classified them when it wrote the schema, that the table keeps
    because a key relies on them (the others are dropped: ``withheld``): no rule turns on one
    (``pipeline.stages.policy.candidates``). Absent from the JSON when empty, so older environments keep their bytes."""
    withheld: list[str] = Field(default_factory=list)
    """Columns the schema stage dropped from the LLM's DDL because it classified them as personal characteristics
    (``pipeline.stages.schema.personal``): no later stage adds them back. Absent from the JSON when empty."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _ident(v, "table name")

    @model_serializer(mode="wrap")
    def _personal_if_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for name in ("personal", "withheld"):
            if not getattr(self, name):
                out.pop(name, None)
        return out


GeneratorKind = Literal[
    "person_name", "first_name", "last_name", "company", "street_address", "city", "postcode", "country", "email",
    "phone", "date", "datetime", "date_after", "integer", "amount", "enum", "boolean", "code", "text_pool",
    "text_combo", "reference", "derived",
]
"""The menu of column generators (``pipeline.stages.rows.generators``); ``reference`` and ``derived`` (a value made
of another column's value in the same row: ``after`` names it, ``also`` the columns whose values follow it as more
of its words (a last name after the first), ``pattern`` is the recipe, ``pool`` the endings the examples write after
it) are chosen by code only."""


class ColumnGenerator(Frozen):
    """How code makes one column's values: a kind from the menu and its arguments (None: not used; left out of
    the JSON). ``by`` says who chose it: the LLM (checked by code), code (references), or the fallback derived
    from the column's type, constraints and example rows after the LLM's choice failed (``note`` says why)."""

    column: str
    kind: GeneratorKind
    by: Literal["llm", "code", "fallback"] = "llm"
    min: float | None = None
    max: float | None = None
    start: str | None = None
    end: str | None = None
    after: str | None = None
    distribution: Literal["uniform", "normal", "skewed"] | None = None
    values: list[str | int | float] | None = None
    weights: list[float] | None = None
    pattern: str | None = None
    pool: list[str] | None = None
    pool2: list[str] | None = None
    parent: str | None = None
    key: str | None = None
    note: str | None = None
    also: list[str] | None = None

    @model_serializer(mode="wrap")
    def _set_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class RowPlan(Frozen):
    """How the rows after a table's first ``examples`` (written by the LLM) were made by code: the locale, the
    seed of the draws and one generator per column. A later step (a task sampler) can draw more rows alike."""

    locale: str = "en_US"
    seed: int
    examples: int
    generators: list[ColumnGenerator] = Field(default_factory=list)
    example_dates: dict[str, list[Any]] = Field(default_factory=dict)
    """The example rows' dates as the model wrote them, per column that code moved since (its examples all on one
    day: ``pipeline.stages.rows.timeline``); absent from the JSON when none moved, so other plans keep their bytes."""

    @model_serializer(mode="wrap")
    def _dates_if_moved(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if not self.example_dates:
            out.pop("example_dates", None)
        return out


class SeedRows(Frozen):
    table: str
    rows: list[dict[str, Any]]
    plan: RowPlan | None = None
    """Set when code made rows at scale (``[stages.build] row_generators``); absent from the JSON otherwise, so
    environments without it keep their bytes and their ids."""

    @model_serializer(mode="wrap")
    def _plan_if_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.plan is None:
            out.pop("plan", None)
        return out


class Param(Frozen):
    name: str
    type: Literal["string", "integer", "number", "boolean"]
    description: str = ""
    required: bool = True
    enum: list[str | int] | None = None
    minimum: float | None = None
    maximum: float | None = None
    max_length: int | None = None
    format: Literal["date", "date-time"] | None = None
    """How a string parameter's value is written: an ISO date (JSON schema ``"format": "date"``) or date and time
    (``"pattern": DATETIME_PATTERN``). Set on the tools a model or a trainer is shown
    (``pipeline.runtime.schemas.described_tools``: from the seeded values of the columns the parameter is bound
    to), the same the server enforces; absent from the JSON when unset, so ``env.json`` keeps its bytes."""

    @model_serializer(mode="wrap")
    def _format_if_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.format is None:
            out.pop("format", None)
        return out

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        _ident(v, "parameter name")
        if v in RESERVED_PARAMS:
            raise ValueError(f"parameter name {v!r} is reserved ({sorted(RESERVED_PARAMS)})")
        return v

    def json_schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": self.type}
        if self.description:
            s["description"] = self.description
        if self.enum is not None:
            s["enum"] = list(self.enum)
        if self.minimum is not None:
            s["minimum"] = self.minimum
        if self.maximum is not None:
            s["maximum"] = self.maximum
        if self.max_length is not None:
            s["maxLength"] = self.max_length
        if self.format == "date":
            s["format"] = "date"
        elif self.format == "date-time":
            s["pattern"] = DATETIME_PATTERN
        return s


class Step(Frozen):
    kind: Literal["query", "guard", "write"]
    sql: str
    bind: str | None = None
    must: Literal["exist", "not_exist"] | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _check(self) -> Step:
        if self.kind == "query" and not self.bind:
            raise ValueError("a query step needs 'bind' (the name its row is bound to)")
        if self.bind is not None:
            _ident(self.bind, "bind name")
        if self.kind == "guard" and (self.must is None or not self.error):
            raise ValueError("a guard step needs 'must' (exist/not_exist) and 'error' (what the agent sees)")
        return self


class Returns(Frozen):
    sql: str
    mode: Literal["one", "all"] = "all"


class Tool(Frozen):
    name: str
    description: str = Field(min_length=1)
    kind: Literal["read", "write"]
    params: list[Param] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    returns: Returns | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _ident(v, "tool name")

    @model_validator(mode="after")
    def _unique_params(self) -> Tool:
        names = [p.name for p in self.params]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"tool {self.name!r} has duplicate parameters {sorted(dup)}")
        if self.returns is None and not any(s.kind == "write" for s in self.steps):
            raise ValueError(f"tool {self.name!r} has no write step and no 'returns' query")
        return self

    def input_schema(self) -> dict[str, Any]:
        """JSON schema of the arguments object (the same for HTTP, MCP and OpenAI function calling)."""
        return {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema()},
        }


RuleKind = Literal["precondition", "limit", "approval", "state"]


class Alternative(Frozen):
    """What a rule's message offers instead of the write it forbids (an exception path): another write tool called
    on the same row, with values the policy fixes (``put the permit on hold``). ``same`` maps each parameter of
    ``tool`` that names the row to the governed tool's parameter that names it in the forbidden call; ``fixed``
    holds the rest (CHECK-listed or enum values); ``value`` is the one the message names (one of ``fixed``'s)."""

    tool: str
    same: dict[str, str] = Field(min_length=1)
    fixed: dict[str, str | int | float] = Field(min_length=1)
    value: str | int | float

    def call(self, forbidden: dict[str, Any]) -> ToolCall:
        """The alternative to a forbidden call with arguments ``forbidden``."""
        return ToolCall(tool=self.tool, arguments={**{q: forbidden.get(p) for q, p in self.same.items()},
                                                   **self.fixed})


class Rule(Frozen):
    """A rule of the house (``policy.md``): a write the domain forbids in some cases. ``condition`` is a read-only
    ``SELECT`` over the database with the governed tools' named parameters (and ``:now`` / ``:today``) that
    returns a row when the call is forbidden; ``message`` is what a clerk says then. Tools stay permissive: the
    agent must follow the rule; a server run with ``--enforce-policy`` makes it a guard that refuses with the
    message (``pipeline.runtime.policy``). ``allowed`` / ``forbidden``: real calls of the seeded rows the rule
    was checked on (each succeeds and writes without the rule)."""

    id: str
    kind: RuleKind
    tools: list[str] = Field(min_length=1)
    condition: str = Field(min_length=1)
    message: str = Field(min_length=1, max_length=300)
    worded_by: Literal["llm", "code"] = "code"
    allowed: list[ToolCall] = Field(default_factory=list)
    forbidden: list[ToolCall] = Field(default_factory=list)
    alternative: Alternative | None = None
    """The compliant alternative the message names (``pipeline.stages.policy.candidates``); absent from the JSON when None,
    so rules without one (and environments written before alternatives existed) keep their bytes and ids."""

    @field_validator("id")
    @classmethod
    def _name(cls, v: str) -> str:
        return _ident(v, "rule id")

    @model_serializer(mode="wrap")
    def _alternative_if_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.alternative is None:
            out.pop("alternative", None)
        return out


class Environment(Frozen):
    """The whole environment IR; serialised as ``env.json``."""

    scenario: Scenario
    clock: str = "2026-01-15T09:00:00"
    tables: list[Table]
    seed: list[SeedRows] = Field(default_factory=list)
    tools: list[Tool] = Field(default_factory=list)
    ir_version: int = 1
    rules: list[Rule] = Field(default_factory=list)
    """The policy (``[stages.build] policy``); absent from the JSON when empty, so environments without rules
    keep their bytes, their ids and their ``server.py``."""

    @model_serializer(mode="wrap")
    def _rules_if_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if not self.rules:
            out.pop("rules", None)
        return out

    @property
    def env_id(self) -> str:
        """Readable slug of the scenario name plus a content hash of the IR (remembered per object: see
        ``_canonical``)."""
        hit = _ENV_IDS.get(id(self))
        if hit is not None and hit[0] is self:
            return hit[1]
        slug = re.sub(r"[^a-z0-9]+", "_", self.scenario.name.lower()).strip("_")[:40] or "env"
        env_id = f"{slug}_{hashlib.sha256(_canonical(self).encode('utf-8')).hexdigest()[:10]}"
        _remember(_ENV_IDS, self, env_id)
        return env_id

    def tool(self, name: str) -> Tool:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def ddl(self) -> str:
        return "\n".join(t.ddl.rstrip().rstrip(";") + ";\n" for t in self.tables)


# Identity caches for ``Environment.env_id``: the id hashes the whole IR, seed rows included (thousands of rows at
# scale), and a build makes many environments that share one seed (``model_copy`` keeps the same ``SeedRows``
# objects). Models are frozen; an entry holds its object, so its ``id()`` cannot be reused while it is cached.
_ENV_IDS: dict[int, tuple[Any, str]] = {}
_SEED_JSON: dict[int, tuple[Any, str]] = {}
_MAX_REMEMBERED = 512
_REMEMBER_LOCK = threading.Lock()


def _remember(cache: dict[int, tuple[Any, str]], obj: Any, value: str) -> None:
    with _REMEMBER_LOCK:
        if len(cache) >= _MAX_REMEMBERED:
            cache.pop(next(iter(cache)), None)
        cache[id(obj)] = (obj, value)


def _seed_json(rows: SeedRows) -> str:
    hit = _SEED_JSON.get(id(rows))
    if hit is not None and hit[0] is rows:
        return hit[1]
    out = canonical_json(rows)
    _remember(_SEED_JSON, rows, out)
    return out


def _canonical(env: Environment) -> str:
    """``canonical_json(env)``, byte for byte, with each seed table's JSON taken from ``_SEED_JSON``: the top level
    is written key by key in sorted order, as ``json.dumps(sort_keys=True)`` does."""
    top = env.model_dump(mode="json", exclude={"seed"})
    parts = {k: canonical_json(v) for k, v in top.items()}
    parts["seed"] = "[" + ",".join(_seed_json(s) for s in env.seed) + "]"
    return "{" + ",".join(f"{canonical_json(k)}:{parts[k]}" for k in sorted(parts)) + "}"


# ---------------------------------------------------------------- tasks


class ToolCall(Frozen):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Assertion(Frozen):
    """``sql`` is a SELECT on the final database; its value must equal ``expect``.

    The value of a query is the single cell when it returns one row of one column, else the list
    of rows (each a list). Unpredictable values (generated ids, timestamps) are asserted through
    existence/type queries (e.g. ``SELECT COUNT(*) ... WHERE typeof(id)='integer'``), never by value.
    """

    sql: str
    expect: Any
    description: str = ""
    name: str | None = None
    """``"gate"`` marks a gate (what must not change: row counts, untouched rows): it never earns the reward,
    a failing one scores 0; every other assertion is a goal and earns it (``pipeline.runtime.reward``)."""


class Verifier(Frozen):
    assertions: list[Assertion]
    mutable_tables: list[str] = Field(default_factory=list)
    answer: dict[str, Any] | str | None = None
    """For questions: the typed expected answer ``{"type", "value", "others", "stated"}`` (a plain string is
    a text answer); checked by ``pipeline.runtime.reward.check_answer``."""


class Difficulty(Frozen):
    attempts: int = 0
    passes: int = 0


class TaskMetadata(BaseModel):
    """What a task records beside its request, calls and verifier: the keys the stages write, typed.

    It dumps exactly what the untyped ``dict`` it replaces dumped: only the keys that were given (a key given as
    None is written as null, one never given is absent), in the order they were given, then any other key an
    older or newer file carries (kept as is, so every file loads and writes back the same bytes). A value a file
    holds that its key's type does not take (``"tier": "medium"``) is kept as written too, for the readers that check
    what they read (the exports), and its attribute is None. Readers that took it as a mapping still may
    (``meta.get("tier")``, ``"rules" in meta``, ``{**meta, "k": v}``); a change is a new one: :meth:`with_values`.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    # the tasks stage (``pipeline.stages.tasks.bank.make_task``)
    tools_used: list[str] | None = None
    """The tools of the reference solution, in the order first called."""
    steps: int | None = None
    """Calls in the reference solution."""
    tables_changed: list[str] | None = None
    """The tables the verifier lets change (``Verifier.mutable_tables``)."""
    tier: int | None = None
    """1 to 3: the planned chain's tier, else 1 call, 2-3 calls, more."""
    shape: str | None = None
    """The planned chain's shape (``lookup``, ``create``, an aggregate, ...)."""
    sources: list[dict[str, Any]] | None = None
    """Per call, where each argument comes from: ``stated`` in the request, or ``$n.column`` of an earlier call."""
    data_dependent: bool | None = None
    """A later call's arguments come from an earlier call's result."""
    rules: list[dict[str, Any]] | None = None
    """A rule-bound task's rules, each with its verdict (``[stages.tasks] rule_tasks``)."""
    policy: str | None = None
    """The environment's policy as its agent is given it (environments with rules)."""
    answer_field: str | None = None
    """The column a question's answer is read from."""
    derivation_notes: list[str] | None = None
    """What deriving the verifier noted."""
    worded_by: str | None = None
    """``llm``, ``template`` or ``llm_template``: who wrote the request."""
    conversation: dict[str, Any] | None = None
    """The conversational form (``verify.conversation.Script.to_metadata`` and ``worded_by``)."""
    # verification (``verify.difficulty.annotate``, ``pipeline.graph.task``)
    difficulty_tag: str | None = None
    pass_rate: float | None = None
    pass_rate_ci: list[float] | None = None
    hard_pool: bool | None = None
    """Proved solvable, solved by no attempt: kept in band mode, flagged."""
    conversation_difficulty: dict[str, Any] | None = None
    # the task sampler (``pipeline.sampler``)
    level: int | None = None
    axes: dict[str, Any] | None = None
    distractors: list[str] | None = None
    perturb: dict[str, Any] | None = None
    """The perturbed database a sampled task runs on (``method``, ``key``, ``db``, ``sha256``)."""

    _order: tuple[str, ...] = PrivateAttr(default=())
    _untyped: dict[str, Any] = PrivateAttr(default_factory=dict)
    """Given values their key's type does not take, as given."""

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> TaskMetadata:
        if not isinstance(data, dict):
            made: TaskMetadata = handler(data)
            return made
        untyped: dict[str, Any] = {}
        try:
            made = handler(data)
        except ValidationError as e:
            untyped = {k: data[k] for k in {str(err["loc"][0]) for err in e.errors() if err["loc"]} if k in data}
            if not untyped:
                raise
            made = handler({k: v for k, v in data.items() if k not in untyped})
        made._order = tuple(data)
        made._untyped = untyped
        return made

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = {**handler(self), **self._untyped}
        given = self.model_fields_set | set(self.__pydantic_extra__ or {}) | set(self._untyped)
        keys = [k for k in self._order if k in given and k in out]
        keys += [k for k in out if k in given and k not in keys]
        return {k: out[k] for k in keys}

    def as_dict(self) -> dict[str, Any]:
        """The keys given, as the untyped metadata held them."""
        return self.model_dump()

    def with_values(self, values: dict[str, Any]) -> TaskMetadata:
        """These keys with ``values`` on top (a key already given keeps its place; a new one goes last)."""
        return TaskMetadata.model_validate({**self.as_dict(), **values})

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)

    def keys(self) -> KeysView[str]:
        return self.as_dict().keys()

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def __len__(self) -> int:
        return len(self.as_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TaskMetadata):
            return self.as_dict() == other.as_dict()
        if isinstance(other, dict):
            return self.as_dict() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Task(Frozen):
    task_id: str
    env_id: str
    instruction: str
    tools: list[dict[str, Any]]
    reference_solution: list[ToolCall]
    verifier: Verifier
    difficulty: Difficulty = Difficulty()
    kind: Literal["lookup", "create", "update", "delete", "multi_step"] = "multi_step"
    metadata: TaskMetadata = Field(default_factory=TaskMetadata)
    provenance: dict[str, Any] = Field(default_factory=dict)

    @staticmethod
    def make_id(env_id: str, instruction: str, reference_solution: list[ToolCall], verifier: Verifier) -> str:
        return "t_" + content_hash(
            {"env_id": env_id, "instruction": instruction, "reference_solution": [c.model_dump(mode="json") for c in reference_solution], "verifier": verifier.model_dump(mode="json")}
        )


class Rejection(Frozen):
    """A dropped item, kept as data: which stage dropped what, why, and the evidence."""

    stage: str
    item: str
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class Intent(Frozen):
    """One user goal: what to get done, and whether it only reads or also writes (the intents stage's output,
    which the schema and tools stages read)."""

    goal: str
    kind: Literal["read", "write"]
