.PHONY: check test test-unit lint fmt types serve bench

PYTEST = .venv/bin/python -m pytest -q -p no:cacheprovider

check: ## what CI runs: lint, format, types, every test (both stores, acceptance and faults)
	scripts/test

test: ## the local default: unit, store conformance on both stores, API/engine on SQLite
	scripts/bootstrap dev
	$(PYTEST) $(ARGS)

test-unit: ## tests/unit only: no database server, no running node (seconds)
	scripts/bootstrap dev
	$(PYTEST) tests/unit $(ARGS)

lint:
	.venv/bin/ruff check src tests benchmarks

fmt:
	.venv/bin/ruff format src tests benchmarks
	.venv/bin/ruff check --fix src tests benchmarks

types:
	.venv/bin/mypy

serve:
	scripts/serve

bench:
	.venv/bin/duetime bench run burst-http --store sqlite --repeat 1
