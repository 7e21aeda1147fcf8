.PHONY: setup test check lint deadcode render-check bench fmt
ENV_DIRS := $(wildcard generated/*/envs/*)

setup:
	bash scripts/setup.sh
test:
	.venv/bin/python -m pytest -q -n 2
check: lint deadcode render-check
lint:
	.venv/bin/ruff check pipeline verify tests benchmarks
	.venv/bin/mypy pipeline verify
# Fails when pipeline/ or verify/ holds code nothing uses (vulture; tests and benchmarks count as users, names
# only a framework calls are in tests/vulture_whitelist.py).
deadcode:
	.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_lint.py -k dead_code
# Fails (exit 1) when a committed server.py is not the render of its env.json.
render-check:
	$(if $(ENV_DIRS),.venv/bin/envfoundry render --check $(ENV_DIRS),@echo "no committed environments")
bench:
	.venv/bin/python benchmarks/bench_runtime.py
	.venv/bin/python benchmarks/bench_dedup.py
	.venv/bin/python benchmarks/bench_sampler.py --n 200
fmt:
	.venv/bin/ruff format pipeline verify tests benchmarks
