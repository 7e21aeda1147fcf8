.PHONY: setup test check bench fmt
setup:
	bash scripts/setup.sh
test:
	.venv/bin/python -m pytest -q
check:
	.venv/bin/ruff check pipeline verify tests benchmarks
	.venv/bin/mypy pipeline verify
	.venv/bin/envfoundry render --check generated/*/envs/* 2>/dev/null || true
bench:
	.venv/bin/python benchmarks/bench_runtime.py
	.venv/bin/python benchmarks/bench_dedup.py
fmt:
	.venv/bin/ruff format pipeline verify tests benchmarks
