# Developer tasks for commcanary. `make` (or `make help`) lists them.
# Every tool runs from the project's virtual environment, .venv/bin/.

VENV   := .venv
BIN    := $(VENV)/bin
PYTHON := $(BIN)/python
PY_SRC := python tests benches fuzz

# The development tools: pyproject.toml's build backend, dependencies, `test`
# extra, `dask` and `arrow` extras (light; the distributed and Arrow tests), as
# scripts/dev_packages.py prints them (scripts/test.sh installs the same list
# plus torch and fuzz).
DEV_PACKAGES = $(shell python3 scripts/dev_packages.py dask arrow server | sed 's/.*/"&"/')

# Quick benchmark options; override, e.g. `make bench BENCH_ARGS="--repeat 3"`.
BENCH_ARGS ?=
COMPILE_BENCH_ARGS  ?= --sizes 1000,10000 --repeat 1
GATE_BENCH_ARGS     ?= --sizes 10000 --repeat 1
BEHAVIOR_BENCH_ARGS ?= --search-sizes 1000 --verify-sizes 10000 --repeat 1
# Options of the Kineto import benchmark, e.g. IMPORT_BENCH_ARGS="--peer-full --json out.json".
IMPORT_BENCH_ARGS ?=

# Path to the shape check, for `make shape`.
SHAPE ?=

.DEFAULT_GOAL := help
.PHONY: help dev test test-quick lint fmt schemas fuzz bench bench-import shape clean nccl-plugin

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

dev: ## Create .venv if missing, install the dev tools, build the extension (quick profile)
	@[ -x $(PYTHON) ] || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet $(DEV_PACKAGES)
	VIRTUAL_ENV="$(CURDIR)/$(VENV)" PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/maturin develop --profile quick

test: ## Run every check CI runs (./scripts/test.sh, in its own venv)
	./scripts/test.sh

test-quick: ## The inner loop: core unit tests, the quick build, pytest without the browser, torch and slow tiers
	cargo test -q -p commcanary-core --lib
	VIRTUAL_ENV="$(CURDIR)/$(VENV)" PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/maturin develop --profile quick --quiet
	PATH="$(CURDIR)/$(BIN):$$PATH" $(PYTHON) -m pytest -q -m "not browser and not torch and not slow" tests

nccl-plugin: ## Build libnccl-profiler-commcanary.so (release) into target/nccl-plugin/ (docs/nccl-plugin.md)
	cargo build -q --release -p commcanary-nccl-profiler --lib
	mkdir -p target/nccl-plugin
	cp target/release/libnccl_profiler_commcanary.so target/nccl-plugin/libnccl-profiler-commcanary.so
	@echo "NCCL_PROFILER_PLUGIN=$(CURDIR)/target/nccl-plugin/libnccl-profiler-commcanary.so"

fuzz: ## A short run of every fuzz target, Rust and Python (scripts/fuzz.sh; FUZZ_ARGS="--runs N")
	./scripts/fuzz.sh $(FUZZ_ARGS)
	$(PYTHON) -m pip install --quiet "atheris>=2.3"
	PATH="$(CURDIR)/$(BIN):$$PATH" ./scripts/fuzz.sh --python $(FUZZ_ARGS)

lint: ## Rust fmt + clippy, ruff check + format, mypy, stubtest, no value rule in the binding (no changes made)
	! grep -rnE 'Error::(option|invalid|new)\(' rust/commcanary-py/src
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check $(PY_SRC)
	$(BIN)/ruff format --check $(PY_SRC)
	$(BIN)/mypy
	$(PYTHON) -m mypy.stubtest commcanary._core

fmt: ## Format Rust (cargo fmt) and Python (ruff format)
	cargo fmt --all
	$(BIN)/ruff format $(PY_SRC)

schemas: ## Write the schema parts the core generates (after adding a replay setting)
	$(PYTHON) scripts/schemas.py

bench: ## Run the benchmarks with quick options (see docs/benchmarks.md)
	@export PATH="$(CURDIR)/$(BIN):$$PATH"; set -e; \
	if [ -f benches/compare_builds.py ]; then \
		$(PYTHON) benches/compare_builds.py $(BENCH_ARGS); \
	else \
		$(PYTHON) benches/compile_bench.py $(COMPILE_BENCH_ARGS) $(BENCH_ARGS); \
		$(PYTHON) benches/gate_bench.py $(GATE_BENCH_ARGS) $(BENCH_ARGS); \
		$(PYTHON) benches/behavior_bench.py $(BEHAVIOR_BENCH_ARGS) $(BENCH_ARGS); \
	fi

bench-import: ## Kineto import vs HTA on 4 x 250 MB traces (generated into /tmp/commcanary-bench)
	@export PATH="$(CURDIR)/$(BIN):$$PATH"; \
	$(PYTHON) benches/import_kineto.py $(IMPORT_BENCH_ARGS)

shape: ## Run the shape check (cycles, long functions): make shape SHAPE=path/to/shape.py
	@[ -n "$(SHAPE)" ] || { echo "set SHAPE to the path of the shape check"; exit 2; }
	python3 $(SHAPE) rust/commcanary-core/src python/commcanary 120

clean: ## Remove build outputs and caches (keeps .venv)
	cargo clean
	rm -rf dist .pytest_cache .mypy_cache .ruff_cache .hypothesis benches/results
	find python -name '*.so' -delete
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
