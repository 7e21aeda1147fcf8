#!/bin/bash
# Checks a tree after house_move.py ran in it (run from anywhere): ruff, mypy, import cycles, layers + lint tests,
# every test module imports (collect-only), then the main command on a warm copy of the example's cache compared
# with REF (default: the committed generated/quickstart; pass a pre-move run's output dir when prompts changed).
# Usage: validate_house.sh REPO [REF_OUT_DIR] [CACHE]      (PY defaults to /work/main/.venv/bin/python)
set -u
REPO=$(cd "${1:-.}" && pwd); REF=${2:-}; CACHE=${3:-$REPO/generated/quickstart/llm_cache.sqlite}
PY=${PY:-/work/main/.venv/bin/python}; TOOLS=$(cd "$(dirname "$0")" && pwd); fail=0
cd "$REPO" || exit 2
step() { echo "== $*"; "$@" || { echo "!! FAILED: $*"; fail=1; }; }
step "$PY" -m ruff check --no-cache pipeline verify tests benchmarks
step "$PY" -m mypy pipeline verify
step python3 /work/shared/tools/import_cycles.py pipeline verify
export PYTHONPATH="$REPO"
step "$PY" -m pytest -q -n 0 tests/test_layers.py tests/test_lint.py
echo "== collect-only (every test module imports)"; "$PY" -m pytest -q -n 0 --collect-only tests 2>&1 | tail -1
OUT=$(mktemp -d /tmp/house-run.XXXXXX); cp "$CACHE" "$OUT/llm_cache.sqlite"
step "$PY" -m pipeline.cli run --seeds seeds/quickstart.txt --out "$OUT" --config seeds/quickstart.toml
step python3 "$TOOLS/compare_quickstart.py" "$REPO" "$OUT" ${REF:+"$REF"}
step "$PY" -m pipeline.cli render --check "$OUT"/envs/*
echo "run output: $OUT"; [ $fail = 0 ] && echo "ALL CHECKS PASSED" || echo "SOME CHECKS FAILED"; exit $fail
