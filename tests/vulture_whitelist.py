"""Names in pipeline/ and verify/ that the dead-code check (vulture, ``make deadcode``, tests/test_lint.py)
cannot see used, because a framework calls or reads them by name. vulture scans this file with tests/ (code
that only tests or benchmarks use counts as used); nothing imports it. Add a name only with its reason."""

# ruff: noqa: B018 (each line marks a name as used)

from vulture.whitelist_utils import Whitelist

_ = Whitelist()

# pydantic / pydantic-settings: model settings, validators (registered by their decorators), the settings
# source hooks (their parameters are the base class's)
_.model_config
_._alternative_if_set
_._band
_._plan_if_set
_._format_if_set  # ir.Param: drops an unset format from the JSON
_._ranges
_._rules_if_set
_._personal_if_set
_._set_only
_._keep_order
_._given_only
# TaskMetadata keys written for trainers and readers of the task files (exports copy them from the JSON)
_.data_dependent
_.derivation_notes
_.difficulty_tag
_._unique_params
_.get_field_value
_.settings_customise_sources
_.dotenv_settings
_.file_secret_settings

# click commands (registered by their decorators)
_.browse
_.eval_cmd
_.export_cmd

# FastAPI routes, middleware and exception handlers (registered by their decorators)
_.api_tasks
_.health
_.only_loopback
_.unknown_tool

# the standard library calls or reads these: http.server handlers and servers, signal
# handlers' and the SQLite authorizer's parameters, a module's __getattr__ (lazy import), sqlite3's
# isolation_level
_.allow_reuse_address
_.close_connection
_.daemon_threads
_.do_GET
_.do_POST
_.log_message
_.protocol_version
_.request_queue_size
_.frame
_.dbname
_.__getattr__
_.isolation_level

# LangGraph state keys (TypedDict fields read and written as state["..."])
_.cursor
_.given_tasks
_.reference_faults
_.unresolved

# records and constants kept as data for their readers: IR versions (in env.json, server.py), the engine's
# version (embedded in every server.py), reply and endpoint fields (inspected by callers and in debugging)
_.ir_version
_.ENGINE_VERSION
_.parsed_from_text
_.raw_content
_.throttled

# called by name from the text of a rendered server.py (the __main__ of an environment with rules)
_.main_with_policy
_._dates_if_moved

# llama-cpp-python reads it as its chat route is built (pipeline/llm/serve.py keep_timings: replies keep their timings)
_.ChatCompletion
