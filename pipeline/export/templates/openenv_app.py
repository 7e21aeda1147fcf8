"""FastAPI application serving the environment with OpenEnv: ``/reset``, ``/step``, ``/state``,
``/schema``, ``/health`` and the ``/ws`` WebSocket sessions ``EnvClient`` uses.

    uvicorn server.app:app --port 8000      # from the environment directory
    python -m <package>.server.app --port 8000
"""

import os

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import Action

try:
    from .environment import EnvFoundryEnvironment, TaskObservation
except ImportError:  # served from the environment directory
    from server.environment import EnvFoundryEnvironment, TaskObservation  # type: ignore[no-redef]

app = create_app(
    EnvFoundryEnvironment,
    Action,  # the MCP actions (call_tool / list_tools) are routed by their "type"
    TaskObservation,
    env_name="envfoundry",
    max_concurrent_envs=int(os.environ.get("ENVFOUNDRY_MAX_SESSIONS", "8")),
)


def main(host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    main(host=args.host, port=args.port)
