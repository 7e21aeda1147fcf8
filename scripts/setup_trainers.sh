#!/usr/bin/env bash
# Creates the trainer virtual environments the export tests install exported artefacts into:
#   .venv-trainers/verifiers  — verifiers==0.4.0 (no torch)
#   .venv-trainers/openenv    — openenv-core==0.3.0
# They are kept apart from envfoundry's .venv because the trainers pin their own versions
# (verifiers 0.4.0 pins mcp==2.0.0 and openai<3). Idempotent: a venv whose library already
# imports is left alone, so a second run takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
ROOT=.venv-trainers
mkdir -p "$ROOT"

make_venv() {  # make_venv NAME IMPORT_CHECK PIP_ARGS...
  local name=$1 check=$2
  shift 2
  local venv="$ROOT/$name"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "trainer venv $venv: ready"
    return 0
  fi
  [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
  # pip's "Location ... is ignored" notes (from a machine-wide find-links setting) are noise here.
  "$venv/bin/python" -m pip install --disable-pip-version-check -q "$@" 2> >(grep -v "^WARNING: Location" >&2)
  "$venv/bin/python" -c "$check"
  echo "trainer venv $venv: installed"
}

# setuptools + wheel: exported artefacts are installed with --no-build-isolation (no index round-trip).
# Readiness is read from installed metadata (instant), not by importing the heavy libraries.
make_venv verifiers "from importlib.metadata import version as v; assert v('verifiers') == '0.4.0'; v('wheel'); v('mcp')" \
  "verifiers==0.4.0" "setuptools>=68" wheel
make_venv openenv "from importlib.metadata import version as v; assert v('openenv-core') == '0.3.0'; v('wheel'); v('uvicorn')" \
  "openenv-core==0.3.0" "setuptools>=68" wheel
