"""The generated ``server.py`` of an environment: its parts and the render that assembles them.

``render`` writes ``server.py`` from the IR: the tool engine (``pipeline/runtime/engine.py``, shared with the
in-process runtime) and ``gate`` (the request gate) verbatim, then ``sessions`` (one database per caller) and
``template`` (the FastAPI routes and the MCP endpoint) without their import blocks, then the environment as
literals. ``gate``, ``sessions`` and ``template`` are the server's own source, embedded byte for byte (standard
library, the engine, FastAPI and mcp only): nothing else of envfoundry runs in a served environment.
"""

from pipeline.server.render import EnvJsonError, check_server, load_env_json, render_server

__all__ = ["EnvJsonError", "check_server", "load_env_json", "render_server"]
