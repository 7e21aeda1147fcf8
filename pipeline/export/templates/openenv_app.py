"""FastAPI application serving the environment with OpenEnv: ``/reset``, ``/step``, ``/state``,
``/schema``, ``/metadata``, ``/health``, ``/mcp`` and the ``/ws`` WebSocket sessions ``EnvClient``
uses (one environment instance, hence one database, per session).

    uvicorn server.app:app --port 8000        # from the environment directory (openenv.yaml)
    python -m <package>.server.app --port 8000  # after `pip install .`
"""

import gc
import os
import sys

from openenv.core.env_server import http_server as _http_server
from openenv.core.env_server.http_server import create_app

from .environment import ADAPTIVE, EnvFoundryEnvironment, bundle, curriculum, tool_specs

try:  # installed: <package>.models; served from the environment directory: models
    from ..models import EnvFoundryAction, EnvFoundryState, TaskObservation, ToolObservation
except ImportError:
    from models import EnvFoundryAction, EnvFoundryState, TaskObservation, ToolObservation  # type: ignore[no-redef]

MAX_SESSIONS_VAR = "ENVFOUNDRY_MAX_SESSIONS"
DEFAULT_MAX_SESSIONS = 1024  # a training step's rollouts: a GRPO step opens hundreds to thousands of sessions


def max_sessions() -> int:
    """``ENVFOUNDRY_MAX_SESSIONS`` (concurrent WebSocket sessions, each with its own database), default 1,024."""
    value = os.environ.get(MAX_SESSIONS_VAR, "").strip()
    if not value:
        return DEFAULT_MAX_SESSIONS
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"error: {MAX_SESSIONS_VAR}={value!r} is not a positive integer")
    return int(value)


MAX_SESSIONS = max_sessions()
SESSION_KIB = 0.0  # measured at start-up, below


class CapacityReached(_http_server.SessionCapacityError):
    """OpenEnv's refusal at the cap (``CAPACITY_REACHED``), its message saying how to raise the cap."""

    def __init__(self, active_sessions: int, max_sessions: int, message: "str | None" = None) -> None:
        cost = f"; each session takes about {SESSION_KIB:.0f} KiB" if SESSION_KIB else ""
        super().__init__(active_sessions, max_sessions, message or (
            f"Server at capacity: {active_sessions}/{max_sessions} sessions active. Close a session, or restart the "
            f"server with a higher cap: {MAX_SESSIONS_VAR}=N (now {max_sessions}{cost})."))


# OpenEnv raises (and catches) the error by its module-level name: its refusal now says how to raise the cap.
_http_server.SessionCapacityError = CapacityReached  # type: ignore[misc]

app = create_app(
    EnvFoundryEnvironment,
    EnvFoundryAction,
    ToolObservation,
    env_name="envfoundry",
    max_concurrent_envs=MAX_SESSIONS,
    state_cls=EnvFoundryState,
    reset_observation_cls=TaskObservation,
)

# Warm-up: the bundle (tasks, initial snapshot, table layouts, the pristine database) and the tool specs (and
# their shared dumps) are made now, then everything alive is moved out of the garbage collector's view
# (gc.freeze), so its collections, which sessions' short-lived objects trigger often, no longer walk these
# long-lived objects each time (ENVFOUNDRY_GC_FREEZE=0: not frozen).
bundle().initial_snapshot()
tool_specs()
if ADAPTIVE:  # ENVFOUNDRY_ADAPTIVE=1: a bad ENVFOUNDRY_ADAPTIVE_* setting, or no sampled tasks, stops the start
    curriculum()
# What a session costs, measured now on real ones (their database copies), and what the cap therefore allows.
SESSION_KIB = bundle().measure_session_kib()
print(f"envfoundry: up to {MAX_SESSIONS} concurrent sessions ({MAX_SESSIONS_VAR}, default {DEFAULT_MAX_SESSIONS}); "
      f"one session measured {SESSION_KIB:.0f} KiB at start-up (its database copy), about "
      f"{MAX_SESSIONS * SESSION_KIB / 1024:.0f} MiB at the cap, plus OpenEnv's own state per WebSocket",
      file=sys.stderr, flush=True)
if os.environ.get("ENVFOUNDRY_GC_FREEZE", "1") != "0":
    gc.collect()
    gc.freeze()


def main() -> None:
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="Serve this envfoundry environment with OpenEnv")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
