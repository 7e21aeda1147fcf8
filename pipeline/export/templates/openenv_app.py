"""FastAPI application serving the environment with OpenEnv: ``/reset``, ``/step``, ``/state``,
``/schema``, ``/metadata``, ``/health``, ``/mcp`` and the ``/ws`` WebSocket sessions ``EnvClient``
uses (one environment instance, hence one database, per session).

    uvicorn server.app:app --port 8000        # from the environment directory (openenv.yaml)
    python -m <package>.server.app --port 8000  # after `pip install .`
"""

import gc
import os

from openenv.core.env_server.http_server import create_app

from .environment import ADAPTIVE, EnvFoundryEnvironment, bundle, curriculum, tool_specs

try:  # installed: <package>.models; served from the environment directory: models
    from ..models import EnvFoundryAction, EnvFoundryState, TaskObservation, ToolObservation
except ImportError:
    from models import EnvFoundryAction, EnvFoundryState, TaskObservation, ToolObservation  # type: ignore[no-redef]

app = create_app(
    EnvFoundryEnvironment,
    EnvFoundryAction,
    ToolObservation,
    env_name="envfoundry",
    max_concurrent_envs=int(os.environ.get("ENVFOUNDRY_MAX_SESSIONS", "64")),
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
