#!/usr/bin/env bash
# Creates the trainer virtual environments the export tests install exported artefacts into; each
# holds one trainer's library (and nothing of envfoundry), as a user's would:
#   .venv-trainers/openenv    — openenv==0.10.0 (PyPI `openenv`; `openenv-core` is its old name and
#                               would overwrite an openenv 0.10 install, so it is never asked for)
#   .venv-trainers/verifiers  — verifiers==0.4.0 (pins mcp==2.0.0 and openai<3) and uv==0.13.9 (PyPI `uv`:
#                               verifiers' default harness runs its chat program as a uv script, even with
#                               the subprocess runtime; without uv it tries to install one at run time)
#   .venv-trainers/verl       — verl[verl-core]==0.9.1 on torch==2.13.0, the CPU build on this
#                               machine's disk (installed first: any other torch request pulls
#                               several GB of CUDA packages)
#   .venv-trainers/sft        — transformers==5.23.0 + jinja2 (chat templates for the SFT transcripts)
# Idempotent: a venv whose pinned versions are installed is left alone (checked from installed
# metadata, without importing the heavy libraries), so a second run takes a few seconds.
# The four venvs are independent: they are made at the same time (scripts/steps.sh: each its own pip
# process and log; a failing one shows its log and fails the script). scripts/setup.sh sources this file and
# calls start_trainer_venvs beside its own steps; run on its own, it starts them and waits.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -n "${STEPS_DIR:-}" ] || . scripts/steps.sh
TRAINER_PY=${PYTHON:-python3}
ROOT=.venv-trainers

make_venv() {  # make_venv NAME IMPORT_CHECK PIP_ARGS... ; PIP_ARGS groups are separated by "--"
  local name=$1 check=$2
  shift 2
  local venv="$ROOT/$name"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "trainer venv $venv: ready"
    return 0
  fi
  # Missing or stale (other versions): made anew, so no old distribution is left under the new one.
  rm -rf "$venv"
  "$TRAINER_PY" -m venv "$venv"
  local group=()
  for arg in "$@" --; do
    if [ "$arg" = "--" ]; then
      if [ ${#group[@]} -gt 0 ]; then
        # pip's "Location ... is ignored" notes (from a machine-wide find-links setting) are noise here.
        "$venv/bin/python" -m pip install --disable-pip-version-check -q "${group[@]}" \
          2> >(grep -v "^WARNING: Location" >&2)
      fi
      group=()
    else
      group+=("$arg")
    fi
  done
  "$venv/bin/python" -c "$check"
  echo "trainer venv $venv: installed"
}

start_trainer_venvs() {
  local V="from importlib.metadata import version as v"
  mkdir -p "$ROOT"
  # setuptools + wheel: exported artefacts are installed with --no-build-isolation (no index round-trip).
  step_start "trainer venv openenv" make_venv openenv \
    "$V; assert v('openenv') == '0.10.0'; v('uvicorn'); v('wheel')" \
    "openenv==0.10.0" uvicorn "setuptools>=68" wheel
  step_start "trainer venv verifiers" make_venv verifiers \
    "$V; assert v('verifiers') == '0.4.0' and v('uv') == '0.13.9'; v('mcp'); v('wheel')" \
    "verifiers==0.4.0" "uv==0.13.9" "setuptools>=68" wheel
  step_start "trainer venv verl" make_venv verl \
    "$V; assert v('verl') == '0.9.1' and v('torch').startswith('2.13.0'); v('cachetools'); v('wheel')" \
    "torch==2.13.0" -- "verl[verl-core]==0.9.1" "setuptools>=68" wheel
  step_start "trainer venv sft" make_venv sft \
    "$V; assert v('transformers') == '5.23.0'; v('jinja2')" \
    "transformers==5.23.0" jinja2
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  start_trainer_venvs
  step_wait_all
fi
