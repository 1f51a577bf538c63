# bisector: `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_HOME ?= $(CURDIR)/.bisector-demo

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-12s %s\n", $$1, $$2}'

# uv (a dependency of bisector itself) installs the rest in a third of pip's time; pip again
# should uv not reach the index. Bytecode is compiled, as pip does: the tests run hundreds of
# interpreters, and where PYTHONDONTWRITEBYTECODE is set each would compile SQLAlchemy anew.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "uv>=0.13,<0.14"
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -e '.[dev]' \
	  || $(BIN)/pip install -q -e '.[dev]'
	$(BIN)/python -m compileall -q bisector >/dev/null  # as pip does for an installed copy
	touch $(STAMP)

install: $(STAMP) ## Make .venv with bisector and the dev tools

demo: $(STAMP) ## Bisect the bundled demo history end to end (SQLite, no GPU, no Docker)
	BISECTOR_HOME=$(DEMO_HOME) $(BIN)/bisect demo
	@echo 'The nightly path, offline, in a store of its own (data/demo/nightlies.db, made anew): wheels'
	@echo 'served from 127.0.0.1, a range of dates, every probe a nightly wheel or an overlay on one:'
	@echo '  BISECTOR_HOME=$(DEMO_HOME) $(BIN)/bisect demo --nightlies'

# Four pytest workers on two cores: most integration tests wait on processes (workers, oracles,
# containers, a PostgreSQL restart), so four overlap the waits (a fresh machine: 15.1 min with five).
test: $(STAMP) ## Run lint, types, the docs site (strict) and every test this machine can run (Docker ones when `docker info` works)
	scripts/test-deps
	$(BIN)/ruff check bisector tests proofs migrations bench scripts
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $$(mktemp -d)
	$(BIN)/pytest -m "not gpu" -n 4 --dist loadfile --no-loadscope-reorder --durations=20 \
	  $$(docker info >/dev/null 2>&1 && echo --run-docker)

test-unit: $(STAMP) ## Only the fast, pure tests
	$(BIN)/pytest -m unit tests/unit

lint: $(STAMP) ## ruff and mypy --strict
	$(BIN)/ruff check bisector tests proofs migrations bench scripts
	$(BIN)/mypy

BASE_IMAGE ?=
images: $(STAMP) ## Build the runtime and builder images (BASE_IMAGE=bisector/base:bookworm here)
	$(BIN)/bisect images --build runtime --build builder $(if $(BASE_IMAGE),--base $(BASE_IMAGE))

base-image: ## Make the local Debian base image from this machine's apt sources (no registry)
	docker/make-base.sh

SECTIONS ?=
bench: $(STAMP) ## Benchmarks as ratios against baselines of the same run (SECTIONS="cli prior": only those)
	$(BIN)/python -m bench.run $(SECTIONS)

bench-changepoints: $(STAMP) ## Only the bench of change points over simulated nightly series
	$(BIN)/python -m bench.changepoints

dist: $(STAMP) ## Build the wheel and sdist into dist/, then check the core install runs the demo
	rm -rf dist
	$(BIN)/uv build --out-dir dist
	$(BIN)/pytest -q -p no:cacheprovider tests/integration/test_dist.py  # a clean venv, core only

docs: $(STAMP) ## Build the documentation site into site/ (MkDocs, strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP) ## Serve the documentation site on 127.0.0.1:8000 while you edit
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

clean: ## Remove the virtualenv, caches and the demo store
	rm -rf $(VENV) $(DEMO_HOME) .pytest_cache .mypy_cache .ruff_cache .hypothesis

.PHONY: help install demo test test-unit lint bench bench-changepoints clean
