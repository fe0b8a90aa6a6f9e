.PHONY: check test lint fmt types serve bench

check: ## what CI runs: lint, format, types, tests
	scripts/test

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
